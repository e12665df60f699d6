# shellcheck shell=bash
# The job scripts/lanes/rdma-lane runs in the Soft-RoCE guest (or on a native device), sourced
# after the lines that set OUT: run_one LABEL BINARY TIMEOUT runs one test binary the way
# `bazel test` would (cwd = its runfiles, TEST_SRCDIR/TEST_WORKSPACE/TEST_TMPDIR set, gtest
# XML written) and records PASS or FAIL; run_beside LABEL BINARY TIMEOUT runs it in the
# background, at most $LANE_JOBS at once (the guest's vCPUs); run_alone waits for those, then
# runs one with nothing else running (a test that watches or changes the whole node: tag
# "exclusive"); summary reports the counts (its status: 0 when none failed).
# The sanitizer options .bazelrc gives `bazel test` (--test_env): keep them in step.
export ASAN_OPTIONS=${ASAN_OPTIONS:-verify_asan_link_order=0:detect_leaks=1:handle_segv=0}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:handle_segv=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
[ -n "${RXE_VM_OUT:-}" ] && RES=$RXE_VM_OUT || RES=$OUT
LANE_JOBS=${LANE_JOBS:-2}
run_one() { # label binary timeout
	local label=$1 bin=$2 limit=$3 name rc t0 t1
	name=$(echo "${label#//}" | tr ':/' '__')
	local tmp; tmp=$(mktemp -d /tmp/lane-test.XXXXXX)
	t0=$(date +%s.%N)
	( cd "$bin.runfiles/forkguard" 2>/dev/null || cd "$(dirname "$bin")" || exit 127
	  export TEST_SRCDIR=$bin.runfiles TEST_WORKSPACE=forkguard TEST_TMPDIR=$tmp \
		RUNFILES_DIR=$bin.runfiles XML_OUTPUT_FILE=$RES/$name.xml \
		GTEST_OUTPUT=xml:$RES/$name.xml FORKGUARD_IN_RDMA_LANE=1
	  exec timeout -k 10 "$limit" "$bin" ) > "$RES/$name.log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	rm -rf "$tmp"
	local secs; secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	# One write per test: the lines of tests running side by side do not interleave.
	if [ $rc = 0 ]; then
		echo PASS > "$RES/$name.result"
		echo "rdma-lane: PASS $label (${secs}s)"
	else
		echo FAIL > "$RES/$name.result"
		printf 'rdma-lane: FAIL %s (exit %s, %ss)\n%s\n' "$label" "$rc" "$secs" \
			"$(sed 's/^/    | /' "$RES/$name.log" | tail -n 80)"
	fi
}
run_beside() { # label binary timeout
	while [ "$(jobs -rp | wc -l)" -ge "$LANE_JOBS" ]; do wait -n; done
	run_one "$@" &
}
run_alone() { # label binary timeout
	wait
	run_one "$@"
}
summary() {
	wait
	local pass fail
	pass=$(grep -lx PASS "$RES"/*.result 2>/dev/null | wc -l)
	fail=$(grep -Lx PASS "$RES"/*.result 2>/dev/null | wc -l)
	echo "rdma-lane: $pass passed, $fail failed" > "$RES/summary"
	echo "rdma-lane: $pass passed, $fail failed"
	[ "$fail" = 0 ]
}
