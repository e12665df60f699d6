"""The fork matrix's results (scripts/lanes/matrix-lane): truth and verdict per cell.

  analyze.py junit RAW OUT --kernels=L --rdma-cores=L [--seconds=N --fetch-seconds=N]
                   [--note=TEXT]...   (a line for the doc's notes, e.g. how RAW was put together)
      reads RAW/kernel-K/<rc>/group-<fork support>/{bare,warn,error}.{json,err,rc} (one
      fork_truth process per fork support measures every kind listed in `kinds`, one JSON
      line each; `error.kinds` the kinds run in FORKGUARD_MODE=error) and the shim's event
      logs beside them, split into RAW/kernel-K/<rc>/<kind>-<fork support>/ (one per cell);
      and RAW/kernel-K/<rc>/doctor-{off,env} (`forkguard doctor` without and with
      RDMAV_FORK_SAFE=1), checked against the cells. Writes OUT/matrix.xml (one testcase
      per cell, two per rdma-core for doctor) and OUT/results.json; prints one line per
      testcase and the counts.
  analyze.py doc RESULTS.json
      prints docs/fork-matrix.md (Markdown) made from a results.json.

A cell's truth comes from the run without the shim: "refused" (ibv_reg_mr failed),
"child-segv" (the child that touched the range died of SIGSEGV), "stale" (the device
read the pre-fork data, or what it wrote did not reach the parent), "nothing" (none of
these). The verdict is the reasons of the fork event the shim wrote under
FORKGUARD_MODE=warn. The cell passes when the truth was established, the shim did not
change it, the verdict says child-segv exactly where the child died and
parent-corruption exactly where data went stale, and (stale cells) FORKGUARD_MODE=error
refused the fork and the data came out intact.
"""

import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "support"))
import junit as junit_xml  # noqa: E402 (tests/support/junit.py: the one JUnit writer)

KIND_TEXT = {
    "anon": "anonymous, small pages (64 KiB)",
    "thp": "anonymous THP (2 MiB, MADV_HUGEPAGE)",
    "hugetlb": "hugetlb (2 MiB, MAP_HUGETLB)",
    "file": "MAP_PRIVATE file, read-only MR (64 KiB)",
    "shared": "MAP_SHARED anonymous (64 KiB)",
}
FS_TEXT = {
    "off": "off",
    "env": "RDMAV_FORK_SAFE=1",
    "init": "ibv_fork_init()",
    "env+hp": "RDMAV_FORK_SAFE=1 RDMAV_HUGEPAGES_SAFE=1",
    "init+hp": "ibv_fork_init() RDMAV_HUGEPAGES_SAFE=1",
}
KINDS = list(KIND_TEXT)
FORK_SUPPORT = list(FS_TEXT)
TRUTHS = ["child-segv", "stale", "nothing", "refused"]


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def measured(d, name):
    """The fork_truth run `name` in cell dir d: (json dict or None, why not)."""
    rc = read(os.path.join(d, name + ".rc")).strip()
    out = read(os.path.join(d, name + ".json")).strip()
    err = read(os.path.join(d, name + ".err")).strip()
    if rc == "":
        return None, "did not run"
    if rc != "0":
        tail = "; ".join(l for l in err.splitlines() if "fork_truth" in l)[-300:] or err[-300:]
        return None, f"exit {rc}: {tail}"
    try:
        return json.loads(out.splitlines()[-1]), ""
    except (ValueError, IndexError) as e:
        return None, f"unreadable output ({e})"


def truth_of(m):
    """A set of outcomes, or None with why when the run shows something unmeasurable."""
    if m["device_reads"] == "other" or m["device_writes"] == "other":
        return None, "the device's data was neither the old nor the new pattern"
    t = set()
    if m["reg"] == "refused":
        t.add("refused")
    if m["child"] == "segv":
        t.add("child-segv")
    elif m["child"] not in ("alive", "none"):
        return None, f"the child ended otherwise: {m['child']}"
    if m["device_reads"] == "stale" or m["device_writes"] == "lost":
        t.add("stale")
    if not t:
        t.add("nothing")
    return t, ""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def json_lines(text):
    """The JSON objects among the lines of text (other lines skipped)."""
    out = []
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict):
            out.append(e)
    return out


def log_events(path):
    """The events of one event log (JSON lines; unreadable lines skipped)."""
    return json_lines(read(path))


def explode(rcdir):
    """One fork_truth process per fork support measured every kind in turn (group-<fs>/):
    split it into one directory per cell (<kind>-<fs>/) as analyze_cell reads them. The
    i-th JSON line of a run is its i-th kind, and the i-th fork event in the event log of
    that process (the header's pid) is that kind's fork. A run that failed at a kind gives
    that kind its exit status and stderr; the kinds after it did not run."""
    for g in sorted(glob.glob(os.path.join(rcdir, "group-*"))):
        fs = os.path.basename(g)[len("group-"):]
        asked = {"bare": read(os.path.join(g, "kinds")).split(),
                 "warn": read(os.path.join(g, "kinds")).split(),
                 "fix": read(os.path.join(g, "kinds")).split(),
                 "enforce": read(os.path.join(g, "kinds")).split(),
                 "error": read(os.path.join(g, "error.kinds")).split()}
        for run in ("bare", "warn", "error", "fix", "enforce"):
            shim = run not in ("bare", "enforce")
            kinds = ",".join(asked[run]).split(",") if asked[run] else []
            rcv = read(os.path.join(g, run + ".rc")).strip()
            if rcv == "" or not kinds:
                continue
            err = read(os.path.join(g, run + ".err"))
            lines = json_lines(read(os.path.join(g, run + ".json")))
            forks = []
            if shim and lines:
                pid = lines[0].get("pid")
                for path in sorted(glob.glob(os.path.join(g, run + "-log", "*.jsonl"))):
                    ev = log_events(path)
                    if ev and ev[0].get("event") == "header" and ev[0].get("pid") == pid:
                        forks = [e for e in ev if e.get("event") == "fork"]
            failed_at = None
            for i, kind in enumerate(kinds):
                d = os.path.join(rcdir, f"{kind}-{fs}")
                os.makedirs(d, exist_ok=True)
                line = next((x for x in lines if x.get("kind") == kind), None)
                if line is None:
                    if failed_at is None and rcv != "0":
                        failed_at = kind
                        write(os.path.join(d, run + ".rc"), rcv + "\n")
                        write(os.path.join(d, run + ".err"), err)
                    elif failed_at is None:
                        write(os.path.join(d, run + ".rc"), "2\n")
                        write(os.path.join(d, run + ".err"),
                              f"fork_truth: error: no result for {kind} (exit {rcv})\n" + err)
                    continue
                write(os.path.join(d, run + ".json"), json.dumps(line) + "\n")
                write(os.path.join(d, run + ".rc"), "0\n")
                write(os.path.join(d, run + ".err"), err)
                if shim:
                    ld = os.path.join(d, run + "-log")
                    os.makedirs(ld, exist_ok=True)
                    j = lines.index(line)
                    if j < len(forks):
                        write(os.path.join(ld, "forkguard.jsonl"), json.dumps(forks[j]) + "\n")


