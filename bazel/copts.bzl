"""Compiler flags carried by every forkguard target.

They are on the targets, not only in the project's .bazelrc, so that a workspace that adds
forkguard as an external repository (docs/bazel.md) builds it the same way without reading
the project's .bazelrc. C sources get no -std=c++20 (GCC warns about it in C)."""

# Warnings as errors, frame pointers and debug info (the shim's stacks and `forkguard report`'s
# file:line need both).
_COMMON = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-fno-omit-frame-pointer",
    "-g",
]

# For targets with C++ sources (the language level the code is written for).
FORKGUARD_COPTS = ["-std=c++20"] + _COMMON

# For targets whose sources are C only.
FORKGUARD_C_COPTS = _COMMON

# What the shim and the formats it compiles in (formats/) add: everything hidden (only the
# wrappers are exported, by name), no exceptions, and initial-exec TLS (no __tls_get_addr on
# the fork path).
FORKGUARD_SHIM_COPTS = [
    "-fvisibility=hidden",
    "-fvisibility-inlines-hidden",
    "-fno-exceptions",
    "-fno-delete-null-pointer-checks",
    "-ftls-model=initial-exec",
]
