// The names of an enum's values, one table per enum, and the lookups every enum shares.
//
// A table is indexed by the value (0, 1, 2, ... in declaration order; for a flag enum, by
// the bit's position). Its rows are char arrays, not pointers: a table costs the shim no
// relocation at load time. The lookups are constexpr, malloc-free and async-signal-safe:
// the shim names things on its fork path. A leaf: libc only.
#pragma once

#include <stddef.h>
#include <string.h>

namespace forkguard {

// names[value], or `fallback` for a value outside the table.
template <typename E, size_t N, size_t W>
constexpr const char* NameOf(const char (&names)[N][W], E value, const char* fallback) {
  auto i = static_cast<unsigned long long>(value);
  return i < N ? names[i] : fallback;
}

// The name of a flag with exactly one bit set, names[the bit's position]; `fallback` for
// none, several, or a bit beyond the table.
template <typename E, size_t N, size_t W>
constexpr const char* FlagName(const char (&names)[N][W], E flag, const char* fallback) {
  auto bits = static_cast<unsigned long long>(flag);
  if (bits == 0 || (bits & (bits - 1)) != 0) return fallback;
  return NameOf(names, __builtin_ctzll(bits), fallback);
}

// The value named `name` (compared with `Compare`: strcmp, or strcasecmp where case does not
// matter, a direct call); false, and *out untouched, for a null pointer or a name not in the
// table.
template <int (*Compare)(const char*, const char*) = strcmp, typename E, size_t N, size_t W>
bool ValueOf(const char (&names)[N][W], const char* name, E* out) {
  if (name == nullptr) return false;
  for (size_t i = 0; i < N; ++i) {
    if (Compare(name, names[i]) == 0) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

// How many values an enum has when `last` is its last: for a static_assert that its table
// has one row per value.
template <typename E>
constexpr size_t CountThrough(E last) {
  return static_cast<size_t>(last) + 1;
}

}  // namespace forkguard