DOCTOR_KIND = {"anon": "anonymous", "thp": "thp", "hugetlb": "hugetlb", "file": "private-file",
               "shared": "shared"}


def doctor_block(text, name):
    """One check of `forkguard doctor`'s output: (status, its text joined, its advice)."""
    status, body, advice, inside = None, [], [], False
    for line in text.splitlines():
        head = line[:6].strip()
        if head in ("ok", "warn", "fail") and line[6:].startswith(name + " "):
            status, inside = head, True
            body.append(line[6 + len(name):].strip())
            continue
        if inside:
            if head in ("ok", "warn", "fail") or line.startswith("summary:"):
                break
            t = line.strip()
            if t.startswith("->"):
                advice.append(t[2:].strip())
            elif advice:
                advice[-1] += " " + t
            else:
                body.append(t)
    return status, " ".join(body), " ".join(advice)


def kind_list(phrase):
    """'anonymous, thp and shared' -> {'anonymous', 'thp', 'shared'}."""
    return {w.strip() for w in phrase.replace(" and ", ", ").split(",") if w.strip()}


def doctor_effects(body):
    """What doctor's fork support check says a fork after registration does without fork
    support, per kind: {'anonymous': 'nothing', 'hugetlb': 'stale', ...}."""
    import re
    out = {}
    text = body[body.find("Without fork support"):]
    for names, what in re.findall(
            r"([a-z-]+(?:, [a-z-]+)*(?: and [a-z-]+)?) memory (intact|STALE|it is unknown)", text):
        eff = {"intact": "nothing", "STALE": "stale", "it is unknown": "unknown"}[what]
        for k in kind_list(names):
            out[k] = eff
    return out


def doctor_checks(kd, rc, cells):
    """Two testcases per rdma-core: what doctor says without fork support and with
    RDMAV_FORK_SAFE=1, against what the cells measured. (name, problem, facts)."""
    by = {(c["kind"], c["fork_support_cell"]): c for c in cells}
    truth = {k: set(c.get("truth", [])) for k, c in by.items() if c.get("truth")}
    out = []
    for fsd in ("off", "env"):
        text = read(os.path.join(kd, rc, "doctor-" + fsd))
        name = (f"rdma-core {rc} / doctor with fork support "
                f"{'off' if fsd == 'off' else 'RDMAV_FORK_SAFE=1'} says what the cells measured")
        status, body, advice = doctor_block(text, "fork support")
        problems = []
        if status is None:
            out.append((name, "doctor printed no fork support check: " + text.strip()[-300:], {}))
            continue
        effects = doctor_effects(body)
        stale_off = [k for k in KINDS if "stale" in truth.get((k, "off"), set())]
        segv_env = [k for k in KINDS if "child-segv" in truth.get((k, "env"), set())]
        # Without fork support: each kind doctor names, as measured.
        for k in KINDS:
            t = truth.get((k, "off"))
            said = effects.get(DOCTOR_KIND[k])
            if t is None or said is None:
                continue
            want = "stale" if "stale" in t else "nothing" if t == {"nothing"} else None
            if want and said != want:
                problems.append(f"doctor says a fork leaves {DOCTOR_KIND[k]} memory "
                                f"{'STALE' if said == 'stale' else said}, measured {truth_label(t)}")
        for k in ("anon", "hugetlb") if fsd == "off" else ():
            if truth.get((k, "off")) and DOCTOR_KIND[k] not in effects:
                problems.append(f"doctor does not say what a fork does to {DOCTOR_KIND[k]} memory")
        advises_env = "RDMAV_FORK_SAFE=1" in advice
        if fsd == "off":
            if advises_env and not stale_off:
                problems.append("doctor advises RDMAV_FORK_SAFE=1 where no data goes stale "
                                "(it only kills children)")
            if advises_env and stale_off and any(
                    "stale" in truth.get((k, f), set()) for k in stale_off for f in ("env",)):
                problems.append("doctor advises RDMAV_FORK_SAFE=1 but the data still goes stale with it")
            if stale_off and status != "warn":
                problems.append(f"data goes stale ({', '.join(stale_off)}) but doctor does not warn")
        else:
            says_segv = "SIGSEGV" in body
            if segv_env and not says_segv:
                problems.append(f"children die ({', '.join(segv_env)}) but doctor does not say so")
            if not segv_env and says_segv:
                problems.append("doctor says children die of SIGSEGV; no child died")
            if segv_env and not stale_off and "unset RDMAV_FORK_SAFE" not in advice:
                problems.append("RDMAV_FORK_SAFE=1 only kills children here but doctor does not "
                                "advise to unset it")
            if segv_env and status != "warn":
                problems.append("children die but doctor does not warn")
        out.append((name, "; ".join(problems),
                    {"status": status, "body": body, "advice": advice, "effects": effects}))
    return out


