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

#include <simdjson.h>

#include "tests/support/event_v2.h"

namespace forkguard::test_support {
namespace {

// ---- JSON ----------------------------------------------------------------

// A value of simdjson's DOM (the reader the product uses) as a Json.
Json FromElement(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  Json out;
  switch (e.type()) {
    case element_type::NULL_VALUE:
      break;
    case element_type::BOOL:
      out.type = Json::Type::kBool;
      out.boolean = e.get_bool().value_unsafe();
      break;
    case element_type::INT64:
      out.type = Json::Type::kNumber;
      out.is_int = true;
      out.integer = e.get_int64().value_unsafe();
      out.number = static_cast<double>(out.integer);
      break;
    case element_type::UINT64:  // addresses above INT64_MAX: keep the bits
      out.type = Json::Type::kNumber;
      out.is_int = true;
      out.integer = static_cast<int64_t>(e.get_uint64().value_unsafe());
      out.number = static_cast<double>(e.get_uint64().value_unsafe());
      break;
    case element_type::DOUBLE:
      out.type = Json::Type::kNumber;
      out.number = e.get_double().value_unsafe();
      break;
    case element_type::STRING:
      out.type = Json::Type::kString;
      out.str = std::string(e.get_string().value_unsafe());
      break;
    case element_type::ARRAY:
      out.type = Json::Type::kArray;
      for (simdjson::dom::element x : e.get_array().value_unsafe())
        out.array.push_back(FromElement(x));
      break;
    case element_type::OBJECT:
      out.type = Json::Type::kObject;
      for (auto field : e.get_object().value_unsafe())
        out.object[std::string(field.key)] = FromElement(field.value);  // the last one wins
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
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto err = parser.parse(text).get(root); err != simdjson::SUCCESS) {
    *error = simdjson::error_message(err);
    return false;
  }
  *out = FromElement(root);
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
  for (const std::string& name : log.files) {
    std::ifstream f(dir + "/" + name, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string content = ss.str();
    size_t pos = 0;
    int line_no = 0;
    testing_support::EventV2Expander v2;  // /2: header, modules and stacks folded in
    while (pos < content.size()) {
      size_t nl = content.find('\n', pos);
      bool last_unterminated = nl == std::string::npos;
      std::string line = content.substr(pos, last_unterminated ? std::string::npos : nl - pos);
      pos = last_unterminated ? content.size() : nl + 1;
      ++line_no;
      if (!last_unterminated) {
        std::string v2_problem;
        std::optional<std::string> expanded = v2.Expand(line, &v2_problem);
        if (!v2_problem.empty()) {
          log.problems.push_back(name + ":" + std::to_string(line_no) + ": " + v2_problem);
        }
        if (!expanded) continue;
        line = *expanded;
      }
      Event ev;
      ev.file = name;
      std::string error;
      if (ParseJson(line, &ev.json, &error) && ev.json.type == Json::Type::kObject) {
        if (last_unterminated) {
          log.problems.push_back(name + ":" + std::to_string(line_no) +
                                 ": complete object without a final newline");
        }
        log.events.push_back(std::move(ev));
      } else if (!last_unterminated) {
        log.problems.push_back(name + ":" + std::to_string(line_no) + ": " + error + ": " +
                               line.substr(0, 200));
      }
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
