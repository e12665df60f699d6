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
// Where it runs: the probe forks, so only forkguard's own processes run it. `forkguard probe
// --system`, run as root once per boot (the forkguard-probe.service unit, the SPANK plugin in
// slurmd), writes the system cache, /run/forkguard/pin-probe-BOOT_ID; `forkguard doctor`,
// `forkguard run` and `forkguard probe` write the user's cache, keyed by the boot id too. The
// shim only reads the caches (a process it watches never sees a child it did not create: no
// SIGCHLD, nothing for its wait(-1) to reap); without either its answer is "not probed".
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
// AT_SECURE (setuid, setgid, capabilities): its environment is its caller's (such a process
// reads root's system cache only). The `secure` overloads take that instead of getauxval(AT_SECURE)
// (tests).
bool PinProbeCacheDir(char* out, size_t cap);
bool PinProbeCacheDir(char* out, size_t cap, bool secure);
// This boot's cache file (DIR/pin-probe-BOOT_ID). False without a boot id or directory.
bool PinProbeCachePath(char* out, size_t cap);
bool PinProbeCachePath(char* out, size_t cap, bool secure);
// This boot's answer from the caches, per kind (MergePinProbe): the user's cache and the
// system cache. Each file is opened O_NOFOLLOW|O_NONBLOCK (a FIFO or device there is refused
// at once, never waited on) and used only if it is a regular file not writable by group or
// others, under 2 KiB, owned by the effective user or root (the user's cache) or by root in a
// directory owned by root and not writable by group or others (the system cache). Under
// AT_SECURE only the system cache is read: root's file under /run is not the caller's
// environment. False when neither gave an answer. Malloc-free: the shim calls it at its first
// RDMA call. `from` (may be null) gets kFromUserCache | kFromSystemCache: the files used.
bool ReadPinProbeCache(PinProbe* out);
bool ReadPinProbeCache(PinProbe* out, bool secure);
bool ReadPinProbeCache(PinProbe* out, bool secure, const char* system_dir, unsigned* from);
constexpr unsigned kFromUserCache = 1;
constexpr unsigned kFromSystemCache = 2;
// The user's cache alone.
bool ReadUserPinProbeCache(PinProbe* out, bool secure);

// The system cache's directory: root's, 0755, on the tmpfs /run (gone at reboot; the file is
// keyed by the boot id all the same).
inline constexpr char kSystemPinProbeDir[] = "/run/forkguard";
// This boot's file in `dir` (DIR/pin-probe-BOOT_ID). False without a boot id.
bool SystemPinProbeCachePath(const char* dir, char* out, size_t cap);
// Reads the system cache in `dir` (kSystemPinProbeDir): the directory opened O_NOFOLLOW |
// O_DIRECTORY and trusted only when owned by root and not writable by group or others; the
// file as above, owned by root. Malloc-free.
bool ReadSystemPinProbeCache(PinProbe* out, const char* dir);
// Writes it (root only: the directory must end up root's): `dir`'s parent opened O_DIRECTORY |
// O_NOFOLLOW, `dir` created 0755 there if missing and opened the same way (refused unless
// owned by the effective user; an existing one with another mode is made 0755), the file
// written 0644 under a temporary name (O_EXCL|O_NOFOLLOW) and renamed into place.
// False with a reason in `err`.
bool WriteSystemPinProbeCache(const PinProbe& p, const char* dir, char* err, size_t cap);

// The merge of the two caches, per kind: a measured answer (intact, stale) wins, the user's
// before the system's (the same kernel measured twice in one boot gives one answer; the
// user's is the one the user can redo). Without one, the user's unknown answer and its reason,
// else the system's: a reason that can change within a boot (no free hugetlb page, memlock)
// in the system cache never hides what the user measured later, nor the other way round.
// `user` or `system` may be null (that cache was not read).
void MergePinProbe(const PinProbe* user, const PinProbe* system, PinProbe* out);

// Writes the user's cache atomically (a temporary file renamed into place), creating the
// directory (0700). False with a reason in `err`.
bool WritePinProbeCache(const PinProbe& p, char* err, size_t cap);
// This boot's answer: the caches (ReadPinProbeCache), else a fresh probe written to the
// user's cache; a kind they have as unknown for a reason that can change within a boot (no
// free hugetlb page, THP off, memlock, a failure) is probed again and the result written to
// the user's cache. `probed` (may be null) says whether a probe ran now; `from` (may be null)
// which caches were read.
PinProbe PinProbeForThisBoot(bool* probed, unsigned* from = nullptr,
                             const char* system_dir = kSystemPinProbeDir);
// Whether a kind left unknown for reason `w` is worth probing again within this boot: not
// probed, no free hugetlb page, THP off, memlock, a failure (not: no io_uring, io_uring
// disabled, not probeable).
bool ProbeAgain(ProbeWhy w);

// The cache's text: "kind fate [why [errno]]" lines after a "forkguard pin-probe 1" line.
size_t FormatPinProbe(const PinProbe& p, char* buf, size_t cap);
bool ParsePinProbe(const char* text, PinProbe* out);

}  // namespace forkguard::facts