def fork_event(logdir):
    """The parent's fork event (the shim's event log, JSON lines), or None."""
    for path in sorted(glob.glob(os.path.join(logdir, "*.jsonl"))):
        for e in log_events(path):
            if e.get("event") == "fork":
                return e
    return None


def truth_label(t):
    return "+".join(x for x in TRUTHS if x in t) if t else "unknown"


def kernel_copies(rcdir, kind):
    """Whether this kernel copies `kind` at fork, from the cell without fork support (its
    truth without the shim: nothing, or stale); None when that cell has no truth."""
    bare, _ = measured(os.path.join(rcdir, f"{kind}-off"), "bare")
    if bare is None or bare.get("reg") == "refused":
        return None
    t, _ = truth_of(bare)
    if t is None:
        return None
    return "stale" not in t


def analyze_fix(d, t, kind, copies):
    """FORKGUARD_MODE=fix in one cell: (facts for the doc, problems). The truth under fix
    must be `nothing` wherever the kernel copies the kind, and never stale; a dead child is
    allowed only where the kernel does not copy and the fork event names the range (fix
    withheld it, or left rdma-core's MADV_DONTFORK)."""
    fx, why = measured(d, "fix")
    if fx is None:
        return {}, [f"FORKGUARD_MODE=fix did not run: {why}"]
    tf, why = truth_of(fx)
    info = {"fix": fx}
    if tf is None:
        return info, [f"under FORKGUARD_MODE=fix: {why}"]
    info["fix_truth"] = sorted(tf)
    ev = fork_event(os.path.join(d, "fix-log"))
    ranges = (ev or {}).get("ranges") or []
    info["fix_action"] = (ev or {}).get("action")
    info["fix_ranges"] = sorted({r.get("fixed") or ("dontfork" if r.get("dontfork") else "unchanged")
                                 for r in ranges})
    problems = []
    if "stale" in tf:
        problems.append("under FORKGUARD_MODE=fix the data went stale")
    if "refused" in t:
        if tf != t:
            problems.append(f"registration refused: under fix {truth_label(tf)}, "
                            f"without the shim {truth_label(t)}")
    elif copies and tf != {"nothing"}:
        problems.append(f"under FORKGUARD_MODE=fix {truth_label(tf)}, where this kernel copies "
                        f"{kind} memory (its cell without fork support: nothing)")
    elif "child-segv" in tf:
        told = any(r.get("fixed") == "withheld" or (r.get("dontfork") and r.get("fixed") != "copied")
                   for r in ranges)
        if copies is None:
            problems.append("under FORKGUARD_MODE=fix the child died, and whether this kernel copies "
                            f"{kind} memory is not established")
        elif not told:
            problems.append("under FORKGUARD_MODE=fix the child died on a range the fork event "
                            "does not name as withheld")
    if ev is None:
        problems.append("under FORKGUARD_MODE=fix: no fork event in its event log")
    return info, problems


def analyze_cell(d, kernel, rc, copies=None, watcher=(False, "not run in this guest job")):
    cell = {"dir": d}
    bare, why = measured(d, "bare")
    if bare is None:
        return cell, f"truth not established: {why}"
    cell["bare"] = bare
    lib = os.path.basename(bare.get("libibverbs", ""))
    if f".{rc}." not in lib:
        return cell, f"truth not established: libibverbs loaded was {lib or '?'}, not rdma-core {rc}"
    t, why = truth_of(bare)
    if t is None:
        return cell, f"truth not established: {why}"
    cell["truth"] = sorted(t)
    warn, why = measured(d, "warn")
    if warn is None:
        return cell, f"under the shim the cell did not run: {why}"
    cell["warn"] = warn
    ev = fork_event(os.path.join(d, "warn-log"))
    if ev is None:
        return cell, "under the shim: no fork event in its event log"
    reasons = ev.get("reasons") or []
    cell["verdict"] = ev.get("verdict")
    cell["reasons"] = reasons
    cell["kernel_cof"] = ev.get("kernel_cof")
    cell["kernel_cof_source"] = ev.get("kernel_cof_source")
    cell["fork_support"] = ev.get("fork_support")
    t2, why = truth_of(warn)
    problems = []
    if t2 != t:
        problems.append(f"the shim changed the outcome: {truth_label(t)} without it, "
                        f"{truth_label(t2) if t2 else why} with it")
    want_segv, want_stale = "child-segv" in t, "stale" in t
    if ("child-segv" in reasons) != want_segv:
        problems.append("verdict " + ("lacks" if want_segv else "claims") + " child-segv")
    if ("parent-corruption" in reasons) != want_stale:
        problems.append("verdict " + ("lacks" if want_stale else "claims") + " parent-corruption")
    if want_stale:
        err, why = measured(d, "error")
        if err is None:
            problems.append(f"FORKGUARD_MODE=error did not run: {why}")
        else:
            cell["error"] = err
            intact = err["device_reads"] == "fresh" and err["device_writes"] in ("seen", "n/a")
            cell["error_intact"] = intact and err["fork"] == "refused"
            if err["fork"] != "refused":
                problems.append("FORKGUARD_MODE=error did not refuse the fork")
            elif not intact:
                problems.append("FORKGUARD_MODE=error refused the fork but the data went stale")
    info, fix_problems = analyze_fix(d, t, os.path.basename(d).split("-", 1)[0], copies)
    cell.update(info)
    problems += fix_problems
    info, enforce_problems = analyze_enforce(d, t, kernel, watcher)
    cell.update(info)
    problems += enforce_problems
    return cell, "; ".join(problems)


