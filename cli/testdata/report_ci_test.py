#!/usr/bin/python3
"""Suppressions, baselines and the CI formats of `forkguard report`, on the real rxe0 logs
of the Python (pyverbs + multiprocessing) and MPI (mpi4py, 2 ranks) tests and of the native
hazard program (cli/testdata/real_rxe*).

- An emitted suppression file, read back, silences exactly the sites it was emitted for
  (and only those, when emitted for part of the logs); every entry is counted, an extra
  entry is listed as never used.
- A baseline of the same run fails nothing under --fail-on new-hazard; a new site fails
  (exit 3) and is the one named new; a moved Python line is not a new site.
- --format sarif validates against the OASIS SARIF 2.1.0 schema (vendored in
  third_party/sarif) and has the JSON report's sites, counts and locations; so have
  --format junit (one test case per site) and --format github (GitHub's documented
  workflow command fields: file, line, title).
- Bad suppression files (unknown key, unbalanced quote, empty match, ...) each get one
  error line naming the file, the line and the valid keys, and exit 2.

- The JSON report with suppressions and a baseline validates against docs/report-schema.json.

Usage: report_ci_test.py FORKGUARD SARIF_SCHEMA REPORT_SCHEMA MPI_LOGS PYTHON_LOGS NATIVE_LOGS
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import xml.etree.ElementTree as ET

import jsonschema

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


fg, schema_path, report_schema_path, mpi, py, native = sys.argv[1:7]
tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))


def report(*args, want_rc=0):
    p = subprocess.run([fg, "report", *args], capture_output=True, text=True)
    check(p.returncode == want_rc,
          f"report {' '.join(args)}: exit {p.returncode}, want {want_rc} {p.stderr.strip()[:300]}")
    return p


def report_json(*args, want_rc=0):
    return json.loads(report("--format", "json", *args, want_rc=want_rc).stdout)


def write(name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def head_frame(stack):
    """The frame that names a site, as the JSON report gives it: the innermost Python frame
    outside the standard library and site-packages, else the innermost Python frame."""
    pyf = [f for f in stack if "py_file" in f]
    for f in pyf:
        if not re.search(r"/usr/lib/python3[.0-9]*/|site-packages|dist-packages|^<", f["py_file"]):
            return f
    return pyf[-1] if pyf else None


def site_of(finding):
    return (finding["location"], finding["count"], tuple(sorted(finding["reasons"])))


ALL = [mpi, py, native]
base = report_json(*ALL)
sites = sorted(site_of(f) for f in base["findings"])
check(len(sites) == 3, f"the real logs have 3 hazardous sites: {sites}")
check(base["summary"]["hazard_forks"] == 4, "4 hazardous forks")

# --- suppressions: emitted, read back ----------------------------------------------------
supp_text = report("--emit-suppressions", *ALL).stdout
entries = [l for l in supp_text.splitlines() if l and not l.startswith("#")]
check(len(entries) == 3, f"one entry per site: {entries}")
check(not any(re.search(r"file:[^ ]*:\d+", e) for e in entries), "entries are not keyed by line")
supp = write("all.supp", supp_text + "kind=child-segv frame=func:never_called_anywhere\n")
r = report_json("--suppressions", supp, *ALL)
check(r["findings"] == [], "the emitted file silences every site")
check(sorted(site_of(f) for f in r.get("suppressed_sites", [])) == sites,
      "... exactly those sites, now listed as suppressed")
check(r["summary"]["hazard_forks"] == 0, "no hazardous fork left")
check(r["summary"]["clean_forks"] == base["summary"]["clean_forks"], "clean forks unchanged")
check(sorted(site_of(f) for f in r["clean_sites"]) == sorted(site_of(f) for f in base["clean_sites"]),
      "clean sites unchanged")
used = {e["entry"]: e for e in r["suppressions"]["entries"]}
check(r["suppressions"]["suppressed_forks"] == 4, "4 forks suppressed")
check(all(used[e]["used"] and used[e]["sites"] == 1 for e in entries),
      "each emitted entry matched its one site")
check(sum(used[e]["forks"] for e in entries) == 4, "their fork counts add up to 4")
never = [e for e in r["suppressions"]["entries"] if not e["used"]]
check(len(never) == 1 and "never_called_anywhere" in never[0]["entry"] and never[0]["line"],
      "the extra entry is listed as never used, with its line")
report("--suppressions", supp, "--fail-on", "hazard", *ALL, want_rc=0)
text = report("--suppressions", supp, *ALL).stdout
check("never used" in text and "suppressed: 4 hazardous forks at 3 call sites" in text,
      "the text report lists the entries, their counts and the unused one")

# Emitted for the MPI run only: silences the MPI site and nothing else.
mpi_supp = write("mpi.supp", report("--emit-suppressions", mpi).stdout)
r = report_json("--suppressions", mpi_supp, *ALL)
mpi_sites = [site_of(f) for f in report_json(mpi)["findings"]]
check([site_of(f) for f in r["suppressed_sites"]] == mpi_sites,
      f"the MPI file silences the MPI site only: {[site_of(f) for f in r['suppressed_sites']]}")
check(sorted(site_of(f) for f in r["findings"]) == sorted(set(sites) - set(mpi_sites)),
      "... and the Python and native sites are still findings")
report("--suppressions", mpi_supp, "--fail-on", "hazard", *ALL, want_rc=3)
# rank= and program= narrow an entry: rank 0 of the two MPI ranks.
rank0 = write("rank0.supp", mpi_supp and open(mpi_supp).read().replace(
    "frame=file:mpi_rank_fork.py", "frame=file:mpi_rank_fork.py program=python3* rank=0"))
r = report_json("--suppressions", rank0, mpi)
check(r["summary"]["hazard_forks"] == 1 and r["suppressions"]["suppressed_forks"] == 1,
      "rank=0 silences rank 0's fork, not rank 1's")

# Forks the shim suppressed at run time (FORKGUARD_SUPPRESSIONS: the event names the entry)
# are counted the same way, with or without the file here.
shimmed = os.path.join(tmp, "shim_suppressed")
shutil.copytree(py, shimmed)
py_entry = [e for e in entries if "start_worker" in e][0]
for n in os.listdir(shimmed):
    p = os.path.join(shimmed, n)
    t = open(p).read().replace('"verdict":"hazard"',
                               '"verdict":"hazard","suppressed":' + json.dumps(py_entry))
    open(p, "w").write(t)
r = report_json(shimmed)
check(r["findings"] == [] and len(r["suppressed_sites"]) == 1,
      "a fork the shim suppressed is not a finding")
check(r["suppressions"]["file"] is None and [(e["line"], e["entry"], e["forks"]) for e in
      r["suppressions"]["entries"]] == [(None, py_entry, 1)],
      "... and is counted against the entry its event names")
r = report_json("--suppressions", supp, shimmed)
check([e["forks"] for e in r["suppressions"]["entries"] if e["entry"] == py_entry] == [1],
      "... the same entry of the file, when it is given too")

# --- bad suppression files: one line each, naming the line and the keys ------------------
bad_cases = {
    "unknown key": ("kind=inherited-rdma frames=func:x\n", 'unknown key "frames"'),
    "unbalanced quote": ('kind=inherited-rdma frame="func:x\n', "unbalanced quote"),
    "empty match": ("kind=inherited-rdma frame=func:\n", "empty match"),
    "empty kind": ("kind= frame=func:x\n", "empty match"),
    "unknown kind": ("kind=segv frame=func:x\n", "unknown verdict kind"),
    "no frame": ("kind=child-segv\n", "entry without frame="),
}
for name, (line, what) in bad_cases.items():
    path = write("bad.supp", "# comment\nkind=* frame=func:ok\n\n" + line)
    p = report("--suppressions", path, *ALL, want_rc=2)
    lines = p.stderr.splitlines()
    check(len(lines) == 1, f"{name}: one error line ({lines})")
    check(bool(lines) and lines[0].startswith(f"forkguard report: {path}:4: ") and what in lines[0]
          and "valid keys: kind=" in lines[0] and "rank=" in lines[0],
          f"{name}: names the file, line 4, the problem and the valid keys: {lines[:1]}")
    check(p.stdout == "", f"{name}: no report printed")

# --- baseline ------------------------------------------------------------------------------
old = write("old.json", json.dumps(report_json(mpi, py)))
report("--baseline", old, "--fail-on", "new-hazard", mpi, py, want_rc=0)
r = report_json("--baseline", old, mpi, py)
check(r["baseline"]["new_sites"] == 0 and r["baseline"]["known_sites"] == 2,
      "a baseline of the same run: nothing new")
r = report_json("--baseline", old, *ALL)
check(r["baseline"]["new_sites"] == 1, "one new site with the native logs added")
new_ids = r["baseline"]["new_finding_ids"]
native_loc = report_json(native)["findings"][0]["location"]
check([f["location"] for f in r["findings"] if f["id"] in new_ids] == [native_loc],
      f"... and it is the native site ({native_loc})")
report("--baseline", old, "--fail-on", "new-hazard", *ALL, want_rc=3)
report("--fail-on", "new-hazard", *ALL, want_rc=2)  # no baseline: a usage error

# A moved line (code inserted above the fork's function) is the same site.
moved = os.path.join(tmp, "moved")
shutil.copytree(py, moved)
for n in os.listdir(moved):
    p = os.path.join(moved, n)
    t = open(p).read()
    t = t.replace('"line":14,"func":"start_worker"', '"line":17,"func":"start_worker"')
    t = t.replace('"line":21,"func":"main"', '"line":24,"func":"main"')
    open(p, "w").write(t)
r = report_json("--baseline", old, mpi, moved)
check(any(f["location"].endswith("multiprocessing_after_rdma.py:17") for f in r["findings"]),
      "the moved logs fork at line 17")
check(r["baseline"]["new_sites"] == 0, "a moved line is not a new site")
report("--baseline", old, "--fail-on", "new-hazard", mpi, moved, want_rc=0)

# --- SARIF ---------------------------------------------------------------------------------
schema = json.load(open(schema_path))
V = jsonschema.Draft4Validator
V.check_schema(schema)
validator = V(schema)


def sarif(*args):
    doc = json.loads(report("--format", "sarif", *args).stdout)
    errors = sorted(validator.iter_errors(doc), key=str)
    check(not errors, f"SARIF of {args} validates against the 2.1.0 schema "
          f"{[e.message for e in errors[:3]]}")
    return doc


def uri_path(uri):
    return urllib.parse.unquote(uri[len("file://"):] if uri.startswith("file://") else uri)


# The validator can fail: a result with a level SARIF does not have.
bad = json.loads(report("--format", "sarif", mpi).stdout)
bad["runs"][0]["results"][0]["level"] = "fatal"
check(any(True for _ in validator.iter_errors(bad)), "the schema rejects a bad SARIF level")

for logs in ([mpi], [py], [native], ALL):
    j = report_json(*logs)
    s = sarif(*logs)
    run = s["runs"][0]
    rules = [x["id"] for x in run["tool"]["driver"]["rules"]]
    check(sorted(rules) == ["child-segv", "inherited-rdma", "parent-corruption"],
          "one rule per verdict kind")
    res = run["results"]
    check(len(res) == len(j["findings"]), f"{logs}: one result per site ({len(res)})")
    for f, x in zip(j["findings"], res):
        check(x["ruleId"] in f["reasons"] and rules[x["ruleIndex"]] == x["ruleId"],
              f"{f['location']}: rule {x['ruleId']} is one of its reasons")
        check(x["properties"]["forks"] == f["count"], f"{f['location']}: count {f['count']}")
        hf = head_frame(f["stack"])
        loc = x["locations"][0]
        if hf is not None:
            pl = loc["physicalLocation"]
            check(uri_path(pl["artifactLocation"]["uri"]) == hf["py_file"]
                  and pl["region"]["startLine"] == hf["py_line"],
                  f"{f['location']}: location is the user's Python file:line")
        else:
            check("logicalLocations" in loc or "physicalLocation" in loc,
                  f"{f['location']}: a location")
        if f.get("init"):
            rel = x.get("relatedLocations", [])
            ih = head_frame(f["init"]["stack"])
            check(len(rel) == 1 and "RDMA first initialized" in rel[0]["message"]["text"],
                  f"{f['location']}: the RDMA init site is a related location")
            if ih is not None:
                check(uri_path(rel[0]["physicalLocation"]["artifactLocation"]["uri"]) ==
                      ih["py_file"] and rel[0]["physicalLocation"]["region"]["startLine"] ==
                      ih["py_line"], f"{f['location']}: ... at the init's Python line")
s = sarif("--suppressions", mpi_supp, "--baseline", old, *ALL)
states = sorted(x.get("baselineState", "") for x in s["runs"][0]["results"])
check(states == ["new", "new", "unchanged"], f"SARIF: baselineState per result {states}")
check(sum(1 for x in s["runs"][0]["results"] if x.get("suppressions")) == 1,
      "SARIF: the suppressed site carries a suppression")

# --- JUnit ---------------------------------------------------------------------------------
j = report_json(*ALL)
x = ET.fromstring(report("--format", "junit", *ALL).stdout)
cases = x.findall("./testsuite/testcase")
check(len(cases) == len(j["findings"]) + len(j["clean_sites"]), "JUnit: one test case per site")
fails = [c for c in cases if c.find("failure") is not None]
check(len(fails) == len(j["findings"]) == int(x.get("failures")),
      "JUnit: a failure per hazardous site, counted in the suite")
check(all(c.get("name").startswith(f["location"]) for c, f in zip(fails, j["findings"])),
      "JUnit: one failure per finding, in findings order, named by its location")
for c, f in zip(fails, j["findings"]):
    hf = head_frame(f["stack"])
    check(c.find("failure").get("type") in f["reasons"], f"JUnit {c.get('name')}: type is a reason")
    check(f"×{f['count']}" in c.find("failure").get("message") or f["count"] == 1,
          f"JUnit {c.get('name')}: count in the message")
    if hf is not None:
        check(c.get("file") == hf["py_file"] and c.get("line") == str(hf["py_line"]),
              f"JUnit {c.get('name')}: file and line")
xb = ET.fromstring(report("--format", "junit", "--baseline", old, *ALL).stdout)
check(xb.get("failures") == "1" and xb.get("skipped") == "2",
      "JUnit with the baseline: the new site fails, the known ones are skipped")

# --- GitHub workflow commands --------------------------------------------------------------
out = report("--format", "github", *ALL).stdout.splitlines()
check(len(out) == len(j["findings"]), "GitHub: one annotation per hazardous site")
cmd = re.compile(r"^::(error|warning|notice) ((?:[a-zA-Z]+=[^,:]*)(?:,[a-zA-Z]+=[^,:]*)*)::(.+)$")
for line, f in zip(out, j["findings"]):
    m = cmd.match(line)
    check(m is not None, f"GitHub: a workflow command: {line[:120]}")
    if not m:
        continue
    props = dict(kv.split("=", 1) for kv in m.group(2).split(","))
    want = "error" if ({"child-segv", "parent-corruption"} & set(f["reasons"])) else "warning"
    check(m.group(1) == want, f"GitHub {f['location']}: ::{want}")
    check("title" in props and props["title"].startswith("forkguard "), "GitHub: title=")
    hf = head_frame(f["stack"])
    if hf is not None:
        check(urllib.parse.unquote(props.get("file", "")) == hf["py_file"]
              and props.get("line") == str(hf["py_line"]),
              f"GitHub {f['location']}: file= and line= of the user's line")
    check(f"×{f['count']}" in m.group(3) or f["count"] == 1, f"GitHub {f['location']}: count")
# Inside a GitHub workflow, paths under $GITHUB_WORKSPACE are made relative to it.
pf = head_frame(j["findings"][0]["stack"])
ws = os.path.dirname(pf["py_file"])
gh = subprocess.run([fg, "report", "--format", "github", mpi], capture_output=True, text=True,
                    env=dict(os.environ, GITHUB_WORKSPACE=ws + "/")).stdout
check(f"file={os.path.basename(pf['py_file'])},line={pf['py_line']}," in gh,
      f"GitHub: file= relative to GITHUB_WORKSPACE: {gh[:100]}")
sr = json.loads(subprocess.run([fg, "report", "--format", "sarif", mpi], capture_output=True,
                               text=True, env=dict(os.environ, GITHUB_WORKSPACE=ws)).stdout)
check(sr["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
      == os.path.basename(pf["py_file"]), "SARIF: uri relative to GITHUB_WORKSPACE")

ob = report("--format", "github", "--baseline", old, *ALL).stdout.splitlines()
check(sum(l.startswith("::notice ") for l in ob) == 2 and
      sum(l.startswith(("::error ", "::warning ")) for l in ob) == 1,
      "GitHub with the baseline: known sites are notices, the new one an error/warning")

# --- the JSON report's new members validate against its schema ------------------------------
rs = json.load(open(report_schema_path))
RV = jsonschema.Draft202012Validator
RV.check_schema(rs)
for args in (["--suppressions", supp], ["--suppressions", mpi_supp, "--baseline", old],
             ["--baseline", old]):
    doc = report_json(*args, *ALL)
    errors = [e.message for e in RV(rs).iter_errors(doc)]
    check(not errors, f"JSON report with {args[::2]} validates against docs/report-schema.json "
          f"{errors[:3]}")
    check(all(k in doc for k in ("suppressions" if "--suppressions" in args else "baseline",)),
          f"... and has its {args[0][2:]} member")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
