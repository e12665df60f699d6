#!/usr/bin/python3
"""`forkguard report --format trace` is Chrome Trace Event JSON that Perfetto and
chrome://tracing open, and it says what the JSON report says.

Structure (the Trace Event Format document): a top-level object with a
traceEvents array; every event has ph/name/pid/tid, ts (us) unless metadata;
instants have a scope; complete events a dur >= 0; metadata names every process
and thread used, with the host as label and a sort index that keeps each host's
processes together; flow events s/f pair up by (cat, id), f not before s, each
bound to a slice of its thread (s inside the parent's slice, f with bp=e at the
start of the child's).
Content, against `--format json` of the same logs: one track per process, fork
instants = forks (verdict in args; hazard ones = hazard_forks), SIGSEGV deaths =
children_segv, RDMA init instants = processes with RDMA, one flow per fork whose
child left a log.

Usage: report_trace_test.py FORKGUARD JOB_GENERATOR [LOG_DIR...]
"""
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(forkguard, fmt, logs):
    out = subprocess.run([forkguard, "report", "--format", fmt] + logs, capture_output=True,
                         check=True).stdout
    return json.loads(out)


def validate(name, trace, report):
    check(isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list),
          f"{name}: top level is an object with a traceEvents array")
    ev = trace["traceEvents"]
    check(trace.get("displayTimeUnit") in ("ms", "ns"), f"{name}: displayTimeUnit is ms or ns")
    bad = [e for e in ev if not (isinstance(e.get("ph"), str) and isinstance(e.get("name"), str)
                                 and isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int))]
    check(not bad, f"{name}: every event has ph, name, int pid and tid ({len(bad)} bad)")
    check(all(e["ph"] in "MXisf" for e in ev), f"{name}: only M, X, i, s, f phases")
    timed = [e for e in ev if e["ph"] != "M"]
    check(all(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0 for e in timed),
          f"{name}: every timed event has ts >= 0")
    check(all(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 for e in ev if e["ph"] == "X"),
          f"{name}: complete events have dur >= 0")
    check(all(e.get("s") in ("t", "p", "g") for e in ev if e["ph"] == "i"),
          f"{name}: instant events have a scope")

    meta = defaultdict(dict)
    for e in ev:
        if e["ph"] == "M":
            meta[(e["name"], e["pid"], e["tid"] if e["name"].startswith("thread") else None)] = e["args"]
    pids = {e["pid"] for e in timed}
    threads = {(e["pid"], e["tid"]) for e in timed}
    check(all(("process_name", p, None) in meta for p in pids), f"{name}: every process track is named")
    check(all(("thread_name", p, t) in meta for p, t in threads), f"{name}: every thread track is named")
    check(all(("process_labels", p, None) in meta and meta[("process_labels", p, None)]["labels"].startswith("host ")
              for p in pids), f"{name}: every process is labelled with its host")

    # One track per process of the report, sorted by host.
    procs = report["processes"]
    names = {p: meta[("process_name", p, None)]["name"] for p in pids if ("process_name", p, None) in meta}
    all_named = [a["name"] for (k, p, _), a in meta.items() if k == "process_name"]
    check(len(all_named) == len(procs), f"{name}: {len(all_named)} process tracks for {len(procs)} processes")
    for p in procs:
        label = f"pid {p['pid']} @ {p['host']}"
        check(sum(1 for n in all_named if n.endswith(label)) == 1, f"{name}: one track for {label}")
    order = sorted(((a["sort_index"], p) for (k, p, _), a in meta.items() if k == "process_sort_index"))
    host_seq = [meta[("process_labels", p, None)]["labels"] for _, p in order]
    runs = [h for i, h in enumerate(host_seq) if i == 0 or host_seq[i - 1] != h]
    check(len(runs) == len(set(host_seq)), f"{name}: the sort index keeps each host's processes together")

    # Content equals the JSON report.
    s = report["summary"]
    forks = [e for e in ev if e["ph"] == "i" and e.get("cat") == "fork" and "verdict" in e.get("args", {})]
    check(len(forks) == s["forks"], f"{name}: {len(forks)} fork instants for {s['forks']} forks")
    verdicts = Counter(e["args"]["verdict"] for e in forks)
    check(verdicts["hazard"] == s["hazard_forks"],
          f"{name}: {verdicts['hazard']} hazard forks in args (JSON {s['hazard_forks']})")
    check(all(isinstance(e["args"].get("reasons"), list) and "action" in e["args"] for e in forks),
          f"{name}: fork args carry reasons and action")
    segv = [e for e in ev if e["ph"] == "i" and e["name"] == "child death: SIGSEGV"]
    check(len(segv) == s["children_segv"], f"{name}: {len(segv)} SIGSEGV deaths (JSON {s['children_segv']})")
    inits = [e for e in ev if e["ph"] == "i" and e["name"].startswith("RDMA init")]
    want_inits = sum(1 for p in procs if p["rdma_initialized"])
    check(len(inits) == want_inits, f"{name}: {len(inits)} RDMA init instants for {want_inits} processes")

    # Flows: fork -> child.
    slices = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    starts = {(e.get("cat"), e.get("id")): e for e in ev if e["ph"] == "s"}
    ends = {(e.get("cat"), e.get("id")): e for e in ev if e["ph"] == "f"}
    check(len(starts) == sum(1 for e in ev if e["ph"] == "s"), f"{name}: flow ids are unique")
    check(set(starts) == set(ends), f"{name}: every flow start has its end and back")
    for k, s_ev in starts.items():
        f_ev = ends.get(k)
        if not f_ev:
            continue
        if f_ev["ts"] < s_ev["ts"]:
            check(False, f"{name}: flow {k} ends before it starts")
        if not any(a <= s_ev["ts"] <= b for a, b in slices[(s_ev["pid"], s_ev["tid"])]):
            check(False, f"{name}: flow {k} start is inside no slice of its thread")
        if f_ev.get("bp") != "e" or not any(a <= f_ev["ts"] <= b for a, b in slices[(f_ev["pid"], f_ev["tid"])]):
            check(False, f"{name}: flow {k} end is not bound to a slice of the child")
        if s_ev["pid"] == f_ev["pid"]:
            check(False, f"{name}: flow {k} does not go to another process")
    by_host_pid = {(p["host"], p["pid"]): p for p in procs}
    want_flows = sum(1 for f in report["forks"] if f["child_pid"] is not None
                     and (f["host"], f["child_pid"]) in by_host_pid
                     and by_host_pid[(f["host"], f["child_pid"])]["parent_pid"] == f["pid"])
    check(len(starts) == want_flows, f"{name}: {len(starts)} fork->child flows, JSON has {want_flows} forks with a logged child")


def main():
    forkguard, generator = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp()
    jobs = []
    d = os.path.join(tmp, "job64")
    os.makedirs(d, exist_ok=True)
    subprocess.run([generator, d, "--junk"], stdout=subprocess.DEVNULL, check=True)
    jobs.append(("job64", [d]))
    for x in sys.argv[3:]:
        files = [os.path.join(x, f) for f in sorted(os.listdir(x))]  # runfiles are symlinks
        jobs.append((os.path.basename(os.path.normpath(x)), files))
    for name, logs in jobs:
        print(f"--- {name}", flush=True)
        validate(name, run(forkguard, "trace", logs), run(forkguard, "json", logs))
    print(f"report_trace_test: {len(failures)} failed check(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