def fix_label(cell):
    return truth_label(set(cell["fix_truth"])) if "fix_truth" in cell else "not measured"


def first_boot(kd, rc, cells):
    """The first processes of the boot (RAW/kernel-K/fg-matrix-firstboot/): the boot's probe
    as the shipped unit runs it, then hugetlb and anonymous memory under the shim in warn and
    in fix mode with nothing in the user's cache. Their verdicts must be those of the same
    kinds' cells without fork support (rdma-core `rc`, measured later in the boot), and fix
    must keep the parent's data intact. (name, problem, facts) per kind."""
    fb = os.path.join(kd, "fg-matrix-firstboot")
    by = {c["kind"]: c for c in cells if c["fork_support_cell"] == "off" and c["rdma_core"] == rc}
    unit_rc = read(os.path.join(fb, "unit.rc")).strip()
    unit = read(os.path.join(fb, "unit-command")).strip()
    out = []
    runs = {}
    for mode in ("warn", "fix"):
        lines = json_lines(read(os.path.join(fb, mode + ".json")))
        pid = lines[0].get("pid") if lines else None
        forks = []
        for path in sorted(glob.glob(os.path.join(fb, mode + "-log", "*.jsonl"))):
            ev = log_events(path)
            if ev and ev[0].get("event") == "header" and ev[0].get("pid") == pid:
                forks = [e for e in ev if e.get("event") == "fork"]
        runs[mode] = (lines, forks, read(os.path.join(fb, mode + ".rc")).strip(),
                      read(os.path.join(fb, mode + ".err")))
    for kind in ("hugetlb", "anon"):
        name = f"first process of the boot / {kind}: the verdict from the boot's probe, and fix"
        facts, problems = {"unit": unit, "unit_rc": unit_rc}, []
        if unit_rc != "0":
            problems.append(f"the boot's probe ({unit or 'no command'}) exited {unit_rc or '?'}: "
                            + read(os.path.join(fb, "unit.out")).strip()[-200:])
        cell = by.get(kind)
        t = set(cell.get("truth", [])) if cell else set()
        if not t:
            problems.append(f"no truth for the {kind} cell without fork support to compare with")
        for mode in ("warn", "fix"):
            lines, forks, rcv, err = runs[mode]
            i = next((j for j, x in enumerate(lines) if x.get("kind") == kind), None)
            if i is None or i >= len(forks):
                problems.append(f"{mode}: no result or fork event (exit {rcv or '?'}: "
                                f"{err.strip()[-200:]})")
                continue
            m, ev = lines[i], forks[i]
            mt, why = truth_of(m)
            reasons = [r for r in ev.get("reasons") or [] if r != "inherited-rdma"]
            facts[mode] = {"truth": sorted(mt) if mt else why, "reasons": reasons,
                           "action": ev.get("action"), "pin_probe": ev.get("pin_probe"),
                           "fixed": [r.get("fixed") for r in ev.get("ranges") or [] if r.get("fixed")]}
            if mode == "warn" and t:
                want = ["parent-corruption"] if "stale" in t else []
                if reasons != want:
                    problems.append(f"the first process's verdict is {reasons or 'none'}; "
                                    f"the cell measured {truth_label(t)}")
                if (ev.get("pin_probe") or {}).get("anonymous") == "not-probed":
                    problems.append("the first process had no probe result for this boot")
            if mode == "fix":
                if mt is None or "stale" in mt:
                    problems.append(f"under fix the data went stale ({why or truth_label(mt)})")
                if "stale" in t and "withheld" not in facts[mode]["fixed"]:
                    problems.append("fix did not withhold the range this kernel does not copy")
                if "stale" not in t and t and facts[mode]["fixed"]:
                    problems.append(f"fix changed a range that needed nothing: {facts[mode]['fixed']}")
        out.append((name, "; ".join(problems), facts))
    return out


def verdict_label(cell):
    if "reasons" not in cell:
        return "none"
    rs = [r for r in cell["reasons"] if r in ("child-segv", "parent-corruption")]
    if rs:
        return ",".join(rs)
    return "clean" if cell.get("verdict") == "clean" else "inherited-rdma only"


# Kernels where `forkguard watch` must load (all of the matrix's have BTF; 5.10 has no
# bpf_find_vma and BPF LSM is not in its default list: the fallback judges there); on others
# its cells say why it did not run, and that is not a failure.
WATCH_KERNELS = ("5.10", "6.1", "6.12")


NOT_IN_JOB = "not run in this guest job"


def watcher_ran(rcdir):
    """Whether `forkguard watch --enforce memory` was watching for this rdma-core's enforce
    runs: (True, "") or (False, why: its stderr's last line)."""
    wd = os.path.join(rcdir, "watch")
    if os.path.exists(os.path.join(wd, "ready")):
        return True, ""
    lines = [l for l in read(os.path.join(wd, "watch.err")).splitlines() if l.strip()]
    if not os.path.isdir(wd):
        return False, NOT_IN_JOB
    return False, (lines[-1] if lines else f"exit {read(os.path.join(wd, 'watch.rc')).strip() or '?'}")


