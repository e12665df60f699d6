// Test-only helpers for the shim tests: the shim's event log (formats/EVENT_LOG.md) as plain
// values, read by the product's reader (test_support::DecodeEventRecords) and its symbolizer, and
// what tests/shim/fork_after_rdma printed. Programs run through tests/support/run_program.h.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/run_program.h"

namespace forkguard::test_support {

// A JSON value (just what the tests need; numbers keep their integer value when they are
// integers), converted from the product's cli::Json.
struct Json {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  bool is_int = false;
  int64_t integer = 0;
  std::string str;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  bool Has(const std::string& key) const;
  // Member access; a missing member is a null value.
  const Json& operator[](const std::string& key) const;
  std::string String(const std::string& key) const;  // "" unless a string
  int64_t Int(const std::string& key) const;         // -1 unless an integer
  bool IsNull() const { return type == Type::kNull; }
};

// Parses one JSON text (cli::ParseJson); false (with *error set) on any syntax error.
bool ParseJson(const std::string& text, Json* out, std::string* error);

// One event-log line with the file it came from.
struct Event {
  Json json;
  std::string file;  // base name of the per-process file
  std::string name() const { return json.String("event"); }
};

struct LoggedEvents {
  std::vector<Event> events;          // every parsed line of every file
  std::vector<std::string> files;     // base names
  std::vector<std::string> problems;  // unparsable lines (except a truncated last line)
  std::vector<Event> Of(const std::string& event_name) const;
  std::vector<Event> OfPid(const std::string& event_name, pid_t pid) const;
  // Registrations of `pid`: its mr_register lines plus the counts of its mr_counts records
  // (a registration at a site its file already had a line for is counted, not written).
  int64_t Registrations(pid_t pid) const;
  // The same per registration stack (its return addresses); deregistrations counted: Deregs.
  std::map<std::vector<uint64_t>, int64_t> RegistrationsByStack(pid_t pid) const;
  int64_t Deregs(pid_t pid) const;
};

// Reads every *.jsonl file in dir: each event with its header's fields and its stacks by
// value, native frames named ("sym") as `forkguard report` names them. A truncated last line
// of a file is tolerated (as the schema allows); any other line the reader notes is a
// problem.
LoggedEvents ReadEventLog(const std::string& dir);

// All "0x..." strings in a stack value: frames as objects with "ip", or raw
// ip strings/integers.
std::vector<uint64_t> StackIps(const Json& stack);
// All "sym" names in a stack value.
std::vector<std::string> StackSymbols(const Json& stack);

// What the fork_after_rdma program reported on stdout.
struct ProgramReport {
  std::vector<pid_t> children;                               // "fork: child=N" / "spawn: child=N"
  std::vector<std::pair<std::string, uint64_t>> registered;  // call, addr
  uint64_t heap_neighbor = 0;
  bool done = false;
};
ProgramReport ParseReport(const std::string& out);

std::string ToHex(uint64_t v);
uint64_t FromHex(const std::string& s);  // "0x.." or a plain hex digit string

}  // namespace forkguard::test_support
