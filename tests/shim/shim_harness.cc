#include "tests/shim/shim_harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "cli/event_log.h"
#include "cli/json.h"
#include "cli/symbolizer.h"
#include "tests/support/event_records.h"

namespace forkguard::test_support {
namespace {

// ---- JSON ----------------------------------------------------------------

// A value of the product's reader (cli/json.h) as a Json.
Json FromJsonValue(const cli::Json& v) {
  using Kind = cli::Json::value_t;
  Json out;
  switch (v.type()) {
    case Kind::null:
    case Kind::discarded:
    case Kind::binary:
      break;
    case Kind::boolean:
      out.type = Json::Type::kBool;
      out.boolean = v.get<bool>();
      break;
    case Kind::number_integer:
    case Kind::number_unsigned:
      out.type = Json::Type::kNumber;
      out.is_int = true;
      out.integer = v.get<int64_t>();
      out.number = static_cast<double>(out.integer);
      break;
    case Kind::number_float:
      out.type = Json::Type::kNumber;
      out.number = v.get<double>();
      break;
    case Kind::string:
      out.type = Json::Type::kString;
      out.str = v.get_ref<const std::string&>();
      break;
    case Kind::array:
      out.type = Json::Type::kArray;
      for (const cli::Json& x : v) out.array.push_back(FromJsonValue(x));
      break;
    case Kind::object:
      out.type = Json::Type::kObject;
      for (const auto& [key, value] : v.items()) out.object[key] = FromJsonValue(value);
      break;
  }
  return out;
}

void CollectStack(const Json& v, std::vector<uint64_t>* ips, std::vector<std::string>* syms) {
  switch (v.type) {
    case Json::Type::kString:
      if (ips && v.str.rfind("0x", 0) == 0) ips->push_back(FromHex(v.str));
      break;
    case Json::Type::kNumber:
      if (ips && v.is_int) ips->push_back(static_cast<uint64_t>(v.integer));
      break;
    case Json::Type::kArray:
      for (const Json& e : v.array) CollectStack(e, ips, syms);
      break;
    case Json::Type::kObject:
      if (ips && v.Has("ip")) CollectStack(v["ip"], ips, nullptr);
      if (syms && v["sym"].type == Json::Type::kString) syms->push_back(v["sym"].str);
      break;
    default:
      break;
  }
}

}  // namespace

bool Json::Has(const std::string& key) const {
  return type == Type::kObject && object.count(key) != 0;
}

const Json& Json::operator[](const std::string& key) const {
  static const Json kNull;
  if (type != Type::kObject) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : it->second;
}

std::string Json::String(const std::string& key) const {
  const Json& v = (*this)[key];
  return v.type == Type::kString ? v.str : "";
}

int64_t Json::Int(const std::string& key) const {
  const Json& v = (*this)[key];
  return v.type == Type::kNumber && v.is_int ? v.integer : -1;
}

bool ParseJson(const std::string& text, Json* out, std::string* error) {
  *out = Json();
  cli::Json v;
  if (!cli::ParseJson(text, &v, error)) return false;
  *out = FromJsonValue(v);
  return true;
}

std::vector<Event> LoggedEvents::Of(const std::string& event_name) const {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.name() == event_name) out.push_back(e);
  }
  return out;
}

std::vector<Event> LoggedEvents::OfPid(const std::string& event_name, pid_t pid) const {
  std::vector<Event> out;
  for (const Event& e : events) {
    if (e.name() == event_name && e.json.Int("pid") == pid) out.push_back(e);
  }
  return out;
}

std::map<std::vector<uint64_t>, int64_t> LoggedEvents::RegistrationsByStack(pid_t pid) const {
  std::map<std::vector<uint64_t>, int64_t> out;
  for (const Event& e : events) {
    if (e.json.Int("pid") != pid) continue;
    if (e.name() == "mr_register") {
      std::vector<uint64_t> ips;
      CollectStack(e.json["stack"], &ips, nullptr);
      ++out[ips];
    } else if (e.name() == "mr_counts") {
      for (const Json& site : e.json["sites"].array) {
        std::vector<uint64_t> ips;
        CollectStack(site["stack"], &ips, nullptr);
        out[ips] += std::max<int64_t>(0, site.Int("n"));
      }
    }
  }
  return out;
}

int64_t LoggedEvents::Registrations(pid_t pid) const {
  int64_t n = 0;
  for (const auto& [stack, count] : RegistrationsByStack(pid)) n += count;
  return n;
}

int64_t LoggedEvents::Deregs(pid_t pid) const {
  int64_t n = 0;
  for (const Event& e : OfPid("mr_counts", pid)) n += std::max<int64_t>(0, e.json.Int("deregs"));
  return n;
}

LoggedEvents ReadEventLog(const std::string& dir) {
  LoggedEvents log;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    log.problems.push_back("cannot open log dir " + dir + ": " + strerror(errno));
    return log;
  }
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 6 && name.compare(name.size() - 6, 6, ".jsonl") == 0) {
      log.files.push_back(name);
    }
  }
  closedir(d);
  // Stacks are named as `forkguard report` names them (the product's reader and symbolizer).
  cli::Symbolizer symbolizer;
  auto symbolize = [&symbolizer](cli::Stack* stack) { symbolizer.Symbolize(stack); };
  for (const std::string& name : log.files) {
    std::ifstream f(dir + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string content = ss.str();
    // The line number of an unterminated last line (a process killed mid-write), 0 when none.
    int unterminated = 0;
    if (!content.empty() && content.back() != '\n')
      unterminated = static_cast<int>(std::count(content.begin(), content.end(), '\n')) + 1;
    std::vector<cli::Note> notes;
    for (EventRecord& r : DecodeEventRecords(name, content, symbolize, &notes)) {
      if (r.line == unterminated) {
        log.problems.push_back(name + ":" + std::to_string(r.line) +
                               ": complete object without a final newline");
      }
      log.events.push_back({FromJsonValue(r.json), name});
    }
    for (const cli::Note& n : notes) {
      if (unterminated != 0 && n.text.rfind("truncated last line", 0) == 0) continue;
      log.problems.push_back(n.where + ": " + n.text);
    }
  }
  return log;
}

std::vector<uint64_t> StackIps(const Json& stack) {
  std::vector<uint64_t> ips;
  CollectStack(stack, &ips, nullptr);
  return ips;
}

std::vector<std::string> StackSymbols(const Json& stack) {
  std::vector<std::string> syms;
  CollectStack(stack, nullptr, &syms);
  return syms;
}

ProgramReport ParseReport(const std::string& out) {
  ProgramReport r;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    int pid = 0;
    char call[64];
    char addr[32];
    if (sscanf(line.c_str(), "fork: child=%d", &pid) == 1 ||
        sscanf(line.c_str(), "spawn: child=%d", &pid) == 1) {
      r.children.push_back(pid);
    } else if (sscanf(line.c_str(), "registered: call=%63s addr=%31s", call, addr) == 2) {
      r.registered.emplace_back(call, FromHex(addr));
    } else if (sscanf(line.c_str(), "heap-neighbor: addr=%31s", addr) == 1) {
      r.heap_neighbor = FromHex(addr);
    } else if (line == "done") {
      r.done = true;
    }
  }
  return r;
}

std::string ToHex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

uint64_t FromHex(const std::string& s) { return strtoull(s.c_str(), nullptr, 16); }

}  // namespace forkguard::test_support