def analyze_enforce(d, t, kernel, watcher):
    """The cell without the shim under `forkguard watch --enforce memory`: (facts, problems).
    The kernel must refuse the fork exactly where the truth is child-segv or stale, and a
    fork it lets through must come out as without the watcher."""
    ran, why = watcher
    if not ran:
        info = {"enforce": "not run", "enforce_why": why}
        if kernel in WATCH_KERNELS and why != NOT_IN_JOB:
            return info, [f"forkguard watch --enforce memory did not start: {why}"]
        return info, []
    m, why = measured(d, "enforce")
    if m is None:
        return {}, [f"under forkguard watch --enforce memory the cell did not run: {why}"]
    want = "child-segv" in t or "stale" in t
    refused = m.get("fork") == "refused"
    info = {"enforce": "refused" if refused else "let through"}
    problems = []
    if refused and not want:
        problems.append(f"forkguard watch --enforce memory refused a fork whose truth is {truth_label(t)}")
    elif want and not refused:
        problems.append(f"forkguard watch --enforce memory let through a fork whose truth is {truth_label(t)}")
    elif refused and m.get("fork_errno") != 1:
        problems.append(f"the refused fork's errno is {m.get('fork_errno')}, not EPERM")
    elif not refused:
        te, why = truth_of(m)
        if te != t:
            problems.append(f"under forkguard watch the outcome changed: {truth_label(t)} without it, "
                            f"{truth_label(te) if te else why} with it")
    return info, problems


def enforce_label(cell):
    return cell.get("enforce", "not measured")


def junit(raw, out, kernels, rcs, seconds, fetch_seconds, notes=()):
    cases, results = [], {"kernels": [], "seconds": seconds, "fetch_seconds": fetch_seconds,
                          "notes": list(notes)}
    counts = {x: 0 for x in TRUTHS}
    counts["unknown"] = 0
    failed = 0
    all_rcs = rcs
    for spec in kernels:
        # "5.10" (every rdma-core of --rdma-cores) or "5.10:33+44" (its own)
        k, _, own = spec.partition(":")
        rcs = own.split("+") if own else all_rcs
        kd = os.path.join(raw, "kernel-" + k)
        kinfo = {
            "kernel": k,
            "uname": read(os.path.join(kd, "uname")).strip(),
            "rdma_system": read(os.path.join(kd, "rdma-system")).strip(),
            "seconds": read(os.path.join(kd, "seconds")).strip(),
            "cells_seconds": read(os.path.join(kd, "cells-seconds")).strip(),
            "boot_seconds": read(os.path.join(kd, "uptime-start")).strip(),
            "up_seconds": read(os.path.join(kd, "uptime-end")).strip(),
            "cells": [],
        }
        results["kernels"].append(kinfo)
        booted = os.path.exists(os.path.join(kd, "finished"))
        if not booted:
            # The cells that did run are still judged below; the rest is this failure.
            why = (read(os.path.join(kd, "boot.err")).strip().splitlines() or ["no output"])[-5:]
            kinfo["boot_error"] = "\n".join(why)
            for f in glob.glob(os.path.join(raw, "fetch-kernel-" + k + ".err")):
                why = read(f).strip().splitlines()[-3:] + why
            cases.append((f"kernel {k}: the guest ran every cell", "\n".join(why)))
            failed += 1
            print(f"matrix-lane: FAIL kernel {k}: the guest did not finish: {' | '.join(why)}")
        for rc in rcs:
            if not booted and not os.path.isdir(os.path.join(kd, rc)):
                continue
            if os.path.exists(os.path.join(kd, f"layer-{rc}.err")) or not os.path.isdir(os.path.join(kd, rc)):
                why = read(os.path.join(raw, f"fetch-rdma-core-{rc}.err")).strip()[-400:]
                cases.append((f"kernel {kinfo['uname'] or k} / rdma-core {rc}: laid over / in the guest",
                              why or read(os.path.join(kd, f"layer-{rc}.err")) or "no results"))
                failed += 1
                print(f"matrix-lane: FAIL kernel {k} rdma-core {rc}: not run ({why[-120:]})")
                continue
            explode(os.path.join(kd, rc))
            steps = {}
            for line in read(os.path.join(kd, rc, "steps")).splitlines():
                parts = line.split()
                try:
                    steps[parts[0]] = round(float(parts[2]) - float(parts[1]), 1)
                except (IndexError, ValueError):
                    pass
            kinfo.setdefault("steps", {})[rc] = steps
            rc_cells = []
            for kind in KINDS:
                for fs in FORK_SUPPORT:
                    d = os.path.join(kd, rc, f"{kind}-{fs}")
                    if not os.path.isdir(d):
                        continue
                    cell, problem = analyze_cell(d, k, rc, kernel_copies(os.path.join(kd, rc), kind),
                                                 watcher_ran(os.path.join(kd, rc)))
                    cell.update({"kernel": k, "rdma_core": rc, "kind": kind, "fork_support_cell": fs,
                                 "ok": not problem, "problem": problem})
                    del cell["dir"]
                    kinfo["cells"].append(cell)
                    rc_cells.append(cell)
                    tl = truth_label(set(cell.get("truth", [])))
                    for x in cell.get("truth", []) or ["unknown"]:
                        counts[x] += 1
                    name = (f"kernel {kinfo['uname'] or k} / rdma-core {rc} / {kind} / fork support "
                            f"{FS_TEXT[fs]}: truth {tl}, verdict {verdict_label(cell)}, "
                            f"under fix {fix_label(cell)}, under watch --enforce memory "
                            f"{enforce_label(cell)}")
                    cases.append((name, problem))
                    failed += bool(problem)
                    print(f"matrix-lane: {'PASS' if not problem else 'FAIL'} {name}"
                          + (f"\n    | {problem}" if problem else ""))
            if not rc_cells:
                cases.append((f"kernel {kinfo['uname'] or k} / rdma-core {rc}: cells ran",
                              "no cell ran"))
                failed += 1
                continue
            if rc == rcs[0] and os.path.isdir(os.path.join(kd, "fg-matrix-firstboot")):
                kinfo["first_boot"] = []
                for name, problem, facts in first_boot(kd, rc, rc_cells):
                    name = f"kernel {kinfo['uname'] or k} / {name}"
                    kinfo["first_boot"].append({"name": name, "ok": not problem, "problem": problem,
                                                **facts})
                    cases.append((name, problem))
                    failed += bool(problem)
                    print(f"matrix-lane: {'PASS' if not problem else 'FAIL'} {name}"
                          + (f"\n    | {problem}" if problem else ""))
            kinfo.setdefault("doctor", {})[rc] = []
            for name, problem, facts in doctor_checks(kd, rc, rc_cells):
                name = f"kernel {kinfo['uname'] or k} / {name}"
                kinfo["doctor"][rc].append({"name": name, "ok": not problem, "problem": problem,
                                            **facts})
                cases.append((name, problem))
                failed += bool(problem)
                print(f"matrix-lane: {'PASS' if not problem else 'FAIL'} {name}"
                      + (f"\n    | {problem}" if problem else ""))
    n = len(cases)
    results["counts"] = counts
    results["cases"] = n
    results["failed"] = failed
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    junit_xml.write(os.path.join(out, "matrix.xml"), "matrix-lane",
                    (junit_xml.Case(name, failure=problem or None, classname="matrix-lane")
                     for name, problem in cases))
    print(f"matrix-lane: {n - failed} passed, {failed} failed; truths: "
          + ", ".join(f"{counts[x]} {x}" for x in TRUTHS + ["unknown"]))
    return 0 if failed == 0 and n > 0 else 1


