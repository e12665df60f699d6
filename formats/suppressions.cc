#include "formats/suppressions.h"

#include <cstring>

#include "formats/text_buffer.h"

namespace forkguard {
namespace {

constexpr char kValidKeys[] =
    "valid keys: kind=child-segv|parent-corruption|inherited-rdma|*[,...], "
    "frame=func:NAME|lib:NAME|file:NAME[:LINE], program=NAME, rank=N[-M][,...]";

struct KindName {
  unsigned bit;
  const char* name;
};
constexpr KindName kKinds[] = {
    {1u << 0, "child-segv"},
    {1u << 1, "parent-corruption"},
    {1u << 2, "inherited-rdma"},
};

// The longest value a token may carry: "file:" + a pattern + ":" + a 9-digit line.
constexpr size_t kMaxValue = SuppressionFrameMatch::kMaxPattern + 16;

// One line being parsed: a cursor and where errors go.
struct LineCursor {
  const char* p;
  const char* end;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

void Error(SuppressionErrorSink sink, void* ctx, int line, const char* what, const char* detail) {
  if (sink == nullptr) return;
  char buf[768];
  TextBuffer b(buf, sizeof buf);
  b.Str(what);
  if (detail != nullptr) {
    b.Str(" \"");
    for (size_t i = 0; detail[i] != '\0' && i < 80; ++i) {
      auto c = static_cast<unsigned char>(detail[i]);
      b.Char(c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c));
    }
    b.Char('"');
  }
  b.Str(" (").Str(kValidKeys).Char(')');
  sink(line, b.data(), ctx);
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads the next `key=value` token into key/value (NUL-terminated, value unquoted).
// Returns 1 for a token, 0 at the end of the line (or a comment), -1 for a bad token with
// *why set. A value that does not fit in value_cap - 1 bytes is a bad token: nothing is cut.
int NextToken(LineCursor* c, char* key, size_t key_cap, char* value, size_t value_cap,
              const char** why) {
  while (c->p < c->end && IsSpace(*c->p)) ++c->p;
  if (c->p >= c->end || *c->p == '#') return 0;
  size_t k = 0;
  while (c->p < c->end && *c->p != '=' && !IsSpace(*c->p) && *c->p != '#') {
    if (k + 1 < key_cap) key[k++] = *c->p;
    ++c->p;
  }
  key[k] = '\0';
  if (c->p >= c->end || *c->p != '=') {
    *why = "expected key=value at";
    return -1;
  }
  ++c->p;  // '='
  size_t v = 0;
  bool overlong = false;
  auto put = [&](char ch) {
    if (v + 1 < value_cap) {
      value[v++] = ch;
    } else {
      overlong = true;
    }
  };
  if (c->p < c->end && *c->p == '"') {
    ++c->p;
    bool closed = false;
    while (c->p < c->end) {
      char ch = *c->p++;
      if (ch == '"') {
        closed = true;
        break;
      }
      if (ch == '\\') {
        // Escapes inside quotes: \" \\ \n \r \t \xNN (two hex digits, not 00).
        if (c->p >= c->end) break;  // unbalanced
        char e = *c->p++;
        if (e == 'n') {
          ch = '\n';
        } else if (e == 'r') {
          ch = '\r';
        } else if (e == 't') {
          ch = '\t';
        } else if (e == 'x') {
          int hi = c->end - c->p >= 2 ? HexDigit(c->p[0]) : -1;
          int lo = hi >= 0 ? HexDigit(c->p[1]) : -1;
          if (lo < 0 || (hi == 0 && lo == 0)) {
            value[v] = '\0';
            *why = "bad escape (\\xNN: two hex digits, not 00) in";
            return -1;
          }
          c->p += 2;
          ch = static_cast<char>(hi * 16 + lo);
        } else if (e == '"' || e == '\\') {
          ch = e;
        } else {
          value[v] = '\0';
          *why = "unknown escape (known: \\\" \\\\ \\n \\r \\t \\xNN) in";
          return -1;
        }
      }
      put(ch);
    }
    value[v] = '\0';
    if (!closed) {
      *why = "unbalanced quote in";
      return -1;
    }
    if (c->p < c->end && !IsSpace(*c->p) && *c->p != '#') {
      *why = "text right after a closing quote in";
      return -1;
    }
  } else {
    while (c->p < c->end && !IsSpace(*c->p) && *c->p != '#') {
      if (*c->p == '"') {
        value[v] = '\0';
        *why = "unbalanced quote in";
        return -1;
      }
      put(*c->p++);
    }
    value[v] = '\0';
  }
  if (overlong) {
    *why = "value too long in";
    return -1;
  }
  return 1;
}

bool ParseLong(const char* s, const char* end, long* out) {
  if (s == end || end - s > 9) return false;
  long v = 0;
  for (const char* p = s; p < end; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + (*p - '0');
  }
  *out = v;
  return true;
}

bool ParseKinds(const char* v, unsigned* out) {
  unsigned kinds = 0;
  const char* p = v;
  while (true) {
    const char* comma = strchr(p, ',');
    size_t n = comma != nullptr ? static_cast<size_t>(comma - p) : strlen(p);
    if (n == 1 && p[0] == '*') {
      kinds |= kSuppressAllKinds;
    } else {
      bool found = false;
      for (const KindName& k : kKinds) {
        if (strlen(k.name) == n && strncmp(k.name, p, n) == 0) {
          kinds |= k.bit;
          found = true;
        }
      }
      if (!found) return false;
    }
    if (comma == nullptr) break;
    p = comma + 1;
  }
  *out |= kinds;
  return true;
}

bool ParseRanks(const char* v, Suppression* s) {
  const char* p = v;
  while (true) {
    const char* comma = strchr(p, ',');
    const char* end = comma != nullptr ? comma : p + strlen(p);
    const char* dash = static_cast<const char*>(memchr(p, '-', static_cast<size_t>(end - p)));
    long lo = 0, hi = 0;
    if (dash != nullptr) {
      if (!ParseLong(p, dash, &lo) || !ParseLong(dash + 1, end, &hi) || hi < lo) return false;
    } else {
      if (!ParseLong(p, end, &lo)) return false;
      hi = lo;
    }
    if (s->rank_count >= Suppression::kMaxRanks) return false;
    s->ranks[s->rank_count++] = {lo, hi};
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return true;
}

// "func:NAME", "lib:NAME", "file:NAME[:LINE]". Returns the error text or nullptr.
const char* ParseFrame(const char* v, SuppressionFrameMatch* f) {
  const char* colon = strchr(v, ':');
  if (colon == nullptr) return "frame needs func:, lib: or file: in";
  size_t n = static_cast<size_t>(colon - v);
  const char* pat = colon + 1;
  if (n == 4 && strncmp(v, "func", 4) == 0) {
    f->kind = SuppressionFrameMatch::kFunc;
  } else if (n == 3 && strncmp(v, "lib", 3) == 0) {
    f->kind = SuppressionFrameMatch::kLib;
  } else if (n == 4 && strncmp(v, "file", 4) == 0) {
    f->kind = SuppressionFrameMatch::kFile;
  } else {
    return "frame needs func:, lib: or file: in";
  }
  size_t len = strlen(pat);
  if (f->kind == SuppressionFrameMatch::kFile) {
    // A trailing ":LINE" (digits) is the line.
    const char* last = strrchr(pat, ':');
    long line = 0;
    if (last != nullptr && ParseLong(last + 1, pat + len, &line)) {
      if (line < 1) return "line numbers start at 1 in";
      f->line = static_cast<int>(line);
      len = static_cast<size_t>(last - pat);
    }
  }
  if (len == 0) return "empty match in";
  if (len >= sizeof f->pattern) return "match too long (at most 239 bytes) in";
  memcpy(f->pattern, pat, len);
  f->pattern[len] = '\0';
  return nullptr;
}

// Bytes the parser would split a bare value on or could not read back from it: blanks, the
// line's end, quotes, '#', backslashes and every other control character.
bool NeedsQuotes(const char* s) {
  if (*s == '\0') return true;
  for (; *s != '\0'; ++s) {
    auto c = static_cast<unsigned char>(*s);
    if (c < 0x20 || c == 0x7f || c == ' ' || c == '"' || c == '#' || c == '\\') return true;
  }
  return false;
}

// `v` as the parser reads it back byte for byte: bare, or quoted with escapes.
void AppendValue(TextBuffer& b, const char* v) {
  if (!NeedsQuotes(v)) {
    b.Str(v);
    return;
  }
  b.Char('"');
  for (; *v != '\0'; ++v) {
    auto c = static_cast<unsigned char>(*v);
    if (c == '"' || c == '\\') {
      b.Char('\\').Char(*v);
    } else if (c == '\n') {
      b.Str("\\n");
    } else if (c == '\r') {
      b.Str("\\r");
    } else if (c == '\t') {
      b.Str("\\t");
    } else if (c < 0x20 || c == 0x7f) {
      b.Str("\\x").Char(TextBuffer::kHexDigits[c >> 4]).Char(TextBuffer::kHexDigits[c & 0xf]);
    } else {
      b.Char(*v);
    }
  }
  b.Char('"');
}

// False when the text does not fit (never for an entry the parser accepts: kMaxText is sized
// for the longest).
bool WriteCanonical(Suppression* s) {
  TextBuffer b(s->text, sizeof s->text);
  b.Str("kind=");
  if (s->kinds == kSuppressAllKinds) {
    b.Char('*');
  } else {
    bool first = true;
    for (const KindName& k : kKinds) {
      if ((s->kinds & k.bit) == 0) continue;
      if (!first) b.Char(',');
      b.Str(k.name);
      first = false;
    }
  }
  for (int i = 0; i < s->frame_count; ++i) {
    const SuppressionFrameMatch& f = s->frames[i];
    char buf[kMaxValue];
    TextBuffer v(buf, sizeof buf);
    v.Str(f.kind == SuppressionFrameMatch::kFunc  ? "func:"
          : f.kind == SuppressionFrameMatch::kLib ? "lib:"
                                                  : "file:");
    v.Str(f.pattern);
    if (f.line > 0) v.Char(':').Dec(f.line);
    b.Str(" frame=");
    AppendValue(b, v.data());
  }
  if (s->program[0] != '\0') {
    b.Str(" program=");
    AppendValue(b, s->program);
  }
  if (s->rank_count > 0) {
    b.Str(" rank=");
    for (int i = 0; i < s->rank_count; ++i) {
      if (i > 0) b.Char(',');
      b.Dec(s->ranks[i].lo);
      if (s->ranks[i].hi != s->ranks[i].lo) b.Char('-').Dec(s->ranks[i].hi);
    }
  }
  return !b.truncated();
}

// Parses one line into *s. Returns 1 for an entry, 0 for a blank/comment line, -1 when bad
// (reported).
int ParseLine(const char* p, const char* end, int line, Suppression* s, SuppressionErrorSink sink,
              void* ctx) {
  LineCursor c{p, end};
  char key[32];
  char value[kMaxValue];
  bool any = false;
  bool has_kind = false;
  *s = Suppression();
  s->source_line = line;
  while (true) {
    const char* why = nullptr;
    int t = NextToken(&c, key, sizeof key, value, sizeof value, &why);
    if (t == 0) break;
    if (t < 0) {
      Error(sink, ctx, line, why, key[0] != '\0' ? key : value);
      return -1;
    }
    any = true;
    if (strcmp(key, "kind") == 0) {
      if (value[0] == '\0') {
        Error(sink, ctx, line, "empty match in", "kind=");
        return -1;
      }
      if (!ParseKinds(value, &s->kinds)) {
        Error(sink, ctx, line, "unknown verdict kind in", value);
        return -1;
      }
      has_kind = true;
    } else if (strcmp(key, "frame") == 0) {
      if (s->frame_count >= Suppression::kMaxFrames) {
        Error(sink, ctx, line, "more than 4 frames in one entry at", value);
        return -1;
      }
      if (value[0] == '\0') {
        Error(sink, ctx, line, "empty match in", "frame=");
        return -1;
      }
      if (const char* err = ParseFrame(value, &s->frames[s->frame_count]); err != nullptr) {
        Error(sink, ctx, line, err, value);
        return -1;
      }
      ++s->frame_count;
    } else if (strcmp(key, "program") == 0) {
      if (value[0] == '\0') {
        Error(sink, ctx, line, "empty match in", "program=");
        return -1;
      }
      if (strlen(value) >= sizeof s->program) {
        Error(sink, ctx, line, "program pattern too long in", value);
        return -1;
      }
      strcpy(s->program, value);
    } else if (strcmp(key, "rank") == 0) {
      if (value[0] == '\0') {
        Error(sink, ctx, line, "empty match in", "rank=");
        return -1;
      }
      if (!ParseRanks(value, s)) {
        Error(sink, ctx, line, "bad rank list (N, N-M, comma separated, at most 8) in", value);
        return -1;
      }
    } else {
      Error(sink, ctx, line, "unknown key", key);
      return -1;
    }
  }
  if (!any) return 0;
  if (!has_kind) {
    Error(sink, ctx, line, "entry without kind=", nullptr);
    return -1;
  }
  if (s->frame_count == 0) {
    Error(sink, ctx, line, "entry without frame=", nullptr);
    return -1;
  }
  if (!WriteCanonical(s)) {
    Error(sink, ctx, line, "entry too long", nullptr);
    return -1;
  }
  return 1;
}

// `pattern` against a path: the whole path, the base name when the pattern has no '/',
// and any tail after a '/' when it has one ("data/loader.py" matches ".../data/loader.py").
bool PathMatches(const char* pattern, const char* path) {
  if (path == nullptr || path[0] == '\0') return false;
  if (SuppressionGlobMatch(pattern, path)) return true;
  bool has_slash = strchr(pattern, '/') != nullptr;
  for (const char* p = path; *p != '\0'; ++p) {
    if (*p != '/') continue;
    if (!has_slash) {
      const char* base = strrchr(p, '/') + 1;
      return SuppressionGlobMatch(pattern, base);
    }
    if (SuppressionGlobMatch(pattern, p + 1)) return true;
  }
  return false;
}

// A C++ name against the pattern without its parameter list too ("ns::f(int)" -> "ns::f").
bool FuncMatches(const char* pattern, const SuppressionFrameFacts& f) {
  if (f.func != nullptr && SuppressionGlobMatch(pattern, f.func)) return true;
  if (f.demangled == nullptr || f.demangled[0] == '\0') return false;
  if (SuppressionGlobMatch(pattern, f.demangled)) return true;
  const char* paren = strchr(f.demangled, '(');
  if (paren == nullptr || paren == f.demangled) return false;
  char name[512];
  size_t n = static_cast<size_t>(paren - f.demangled);
  if (n >= sizeof name) return false;
  memcpy(name, f.demangled, n);
  name[n] = '\0';
  return SuppressionGlobMatch(pattern, name);
}

bool FrameMatches(const SuppressionFrameMatch& m, const SuppressionFrameFacts& f) {
  switch (m.kind) {
    case SuppressionFrameMatch::kFunc:
      return FuncMatches(m.pattern, f);
    case SuppressionFrameMatch::kLib:
      return PathMatches(m.pattern, f.lib);
    case SuppressionFrameMatch::kFile:
      return (m.line == 0 || m.line == f.line) && PathMatches(m.pattern, f.file);
  }
  return false;
}

bool EntryMatches(const Suppression& s, const SuppressionQuery& q) {
  if (q.kinds == 0 || (q.kinds & ~s.kinds) != 0) return false;
  if (s.program[0] != '\0' &&
      (q.program == nullptr || !SuppressionGlobMatch(s.program, q.program))) {
    return false;
  }
  if (s.rank_count > 0) {
    bool in = false;
    for (int i = 0; i < s.rank_count && !in; ++i) {
      in = q.rank >= s.ranks[i].lo && q.rank <= s.ranks[i].hi;
    }
    if (q.rank < 0 || !in) return false;
  }
  for (int k = 0; k < s.frame_count; ++k) {
    bool found = false;
    for (int i = 0; i < q.frame_count && !found; ++i) {
      found = FrameMatches(s.frames[k], q.frames[i]);
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

const char* SuppressionKindName(unsigned bit) {
  for (const KindName& k : kKinds) {
    if (k.bit == bit) return k.name;
  }
  return nullptr;
}

bool SuppressionGlobMatch(const char* pattern, const char* text) {
  if (pattern == nullptr || text == nullptr) return false;
  const char* star = nullptr;  // the last '*' seen, and where its run started in text
  const char* resume = nullptr;
  const char* p = pattern;
  const char* t = text;
  while (*t != '\0') {
    if (*p == '*') {
      star = p++;
      resume = t;
    } else if (*p != '\0' && (*p == '?' || *p == *t)) {
      ++p;
      ++t;
    } else if (star != nullptr) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (*p == '*') ++p;
  return *p == '\0';
}

int ParseSuppressions(const char* text, size_t len, SuppressionSet* out,
                      SuppressionErrorSink on_error, void* ctx) {
  out->count = 0;
  int bad = 0;
  int line = 0;
  const char* p = text;
  const char* end = text + len;
  while (p < end) {
    ++line;
    const char* nl = static_cast<const char*>(memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* eol = nl != nullptr ? nl : end;
    if (memchr(p, '\0', static_cast<size_t>(eol - p)) != nullptr) {
      Error(on_error, ctx, line, "NUL byte in the line", nullptr);
      ++bad;
    } else if (out->count >= SuppressionSet::kMaxEntries) {
      LineCursor c{p, eol};
      while (c.p < c.end && IsSpace(*c.p)) ++c.p;
      if (c.p < c.end && *c.p != '#') {
        Error(on_error, ctx, line, "more than 128 entries", nullptr);
        ++bad;
      }
    } else {
      int r = ParseLine(p, eol, line, &out->entries[out->count], on_error, ctx);
      if (r > 0) ++out->count;
      if (r < 0) ++bad;
    }
    p = eol + 1;
  }
  if (bad > 0) out->count = 0;
  return bad;
}

bool QuoteSuppressionValue(const char* value, char* out, size_t cap) {
  TextBuffer b(out, cap);
  AppendValue(b, value);
  if (!b.truncated()) return true;
  if (cap > 0) out[0] = '\0';
  return false;
}

int MatchSuppression(const SuppressionSet& set, const SuppressionQuery& q) {
  for (int i = 0; i < set.count; ++i) {
    if (EntryMatches(set.entries[i], q)) return i;
  }
  return -1;
}

}  // namespace forkguard
