#!/bin/bash
# docs/event-schema.json (JSON Schema 2020-12, python3-jsonschema) against real
# shim output: the real libforkguard.so run now on tests/shim/fork_after_rdma
# (stub libibverbs) in six scenarios (one registers from several threads at one
# call site: mr_counts), one with FORKGUARD_SUPPRESSIONS, one exec'd without the
# shim, the checked-in logs of the shim
# (cli/testdata/shim_v1, cli/testdata/real_rxe) and the job generator's logs.
# Every complete line validates; a truncated last line is skipped; broken
# lines are rejected.
# Usage: event_schema_test.sh SCHEMA SHIM PROGRAM STUB_LIBIBVERBS GENERATOR LOG...
set -euo pipefail
schema=$1 shim=$(realpath "$2") prog=$3 stub=$(dirname "$(realpath "$4")") gen=$5
shift 5
py=/usr/bin/python3
"$py" -c 'import jsonschema' 2>/dev/null || {
	echo "FAIL: python3-jsonschema is not installed (scripts/setup installs it)"; exit 1; }
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/evschema.XXXXXX")
i=0
for args in "" "--order=fork-first" "--fork-safe --touch-buffer" "--spawn" "--fork-exec --forks=3" \
	"--threads=4 --churn"; do
	i=$((i + 1))
	mkdir "$tmp/run$i"
	# shellcheck disable=SC2086
	FORKGUARD_LOG="$tmp/run$i" LD_LIBRARY_PATH="$stub" LD_PRELOAD="$shim" "$prog" $args \
		> "$tmp/run$i.out" 2>&1 || { echo "FAIL: fork_after_rdma $args"; cat "$tmp/run$i.out"; exit 1; }
done
# A fork FORKGUARD_SUPPRESSIONS silenced (the event names the entry).
printf 'kind=* frame=func:fg_test_fork_*\n' > "$tmp/fg.supp"
mkdir "$tmp/run_supp"
FORKGUARD_SUPPRESSIONS="$tmp/fg.supp" FORKGUARD_LOG="$tmp/run_supp" LD_LIBRARY_PATH="$stub" \
	LD_PRELOAD="$shim" "$prog" --fork-safe > "$tmp/run_supp.out" 2>&1 ||
	{ echo "FAIL: fork_after_rdma with suppressions"; cat "$tmp/run_supp.out"; exit 1; }
grep -q '"suppressed":"kind=\* frame=func:fg_test_fork_\*"' "$tmp"/run_supp/*.jsonl ||
	{ echo "FAIL: no suppressed fork event"; cat "$tmp"/run_supp/*.jsonl; exit 1; }
# A program exec'd without the shim (env -i drops LD_PRELOAD): unwatched_exec in a file of
# its own.
mkdir "$tmp/run_unwatched"
FORKGUARD_LOG="$tmp/run_unwatched" LD_PRELOAD="$shim" /usr/bin/env -i /bin/true
grep -q '"event":"unwatched_exec"' "$tmp/run_unwatched"/*.jsonl ||
	{ echo "FAIL: no unwatched_exec for env -i"; exit 1; }
mkdir "$tmp/job"
"$gen" "$tmp/job" --events-per-process 40 > /dev/null
"$py" - "$schema" "$tmp" "$@" <<'PY'
import glob, json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
V = jsonschema.Draft202012Validator
V.check_schema(schema)
v = V(schema)
live = sorted(glob.glob(f"{sys.argv[2]}/run*/*.jsonl"))  # run_unwatched too
gen = sorted(glob.glob(f"{sys.argv[2]}/job/*.jsonl"))
files = live + gen + sys.argv[3:]
bad = 0
seen = {}
for f in files:
    lines = open(f, "rb").read().split(b"\n")
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                continue  # a truncated last line (a killed process): not a record
            print(f"FAIL: {f}:{i+1}: not JSON"); bad += 1; continue
        kind = "live" if f in live else "generated" if f in gen else "checked-in"
        seen.setdefault(kind, set()).add(doc.get("event"))
        for e in list(v.iter_errors(doc))[:3]:
            print(f"FAIL: {f}:{i+1}: {doc.get('event')}: {list(e.path)}: {e.message[:200]}")
            bad += 1
assert not bad, f"{bad} schema errors"
for kind, events in sorted(seen.items()):
    print(f"ok: {kind} lines validate; events: {', '.join(sorted(events))}")
assert {"header", "module", "stack", "process_start", "rdma_init", "mr_register", "fork",
        "fork_child", "child_segv", "spawn", "process_exit", "mr_counts"} <= seen["live"], seen["live"]
# The schema has teeth: broken lines of each kind are rejected (/2 and /1).
header = json.loads(open(live[0], "rb").readline())
assert header.get("event") == "header", header
v1 = {"schema": "forkguard.event/1", "event": "note", "ts_ns": 1, "pid": 2, "ppid": 1, "tid": 2,
      "host": "h", "prog": "p", "rank": None, "seq": 0, "text": "x"}
assert v.is_valid(v1), v1
ev = {"event": "mr_register", "ts": 5, "seq": 3, "mr": [4096, 4096, 1, 1234], "stack": 0}
assert v.is_valid(ev), ev
counts = {"event": "mr_counts", "ts": 9, "seq": 4, "sites": [
    {"stack": 0, "n": 3, "bytes": 12288}, {"stack": 1, "call": "ibv_reg_mr_iova2",
                                           "dontfork": True, "n": 0, "bytes": 4096}],
          "deregs": 4}
assert v.is_valid(counts), counts
broken = [dict(v1, seq="1"), {k: x for k, x in v1.items() if k != "pid"},
          dict(header, schema="forkguard.event/3"), {k: x for k, x in header.items() if k != "pid"},
          dict(header, seq=0),
          dict(ev, seq="1"), dict(ev, pid=1), {k: x for k, x in ev.items() if k != "seq"},
          dict(ev, mr=[1, 2, 3]), dict(ev, stack=[{"obj": "x"}]), dict(ev, stack=-1),
          {"event": "mr_counts", "ts": 5, "seq": 4},
          {"event": "mr_counts", "ts": 5, "seq": 4, "sites": [{"stack": 0, "n": -1, "bytes": 0}]},
          {"event": "mr_counts", "ts": 5, "seq": 4, "sites": [{"stack": "0x1", "n": 1, "bytes": 0}]},
          {"event": "mr_counts", "ts": 5, "seq": 4, "sites": [{"stack": 0, "bytes": 0}]},
          {"event": "mr_counts", "ts": 5, "seq": 4, "sites": [], "deregs": 0},
          {"event": "stack", "id": 0, "frames": [[0]]}, {"event": "stack", "frames": []},
          {"event": "module", "id": 0, "path": "/x", "base": "0x1", "build_id": "XYZ"},
          dict(ev, event="fork", verdict="maybe", reasons=[], action="proceeded", site=None,
               reported=False, stack=0, init=None, ranges=[], via="fork"),
          dict(v1, event="rdma_init", call="ibv_open_device", device=None, stack=[{"obj": "x"}]),
          dict(v1, event="mr_register", call="ibv_reg_mr", addr=-1, len=4096, access=1,
               dontfork=None, handle="0x1", stack=[])]
for b in broken:
    assert not v.is_valid(b), b
print(f"ok: {len(broken)} broken lines rejected")
PY
