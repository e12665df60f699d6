// What every process the shim is preloaded into runs and touches when it starts, before it
// makes any call the shim watches: the constructor, the parsing of the environment, the
// lookup of the libc functions it wraps. A site-wide LD_PRELOAD pays this in every `sh`,
// `cat` and `srun`, and most of it is page faults: a process starts with no page-table
// entries for the shim, so every distinct page of its code or data it touches is a fault.
//
// FORKGUARD_START_PATH puts a function with the constructor, FORKGUARD_START_RODATA a
// constant it reads: libforkguard.ld places both right after the headers, the relocations
// and the PLT, which the loader reads anyway, so that the start-up code is one run of pages
// (one or two fault-around blocks of 16 pages) rather than a page in every file.
// FORKGUARD_START_DATA does the same for the zero-filled globals written or read at start
// and by the fork and open fast paths (libforkguard.ld gathers `.bss.forkguard_start` at
// the start of .bss): one page rather than one in every file's .bss.
// What is not needed by a process that never touches RDMA is not done at start at all
// (process_init.cc, Init). `scripts/bench shim --start-only` measures it; docs/shim-cost.md
// has the figures.
#pragma once

#define FORKGUARD_START_PATH __attribute__((section(".text.startup.forkguard")))
#define FORKGUARD_START_DATA __attribute__((section(".bss.forkguard_start")))
// Constant data read at start (a path, the names of the wrapped functions): with the code,
// not in .rodata, whose pages the start would otherwise touch for a few strings.
#define FORKGUARD_START_RODATA __attribute__((section(".text.startup.forkguard_rodata")))
// The configuration: after the other start data, so that its first fields (mode, report,
// quiet, stack depth, the first bytes of the log directory) share their page and its long
// tail (paths, FORKGUARD_ALLOW's patterns) is on pages touched only when those are set.
#define FORKGUARD_START_DATA_LAST __attribute__((section(".bss.forkguard_start_last")))
