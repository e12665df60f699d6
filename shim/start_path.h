// What every process the shim is preloaded into runs and touches when it starts, before it
// makes any call the shim watches: the constructor, the parsing of the environment, the
// lookup of the libc functions it wraps. A site-wide LD_PRELOAD pays this in every `sh`,
// `cat` and `srun`, and most of it is page faults: a process starts with no page-table
// entries for the shim, so every distinct page of its code or data it touches is a fault.
//
// FORKGUARD_START_PATH puts a function with the constructors (GNU ld's default script
// places `.text.startup.*` together, right before the fork child path of child_path.h):
// the start-up code is one run of pages rather than a page in every file.
// FORKGUARD_START_DATA does the same for the zero-filled globals written or read at start
// and by the fork and open fast paths (libforkguard.ld gathers `.bss.forkguard_start` at
// the start of .bss): a few pages rather than one in every file's .bss.
// `scripts/bench shim --start-only` measures it; shim/README.md, "Cost", has the figures.
#pragma once

#define FORKGUARD_START_PATH __attribute__((section(".text.startup.forkguard")))
#define FORKGUARD_START_DATA __attribute__((section(".bss.forkguard_start")))
