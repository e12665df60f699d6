#!/bin/bash
# Runs a libFuzzer target for a bounded time over its seed corpus (the fuzz tests
# of cli/ and tests/safety/ share it).
# Usage: run_fuzzer.sh FUZZER SEED_FILE_IN_CORPUS_DIR SECONDS [LIBFUZZER_FLAG...]
# Fails when the fuzzer finds a crash, a sanitizer error, a contract breach
# (abort) or a timeout; the reproducer lands in the test's undeclared outputs.
set -uo pipefail
fuzzer=$1
seeds=$(dirname "$2")
secs=${3:-20}
shift 3
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/fuzz-corpus.XXXXXX")
artifacts=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/
echo "fuzzing for ${secs}s; seeds: $(ls "$seeds" | wc -l) files in $seeds"
start=$SECONDS
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
	-print_final_stats=1 -artifact_prefix="$artifacts" "$@" "$work" "$seeds" >"$work.log" 2>&1
rc=$?
took=$((SECONDS - start))
grep -v '^#[0-9]' "$work.log" | tail -n 60
# The executions and the time, on one line.
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log" | tail -n 1)
echo "fuzzed $(basename "$fuzzer"): ${runs:-?} executions in ${took}s" \
	"(${runs:+$((runs / (took > 0 ? took : 1)))}/s)"
echo "fuzzer exit status: $rc"
exit "$rc"
