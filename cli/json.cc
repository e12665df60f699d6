#include "cli/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace forkguard::cli {

JsonValue JsonValue::Bool(bool b) {
  JsonValue v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
JsonValue JsonValue::Int(int64_t i) {
  JsonValue v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
JsonValue JsonValue::Double(double d) {
  JsonValue v;
  v.kind_ = Kind::kDouble;
  v.double_ = d;
  return v;
}
JsonValue JsonValue::String(std::string s) {
  JsonValue v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(s);
  return v;
}
JsonValue JsonValue::Array() {
  JsonValue v;
  v.kind_ = Kind::kArray;
  return v;
}
JsonValue JsonValue::Object() {
  JsonValue v;
  v.kind_ = Kind::kObject;
  return v;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  if (kind_ != Kind::kObject) return nullptr;
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

std::string JsonValue::GetString(std::string_view key, std::string fallback) const {
  const JsonValue* v = Find(key);
  return v && v->is_string() ? v->string_value() : fallback;
}

int64_t JsonValue::GetInt(std::string_view key, int64_t fallback) const {
  const JsonValue* v = Find(key);
  if (!v) return fallback;
  if (v->is_int()) return v->int_value();
  if (v->kind_ == Kind::kDouble && std::isfinite(v->double_) && v->double_ > -9.2e18 &&
      v->double_ < 9.2e18)
    return static_cast<int64_t>(v->double_);
  return fallback;
}

bool JsonValue::GetBool(std::string_view key, bool fallback) const {
  const JsonValue* v = Find(key);
  return v && v->is_bool() ? v->bool_value() : fallback;
}

void JsonValue::Push(JsonValue v) {
  kind_ = Kind::kArray;
  array_.push_back(std::move(v));
}

void JsonValue::Set(std::string key, JsonValue v) {
  kind_ = Kind::kObject;
  for (auto& [k, old] : members_) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  members_.emplace_back(std::move(key), std::move(v));
}

namespace {

constexpr int kMaxDepth = 64;

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  explicit Parser(std::string_view t) : t_(t) {}

  bool ParseDocument(JsonValue* out, std::string* error) {
    SkipSpace();
    if (!ParseValue(out, 0)) {
      *error = err_ + " at byte " + std::to_string(pos_);
      return false;
    }
    SkipSpace();
    if (pos_ != t_.size()) {
      *error = "trailing data at byte " + std::to_string(pos_);
      return false;
    }
    return true;
  }

 private:
  bool Fail(const char* what) {
    if (err_.empty()) err_ = what;
    return false;
  }
  void SkipSpace() {
    while (pos_ < t_.size() &&
           (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
      ++pos_;
  }
  bool Literal(std::string_view word) {
    if (t_.substr(pos_, word.size()) != word) return Fail("invalid literal");
    pos_ += word.size();
    return true;
  }

  bool ParseValue(JsonValue* out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting too deep");
    if (pos_ >= t_.size()) return Fail("unexpected end of input");
    char c = t_[pos_];
    switch (c) {
      case 'n':
        *out = JsonValue();
        return Literal("null");
      case 't':
        *out = JsonValue::Bool(true);
        return Literal("true");
      case 'f':
        *out = JsonValue::Bool(false);
        return Literal("false");
      case '"': {
        std::string s;
        if (!ParseString(&s)) return false;
        *out = JsonValue::String(std::move(s));
        return true;
      }
      case '[':
        return ParseArray(out, depth);
      case '{':
        return ParseObject(out, depth);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(out);
        return Fail("unexpected character");
    }
  }

  bool ParseArray(JsonValue* out, int depth) {
    ++pos_;  // '['
    *out = JsonValue::Array();
    SkipSpace();
    if (pos_ < t_.size() && t_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      JsonValue item;
      if (!ParseValue(&item, depth + 1)) return false;
      out->Push(std::move(item));
      SkipSpace();
      if (pos_ >= t_.size()) return Fail("unterminated array");
      if (t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (t_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  bool ParseObject(JsonValue* out, int depth) {
    ++pos_;  // '{'
    *out = JsonValue::Object();
    SkipSpace();
    if (pos_ < t_.size() && t_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      SkipSpace();
      if (pos_ >= t_.size() || t_[pos_] != '"') return Fail("expected a member name");
      std::string key;
      if (!ParseString(&key)) return false;
      SkipSpace();
      if (pos_ >= t_.size() || t_[pos_] != ':') return Fail("expected ':'");
      ++pos_;
      SkipSpace();
      JsonValue item;
      if (!ParseValue(&item, depth + 1)) return false;
      // Duplicate keys: the first one wins (Find), the rest are kept harmlessly.
      out->Set(std::move(key), std::move(item));
      SkipSpace();
      if (pos_ >= t_.size()) return Fail("unterminated object");
      if (t_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (t_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

  bool Hex4(uint32_t* v) {
    if (pos_ + 4 > t_.size()) return Fail("truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = t_[pos_++];
      *v <<= 4;
      if (c >= '0' && c <= '9')
        *v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        *v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        *v |= c - 'A' + 10;
      else
        return Fail("bad \\u escape");
    }
    return true;
  }

  bool ParseString(std::string* s) {
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= t_.size()) return Fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(t_[pos_++]);
      if (c == '"') return true;
      if (c < 0x20) return Fail("control character in string");
      if (c != '\\') {
        s->push_back(static_cast<char>(c));
        continue;
      }
      if (pos_ >= t_.size()) return Fail("unterminated escape");
      char e = t_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          s->push_back(e);
          break;
        case 'b':
          s->push_back('\b');
          break;
        case 'f':
          s->push_back('\f');
          break;
        case 'n':
          s->push_back('\n');
          break;
        case 'r':
          s->push_back('\r');
          break;
        case 't':
          s->push_back('\t');
          break;
        case 'u': {
          uint32_t cp;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < t_.size() && t_[pos_] == '\\' &&
              t_[pos_ + 1] == 'u') {
            size_t save = pos_;
            pos_ += 2;
            uint32_t lo;
            if (!Hex4(&lo)) return false;
            if (lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              pos_ = save;
              cp = 0xFFFD;
            }
          } else if (cp >= 0xD800 && cp < 0xE000) {
            cp = 0xFFFD;  // lone surrogate
          }
          AppendUtf8(s, cp);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
  }

  bool ParseNumber(JsonValue* out) {
    size_t start = pos_;
    bool is_double = false;
    if (t_[pos_] == '-') ++pos_;
    if (pos_ >= t_.size() || !(t_[pos_] >= '0' && t_[pos_] <= '9')) return Fail("bad number");
    if (t_[pos_] == '0') {
      ++pos_;
    } else {
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
    }
    if (pos_ < t_.size() && t_[pos_] == '.') {
      is_double = true;
      ++pos_;
      if (pos_ >= t_.size() || !(t_[pos_] >= '0' && t_[pos_] <= '9')) return Fail("bad number");
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
    }
    if (pos_ < t_.size() && (t_[pos_] == 'e' || t_[pos_] == 'E')) {
      is_double = true;
      ++pos_;
      if (pos_ < t_.size() && (t_[pos_] == '+' || t_[pos_] == '-')) ++pos_;
      if (pos_ >= t_.size() || !(t_[pos_] >= '0' && t_[pos_] <= '9')) return Fail("bad number");
      while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') ++pos_;
    }
    std::string num(t_.substr(start, pos_ - start));
    if (!is_double) {
      errno = 0;
      char* end = nullptr;
      long long v = strtoll(num.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') {
        *out = JsonValue::Int(v);
        return true;
      }
    }
    *out = JsonValue::Double(strtod(num.c_str(), nullptr));
    return true;
  }

  std::string_view t_;
  size_t pos_ = 0;
  std::string err_;
};

void Write(const JsonValue& v, int indent, int level, std::string* out) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * lvl), ' ');
  };
  switch (v.kind()) {
    case JsonValue::Kind::kNull:
      out->append("null");
      break;
    case JsonValue::Kind::kBool:
      out->append(v.bool_value() ? "true" : "false");
      break;
    case JsonValue::Kind::kInt:
      out->append(std::to_string(v.int_value()));
      break;
    case JsonValue::Kind::kDouble: {
      if (!std::isfinite(v.double_value())) {
        out->append("null");
        break;
      }
      char buf[64];
      snprintf(buf, sizeof buf, "%.17g", v.double_value());
      out->append(buf);
      break;
    }
    case JsonValue::Kind::kString:
      out->append(JsonQuote(v.string_value()));
      break;
    case JsonValue::Kind::kArray: {
      if (v.array().empty()) {
        out->append("[]");
        break;
      }
      out->push_back('[');
      bool first = true;
      for (const auto& item : v.array()) {
        if (!first) out->push_back(',');
        first = false;
        newline(level + 1);
        Write(item, indent, level + 1, out);
      }
      newline(level);
      out->push_back(']');
      break;
    }
    case JsonValue::Kind::kObject: {
      if (v.members().empty()) {
        out->append("{}");
        break;
      }
      out->push_back('{');
      bool first = true;
      for (const auto& [k, item] : v.members()) {
        if (!first) out->push_back(',');
        first = false;
        newline(level + 1);
        out->append(JsonQuote(k));
        out->append(indent < 0 ? ":" : ": ");
        Write(item, indent, level + 1, out);
      }
      newline(level);
      out->push_back('}');
      break;
    }
  }
}

// Length of a valid UTF-8 sequence starting at s[i], or 0 if invalid.
size_t Utf8Len(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n;
}

}  // namespace

bool ParseJson(std::string_view text, JsonValue* out, std::string* error) {
  Parser p(text);
  return p.ParseDocument(out, error);
}

std::string WriteJson(const JsonValue& v, int indent) {
  std::string out;
  Write(v, indent, 0, &out);
  return out;
}

std::string JsonQuote(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out.append(buf);
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (size_t n = Utf8Len(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\\ufffd");
      ++i;
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace forkguard::cli