def outcome_text(m):
    if m is None:
        return "?"
    parts = []
    if m["reg"] == "refused":
        parts.append(f"ibv_reg_mr refused ({os.strerror(m['reg_errno'])})")
    else:
        parts.append({"fresh": "device reads new data", "stale": "device reads **pre-fork data**"}
                     .get(m["device_reads"], m["device_reads"]))
        if m["device_writes"] != "n/a":
            parts.append({"seen": "its writes reach the parent", "lost": "its writes **lost**"}
                         .get(m["device_writes"], m["device_writes"]))
    parts.append({"alive": "child lives", "segv": "child **SIGSEGV**"}.get(m["child"], m["child"]))
    if m.get("dontfork"):
        parts.append("`dc`")
    return "; ".join(parts)


def fix_text(cell):
    """The fix mode column: the truth under fix and what the shim did to the range."""
    if "fix_truth" not in cell:
        return ""
    did = [r for r in cell.get("fix_ranges", []) if r in ("copied", "withheld", "failed")]
    return f"**{fix_label(cell)}**" + (f" ({', '.join(did)})" if did else "")


def fix_summary(res):
    """Per kernel: the harmful cells (child-segv or stale without the shim) that fix made
    `nothing`, and those it did not, with why."""
    out = []
    for k in res["kernels"]:
        name = k["uname"] or k["kernel"]
        harmful = [c for c in k["cells"] if {"child-segv", "stale"} & set(c.get("truth", []))
                   and "refused" not in c.get("truth", [])]
        if not harmful or not any("fix_truth" in c for c in harmful):
            continue
        made = [c for c in harmful if c.get("fix_truth") == ["nothing"]]
        rest = [c for c in harmful if c.get("fix_truth") != ["nothing"]]
        out.append(f"- {name}: {len(made)} of {len(harmful)} harmful cells (child-segv or stale without "
                   f"forkguard) are `nothing` under fix"
                   + (f"; {len(rest)} are not:" if rest else "."))
        why = {}
        for c in rest:
            ft = c.get("fix_truth")
            if ft == ["child-segv"] and "stale" not in ft and c["ok"]:
                reason = ("the kernel does not copy this memory at fork: the range is withheld from the "
                          "child (parent's data intact, the child that touches it dies)")
            elif ft is None:
                reason = "not measured under fix: " + (c.get("problem") or "?")
            else:
                reason = f"under fix {fix_label(c)}: " + (c.get("problem") or "?")
            why.setdefault(reason, []).append(
                f"rdma-core {c['rdma_core']} {c['kind']} / {FS_TEXT[c['fork_support_cell']]}")
        for reason, cs in why.items():
            out.append(f"  - {reason}: " + "; ".join(cs))
    return out


def enforce_summary(res):
    """Per kernel: the cells whose fork `forkguard watch --enforce memory` refused, against
    their truth; or why it did not run."""
    out = []
    for k in res["kernels"]:
        name = k["uname"] or k["kernel"]
        cells = [c for c in k["cells"] if "enforce" in c]
        if not cells:
            continue
        ran = [c for c in cells if c["enforce"] != "not run"]
        if not ran:
            whys = sorted({c.get("enforce_why", "?") for c in cells})
            out.append(f"- {name}: not run: " + "; ".join(whys))
            continue
        refused = [c for c in ran if c["enforce"] == "refused"]
        harmful = [c for c in ran if {"child-segv", "stale"} & set(c.get("truth", []))]
        right = [c for c in refused if c in harmful]
        out.append(f"- {name}: {len(refused)} of {len(ran)} cells' forks refused by the kernel; "
                   f"{len(harmful)} cells are child-segv or stale without forkguard, "
                   f"{len(right)} of them refused"
                   + ("." if len(right) == len(harmful) == len(refused) else
                      f"; **{len(refused) - len(right)} refused wrongly, "
                      f"{len(harmful) - len(right)} let through wrongly**."))
        for c in refused:
            out.append(f"  - refused: rdma-core {c['rdma_core']} {c['kind']} / "
                       f"{FS_TEXT[c['fork_support_cell']]}: truth {truth_label(set(c.get('truth', [])))}")
    return out


def section(w, title, lines, intro=()):
    """A `## title` section of the doc (`w` writes a line): the paragraph `intro`, then `lines`;
    nothing when there are no lines."""
    if not lines:
        return
    w(f"## {title}")
    w("")
    if intro:
        for line in intro:
            w(line)
        w("")
    for line in lines:
        w(line)
    w("")


