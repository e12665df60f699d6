#!/bin/bash
# The one JUnit writer (junit.py, and junit.sh that calls it) and the counter behind
# scripts/test's last line: every case counted once as what it was, text that XML cannot
# carry made safe, and a lane that wrote nothing, broken XML or no case counted as a failure.
# shellcheck disable=SC2016,SC2031 # each check is a string check() evaluates
set -uo pipefail
JUNIT_SH=$1 JUNIT_PY=$2
T=${TEST_TMPDIR:-$(mktemp -d)}
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi; }
count() { /usr/bin/python3 "$JUNIT_PY" count 2>"$T/count.err"; }
parses() { /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as ET; ET.parse(sys.argv[1])' "$1"; }

# --- the shell side: pass, fail, skip, check -------------------------------------------
(
	# shellcheck source=tests/support/junit.sh
	. "$JUNIT_SH"
	junit_pass 'passes <&> "quoted"'
	junit_fail 'fails' "$(printf 'line 1 <b>&amp;\n\001control\033[31m\nlast line')"
	junit_skip 'skipped' 'no device & no guest'
	junit_check 'check that passes' true
	junit_check 'check that fails' sh -c 'echo its output; exit 3'
	junit_write "$T/sh/suite.xml" 'shell suite'
	echo "write exit $?" >&2
) > "$T/sh.out" 2> "$T/sh.err"
check "junit_write returns 1 when a check failed" 'grep -qx "write exit 1" "$T/sh.err"'
check "each check is said as it happens" \
	'[ "$(grep -c "^PASS \|^FAIL \|^SKIP " "$T/sh.out")" = 5 ] && grep -qx "    | its output" "$T/sh.out"'
check "the file parses as XML (control characters dropped)" 'parses "$T/sh/suite.xml"'
check "5 cases: 2 passed, 2 failed, 1 skipped" \
	'[ "$(printf "sh\t%s\n" "$T/sh/suite.xml" | count)" = "2 2 1" ]'
names() { /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as ET
for c in ET.parse(sys.argv[1]).getroot().iter("testcase"): print(c.get("name"))' "$1"; }
check "names and text escaped: they read back as written" \
	'[ "$(names "$T/sh/suite.xml" | sed -n 1p)" = "passes <&> \"quoted\"" ] &&
	 grep -qF "line 1 &lt;b&gt;&amp;amp;" "$T/sh/suite.xml"'
check "a failure keeps its output, a skip its reason" \
	'grep -qF "<failure message=\"check failed\">its output</failure>" "$T/sh/suite.xml" &&
	 grep -qF "<skipped message=\"no device &amp; no guest\"/>" "$T/sh/suite.xml"'
check "the suite carries its counts" \
	'grep -qF "<testsuite name=\"shell suite\" tests=\"5\" failures=\"2\" skipped=\"1\">" "$T/sh/suite.xml"'
(
	# shellcheck source=tests/support/junit.sh
	. "$JUNIT_SH"
	junit_pass 'one'
	junit_write "$T/sh/ok.xml" ok; echo "ok exit $?" >&2
	junit_write "" nowhere; echo "no file exit $?" >&2
) > /dev/null 2> "$T/sh2.err"
check "junit_write returns 0 when every check passed" 'grep -qx "ok exit 0" "$T/sh2.err"'
check "junit_write without a file writes nothing and says how it went" \
	'grep -qx "no file exit 0" "$T/sh2.err" && [ "$(ls "$T/sh")" = "$(printf "ok.xml\nsuite.xml")" ]'
(
	# shellcheck source=tests/support/junit.sh
	. "$JUNIT_SH"
	junit_write "$T/sh/empty.xml" empty
) > /dev/null 2>&1
check "a suite without a case is written, and counted as a failure" \
	'parses "$T/sh/empty.xml" && [ "$(printf "empty\t%s\n" "$T/sh/empty.xml" | count)" = "0 1 0" ] &&
	 grep -q "empty: ran no test case" "$T/count.err"'

# --- the Python side: classname, time, a message with its own lines ------------------------
/usr/bin/python3 - "$JUNIT_PY" "$T/py.xml" <<'PY'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("junit", sys.argv[1])
junit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(junit)
junit.write(sys.argv[2], "lane", [
    junit.Case("a cell", classname="lane.node0", time="1.5"),
    junit.Case("b cell", failure="first\nsecond", classname="lane.node1"),
    junit.Case("c cell", skipped="not yet", time="0"),
])
PY
check "Python: the file parses, 1 passed, 1 failed, 1 skipped" \
	'parses "$T/py.xml" && [ "$(printf "py\t%s\n" "$T/py.xml" | count)" = "1 1 1" ]'
check "Python: classname and time kept, one line per case" \
	'grep -qF "<testcase classname=\"lane.node0\" name=\"a cell\" time=\"1.5\"/>" "$T/py.xml" &&
	 grep -qF "name=\"b cell\"><failure message=\"first&#10;second\">" "$T/py.xml" &&
	 [ "$(grep -c "<testcase" "$T/py.xml")" = 3 ]'
check "write refuses a status it does not know" \
	'! printf "maybe\0n\0\0\0" | /usr/bin/python3 "$JUNIT_PY" write "$T/bad.xml" bad 2>/dev/null'

# --- the counter over what other writers leave: gtest, bazel, nothing ------------------------
cat > "$T/gtest.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="1" disabled="1" errors="0" name="AllTests">
  <testsuite name="A" tests="2">
    <testcase name="one" status="run" result="completed"/>
    <testcase name="two" status="run" result="completed"><failure message="x"/></testcase>
  </testsuite>
  <testsuite name="B" tests="2">
    <testcase name="three" status="notrun" result="suppressed"/>
    <testcase name="four" status="run" result="skipped"><skipped message=""/></testcase>
  </testsuite>
</testsuites>
XML
cat > "$T/bazel.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
<testsuite name="//x:y_test" tests="1" failures="0" errors="1">
<testcase name="//x:y_test" status="run" duration="1" time="1"><error message="exited with error code 1"></error></testcase>
</testsuite>
</testsuites>
XML
echo '<testsuite><testcase name="cut' > "$T/broken.xml"
check "gtest: 1 passed, 1 failed, 2 skipped (disabled and skipped)" \
	'[ "$(printf "g\t%s\n" "$T/gtest.xml" | count)" = "1 1 2" ]'
check "bazel: an error is a failure" '[ "$(printf "b\t%s\n" "$T/bazel.xml" | count)" = "0 1 0" ]'
check "missing and broken files are one failure each, named" \
	'[ "$(printf "gone\t%s\nbroken\t%s\n" "$T/none.xml" "$T/broken.xml" | count)" = "0 2 0" ] &&
	 grep -q "gone: no readable result" "$T/count.err" && grep -q "broken: no readable result" "$T/count.err"'
check "counts add up over files" \
	'[ "$(printf "g\t%s\nsh\t%s\npy\t%s\n" "$T/gtest.xml" "$T/sh/suite.xml" "$T/py.xml" | count)" = "4 4 4" ]'

# --- the digest scripts/test prints last: a line per file that failed, capped ---------------
digest() { /usr/bin/python3 "$JUNIT_PY" digest "$@"; }
printf "g\t%s\nb\t%s\ngone\t%s\nok\t%s\n" "$T/gtest.xml" "$T/bazel.xml" "$T/none.xml" "$T/sh/ok.xml" |
	digest > "$T/digest.out"
check "digest: a line per file with a failure, its first failed cases and their messages" \
	'[ "$(cat "$T/digest.out")" = "$(printf "%s\n" "FAIL g: 1 failed: two: x" \
		"FAIL b: 1 failed: //x:y_test: exited with error code 1" "FAIL gone: no readable result")" ]'
check "digest: a file where everything passed is not named" '! grep -q "FAIL ok" "$T/digest.out"'
for i in 1 2 3 4 5; do printf "f%s\t%s\n" "$i" "$T/bazel.xml"; done | digest 2 > "$T/digest2.out"
check "digest: at most MAX lines, then how many more files failed" \
	'[ "$(wc -l < "$T/digest2.out")" = 3 ] && grep -qx "... and 3 more files with failures" "$T/digest2.out"'

[ "$fails" = 0 ] && echo "junit_test: all checks passed"
[ "$fails" = 0 ]
