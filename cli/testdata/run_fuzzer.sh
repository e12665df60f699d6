#!/bin/bash
# Runs the log-parser fuzz target for a bounded time over the seed corpus.
# Usage: run_fuzzer.sh FUZZER SEED_FILE_IN_CORPUS_DIR [SECONDS]
# Fails when the fuzzer finds a crash, a sanitizer error or a timeout.
set -uo pipefail
fuzzer=$1
seeds=$(dirname "$2")
secs=${3:-20}
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/fuzz-corpus.XXXXXX")
artifacts=${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/
echo "fuzzing for ${secs}s; seeds: $(ls "$seeds" | wc -l) files in $seeds"
# New inputs go to the writable $work; the checked-in seeds are read only.
"$fuzzer" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
	-print_final_stats=1 -artifact_prefix="$artifacts" "$work" "$seeds" > "$work.log" 2>&1
rc=$?
grep -v '^#[0-9]' "$work.log" | tail -n 60
echo "fuzzer exit status: $rc"
exit "$rc"