def doc(path):
    with open(path) as f:
        res = json.load(f)
    o = []
    w = o.append
    w("# The fork matrix: what a fork does, measured, beside what forkguard says")
    w("")
    w("Generated by `scripts/lanes/matrix-lane --write-doc` from its last run (do not edit by hand;")
    w("`scripts/lanes/matrix-lane --doc-only` rewrites it from the last results). Every cell ran on a")
    w("real Soft-RoCE device (`rxe0`) in the project's QEMU guest, booted once per kernel, with each")
    w("rdma-core laid over `/` inside the guest in turn (`scripts/guests/matrix-fetch` fetches the kernels")
    w("and rdma-cores from Debian's registry into a cache; rdma-core 56 is built from trixie's source).")
    w("")
    w("How a cell is measured (`//tests/matrix:fork_truth`): register a buffer of the memory kind")
    w("(fork support as the cell says), fork a child that stays alive, let the parent write the")
    w("buffer, RDMA-WRITE the buffer's MR into a second MR over a loopback RC QP (does the device read")
    w("what the parent wrote?), RDMA-WRITE new data into the buffer's MR (does the parent read it?),")
    w("then let the child read the buffer (does it die?). Truth, from the run without forkguard:")
    w("")
    w("- **child-segv**: the child that touched the range died of SIGSEGV (the range was `MADV_DONTFORK`);")
    w("- **stale**: after fork + a parent write, the device read the pre-fork data or its writes did not")
    w("  reach the parent: silent data corruption;")
    w("- **nothing**: neither; **refused**: `ibv_reg_mr` itself failed.")
    w("")
    w("Verdict: the `reasons` of the shim's `fork` event for the same cell (`FORKGUARD_MODE=warn`;")
    w("`inherited-rdma`, always present here, is left out). A cell passes when the verdict says")
    w("`child-segv` exactly where the child died and `parent-corruption` exactly where data went stale;")
    w("in stale cells `FORKGUARD_MODE=error` must refuse the fork and the data come out intact.")
    w("")
    w("Fix: the same cell under `FORKGUARD_MODE=fix` (the truth measured again, and what the shim did")
    w("to the range: `copied` = made `MADV_DOFORK` for the fork, `withheld` = made `MADV_DONTFORK` for")
    w("it, each undone in the parent after the fork). The truth under fix must be `nothing` wherever")
    w("the kernel copies the kind (its cell without fork support: nothing), and never `stale`; a dead")
    w("child is allowed only where the kernel does not copy and the fork event names the range.")
    w("")
    c = res.get("counts", {})
    cells = [x for k in res["kernels"] for x in k["cells"]]
    bad = sum(1 for x in cells if not x["ok"])
    others = res.get("failed", 0) - bad
    docs_ = [d for k in res["kernels"] for v in k.get("doctor", {}).values() for d in v]
    dbad = sum(1 for d in docs_ if not d["ok"])
    fbs = [f for k in res["kernels"] for f in k.get("first_boot", [])]
    fbad = sum(1 for f in fbs if not f["ok"])
    others = others - dbad - fbad
    w(f"**{len(cells)} cells measured, {bad} failed** (the verdict disagrees with the truth, or the truth "
      "could not be established). Truths: " + ", ".join(f"{c.get(x, 0)} {x}" for x in TRUTHS)
      + (f", {c['unknown']} not established" if c.get("unknown") else "") + "."
      + (f" `forkguard doctor` checked against the cells {len(docs_)} times, {dbad} wrong." if docs_ else "")
      + (f" The first process of a boot checked {len(fbs)} times, {fbad} wrong." if fbs else "")
      + (f" {others} more failure(s): a kernel or rdma-core that did not run (below)." if others else "")
      + (f" Lane time {res['seconds']} s (fetch {res.get('fetch_seconds', '?')} s)."
         if str(res.get("seconds", "?")) != "?" else ""))
    w("")
    hl = []
    for k in res["kernels"]:
        name = k["uname"] or k["kernel"]
        for cell in k["cells"]:
            fs, kind, rc = cell["fork_support_cell"], cell["kind"], cell["rdma_core"]
            show = (k["kernel"] == "5.10" and fs == "off" and kind in ("anon", "hugetlb")) or (
                rc == "56" and kind == "anon" and fs in ("env", "init"))
            if not show:
                continue
            b = cell.get("bare") or {}
            hl.append(f"- {name}, rdma-core {rc}, {KIND_TEXT[kind]}, fork support {FS_TEXT[fs]}: "
                      f"{outcome_text(b)}{'' if b.get('dontfork') else '; no `dc`'} → truth "
                      f"**{truth_label(set(cell.get('truth', [])))}**, verdict "
                      f"**{verdict_label(cell)}** ({'agrees' if cell['ok'] else 'WRONG: ' + cell['problem']})")
        if k["kernel"] == "5.10":
            for rc, ds in sorted(k.get("doctor", {}).items()):
                for d in ds:
                    if "fork support off" in d["name"]:
                        hl.append(f"- {name}, rdma-core {rc}: `forkguard doctor` (fork support off) "
                                  f"**{d.get('status')}**, advice: \"{d.get('advice') or 'none'}\" "
                                  f"({'agrees with the cells' if d['ok'] else 'WRONG: ' + d['problem']})")
    fl = fix_summary(res)
    section(w, "Highlights", hl)
    section(w, "Fix mode", fl)
    section(w, "Refused in the kernel: `forkguard watch --enforce memory`", enforce_summary(res),
            ["The same cells without the shim, under the watcher: the kernel must refuse the fork",
             "exactly where the truth is child-segv or stale, and change nothing else."])
    w("## Overview")
    w("")
    w("Truth per cell, and the verdict where it differs (**✗ verdict**); ✓ where they agree; then")
    w("the truth under `FORKGUARD_MODE=fix` (→ fix).")
    w("")
    cols = [(k, rc) for k in res["kernels"] for rc in
            dict.fromkeys(c["rdma_core"] for c in k["cells"])]
    if cols:
        w("| memory | fork support | " + " | ".join(
            f"{k['uname'] or k['kernel']} rdma-core {rc}" for k, rc in cols) + " |")
        w("|---|---|" + "---|" * len(cols))
        for kind in KINDS:
            for fs in FORK_SUPPORT:
                row = []
                for k, rc in cols:
                    cell = next((c for c in k["cells"] if c["rdma_core"] == rc and c["kind"] == kind
                                 and c["fork_support_cell"] == fs), None)
                    if cell is None:
                        row.append("")
                        continue
                    t = truth_label(set(cell.get("truth", [])))
                    fx = f" → fix {fix_label(cell)}" if "fix_truth" in cell else ""
                    row.append(f"{t} ✓{fx}" if cell["ok"] else f"{t} **✗ {verdict_label(cell)}**{fx}")
                if any(row):
                    w(f"| {KIND_TEXT[kind]} | {FS_TEXT[fs]} | " + " | ".join(row) + " |")
        w("")
    for k in res["kernels"]:
        w(f"## Kernel {k['uname'] or k['kernel']}")
        w("")
        if k.get("rdma_system"):
            w(f"`rdma system show`: `{k['rdma_system']}`. The guest booted in {k.get('boot_seconds') or '?'} s, "
              f"its cells took {k.get('cells_seconds') or '?'} s; {k.get('seconds') or '?'} s on the host "
              "including the wait for the shared guest lock.")
            w("")
        if k.get("boot_error"):
            w("The guest did not boot or did not finish" + (" (the cells below are those that ran)"
              if k["cells"] else "") + ". The lane's last lines about it:")
            w("")
            w("```")
            w(k["boot_error"])
            w("```")
            w("")
        for f in k.get("first_boot", []):
            kind = "hugetlb" if "/ hugetlb:" in f["name"] else "anonymous"
            wv, fx = f.get("warn") or {}, f.get("fix") or {}
            w(f"First process of the boot, {kind} memory, fork support off (nothing run before it but "
              f"the boot's probe, `{f.get('unit') or '?'}`): verdict **{', '.join(wv.get('reasons') or []) or 'nothing'}**"
              f" (pin probe as it read it: {', '.join(f'{a} {b}' for a, b in (wv.get('pin_probe') or {}).items()) or '?'});"
              f" under fix: {', '.join(fx.get('fixed') or []) or 'nothing changed'}, truth **{truth_label(set(fx.get('truth') or [])) if isinstance(fx.get('truth'), list) else '?'}**"
              + (" — right." if f["ok"] else f" — **WRONG**: {f['problem']}."))
            w("")
        if not k["cells"]:
            continue
        rcs = []
        for cell in k["cells"]:
            if cell["rdma_core"] not in rcs:
                rcs.append(cell["rdma_core"])
        for rc in rcs:
            w(f"### rdma-core {rc}")
            w("")
            st = k.get("steps", {}).get(rc, {})
            if st:
                w("In the guest: " + ", ".join(f"{n} {v} s" for n, v in st.items()) + ".")
                w("")
            w("| memory | fork support | what happened | truth | verdict | kernel copy-on-fork (source) | error mode | fix mode | watch --enforce memory | |")
            w("|---|---|---|---|---|---|---|---|---|---|")
            for cell in (x for x in k["cells"] if x["rdma_core"] == rc):
                cof = cell.get("kernel_cof")
                cofs = "?" if "reasons" not in cell else (
                    f"{'yes' if cof else 'no' if cof is False else 'unknown'} ({cell.get('kernel_cof_source') or '?'})")
                err = ""
                if "error" in cell:
                    err = "fork refused, data intact" if cell.get("error_intact") else "**not intact**"
                mark = "ok" if cell["ok"] else "**WRONG**: " + cell["problem"]
                w(f"| {KIND_TEXT[cell['kind']]} | {FS_TEXT[cell['fork_support_cell']]} | "
                  f"{outcome_text(cell.get('bare'))} | **{truth_label(set(cell.get('truth', [])))}** | "
                  f"{verdict_label(cell)} | {cofs} | {err} | {fix_text(cell)} | {enforce_label(cell)} | {mark} |")
            w("")
            for dc in k.get("doctor", {}).get(rc, []):
                which = "RDMAV_FORK_SAFE=1" if "RDMAV_FORK_SAFE=1" in dc["name"] else "off"
                eff = ", ".join(f"{kk} {'STALE' if v == 'stale' else v}"
                                for kk, v in sorted(dc.get("effects", {}).items()))
                w(f"`forkguard doctor` with fork support {which}: **{dc.get('status') or '?'}**"
                  + (f" (says a fork without fork support leaves: {eff})" if eff else "")
                  + (f"; advice: \"{dc['advice']}\"" if dc.get("advice") else "; no advice")
                  + (" — agrees with the cells." if dc["ok"] else f" — **WRONG**: {dc['problem']}."))
                w("")
    w("## Notes")
    w("")
    w("- A kernel that does not boot in the guest fails its testcase with the console's reason.")
    w("- Lane time includes waiting for the guest lock shared with other runs on this machine; the")
    w("  cells' own time in the guest is given per kernel.")
    for n in res.get("notes", []):
        w(f"- {n}")
    w("- rdma-core 33 (bullseye's binaries) and 56 (trixie's source, built here) are never installed")
    w("  on the host: each is a tree laid over the guest's throw-away root.")
    print("\n".join(o))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "doc":
        return doc(argv[2])
    if len(argv) >= 4 and argv[1] == "junit":
        opts = dict(a[2:].split("=", 1) for a in argv[4:] if a.startswith("--") and "=" in a)
        notes = [a[len("--note="):] for a in argv[4:] if a.startswith("--note=")]
        return junit(argv[2], argv[3], opts.get("kernels", "").split(","), opts.get("rdma-cores", "").split(","),
                     opts.get("seconds", "?"), opts.get("fetch-seconds", "?"), notes)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
