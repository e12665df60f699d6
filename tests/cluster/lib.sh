# tests/cluster/lib.sh - sourced by the two-host tests (tag "cluster"). The same
# test script runs on both nodes at once under scripts/lanes/cluster-lane; CLUSTER_NODE
# says which half this is, the cluster-* helpers (scripts/guests/rxe-cluster) join them.
#
#   check NAME CMD...            run CMD; record PASS/FAIL NAME for this node
#   check_grep NAME REGEX FILE   FILE has a line matching the extended REGEX
#   check_no_grep NAME REGEX FILE
#   check_eq NAME WANT GOT
#   fail NAME DETAIL             record a failure
#   finish                       exit 1 if any check of this node failed (or none ran)
# Paths: $FG (forkguard CLI), $SHIM (libforkguard.so), $AUDIT, $WORK (this test's
# directory on the shared filesystem, the same path on both nodes), $HERE (this dir).
set -u
if [ -z "${CLUSTER_NODE:-}" ] || [ -z "${CLUSTER_SHARED:-}" ]; then
	echo "$0: a two-host test: run it with scripts/lanes/cluster-lane (it needs the node0/node1 pair)" >&2
	exit 1
fi
R=${TEST_SRCDIR:-$PWD/..}/forkguard
FG=$(readlink -f "$R/cli/forkguard")
SHIM=$(readlink -f "$R/shim/libforkguard.so")
AUDIT=$(readlink -f "$R/shim/libforkguard_audit.so" 2>/dev/null || true)
HERE=$R/tests/cluster
WORK=${CLUSTER_TEST_WORK:-$CLUSTER_SHARED/work/$(basename "$0")}
CHECKS=${CLUSTER_TEST_CHECKS:-/dev/null}
ME=node$CLUSTER_NODE
mkdir -p "$WORK"
_nchecks=0; _nfail=0
_record() { # PASS|FAIL name detail
	_nchecks=$((_nchecks + 1))
	[ "$1" = FAIL ] && _nfail=$((_nfail + 1))
	printf '%s %s\t%s\n' "$1" "$2" "$(printf '%s' "$3" | tr '\n\t' '  ' | cut -c1-2000)" >> "$CHECKS"
	echo "$ME: $1: $2${3:+ - $3}" | cut -c1-600
}
fail() { _record FAIL "$1" "${2:-}"; }
check() {
	local name=$1; shift
	local out
	if out=$("$@" 2>&1); then _record PASS "$name" ""
	else _record FAIL "$name" "$* -> $(printf '%s' "$out" | tail -c 600)"; fi
}
check_grep() { # name regex file
	if grep -Eq -- "$2" "$3" 2>/dev/null; then _record PASS "$1" ""
	else _record FAIL "$1" "no line matching /$2/ in $3: $(tail -c 800 "$3" 2>/dev/null)"; fi
}
check_no_grep() {
	if ! grep -Eq -- "$2" "$3" 2>/dev/null; then _record PASS "$1" ""
	else _record FAIL "$1" "unexpected /$2/ in $3: $(grep -Em3 -- "$2" "$3")"; fi
}
check_eq() { # name want got
	if [ "$2" = "$3" ]; then _record PASS "$1" ""
	else _record FAIL "$1" "want '$2', got '$3'"; fi
}
finish() {
	[ "$_nchecks" -gt 0 ] || fail "ran checks" "no check ran on $ME"
	echo "$ME: $_nchecks checks, $_nfail failed"
	[ "$_nfail" = 0 ]
}
# jq-like one-liners over a JSON report, with Debian's python
json_get() { # file python-expression-over-d
	/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2>&1
}
# A check this tree cannot make yet (a feature of another branch): counted as
# skipped in scripts/test's line, never as passed.
skip() { # name reason
	_nchecks=$((_nchecks + 1))
	printf 'SKIP %s\t%s\n' "$1" "$2" >> "$CHECKS"
	echo "$ME: SKIP: $1 - $2"
}
