"""JUnit XML for the lanes scripts/test runs outside `bazel test`: the one writer, and the
counter behind scripts/test's last line.

  junit.py write FILE SUITE
      reads test cases on stdin, four NUL-terminated fields each: STATUS (pass, fail or
      skip), NAME, MESSAGE (why it failed or was skipped), TEXT (the failure's output), and
      writes them to FILE as one <testsuite> (tests/support/junit.sh calls this).
  junit.py count
      reads "LABEL<TAB>FILE" lines on stdin, one per JUnit file a lane must have written,
      and prints "PASSED FAILED SKIPPED" over all of them. A file that is missing or does
      not parse, or that holds no test case, counts as one failure (named on stderr): a lane
      that ran nothing is not a pass.
  junit.py digest [MAX]
      reads the same lines and prints one line per file with a failure: its label, how many
      of its cases failed, and the first of them with their messages; at most MAX lines
      (default 30), then how many more files failed. scripts/test prints it last, where a
      log cut to its tail still shows what failed.

From Python: write(path, suite, cases) with Case rows, count(path, label).
"""

import re
import sys
import xml.etree.ElementTree as ET
from typing import NamedTuple, Optional
from xml.sax.saxutils import escape, quoteattr


class Case(NamedTuple):
    name: str
    failure: Optional[str] = None  # the message of a failed case
    text: str = ""  # a failed case's output
    skipped: Optional[str] = None  # why the case was skipped
    classname: Optional[str] = None
    time: Optional[str] = None  # seconds


# Characters XML 1.0 cannot carry at all, even escaped (a test's output may hold them).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def _attr(value):
    return quoteattr(_NOT_XML.sub("", value))


def write(path, suite, cases):
    """Writes cases (Case rows) to path as one <testsuite> named suite, one line per case."""
    cases = list(cases)
    failures = sum(1 for c in cases if c.failure is not None)
    skipped = sum(1 for c in cases if c.failure is None and c.skipped is not None)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f"<testsuite name={_attr(suite)} tests=\"{len(cases)}\" failures=\"{failures}\""
           f" skipped=\"{skipped}\">"]
    for c in cases:
        head = "  <testcase"
        if c.classname is not None:
            head += f" classname={_attr(c.classname)}"
        head += f" name={_attr(c.name)}"
        if c.time is not None:
            head += f" time={_attr(c.time)}"
        if c.failure is not None:
            body = _NOT_XML.sub("", escape(c.text))
            out.append(f"{head}><failure message={_attr(c.failure)}>{body}</failure></testcase>")
        elif c.skipped is not None:
            out.append(f"{head}><skipped message={_attr(c.skipped)}/></testcase>")
        else:
            out.append(f"{head}/>")
    out.append("</testsuite>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


def count(path, label):
    """(passed, failed, skipped) in the JUnit file path: a <testsuite> or <testsuites> of
    them (gtest, bazel). label names the file in what goes to stderr."""
    try:
        root = ET.parse(path).getroot()
    except Exception as e:  # missing, unreadable or not XML: the lane did not finish
        print(f"scripts/test: {label}: no readable result ({e})", file=sys.stderr)
        return 0, 1, 0
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    passed = failed = skipped = 0
    for s in suites:
        for c in s.findall("testcase"):
            if c.find("failure") is not None or c.find("error") is not None:
                failed += 1
            elif c.find("skipped") is not None or c.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    if passed + failed + skipped == 0:
        print(f"scripts/test: {label}: ran no test case", file=sys.stderr)
        return 0, 1, 0
    return passed, failed, skipped


def failed_cases(path):
    """[(name, message)] of the failed cases in the JUnit file path, None when it cannot be
    read, [] when none failed."""
    try:
        root = ET.parse(path).getroot()
    except Exception:
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    out = []
    for s in suites:
        for c in s.findall("testcase"):
            f = c.find("failure")
            if f is None:
                f = c.find("error")
            if f is not None:
                name = c.get("name", "?")
                cls = c.get("classname") or ""
                if cls.startswith("//") and "." in cls:
                    cls = cls.rsplit(".", 1)[1]  # a lane's "//pkg:test.node0": the node
                if cls:
                    name = f"{cls}.{name}"
                out.append((name, " ".join((f.get("message") or "").split())))
    return out


def _cut(text, width):
    return text if len(text) <= width else text[:width - 3] + "..."


def digest(lines, limit=30, width=300):
    """The lines digest prints for "LABEL<TAB>FILE" lines."""
    out = []
    more = 0
    for line in lines:
        label, sep, path = line.rstrip("\n").partition("\t")
        if not sep:
            continue
        cases = failed_cases(path)
        if cases == []:
            continue
        if len(out) >= limit:
            more += 1
            continue
        if cases is None:
            text = f"FAIL {label}: no readable result"
        else:
            shown = "; ".join(f"{_cut(n, 100)}: {_cut(m, 80)}" if m else _cut(n, 100)
                              for n, m in cases[:3])
            text = f"FAIL {label}: {len(cases)} failed: {shown}"
        out.append(_cut(text, width))
    if more:
        out.append(f"... and {more} more files with failures")
    return out


def _read_cases(data):
    fields = data.decode("utf-8", errors="replace").split("\0")
    fields.pop()  # what follows the last NUL: nothing
    if len(fields) % 4:
        raise ValueError(f"{len(fields)} fields on stdin, not four per case")
    for i in range(0, len(fields), 4):
        status, name, message, text = fields[i:i + 4]
        if status == "pass":
            yield Case(name)
        elif status == "fail":
            yield Case(name, failure=message, text=text)
        elif status == "skip":
            yield Case(name, skipped=message)
        else:
            raise ValueError(f"case {name!r}: status {status!r} is not pass, fail or skip")


def main(argv):
    if len(argv) == 4 and argv[1] == "write":
        write(argv[2], argv[3], _read_cases(sys.stdin.buffer.read()))
        return 0
    if len(argv) == 2 and argv[1] == "count":
        total = [0, 0, 0]
        for line in sys.stdin:
            label, sep, path = line.rstrip("\n").partition("\t")
            if not sep:
                continue
            for i, n in enumerate(count(path, label)):
                total[i] += n
        print(*total)
        return 0
    if len(argv) in (2, 3) and argv[1] == "digest":
        for line in digest(sys.stdin, int(argv[2]) if len(argv) == 3 else 30):
            print(line)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
