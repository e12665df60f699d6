# shellcheck shell=bash
# junit.sh - sourced by the shell lanes of scripts/test (tests/consumer/check.sh,
# tests/package/check.sh, scripts/lanes/matrix-lane, scripts/test's lint): record each check
# as a JUnit test case, so that scripts/test counts it into its final line like every gtest
# case. junit.py beside this file writes the XML (the one JUnit writer).
#   junit_check NAME CMD...   run CMD; pass when it exits 0 (its output is kept as the reason)
#   junit_pass NAME | junit_fail NAME REASON | junit_skip NAME REASON
#   junit_write FILE SUITE    write the XML; returns 1 when a check failed
JUNIT_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)/junit.py
# The cases so far, four fields each as junit.py reads them: status, name, message, text.
JUNIT_CASES=()
JUNIT_FAILED=0
junit_pass() {
	echo "PASS $1"
	JUNIT_CASES+=(pass "$1" "" "")
}
junit_fail() {
	local out
	out=$(printf '%s\n' "$2" | tail -n 60)
	echo "FAIL $1"
	printf '%s\n' "$out" | sed 's/^/    | /'
	JUNIT_FAILED=$((JUNIT_FAILED + 1))
	JUNIT_CASES+=(fail "$1" "check failed" "$out")
}
junit_skip() {
	echo "SKIP $1: $2"
	JUNIT_CASES+=(skip "$1" "$2" "")
}
junit_check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then junit_pass "$name"; else junit_fail "$name" "$out"; fi
}
junit_write() {
	[ -n "$1" ] || return $((JUNIT_FAILED > 0))
	mkdir -p "$(dirname "$1")"
	{ [ ${#JUNIT_CASES[@]} = 0 ] || printf '%s\0' "${JUNIT_CASES[@]}"; } |
		/usr/bin/python3 "$JUNIT_PY" write "$1" "$2" || return 1
	return $((JUNIT_FAILED > 0))
}
