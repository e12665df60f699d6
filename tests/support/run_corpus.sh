#!/bin/bash
# Runs a libFuzzer target once on each given file (no fuzzing, no mutation): the corpus of
# what fuzzing found, kept as a regression test (forkguard_corpus_test in bazel/fuzz.bzl).
# Usage: run_corpus.sh FUZZER FILE...
# Fails when any file crashes the target, trips a sanitizer or breaks a contract (abort).
set -uo pipefail
fuzzer=$1
shift
log=$(mktemp "${TEST_TMPDIR:-/tmp}/corpus.XXXXXX")
"$fuzzer" -rss_limit_mb=2048 -timeout=10 "$@" >"$log" 2>&1
rc=$?
grep -v '^Executed ' "$log" | tail -n 60
echo "corpus: $# files through $(basename "$fuzzer"), exit status $rc"
exit "$rc"
