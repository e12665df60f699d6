// simdjson's side of cli/json.h, for the event-log reader, which decodes lines straight
// from simdjson's DOM (cli/event_fields.h): this thread's line parser and simdjson's errors
// as short texts.
#pragma once

#include <string>

#include <simdjson.h>

namespace forkguard::cli {

// A short text for a simdjson error ("nesting too deep", ...).
std::string JsonErrorText(simdjson::error_code code);

// This thread's parser for lines of up to 1 MiB (reused: no allocation per line).
simdjson::dom::parser& LineParser();

}  // namespace forkguard::cli
