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

#include "tests/support/event_v2.h"

namespace forkguard::test_support {
namespace {

// ---- JSON ----------------------------------------------------------------

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}

  bool Parse(Json* out, std::string* error) {
    bool ok = Value(out, 0);
    SkipSpace();
    if (ok && pos_ != s_.size()) ok = Fail("trailing characters");
    if (!ok && error) *error = error_ + " at offset " + std::to_string(pos_);
    return ok;
  }

 private:
  bool Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }
  void SkipSpace() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool Literal(const char* word) {
    size_t n = strlen(word);
    if (s_.compare(pos_, n, word) != 0) return Fail(std::string("expected ") + word);
    pos_ += n;
    return true;
  }
  bool Value(Json* out, int depth) {
    if (depth > 64) return Fail("nesting too deep");
    SkipSpace();
    if (pos_ >= s_.size()) return Fail("unexpected end");
    char c = s_[pos_];
    if (c == '{') return Object(out, depth);
    if (c == '[') return Array(out, depth);
    if (c == '"') {
      out->type = Json::Type::kString;
      return String(&out->str);
    }
    if (c == 't') {
      out->type = Json::Type::kBool;
      out->boolean = true;
      return Literal("true");
    }
    if (c == 'f') {
      out->type = Json::Type::kBool;
      return Literal("false");
    }
    if (c == 'n') {
      out->type = Json::Type::kNull;
      return Literal("null");
    }
    return Number(out);
  }
  bool Object(Json* out, int depth) {
    out->type = Json::Type::kObject;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      std::string key;
      if (pos_ >= s_.size() || s_[pos_] != '"' || !String(&key)) return Fail("expected key");
      SkipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      Json v;
      if (!Value(&v, depth + 1)) return false;
      out->object[key] = std::move(v);
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }
  bool Array(Json* out, int depth) {
    out->type = Json::Type::kArray;
    ++pos_;
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      Json v;
      if (!Value(&v, depth + 1)) return false;
      out->array.push_back(std::move(v));
      SkipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }
  static void AppendUtf8(std::string* out, unsigned cp) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xC0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      *out += static_cast<char>(0xE0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool String(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size()) {
      char c = s_[pos_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *out += e;
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          if (pos_ + 4 > s_.size()) return Fail("short \\u escape");
          unsigned cp = 0;
          for (int i = 0; i < 4; ++i) {
            char h = s_[pos_++];
            cp <<= 4;
            if (h >= '0' && h <= '9') {
              cp |= h - '0';
            } else if (h >= 'a' && h <= 'f') {
              cp |= h - 'a' + 10;
            } else if (h >= 'A' && h <= 'F') {
              cp |= h - 'A' + 10;
            } else {
              return Fail("bad \\u escape");
            }
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
    return Fail("unterminated string");
  }
  bool Number(Json* out) {
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    size_t digits = pos_;
    while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    if (pos_ == digits) return Fail("expected a value");
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      ++pos_;
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    }
    std::string text = s_.substr(start, pos_ - start);
    out->type = Json::Type::kNumber;
    out->number = strtod(text.c_str(), nullptr);
    if (integral) {
      errno = 0;
      long long v = strtoll(text.c_str(), nullptr, 10);
      if (errno == 0) {
        out->is_int = true;
        out->integer = v;
      } else if (text[0] != '-') {
        // Addresses above INT64_MAX: keep the bits.
        out->is_int = true;
        out->integer = static_cast<int64_t>(strtoull(text.c_str(), nullptr, 10));
      }
    }
    return true;
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

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
  return JsonParser(text).Parse(out, error);
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
