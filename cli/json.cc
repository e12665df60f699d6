#include "cli/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "cli/format.h"
#include "cli/json_parser.h"

namespace forkguard::cli {

const Json* FindMember(const Json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string GetString(const Json& object, std::string_view key, std::string fallback) {
  const Json* v = FindMember(object, key);
  return v && v->is_string() ? v->get_ref<const std::string&>() : fallback;
}

int64_t GetInt(const Json& object, std::string_view key, int64_t fallback) {
  const Json* v = FindMember(object, key);
  if (!v) return fallback;
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    return u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? static_cast<int64_t>(u)
                                                                           : fallback;
  }
  if (v->is_number_integer()) return v->get<int64_t>();
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d > -9.2e18 && d < 9.2e18) return static_cast<int64_t>(d);
  }
  return fallback;
}

bool GetBool(const Json& object, std::string_view key, bool fallback) {
  const Json* v = FindMember(object, key);
  return v && v->is_boolean() ? v->get<bool>() : fallback;
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
    } else if (size_t n = Utf8Length(s, i)) {
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

template <typename T>
void AppendNumber(T v, std::string* out) {
  char buf[24];
  out->append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void Write(const Json& v, int indent, int level, std::string* out) {
  auto newline = [&](int lvl) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(indent * lvl), ' ');
  };
  // An array's or an object's items between `open` and `close`, comma separated, each on a
  // line of its own when indenting ("[]", "{}" when empty).
  auto items_in = [&](char open, char close, const auto& items, const auto& write_item) {
    out->push_back(open);
    bool first = true;
    for (const auto& item : items) {
      if (!first) out->push_back(',');
      first = false;
      newline(level + 1);
      write_item(item);
    }
    if (!items.empty()) newline(level);
    out->push_back(close);
  };
  switch (v.type()) {
    case Json::value_t::null:
    case Json::value_t::discarded:
    case Json::value_t::binary:  // never built here; no JSON text for it
      out->append("null");
      break;
    case Json::value_t::boolean:
      out->append(v.get<bool>() ? "true" : "false");
      break;
    case Json::value_t::number_integer:
      AppendNumber(v.get<int64_t>(), out);
      break;
    case Json::value_t::number_unsigned:
      AppendNumber(v.get<uint64_t>(), out);
      break;
    case Json::value_t::number_float: {
      double d = v.get<double>();
      if (!std::isfinite(d)) {
        out->append("null");
        break;
      }
      // As printf's %.17g.
      char buf[64];
      out->append(buf, std::to_chars(buf, buf + sizeof buf, d, std::chars_format::general, 17).ptr);
      break;
    }
    case Json::value_t::string:
      AppendQuoted(v.get_ref<const std::string&>(), out);
      break;
    case Json::value_t::array:
      items_in('[', ']', v.get_ref<const Json::array_t&>(),
               [&](const Json& item) { Write(item, indent, level + 1, out); });
      break;
    case Json::value_t::object:
      items_in('{', '}', v.get_ref<const Json::object_t&>(), [&](const auto& member) {
        AppendQuoted(member.first, out);
        out->append(indent < 0 ? ":" : ": ");
        Write(member.second, indent, level + 1, out);
      });
      break;
  }
}

Json FromElement(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::ARRAY: {
      Json a = Json::array();
      // Named: value_unsafe() of a temporary result would dangle in the range-for.
      simdjson::dom::array arr = e.get_array().value_unsafe();
      for (simdjson::dom::element x : arr) a.push_back(FromElement(x));
      return a;
    }
    case element_type::OBJECT: {
      // Document order kept; of duplicate keys the first is kept (emplace keeps what is there).
      Json o = Json::object();
      simdjson::dom::object obj = e.get_object().value_unsafe();
      for (auto field : obj) o.emplace(std::string(field.key), FromElement(field.value));
      return o;
    }
    case element_type::INT64:
      return e.get_int64().value_unsafe();
    case element_type::UINT64:
      return static_cast<double>(e.get_uint64().value_unsafe());
    case element_type::DOUBLE:
      return e.get_double().value_unsafe();
    case element_type::STRING:
      return std::string(e.get_string().value_unsafe());
    case element_type::BOOL:
      return e.get_bool().value_unsafe();
    case element_type::NULL_VALUE:
      break;
  }
  return Json();
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

bool ParseJson(std::string_view text, Json* out, std::string* error) {
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

std::string WriteJson(const Json& v, int indent) {
  std::string out;
  Write(v, indent, 0, &out);
  return out;
}

std::string JsonQuote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  AppendQuoted(s, &out);
  return out;
}

}  // namespace forkguard::cli
