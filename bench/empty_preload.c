/* Intentionally empty: the baseline of `scripts/bench shim`'s start-up case, a preloaded
   library that does nothing, built by the same toolchain as libforkguard.so. */
