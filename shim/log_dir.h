// The FORKGUARD_LOG directory: its template expanded and the directory made ready, once per
// process at init (never on the fork path: a forked child logs into its parent's directory,
// under a file name with its own pid; see shim/EVENT_LOG.md).
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "shim/text_buffer.h"

namespace forkguard {

struct LogPathFields {
  const char* host = "";  // %h
  pid_t pid = 0;          // %p
  long rank = -1;         // %r ("norank" when -1)
  const char* job = "";   // %j ("nojob" when empty)
};

// Expands %h %p %r %j and %% of `tmpl` into `out`. On failure (an unknown or trailing '%',
// a path too long, a value that would add a path component) appends why to `why` and
// returns false.
bool ExpandLogPath(const char* tmpl, const LogPathFields& f, TextBuffer& out, TextBuffer& why);

// Makes `path` (absolute) a directory this process can log into: creates each missing
// component with mode 0700, walking from / with openat so no component is resolved twice;
// follows a symlink on the way only when it is owned by this user or root; the last
// component must be a real directory (not a symlink) owned by this user and writable. On
// failure appends why to `why` ("cannot create /a/b: Permission denied") and returns false.
bool MakeLogDir(const char* path, TextBuffer& why);

}  // namespace forkguard
