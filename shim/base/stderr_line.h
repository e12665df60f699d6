// What the shim prints on stderr, line by line. Under a launcher every rank's stderr is one
// stream: each line starts with "[HOST rRANK PID] " (the rank left out when unknown) and is
// written whole, with one writev(2) of at most PIPE_BUF bytes, which a pipe never splits or
// interleaves with another writer's. A longer line is cut and ends with kCutMarker.
// Async-signal-safe: no malloc, no locks; used by the forked child and the SIGSEGV handler.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace forkguard {

inline constexpr char kCutMarker[] = " [...cut]";
inline constexpr size_t kMaxStderrLine = 4096;  // PIPE_BUF on Linux

// The prefix's host (up to its first '.') and rank (-1: unknown). Before any line is printed
// (at init, or by the source below); forked children keep it (their own pid is read at each
// write).
void SetStderrIdentity(const char* short_host, long rank);

// A function that sets the identity (SetStderrIdentity) when it has not been set yet,
// called before each prefix is formatted: the host and rank are read when the first line
// is printed, not by every process at start. Must be async-signal-safe and idempotent.
void SetStderrIdentitySource(void (*ensure)());

// "[node1 r3 1234] ", NUL-terminated; returns its length.
size_t FormatStderrPrefix(char* buf, size_t cap, pid_t pid);

// Writes `text` (lines separated by '\n'; a last line without one gets one) to `fd`, each
// line prefixed. Each line is one writev call; an interrupted or short write is finished with
// further writes.
void WriteLinesTo(int fd, const char* text, size_t n);
void WriteStderrLines(const char* text, size_t n);
void WriteStderrLines(const char* text);

}  // namespace forkguard
