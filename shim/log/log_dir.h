// The FORKGUARD_LOG directory: its template expanded and the directory made ready and opened,
// once per process at init. A forked child logs into its parent's directory through the
// inherited descriptor, under a file name with its own pid (formats/EVENT_LOG.md); it walks the
// path again (OpenLogDir without `why`) only when the program closed or replaced that
// descriptor.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "formats/text_buffer.h"

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

// The length of the template's fixed prefix: its bytes before the first path component
// that holds a '%' (all of it when none does). The expanded path starts with the same bytes.
size_t LogDirFixedPrefix(const char* tmpl);

// Opens `path` (absolute) as the directory this process logs into, walking from / one
// component at a time with openat (nothing is resolved by path twice) and creating each
// missing one with mode 0700:
// - in the fixed prefix (its first `fixed_len` bytes, a site's or the user's own path): a
//   symlink is followed only when it is owned by this user or root; a directory may be
//   anyone's (a shared, sticky, world-writable root);
// - below it (what the template expands, which another user could have made first): each
//   component is opened O_DIRECTORY|O_NOFOLLOW (a symlink is refused) and must be owned by
//   the effective user and not writable by group or others, created now or found;
// - the last must be a real directory (not a symlink) owned by this user and writable.
// Returns its descriptor (O_CLOEXEC; files are then created with openat on it), or -1 with
// why appended to `why` when it is not null ("cannot create /a/b: Permission denied",
// "/a/b is owned by uid 65534, not by this user"). Malloc-free when `why` is null (a forked
// child opening its file after the program closed the descriptor).
int OpenLogDir(const char* path, size_t fixed_len, TextBuffer* why);

}  // namespace forkguard
