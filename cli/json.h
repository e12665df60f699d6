// JSON for the CLI: the DOM is nlohmann's ordered_json (members keep their
// insertion order), written by WriteJson in the reports' exact bytes; reading
// is simdjson's: ParseJson (strict, validating UTF-8) turns a document into
// that DOM, for tests and tools. The event-log reader decodes lines straight
// from simdjson (cli/event_fields.h). Untrusted input never throws; depth is
// bounded. simdjson's own parser and error texts, for the readers that decode
// with it: cli/json_parser.h (simdjson.h costs every file that includes it
// seconds to compile).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace forkguard::cli {

using Json = nlohmann::ordered_json;

// Deepest nesting any reader here accepts.
inline constexpr size_t kMaxJsonDepth = 64;

// Object member lookup; nullptr when absent or `object` is not an object.
const Json* FindMember(const Json& object, std::string_view key);

// Typed lookups with a fallback for absent or mistyped members: logs are
// read tolerantly, one bad field never drops the line. GetInt takes an
// integer, or a finite double within int64's range (truncated).
std::string GetString(const Json& object, std::string_view key, std::string fallback = "");
int64_t GetInt(const Json& object, std::string_view key, int64_t fallback);
bool GetBool(const Json& object, std::string_view key, bool fallback);

// Parses exactly one JSON value (surrounding whitespace allowed). On failure
// returns false and sets *error to a short description. Integers beyond
// int64 become doubles; of an object's duplicate keys the first is kept.
bool ParseJson(std::string_view text, Json* out, std::string* error);

// Serializes with 2-space indentation (indent < 0: compact, one line). Not
// Json::dump(): doubles are written as printf's %.17g (non-finite: null),
// every control character and DEL as \u00XX, and invalid UTF-8 as \ufffd.
std::string WriteJson(const Json& v, int indent = 2);

// JSON string escaping (quotes included), as WriteJson writes strings.
std::string JsonQuote(std::string_view s);

}  // namespace forkguard::cli
