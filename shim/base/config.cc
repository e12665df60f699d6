#include "shim/base/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include <strings.h>

#include "formats/event_schema.h"
#include "formats/text_buffer.h"
#include "names/name_table.h"

namespace forkguard {
namespace {

// FORKGUARD_MODE's values (any case), by enum: the event log's (formats/event_schema.h). An
// array of arrays, not of pointers: no relocations to apply at load.
constexpr char kModeNames[][6] = {
#define FORKGUARD_X(id, name) name,
    FORKGUARD_MODES(FORKGUARD_X)
#undef FORKGUARD_X
};
// FORKGUARD_REPORT's values (any case), by enum.
static_assert(std::size(kModeNames) == CountThrough(Mode::kFix));
constexpr char kReportNames[][7] = {"once", "always"};
static_assert(std::size(kReportNames) == CountThrough(ReportPolicy::kAlways));

void Warn(WarningSink warn, void* ctx, const char* name, const char* value, const char* why,
          const char* fallback) {
  if (warn == nullptr) return;
  char buf[512];
  TextBuffer line(buf, sizeof(buf));
  FormatIgnoredVariable(line, name, value, why, fallback);
  warn(line.data(), ctx);
}

bool EqualsIgnoreCase(const char* a, const char* b) { return strcasecmp(a, b) == 0; }

}  // namespace

void FormatIgnoredVariable(TextBuffer& out, const char* name, const char* value, const char* why,
                           const char* fallback) {
  out.Str("forkguard: ignoring ").Str(name).Char('=');
  AppendShownValue(out, value);
  out.Str(": ").Str(why).Str("; using ").Str(fallback);
}

const char* ModeName(Mode mode) { return NameOf(kModeNames, mode, "warn"); }

Config ParseConfig(EnvLookup env, void* env_ctx, WarningSink warn, void* warn_ctx, bool secure) {
  Config c;
  ParseConfigInto(c, env, env_ctx, warn, warn_ctx, secure);
  return c;
}

void ParseConfigInto(Config& c, EnvLookup env, void* env_ctx, WarningSink warn, void* warn_ctx,
                     bool secure) {
  if (secure || env == nullptr) return;

  if (const char* v = env("FORKGUARD_MODE", env_ctx);
      v != nullptr && !ValueOf<strcasecmp>(kModeNames, v, &c.mode)) {
    Warn(warn, warn_ctx, "FORKGUARD_MODE", v, "expected warn, error, abort, fix or off", "warn");
  }

  if (const char* v = env("FORKGUARD_REPORT", env_ctx);
      v != nullptr && !ValueOf<strcasecmp>(kReportNames, v, &c.report)) {
    Warn(warn, warn_ctx, "FORKGUARD_REPORT", v, "expected once or always", "once");
  }

  if (const char* v = env("FORKGUARD_QUIET", env_ctx); v != nullptr) {
    if (strcmp(v, "1") == 0 || EqualsIgnoreCase(v, "true") || EqualsIgnoreCase(v, "yes")) {
      c.quiet = true;
    } else if (strcmp(v, "0") == 0 || EqualsIgnoreCase(v, "false") || EqualsIgnoreCase(v, "no") ||
               v[0] == '\0') {
      c.quiet = false;
    } else {
      Warn(warn, warn_ctx, "FORKGUARD_QUIET", v, "expected 1 or 0", "0");
    }
  }

  if (const char* v = env("FORKGUARD_STACK_DEPTH", env_ctx); v != nullptr) {
    errno = 0;
    char* end = nullptr;
    long depth = strtol(v, &end, 10);
    if (v[0] == '\0' || end == nullptr || *end != '\0' || errno != 0) {
      Warn(warn, warn_ctx, "FORKGUARD_STACK_DEPTH", v, "not a number", "32");
    } else if (depth < 1 || depth > Config::kMaxStackDepth) {
      Warn(warn, warn_ctx, "FORKGUARD_STACK_DEPTH", v, "must be between 1 and 64", "32");
    } else {
      c.stack_depth = static_cast<int>(depth);
    }
  }

  if (const char* v = env("FORKGUARD_LOG", env_ctx); v != nullptr && v[0] != '\0') {
    if (v[0] != '/') {
      // A relative directory would resolve differently in children that chdir.
      Warn(warn, warn_ctx, "FORKGUARD_LOG", v, "not an absolute path", "no event log");
    } else if (strlen(v) >= sizeof(c.log_dir) - 128) {
      Warn(warn, warn_ctx, "FORKGUARD_LOG", v, "path too long", "no event log");
    } else {
      strcpy(c.log_dir, v);
    }
  }

  if (const char* v = env("FORKGUARD_SUPPRESSIONS", env_ctx); v != nullptr && v[0] != '\0') {
    if (v[0] != '/') {
      // Read again by every exec'd child: a relative path would follow their chdir.
      Warn(warn, warn_ctx, "FORKGUARD_SUPPRESSIONS", v, "not an absolute path", "no suppressions");
    } else if (strlen(v) >= sizeof(c.suppressions)) {
      Warn(warn, warn_ctx, "FORKGUARD_SUPPRESSIONS", v, "path too long", "no suppressions");
    } else {
      strcpy(c.suppressions, v);
    }
  }

  if (const char* v = env("FORKGUARD_ALLOW", env_ctx); v != nullptr) {
    const char* p = v;
    bool reported_overflow = false;
    while (*p != '\0') {
      const char* comma = strchr(p, ',');
      size_t len = comma != nullptr ? static_cast<size_t>(comma - p) : strlen(p);
      // Trim spaces around each pattern.
      while (len > 0 && *p == ' ') {
        ++p;
        --len;
      }
      while (len > 0 && p[len - 1] == ' ') --len;
      if (len > 0) {
        if (len >= static_cast<size_t>(Config::kMaxAllowPatternLen)) {
          char pat[Config::kMaxAllowPatternLen];
          memcpy(pat, p, sizeof(pat) - 1);
          pat[sizeof(pat) - 1] = '\0';
          Warn(warn, warn_ctx, "FORKGUARD_ALLOW", pat, "pattern longer than 127 bytes",
               "the other patterns");
        } else if (c.allow_count >= Config::kMaxAllowPatterns) {
          if (!reported_overflow) {
            Warn(warn, warn_ctx, "FORKGUARD_ALLOW", p, "more than 16 patterns", "the first 16");
            reported_overflow = true;
          }
        } else {
          memcpy(c.allow[c.allow_count], p, len);
          c.allow[c.allow_count][len] = '\0';
          ++c.allow_count;
        }
      }
      if (comma == nullptr) break;
      p = comma + 1;
    }
  }
}

void AppendShownValue(TextBuffer& out, const char* value) {
  constexpr size_t kMaxShown = 92;
  size_t i = 0;
  for (; value[i] != '\0' && i < kMaxShown; ++i) {
    auto c = static_cast<unsigned char>(value[i]);
    out.Char(c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c));
  }
  if (value[i] != '\0') out.Str("...");
}

bool AllowPatternMatches(const char* pattern, const char* text) {
  if (pattern == nullptr || text == nullptr || pattern[0] == '\0') return false;
  return strstr(text, pattern) != nullptr;
}

}  // namespace forkguard
