#!/bin/bash
# The JSON report validates against docs/report-schema.json (JSON Schema 2020-12,
# checked with python3-jsonschema) and carries the generated job's true counts:
# 64 processes, the worker-pool call site grouped xN over the right processes.
# A job in fix mode (forks made safe) validates too, with its made_safe counts.
# Usage: report_schema_test.sh FORKGUARD JOB_GENERATOR SCHEMA CORPUS_SEED_FILE FIX_MODE_LOG
set -euo pipefail
fg=$1 gen=$2 schema=$3 corpus=$(dirname "$4") fix_mode=$(dirname "$5")
py=/usr/bin/python3
tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/schema.XXXXXX")
"$py" -c 'import jsonschema' 2>/dev/null || {
	echo "FAIL: python3-jsonschema is not installed (scripts/setup installs it)"; exit 1; }

"$gen" "$tmp/job" > "$tmp/truth.json"
"$fg" report --format json "$tmp/job" > "$tmp/job.json"
rc=0; "$fg" report --format json --fail-on hazard "$tmp/job" > /dev/null || rc=$?
[ "$rc" = 3 ] || { echo "FAIL: --fail-on hazard exited $rc, want 3"; exit 1; }
"$gen" "$tmp/junk" --junk > "$tmp/junk_truth.json"
"$fg" report --format json "$tmp/junk" > "$tmp/junk.json"
"$fg" report --format json "$corpus" "$tmp/missing" > "$tmp/corpus.json"
mkdir "$tmp/empty"
"$fg" report --format json "$tmp/empty" > "$tmp/empty.json"
"$fg" report --format json --no-symbolize "$fix_mode" > "$tmp/fixed.json"

"$py" - "$schema" "$tmp" <<'PY'
import copy, json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
tmp = sys.argv[2]
V = jsonschema.Draft202012Validator
V.check_schema(schema)
v = V(schema)
def valid(name):
    doc = json.load(open(f"{tmp}/{name}.json"))
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
    for e in errs[:5]:
        print(f"FAIL: {name}.json: {list(e.path)}: {e.message}")
    assert not errs, f"{name}.json does not validate"
    print(f"ok: {name}.json validates")
    return doc
job = valid("job"); junk = valid("junk"); corpus = valid("corpus"); empty = valid("empty")
fixed = valid("fixed")
assert "fixed_forks" not in job["summary"] and "made_safe" not in job["summary"], job["summary"]
assert fixed["summary"]["fixed_forks"] == 2 == fixed["summary"]["made_safe"]["forks"], fixed["summary"]
assert fixed["findings"][0]["made_safe"]["withheld"]["kinds"] == ["hugetlb"], fixed["findings"][0]

def check(doc, truth, label):
    t = json.load(open(f"{tmp}/{truth}"))
    s = doc["summary"]
    got = {
        "processes": s["processes"], "hosts": len(s["hosts"]), "hazard_forks": s["hazard_forks"],
        "hazard_sites": s["hazard_sites"], "segv": s["children_segv"],
        "worker_site_hazard": doc["findings"][0]["count"],
        "worker_site_hazard_processes": doc["findings"][0]["process_count"],
        "worker_site_clean": doc["clean_sites"][0]["count"],
        "helper_hazard": doc["findings"][1]["count"],
        "exec_children": doc["findings"][1]["children"]["exec"],
    }
    for k, want in got.items():
        assert t[k] == want, f"{label}: {k}: report says {want}, the job has {t[k]}"
    assert t["processes"] == 64, t
    assert doc["findings"][0]["ranks"] == [0, 1, 2, 3, 4, 5], doc["findings"][0]["ranks"]
    assert doc["findings"][0]["location"] == "train.py:42"
    print(f"ok: {label}: counts match the generated job ({t['processes']} processes, "
          f"x{got['worker_site_hazard']} at the worker site in {got['worker_site_hazard_processes']} processes)")
check(job, "truth.json", "job")
# Every fork is listed with its verdict and points at its site.
forks = job["forks"]
assert len(forks) == job["summary"]["forks"], len(forks)
assert sum(f["verdict"] == "hazard" for f in forks) == job["summary"]["hazard_forks"]
ids = {g["id"]: g for g in job["findings"] + job["clean_sites"]}
for f in forks:
    assert ids[f["site_id"]]["verdict"] == f["verdict"], f
assert sum(f["site_id"] == 1 for f in forks) == job["findings"][0]["count"]
check(junk, "junk_truth.json", "junk job")
assert len(junk["notes"]) == 2 and junk["summary"]["lines_skipped"] == 2, junk["notes"]
assert any("missing" in n["where"] for n in corpus["notes"]), corpus["notes"]
assert empty["summary"]["processes"] == 0 and len(empty["notes"]) == 1

# The validator is not vacuous: broken reports are rejected.
bad = []
b = copy.deepcopy(job); del b["summary"]; bad.append(b)
b = copy.deepcopy(job); b["findings"][0]["count"] = 0; bad.append(b)
b = copy.deepcopy(job); b["findings"][0]["stack"][0]["off"] = "12"; bad.append(b)
b = copy.deepcopy(job); b["schema"] = "forkguard.report/2"; bad.append(b)
b = copy.deepcopy(job); del b["findings"][0]["init"]; bad.append(b)
b = copy.deepcopy(fixed); b["summary"]["made_safe"]["copied"]["kinds"] = ["heap"]; bad.append(b)
b = copy.deepcopy(fixed); del b["findings"][0]["made_safe"]["failed_ranges"]; bad.append(b)
for i, b in enumerate(bad):
    assert not v.is_valid(b), f"mutation {i} was accepted"
print(f"ok: {len(bad)} broken reports rejected")
PY
echo PASS
