#!/bin/bash
# tests/consumer/check.sh - forkguard used from another Bazel workspace, as docs/bazel.md
# tells a user to: this directory is that workspace (its own WORKSPACE, no .bazelrc).
# Checks, one JUnit case each (scripts/test counts them):
#   0. every C/C++ target of the project with sources carries bazel/copts.bzl's flags
#      (a new target without them builds here through .bazelrc but not for a consumer);
#   1. the public targets (@forkguard//:libforkguard.so, :libforkguard_audit.so,
#      :forkguard, :refloader, :gate) build without the project's .bazelrc;
#   2. //:fork_before_rdma_init_test passes under --run_under=@forkguard//:gate, with
#      forkguard's report in its log;
#   3. //:fork_after_rdma_init_test passes without the gate (the test itself is fine);
#   4. under the gate it fails for the right reason: the fork failed with EPERM, the
#      explanation and the gate's verdict are in its log, the event log in its outputs.
# Usage: tests/consumer/check.sh [--junit FILE]
#        tests/consumer/check.sh --build-only
#   --build-only  only build what the checks build and run, at the lowest CPU priority, and
#                 keep this workspace's Bazel server (it stays at that priority) for the
#                 checks: scripts/test runs it in the background while the real-device
#                 lane's guest leaves a core idle, so that the checks later find it built
set -uo pipefail
cd "$(dirname "$0")" || exit 2
# shellcheck source=../support/junit.sh
. ../support/junit.sh
JUNIT=
[ "${1:-}" = --junit ] && JUNIT=$2

# No convenience symlinks in the source tree; the process-wrapper sandbox keeps Debian's
# linux-sandbox debug lines out of the output (neither changes how anything compiles).
OPTS=(--noshow_progress --symlink_prefix=/ --spawn_strategy=processwrapper-sandbox)
PUBLIC=(@forkguard//:libforkguard.so @forkguard//:libforkguard_audit.so @forkguard//:forkguard
	@forkguard//:refloader @forkguard//:gate)
GATE=--run_under=@forkguard//:gate

if [ "${1:-}" = --build-only ]; then
	# A server started by a niced client is niced, and so is every action it runs.
	bazel shutdown >/dev/null 2>&1
	exec nice -n 19 bazel build "${OPTS[@]}" "${PUBLIC[@]}" //:all
fi

copts_on_every_target() {
	local missing
	missing=$(cd ../.. && bazel query --noshow_progress \
		'attr(copts, "^\[\]$", kind("cc_(library|binary|test) rule", //...)) intersect attr(srcs, "^\[.+\]$", //...)' \
		2>/dev/null) || { echo "bazel query failed"; return 1; }
	[ -z "$missing" ] || { echo "targets without FORKGUARD_COPTS/FORKGUARD_C_COPTS: $missing"; return 1; }
}
junit_check "consumer: every project target with sources carries the project's copts" copts_on_every_target

junit_check "consumer: public targets build without the project's .bazelrc" \
	bazel build "${OPTS[@]}" "${PUBLIC[@]}"
LOGS=$(bazel info "${OPTS[@]}" bazel-testlogs 2>/dev/null)

log_has() { # LOG PATTERN... : every pattern is in the log
	local log=$1 p
	shift
	for p in "$@"; do grep -qF -- "$p" "$log" || { echo "missing from $log: $p"; return 1; }; done
}

right_order() {
	bazel test "${OPTS[@]}" --nocache_test_results "$GATE" //:fork_before_rdma_init_test || return 1
	log_has "$LOGS/fork_before_rdma_init_test/test.log" "[  PASSED  ] 1 test." \
		"1 fork: 0 hazardous at 0 call sites, 1 clean"
}
junit_check "consumer: fork before RDMA init passes under the gate" right_order

junit_check "consumer: fork after RDMA init passes without the gate" \
	bazel test "${OPTS[@]}" --nocache_test_results //:fork_after_rdma_init_test

wrong_order() {
	local rc log=$LOGS/fork_after_rdma_init_test/test.log
	bazel test "${OPTS[@]}" --nocache_test_results "$GATE" //:fork_after_rdma_init_test
	rc=$?
	# bazel test: 3 = built, and a test failed.
	[ $rc = 3 ] || { echo "bazel test exited $rc, expected 3 (a test failed)"; return 1; }
	log_has "$log" \
		"forkguard: fork after RDMA init in pid" \
		"verdict: hazard (inherited-rdma)" \
		"RDMA first initialized" "consumer::OpenAndRegister" \
		"fork called at:" "consumer::ForkHelper" \
		"mode: error - the fork fails with EPERM" \
		"fork: Operation not permitted" \
		"[  FAILED  ] ForkAfterRdmaInit.HelperForkedAfterRegistration" \
		"hazard: fork() after RDMA initialization" \
		"forkguard gate: FAILED: a hazardous fork" || { tail -n 40 "$log"; return 1; }
	/usr/bin/python3 - "$LOGS/fork_after_rdma_init_test/test.outputs/outputs.zip" <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
forks = [json.loads(l) for n in z.namelist() if n.endswith(".jsonl")
         for l in z.read(n).decode().splitlines() if '"event":"fork"' in l]
ok = [f for f in forks if f["verdict"] == "hazard" and f["action"] == "failed"]
print(f"event log in outputs.zip: {len(forks)} fork event(s), {len(ok)} hazard/failed")
sys.exit(0 if ok else 1)
PY
}
junit_check "consumer: fork after RDMA init fails under the gate, with the explanation" wrong_order

bazel shutdown >/dev/null 2>&1  # this workspace's own server; nothing else uses it
junit_write "$JUNIT" consumer
