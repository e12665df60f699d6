// Suppression files: which hazardous fork sites a user has looked at and accepted.
//
// One home for the format, read by the shim (FORKGUARD_SUPPRESSIONS, parsed once at start)
// and by `forkguard report --suppressions FILE`, so both silence exactly the same forks.
// The format (docs/cli.md, "Suppressions"): one entry a line, `#` starts a comment,
//
//   kind=child-segv frame=func:build_loader
//   kind=child-segv,inherited-rdma frame=lib:libtorch* program=python3 rank=0-3
//   kind=* frame=file:train.py:88 frame="func:Loader::start *"
//
// Keys: kind (required; child-segv, parent-corruption, inherited-rdma or *, comma
// separated), frame (required, up to 4: func:PATTERN, lib:PATTERN, file:PATTERN[:LINE]),
// program (PATTERN), rank (N, N-M, comma separated). Values may be double-quoted; inside
// quotes a backslash starts an escape: \" \\ \n \r \t \xNN (two hex digits, not 00), and
// any other is a bad line. A value or a pattern too long for its field is a bad line, never
// cut. Patterns are globs (`*`, `?`).
//
// A file with any bad line is refused whole (ParseSuppressions leaves the set empty): a line
// the reader cannot take is never dropped while the rest applies, so a planted or mangled
// line cannot leave a broader neighbour in force by itself.
//
// An entry matches a hazardous fork when its kinds include every reason of the fork's
// verdict, each of its frames matches some frame of the fork's stack (native or Python),
// and its program and rank (when given) match the process.
//
// Fixed-size storage, no malloc, libc only: the shim matches on the fork path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace forkguard {

struct SuppressionFrameMatch {
  enum Kind : uint8_t { kFunc, kLib, kFile };
  static constexpr size_t kMaxPattern = 240;
  Kind kind = kFunc;
  int line = 0;  // file:PATTERN:LINE; 0 matches any line
  char pattern[kMaxPattern] = {};
};

struct Suppression {
  static constexpr int kMaxFrames = 4;
  static constexpr int kMaxRanks = 8;
  static constexpr size_t kMaxProgram = 128;
  // The longest canonical text: kinds, 4 frames and a program with every byte escaped
  // (\xNN), 8 ranks; WriteCanonical never cuts an entry the parser accepts.
  static constexpr size_t kMaxText =
      5 + 43 + kMaxFrames * (7 + 2 + 5 + 4 * (SuppressionFrameMatch::kMaxPattern - 1) + 10) +
      (9 + 2 + 4 * (kMaxProgram - 1)) + (6 + kMaxRanks * 19 + (kMaxRanks - 1)) + 1;
  int source_line = 0;  // 1-based line in its file
  unsigned kinds = 0;   // verdict reason bits (shim/verdict/verdict.h); kAllKinds for `*`
  int frame_count = 0;
  SuppressionFrameMatch frames[kMaxFrames];
  char program[kMaxProgram] = {};  // "" matches any program
  int rank_count = 0;              // 0 matches any rank
  struct Range {
    long lo, hi;
  } ranks[kMaxRanks] = {};
  // The entry written back in canonical form (keys in order, values quoted when needed):
  // what the event log and the report name it by.
  char text[kMaxText] = {};
};

struct SuppressionSet {
  static constexpr int kMaxEntries = 128;
  int count = 0;
  Suppression entries[kMaxEntries];
};

inline constexpr unsigned kSuppressAllKinds = 0x7;  // child-segv | parent-corruption | inherited

// Receives one error: its 1-based line number and "what (valid keys: ...)", one line of
// text without the file and line (the caller prefixes them). At most one error per line.
using SuppressionErrorSink = void (*)(int line, const char* text, void* ctx);

// Parses a whole file's text. Every bad line is reported; when there is any, out->count is 0
// (fail closed: no entry of a file with a bad line applies). Returns the number of bad lines.
int ParseSuppressions(const char* text, size_t len, SuppressionSet* out,
                      SuppressionErrorSink on_error, void* ctx);

// Writes `value` as a value the parser reads back byte for byte: bare when it holds nothing
// the parser splits on, else double-quoted with the escapes above (control characters as
// \xNN). NUL-terminated; false (out is then "") when it does not fit in `cap`. `value` must not
// be empty (an empty match is a bad line).
bool QuoteSuppressionValue(const char* value, char* out, size_t cap);

// One frame of the fork stack as the matcher sees it; any field may be null/0.
struct SuppressionFrameFacts {
  const char* func = nullptr;       // symbol as linked (mangled for C++), or Python function
  const char* demangled = nullptr;  // C++ name with its parameter list, when known
  const char* lib = nullptr;        // native object's path
  const char* file = nullptr;       // Python file, or native source file when symbolized
  int line = 0;
};

struct SuppressionQuery {
  unsigned kinds = 0;  // the fork's verdict reasons
  const char* program = nullptr;
  long rank = -1;  // -1: unknown (an entry that names ranks does not match)
  const SuppressionFrameFacts* frames = nullptr;
  int frame_count = 0;
};

// The first entry of `set` that matches, or -1. No allocation, no locks.
int MatchSuppression(const SuppressionSet& set, const SuppressionQuery& q);

// Glob match: `*` any run of characters (slashes too), `?` one character. Iterative.
bool SuppressionGlobMatch(const char* pattern, const char* text);

// "child-segv" etc. for one reason bit, nullptr for others.
const char* SuppressionKindName(unsigned bit);

}  // namespace forkguard
