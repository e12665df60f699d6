#!/bin/bash
# forkguard's gate for Bazel tests:
#     bazel test --run_under=@forkguard//:gate //your:test
# runs the test binary (with its arguments) under
#     forkguard run --mode error --fail-on hazard -- TEST...
# so a fork after RDMA initialization fails (fork() returns -1, EPERM) and the test
# fails with exit status 3 and the explanation in its log. Otherwise the test's own
# output and exit status are kept. The event logs go to the test's undeclared outputs
# (bazel-testlogs/.../test.outputs/outputs.zip, forkguard/*.jsonl).
# Extra options for `forkguard run`: FORKGUARD_GATE_OPTS (e.g. "--mode warn").
set -u

# This script's runfiles: beside it when Bazel runs it, else the caller's.
R=
for d in "$0.runfiles" "${RUNFILES_DIR:-}"; do
	[ -n "$d" ] && [ -d "$d" ] && { R=$d; break; }
done
CLI='' SHIM=''
for ws in "$R"/*/; do
	if [ -x "$ws/cli/forkguard" ] && [ -f "$ws/shim/libforkguard.so" ]; then
		CLI=$ws/cli/forkguard SHIM=$ws/shim
		break
	fi
done
if [ -z "$CLI" ]; then
	echo "forkguard gate: cannot find cli/forkguard and shim/libforkguard.so in the runfiles of $0 (${R:-none})" >&2
	exit 125
fi
[ $# -ge 1 ] || { echo "forkguard gate: usage: $0 TEST [ARGS...] (bazel test --run_under=@forkguard//:gate)" >&2; exit 2; }

LOG=()
[ -n "${TEST_UNDECLARED_OUTPUTS_DIR:-}" ] && LOG=(--log "$TEST_UNDECLARED_OUTPUTS_DIR/forkguard")
# shellcheck disable=SC2086 # FORKGUARD_GATE_OPTS is a list of options
FORKGUARD_SHIM_DIR=$SHIM "$CLI" run --mode error --fail-on hazard "${LOG[@]}" ${FORKGUARD_GATE_OPTS:-} -- "$@"
rc=$?
[ $rc = 3 ] && echo "forkguard gate: FAILED: a hazardous fork (fork after RDMA initialization) - see the report above" >&2
exit $rc
