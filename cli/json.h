// A JSON value and writer for the JSON report, and ParseJson: simdjson's DOM
// parser (strict, validating UTF-8) turned into a JsonValue, for tests and
// tools. The event-log reader decodes lines straight from simdjson
// (cli/event_log.cc). Untrusted input never throws; depth is bounded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

namespace forkguard::cli {

// Deepest nesting any reader here accepts.
inline constexpr size_t kMaxJsonDepth = 64;

// A short text for a simdjson error ("nesting too deep", ...).
std::string JsonErrorText(simdjson::error_code code);

// This thread's parser for lines of up to 1 MiB (reused: no allocation per line).
simdjson::dom::parser& LineParser();

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kInt, kDouble, kString, kArray, kObject };

  JsonValue() = default;
  static JsonValue Bool(bool b);
  static JsonValue Int(int64_t i);
  static JsonValue Double(double d);
  static JsonValue String(std::string s);
  static JsonValue Array();
  static JsonValue Object();

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kDouble; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }

  bool bool_value() const { return bool_; }
  int64_t int_value() const { return int_; }
  double double_value() const { return kind_ == Kind::kInt ? static_cast<double>(int_) : double_; }
  const std::string& string_value() const { return string_; }
  const std::vector<JsonValue>& array() const { return array_; }
  const std::vector<std::pair<std::string, JsonValue>>& members() const { return members_; }

  // Object member lookup (first match); nullptr when absent or not an object.
  const JsonValue* Find(std::string_view key) const;

  // Typed lookups with a fallback for absent or mistyped members: logs are
  // read tolerantly, one bad field never drops the line.
  std::string GetString(std::string_view key, std::string fallback = "") const;
  int64_t GetInt(std::string_view key, int64_t fallback) const;
  bool GetBool(std::string_view key, bool fallback) const;

  // Builders.
  void Push(JsonValue v);
  void Set(std::string key, JsonValue v);
  void Append(std::string key, JsonValue v);  // no duplicate check (parsing)

 private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> members_;
};

// Parses exactly one JSON value (surrounding whitespace allowed). On failure
// returns false and sets *error to a short description with the byte offset.
bool ParseJson(std::string_view text, JsonValue* out, std::string* error);

// Serializes with 2-space indentation (indent < 0: compact, one line).
std::string WriteJson(const JsonValue& v, int indent = 2);

// JSON string escaping (quotes included); invalid UTF-8 becomes U+FFFD.
std::string JsonQuote(std::string_view s);

}  // namespace forkguard::cli
