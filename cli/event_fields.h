// Reading one JSON line of an event log: its members found by schema::Key in one pass
// (Fields), and tolerant typed lookups (a member absent or mistyped reads as the fallback; a
// bad field never drops the line). The lines' framing is cli/log_lines.h, what an event
// means cli/event_decode.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "cli/json.h"
#include "cli/json_parser.h"
#include "formats/event_schema.h"

namespace forkguard::cli {

// The simdjson and schema names the reader's files use unqualified (`using namespace
// reader_names;` in a .cc file, never in a header).
namespace reader_names {
using schema::EventType;
using schema::Key;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;
}  // namespace reader_names

// A name of a fixed list (formats/event_schema.h) -> its index, N when it is none of them: a
// hash table built at compile time (linear probing; one or two comparisons for a name
// that is in the list).
template <size_t N, size_t kSlots>
class NameIndex {
 public:
  static_assert(N < 255 && kSlots >= 2 * N && (kSlots & (kSlots - 1)) == 0);
  constexpr explicit NameIndex(const char* const (&names)[N]) {
    for (auto& s : slot_) s = kEmpty;
    for (size_t i = 0; i < N; ++i) {
      std::string_view n = names[i];
      names_[i] = n;
      size_t h = Hash(n);
      while (slot_[h] != kEmpty) h = (h + 1) & (kSlots - 1);
      slot_[h] = static_cast<uint8_t>(i);
    }
  }
  [[gnu::always_inline]] constexpr size_t Find(std::string_view k) const {
    if (k.empty()) return N;
    for (size_t h = Hash(k);; h = (h + 1) & (kSlots - 1)) {
      uint8_t i = slot_[h];
      if (i == kEmpty) return N;
      if (names_[i] == k) return i;
    }
  }

 private:
  static constexpr uint8_t kEmpty = 0xff;
  static constexpr size_t Hash(std::string_view k) {
    return (k.size() * 31 + static_cast<unsigned char>(k[0]) * 7 +
            static_cast<unsigned char>(k[k.size() / 2]) * 3 +
            static_cast<unsigned char>(k.back())) &
           (kSlots - 1);
  }
  std::string_view names_[N] = {};
  uint8_t slot_[kSlots] = {};
};

constexpr size_t kKeys = static_cast<size_t>(schema::Key::kCount);
constexpr size_t kEventTypes = static_cast<size_t>(schema::EventType::kCount);
constexpr NameIndex<kKeys, 256> kKeyIndex(schema::kKeyNames);
constexpr NameIndex<kEventTypes, 64> kEventTypeIndex(schema::kEventTypeNames);

// A member's Key; Key::kCount for a name that is not one.
[[gnu::always_inline]] constexpr schema::Key KeyOf(std::string_view k) {
  return static_cast<schema::Key>(kKeyIndex.Find(k));
}
// A record's type; EventType::kCount for a type this forkguard does not know.
constexpr schema::EventType EventTypeOf(std::string_view t) {
  return static_cast<schema::EventType>(kEventTypeIndex.Find(t));
}
static_assert(KeyOf(schema::kKeyVerdict) == schema::Key::kVerdict &&
              KeyOf("tx") == schema::Key::kCount && KeyOf("") == schema::Key::kCount &&
              KeyOf(schema::kKeyN) == schema::Key::kN);
static_assert(EventTypeOf(schema::kFork) == schema::EventType::kFork &&
              EventTypeOf(schema::kNote) == schema::EventType::kNote &&
              EventTypeOf("forks") == schema::EventType::kCount);

// An object's members by Key: the first member of each name, as object::at_key finds it,
// found in one pass over the object (a lookup by name would scan the object once per field
// asked for).
struct Fields {
  simdjson::dom::object o;
  uint64_t have[(kKeys + 63) / 64] = {};
  union Slot {
    Slot() {}  // not zeroed: a slot is read only once `have` says it was written
    simdjson::dom::element e;
  } at[kKeys];
  explicit Fields(simdjson::dom::object obj) : o(obj) {
    for (auto field : o) {
      auto k = static_cast<size_t>(KeyOf(field.key));
      if (k == kKeys) continue;
      uint64_t bit = uint64_t{1} << (k % 64);
      if (have[k / 64] & bit) continue;
      have[k / 64] |= bit;
      at[k].e = field.value;
    }
  }
};

// Tolerant typed lookups, as json.h's Get* (first member of that name), in an object or
// in the Fields of one.
bool Member(simdjson::dom::object o, schema::Key key, simdjson::dom::element* out);
[[gnu::always_inline]] inline bool Member(const Fields& f, schema::Key key,
                                          simdjson::dom::element* out) {
  auto k = static_cast<size_t>(key);
  if (!(f.have[k / 64] & (uint64_t{1} << (k % 64)))) return false;
  *out = f.at[k].e;
  return true;
}
// The string member `key`, or `fallback` when absent or not a string (a view into the
// parsed line: valid until the next line is parsed).
template <typename O>
[[gnu::always_inline]] inline std::string_view StrView(const O& o, schema::Key key,
                                                       std::string_view fallback = "") {
  simdjson::dom::element e;
  std::string_view v;
  if (Member(o, key, &e) && e.get_string().get(v) == simdjson::SUCCESS) return v;
  return fallback;
}
template <typename O>
[[gnu::always_inline]] inline std::string Str(const O& o, schema::Key key,
                                              std::string_view fallback = "") {
  return std::string(StrView(o, key, fallback));
}
// An integer, or a double within int64's range (truncated); nullopt for anything else.
inline std::optional<int64_t> IntOf(simdjson::dom::element e) {
  switch (e.type()) {
    case simdjson::dom::element_type::INT64:
      return e.get_int64().value_unsafe();
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE: {
      double d = 0;
      if (e.get_double().get(d) != simdjson::SUCCESS) return std::nullopt;
      if (d > -9.2e18 && d < 9.2e18) return static_cast<int64_t>(d);
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}
template <typename O>
[[gnu::always_inline]] inline int64_t Int(const O& o, schema::Key key, int64_t fallback) {
  simdjson::dom::element e;
  if (!Member(o, key, &e)) return fallback;
  return IntOf(e).value_or(fallback);
}
template <typename O>
[[gnu::always_inline]] inline bool Bool(const O& o, schema::Key key, bool fallback) {
  simdjson::dom::element e;
  bool b = false;
  if (Member(o, key, &e) && e.get_bool().get(b) == simdjson::SUCCESS) return b;
  return fallback;
}
std::optional<uint64_t> Address(simdjson::dom::element e);
template <typename O>
[[gnu::always_inline]] inline std::optional<uint64_t> AddressAt(const O& o, schema::Key key) {
  simdjson::dom::element e;
  if (!Member(o, key, &e)) return std::nullopt;
  return Address(e);
}

// "0x1a2b" or an integer -> value.
std::optional<uint64_t> ParseAddress(const Json* v);
std::optional<uint64_t> ParseAddressText(std::string_view s);

}  // namespace forkguard::cli
