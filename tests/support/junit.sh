# shellcheck shell=bash
# junit.sh - sourced by the shell lanes of scripts/test (tests/consumer/check.sh,
# tests/package/check.sh): record each check as a JUnit test case, so that scripts/test
# counts it into its final line like every gtest case.
#   junit_check NAME CMD...   run CMD; pass when it exits 0 (its output is kept as the reason)
#   junit_pass NAME | junit_fail NAME REASON | junit_skip NAME REASON
#   junit_write FILE SUITE    write the XML; returns 1 when a check failed
JUNIT_XML=
JUNIT_FAILED=0
_junit_esc() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' | tr -d '\000-\010\013\014\016-\037'; }
junit_pass() {
	echo "PASS $1"
	JUNIT_XML+="<testcase name=\"$(printf %s "$1" | _junit_esc)\"/>"$'\n'
}
junit_fail() {
	echo "FAIL $1"
	printf '%s\n' "$2" | tail -n 60 | sed 's/^/    | /'
	JUNIT_FAILED=$((JUNIT_FAILED + 1))
	JUNIT_XML+="<testcase name=\"$(printf %s "$1" | _junit_esc)\"><failure message=\"check failed\">$(printf %s "$2" | tail -n 60 | _junit_esc)</failure></testcase>"$'\n'
}
junit_skip() {
	echo "SKIP $1: $2"
	JUNIT_XML+="<testcase name=\"$(printf %s "$1" | _junit_esc)\"><skipped message=\"$(printf %s "$2" | _junit_esc)\"/></testcase>"$'\n'
}
junit_check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then junit_pass "$name"; else junit_fail "$name" "$out"; fi
}
junit_write() {
	[ -n "$1" ] || return $((JUNIT_FAILED > 0))
	mkdir -p "$(dirname "$1")"
	{
		echo '<?xml version="1.0" encoding="UTF-8"?>'
		echo "<testsuite name=\"$2\">"
		printf %s "$JUNIT_XML"
		echo '</testsuite>'
	} > "$1"
	return $((JUNIT_FAILED > 0))
}
