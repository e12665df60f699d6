#include "cli/json.h"

#include <cerrno>
#include <charconv>
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

void JsonValue::Append(std::string key, JsonValue v) {
  members_.emplace_back(std::move(key), std::move(v));
}

namespace {

void AppendQuoted(std::string_view s, std::string* out);

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
    case JsonValue::Kind::kInt: {
      char buf[24];
      out->append(buf, std::to_chars(buf, buf + sizeof buf, v.int_value()).ptr);
      break;
    }
    case JsonValue::Kind::kDouble: {
      if (!std::isfinite(v.double_value())) {
        out->append("null");
        break;
      }
      // As printf's %.17g.
      char buf[64];
      out->append(buf, std::to_chars(buf, buf + sizeof buf, v.double_value(),
                                     std::chars_format::general, 17)
                           .ptr);
      break;
    }
    case JsonValue::Kind::kString:
      AppendQuoted(v.string_value(), out);
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
        AppendQuoted(k, out);
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

namespace {

JsonValue FromElement(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::ARRAY: {
      JsonValue a = JsonValue::Array();
      simdjson::dom::array arr = e.get_array().value_unsafe();
      for (simdjson::dom::element x : arr) a.Push(FromElement(x));
      return a;
    }
    case element_type::OBJECT: {
      // Push order kept and duplicates kept: Find() returns the first, as before.
      JsonValue o = JsonValue::Object();
      simdjson::dom::object obj = e.get_object().value_unsafe();
      for (auto field : obj) o.Append(std::string(field.key), FromElement(field.value));
      return o;
    }
    case element_type::INT64:
      return JsonValue::Int(e.get_int64().value_unsafe());
    case element_type::UINT64:
      return JsonValue::Double(static_cast<double>(e.get_uint64().value_unsafe()));
    case element_type::DOUBLE:
      return JsonValue::Double(e.get_double().value_unsafe());
    case element_type::STRING:
      return JsonValue::String(std::string(e.get_string().value_unsafe()));
    case element_type::BOOL:
      return JsonValue::Bool(e.get_bool().value_unsafe());
    case element_type::NULL_VALUE:
      break;
  }
  return JsonValue();
}

}  // namespace

std::string JsonErrorText(simdjson::error_code code) {
  switch (code) {
    case simdjson::DEPTH_ERROR:
      return "nesting too deep";
    case simdjson::UTF8_ERROR:
      return "invalid UTF-8";
    case simdjson::UNCLOSED_STRING:
      return "unterminated string";
    case simdjson::EMPTY:
      return "empty";
    case simdjson::NUMBER_ERROR:
      return "malformed number, or one out of 64-bit range";
    case simdjson::STRING_ERROR:
      return "bad string escape or lone UTF-16 surrogate";
    default:
      return simdjson::error_message(code);
  }
}

simdjson::dom::parser& LineParser() {
  thread_local simdjson::dom::parser parser = [] {
    simdjson::dom::parser p;
    // Lines are at most 1 MiB (the reader skips longer ones); 64 levels is
    // deeper than anything the shim writes.
    if (p.allocate(size_t{1} << 20, kMaxJsonDepth) != simdjson::SUCCESS) abort();
    return p;
  }();
  return parser;
}

bool ParseJson(std::string_view text, JsonValue* out, std::string* error) {
  simdjson::dom::parser local;
  simdjson::dom::parser& p = text.size() <= (size_t{1} << 20) ? LineParser() : local;
  if (&p == &local && local.allocate(text.size(), kMaxJsonDepth) != simdjson::SUCCESS) {
    if (error) *error = "out of memory";
    return false;
  }
  simdjson::dom::element root;
  auto err = p.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root);
  if (err != simdjson::SUCCESS) {
    if (error) *error = JsonErrorText(err);
    return false;
  }
  *out = FromElement(root);
  return true;
}

std::string WriteJson(const JsonValue& v, int indent) {
  std::string out;
  Write(v, indent, 0, &out);
  return out;
}

namespace {

// Appends `s` quoted; runs of characters that need no escape are appended at once.
void AppendQuoted(std::string_view s, std::string* out) {
  out->push_back('"');
  size_t plain = 0;  // start of the run not appended yet
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      ++i;
      continue;
    }
    out->append(s.substr(plain, i - plain));
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out->append(buf);
      ++i;
    } else if (size_t n = Utf8Len(s, i)) {
      out->append(s.substr(i, n));
      i += n;
    } else {
      out->append("\\ufffd");
      ++i;
    }
    plain = i;
  }
  out->append(s.substr(plain));
  out->push_back('"');
}

}  // namespace

std::string JsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendQuoted(s, &out);
  return out;
}

}  // namespace forkguard::cli
