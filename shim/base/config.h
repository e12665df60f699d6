// Config: the shim's settings from the environment (documented in shim/README.md).
//
// Parsed once, before any fork is decided. A plain struct with fixed-size storage so that
// the fork path and the forked child can read it without allocating.
#pragma once

#include <cstddef>

#include "formats/text_buffer.h"

namespace forkguard {

// kFix: at a fork after RDMA init, each registered range is made to fork the way this
// machine keeps the parent's data intact (shim/fix/fork_fix.h); every other mode leaves it as the
// libraries set it.
enum class Mode { kWarn, kError, kAbort, kOff, kFix };
enum class ReportPolicy { kOnce, kAlways };

const char* ModeName(Mode mode);

struct Config {
  static constexpr int kMaxAllowPatterns = 16;
  static constexpr int kMaxAllowPatternLen = 128;
  static constexpr int kDefaultStackDepth = 32;
  static constexpr int kMaxStackDepth = 64;

  Mode mode = Mode::kWarn;
  ReportPolicy report = ReportPolicy::kOnce;
  bool quiet = false;
  int stack_depth = kDefaultStackDepth;
  char log_dir[1024] = {};       // empty: no event log
  char suppressions[1024] = {};  // FORKGUARD_SUPPRESSIONS (absolute path); empty: none
  int allow_count = 0;
  char allow[kMaxAllowPatterns][kMaxAllowPatternLen] = {};
};

// Looks a variable up; returns nullptr when unset. Tests pass a fake environment.
using EnvLookup = const char* (*)(const char* name, void* ctx);
// Receives one complete warning line (without the trailing newline).
using WarningSink = void (*)(const char* line, void* ctx);

// Parses FORKGUARD_* variables. Every bad value produces exactly one warning line
// "forkguard: ignoring FORKGUARD_X=...: <why>; using <default>" and the safe default.
// With `secure` (AT_SECURE: setuid/setgid/capabilities) the environment is ignored.
Config ParseConfig(EnvLookup env, void* env_ctx, WarningSink warn, void* warn_ctx, bool secure);
// The same into `c`, which holds the defaults: only what the environment sets is written
// (the shim's configuration is a global whose long tail a process without those variables
// then never touches).
void ParseConfigInto(Config& c, EnvLookup env, void* env_ctx, WarningSink warn, void* warn_ctx,
                     bool secure);

// Appends `value` as a warning shows it: at most 92 bytes (then "..."), control
// characters as '?', so a warning is always one bounded line.
void AppendShownValue(TextBuffer& out, const char* value);

// "forkguard: ignoring NAME=<value as shown>: <why>; using <fallback>" (no '\n'): the warning
// of every setting the shim does not take. Here, not in shim/messages/message.cc with the shim's
// other sentences, because the config fuzzer compiles this file on its own.
void FormatIgnoredVariable(TextBuffer& out, const char* name, const char* value, const char* why,
                           const char* fallback);

// True when `text` contains `pattern` (plain substring; empty patterns never match).
bool AllowPatternMatches(const char* pattern, const char* text);

}  // namespace forkguard
