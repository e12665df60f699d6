// How the shim tells the watcher that it lets this thread's next fork through (its site is in
// FORKGUARD_ALLOW or matches an entry of FORKGUARD_SUPPRESSIONS): a madvise(2) with these
// arguments, which the kernel refuses (EINVAL) after the watcher's probe at the system call's
// entry has seen them. The watcher (bpf/watch.bpf.c) keeps the mark per thread for one second;
// the thread's next fork it judges is not refused, and its record says so (`shim_suppressed`).
// Plain C: the shim, the BPF object and the loader include it.
#pragma once

// "forkguar" as an address no mapping has, and an advice no kernel defines.
#define FORKGUARD_WATCH_MARK_ADDR 0x666f726b67756172ULL
#define FORKGUARD_WATCH_MARK_ADVICE 0x46474b31
// How long a mark waits for its fork (ns).
#define FORKGUARD_WATCH_MARK_NS 1000000000ULL
