#!/bin/bash
# The gate keeps what the test it wraps prints and its exit status (no RDMA here:
# tests/consumer/check.sh shows the hazard case from a consumer workspace).
set -u
GATE=$1
fail=0
out=$("$GATE" /bin/sh -c 'echo test-stdout; echo test-stderr >&2; exit 7' 2>&1)
rc=$?
[ $rc = 7 ] || { echo "FAIL: a test exiting 7 under the gate gave $rc"; fail=1; }
for s in test-stdout test-stderr "forkguard: 1 process"; do
	grep -qF "$s" <<<"$out" || { echo "FAIL: '$s' missing from the output:"; echo "$out"; fail=1; }
done
"$GATE" /bin/true >/dev/null 2>&1 || { echo "FAIL: /bin/true under the gate failed"; fail=1; }
"$GATE" >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL: the gate without a command should exit 2"; fail=1; }
[ $fail = 0 ] && echo "PASS: the gate keeps the test's output and exit status"
exit $fail
