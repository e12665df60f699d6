// The pin probe: what this kernel does at fork to long-term pinned pages, per memory kind,
// measured without an RDMA device. io_uring's registered buffers (IORING_REGISTER_BUFFERS)
// are pinned with FOLL_LONGTERM like an RDMA memory registration (ib_umem): the probe
// registers a buffer, forks a child that stays alive, writes new data into the buffer in the
// parent, then has the kernel write the registered buffer into a memfd
// (IORING_OP_WRITE_FIXED, which reads the pinned pages, not the parent's mapping). The new
// data means the kernel copied the pinned page for the child at fork (intact); the old data
// means the parent's write went to a new page while the pin kept the old one (stale: what a
// device would read and write after such a fork). Raw syscalls, no liburing.
//
// Where it runs: the probe forks, so only `forkguard doctor` and `forkguard run` (our own
// processes) run it, once per boot, and cache the answer per user keyed by the boot id. The
// shim only reads the cache (a process it watches never sees a child it did not create: no
// SIGCHLD, nothing for its wait(-1) to reap); without a cache its answer is "not probed".
#pragma once

#include <cstddef>

#include "facts/fork_rule.h"

namespace forkguard::facts {

// Probes one kind (anonymous, THP or hugetlb; other kinds answer kNotProbeable).
void ProbeKind(MemoryKind kind, PinProbe* out);
// The same without the fork: the parent's pages are discarded (MADV_DONTNEED) before it
// writes, so the pins keep the old pages - the probe must then answer stale.
void ProbeKindForTesting(MemoryKind kind, PinProbe* out, bool discard_instead_of_fork);
// Probes anonymous, THP and hugetlb memory. Forks (one short-lived child per kind).
PinProbe RunPinProbe();

// The cache directory: $FORKGUARD_CACHE_DIR, else $XDG_CACHE_HOME/forkguard, else
// $HOME/.cache/forkguard. False when none can be named, and always in a process under
// AT_SECURE (setuid, setgid, capabilities): its environment is its caller's, and there is no
// system-wide cache. The `secure` overloads take that instead of getauxval(AT_SECURE) (tests).
bool PinProbeCacheDir(char* out, size_t cap);
bool PinProbeCacheDir(char* out, size_t cap, bool secure);
// This boot's cache file (DIR/pin-probe-BOOT_ID). False without a boot id or directory.
bool PinProbeCachePath(char* out, size_t cap);
bool PinProbeCachePath(char* out, size_t cap, bool secure);
// Reads this boot's cache: opened O_NOFOLLOW|O_NONBLOCK (a FIFO or device there is refused at
// once, never waited on) and used only if it is a regular file owned by the effective user
// or root, not writable by group or others, and under 2 KiB. Malloc-free: the shim calls it
// at its first RDMA call.
bool ReadPinProbeCache(PinProbe* out);
bool ReadPinProbeCache(PinProbe* out, bool secure);
// Writes it atomically (a temporary file renamed into place), creating the directory (0700).
// False with a reason in `err`.
bool WritePinProbeCache(const PinProbe& p, char* err, size_t cap);
// This boot's answer: the cache, else a fresh probe written to the cache; a kind the cache
// has as unknown for a reason that can change within a boot (no free hugetlb page, THP off,
// memlock, a failure) is probed again. `probed` (may be null) says whether a probe ran now.
PinProbe PinProbeForThisBoot(bool* probed);

// The cache's text: "kind fate [why [errno]]" lines after a "forkguard pin-probe 1" line.
size_t FormatPinProbe(const PinProbe& p, char* buf, size_t cap);
bool ParsePinProbe(const char* text, PinProbe* out);

}  // namespace forkguard::facts
