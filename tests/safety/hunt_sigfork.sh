#!/bin/bash
# tests/safety/hunt_sigfork.sh - hunt rare hangs of a fork from a signal handler under the
# shim (developer tool, not a test target). behaviour_test runs the program once; windows a
# few instructions wide (a handler landing inside the loader lock, or between two steps of
# the atfork bookkeeping) need hundreds of runs in parallel to show. Every run that outlives
# its bound is attached with gdb (all threads' stacks) and its log tail is printed.
#
# Usage: tests/safety/hunt_sigfork.sh [--runs N] [--jobs J] [--device stub0|-] [--forks F] [--no-log]
#   defaults: 150 runs per job, 3 jobs, device stub0 (a live MR), 1000 forks per run, with
#   FORKGUARD_LOG. --no-log: without it (with --device -, nothing watched: the forks take the
#   shim's tail-call path and its atfork handlers are never registered).
# Exit: 0 no hang; 1 a hang was found (stacks above).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=150 JOBS=3 DEV=stub0 FORKS=1000 NOLOG=0
while [ $# -gt 0 ]; do
	case "$1" in
		--runs) RUNS=$2; shift ;;
		--jobs) JOBS=$2; shift ;;
		--device) DEV=$2; shift ;;
		--forks) FORKS=$2; shift ;;
		--no-log) NOLOG=1 ;;
		*) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
command -v gdb >/dev/null || { echo "hunt_sigfork: gdb is needed (apt-get install gdb)" >&2; exit 2; }
bazel build --noshow_progress //tests/safety:behave_prog //shim:libforkguard.so //tests/stub_ibverbs/... >/dev/null
BIN=$(bazel info bazel-bin 2>/dev/null)
WORK=$(mktemp -d /tmp/hunt-sigfork.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

job() {
	local j=$1 i pid t
	for ((i = 1; i <= RUNS; i++)); do
		local log=$WORK/log.$j
		rm -rf "$log" && mkdir -p "$log"
		local logenv=("FORKGUARD_LOG=$log")
		[ "$NOLOG" = 1 ] && logenv=()
		env LD_LIBRARY_PATH=$BIN/tests/stub_ibverbs/lib LD_PRELOAD=$BIN/shim/libforkguard.so \
			"${logenv[@]}" "$BIN/tests/safety/behave_prog" sigfork "$DEV" "$FORKS" periodic \
			>/dev/null 2>"$WORK/err.$j" &
		pid=$!
		for ((t = 0; t < 150; t++)); do
			sleep 0.1
			kill -0 "$pid" 2>/dev/null || break
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "hunt_sigfork: job $j run $i: pid $pid still running after 15 s - a hang"
			gdb -p "$pid" -batch -ex 'thread apply all bt' 2>&1 | grep -E '^(#|Thread)'
			echo "--- last log lines:"
			tail -n 3 "$log"/*.jsonl | cut -c1-400
			kill -9 "$pid"
			return 1
		fi
		wait "$pid" || true
	done
}

pids=()
for ((j = 1; j <= JOBS; j++)); do
	job "$j" &
	pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
if [ "$status" = 0 ]; then
	echo "hunt_sigfork: $((RUNS * JOBS)) runs ($DEV, $FORKS forks each under a 1 ms timer$([ "$NOLOG" = 1 ] && echo ", no log")): no hang"
fi
exit "$status"
