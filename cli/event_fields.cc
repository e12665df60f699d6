// Tolerant typed lookups in a line's JSON, and addresses as the logs write them.
#include "cli/event_fields.h"

#include <cstdint>

namespace forkguard::cli {

using namespace reader_names;

bool Member(object o, schema::Key key, element* out) {
  return o.at_key(schema::KeyName(key)).get(*out) == simdjson::SUCCESS;
}

std::optional<uint64_t> Address(element e) {
  if (e.type() == element_type::INT64) {
    int64_t v = e.get_int64().value_unsafe();
    if (v >= 0) return static_cast<uint64_t>(v);
    return std::nullopt;
  }
  std::string_view s;
  if (e.get_string().get(s) == simdjson::SUCCESS) return ParseAddressText(s);
  return std::nullopt;
}

std::optional<uint64_t> ParseAddress(const Json* v) {
  if (!v) return std::nullopt;
  if (v->is_number_integer() && v->get<int64_t>() >= 0)
    return static_cast<uint64_t>(v->get<int64_t>());
  if (!v->is_string()) return std::nullopt;
  return ParseAddressText(v->get_ref<const std::string&>());
}

std::optional<uint64_t> ParseAddressText(std::string_view s) {
  size_t i = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    i = 2;
    base = 16;
  }
  if (i >= s.size() || s.size() - i > 16 + (base == 10 ? 4 : 0)) return std::nullopt;
  uint64_t r = 0;
  for (; i < s.size(); ++i) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return std::nullopt;
    if (r > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      return std::nullopt;
    r = r * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  return r;
}

}  // namespace forkguard::cli
