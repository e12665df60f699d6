// FORKGUARD_CHILD_PATH marks the code a forked child runs before fork() returns in it (the
// atfork child handlers and what they call). A child starts without page-table entries for
// file-backed code, so every distinct code page it executes is a page fault on every fork:
// these functions share one input section name, and the GNU linker's default script places
// all `.text.hot.*` sections together, so the child path costs one page, not one per file
// (measured: three faults per fork before, scripts/bench shim). The group is about 1 KiB;
// the fork() wrapper, first in it because interpose.cc is the library's own source and is
// linked before shim_core's objects, is page-aligned so the group never straddles a page
// (`nm -n libforkguard.so` shows the layout).
#pragma once

#define FORKGUARD_CHILD_PATH __attribute__((section(".text.hot.forkguard_child")))
#define FORKGUARD_CHILD_PATH_FIRST FORKGUARD_CHILD_PATH __attribute__((aligned(4096)))
