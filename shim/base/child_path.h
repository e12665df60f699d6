// FORKGUARD_CHILD_PATH marks the code a forked child runs before fork() returns in it (the
// atfork child handlers and what they call). A child starts without page-table entries for
// file-backed code, so every distinct code page it executes is a page fault on every fork:
// these functions share one input section name, and the GNU linker's default script places
// all `.text.hot.*` sections together, so the child path costs one page, not one per file
// (measured: three faults per fork before, scripts/bench shim). The group is about 1 KiB;
// the fork() wrapper, first in it because interpose.cc is the library's own source and is
// linked before the shim's libraries, is page-aligned so the group never straddles a page
// (`nm -n libforkguard.so` shows the layout).
#pragma once

#define FORKGUARD_CHILD_PATH __attribute__((section(".text.hot.forkguard_child")))
#define FORKGUARD_CHILD_PATH_FIRST FORKGUARD_CHILD_PATH __attribute__((aligned(4096)))

// FORKGUARD_REG_PATH marks what an unlogged ibv_reg_mr/ibv_dereg_mr runs in the shim (the
// wrappers, hooks::OnRegMr/OnDeregMr, the call-site cache's hit, the MR table's insert and
// remove). In the TCG guest every jump to another code page and every return leaves the
// translated code for a lookup of the next block (only a direct jump within one page is
// chained), so these share one section: the GNU linker's default script places
// `.text.sorted.*` together, sorted by name, right after `.text.hot.*` (the child path
// above). The ibv_reg_mr wrapper, first by its section's name, is page-aligned so that the
// group (about 3 KiB) is one page and every call within it is a chained jump.
#define FORKGUARD_REG_PATH __attribute__((section(".text.sorted.forkguard_reg.1")))
#define FORKGUARD_REG_PATH_FIRST \
  __attribute__((section(".text.sorted.forkguard_reg.0"), aligned(4096)))
