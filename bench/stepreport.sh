#!/bin/bash
# bench/stepreport.sh (scripts/bench stepreport) - the Slurm plugin's step-end report on a
# site's shared log root (log=ROOT/%j/%h), side by side in one run:
#   job dir   what the plugin runs now: `forkguard report --job J --owner UID` over ROOT/J
#             only (the template expanded up to its %j component)
#   whole root  what it ran before: `forkguard report --job J` over all of ROOT
# on a root holding the victim's job (UID 1000) and N other jobs' logs (default 10,000, each
# of other users), first as it is, then with planted files: a hostile log (fork lines with
# timestamps at the int64 extremes, the victim's job id) and a log named with a 19-digit pid,
# both in the root and in the victim's job directory (owned by uid 65534), and symlinks to /
# in both places. Prints the wall time of each and the ratio, and checks that the job-dir
# report is byte-identical before and after the planting (the victim's report untouched).
# Needs root (it gives files to other users).
# Usage: scripts/bench stepreport [--jobs N] [--keep DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=10000 KEEP=
while [ $# -gt 0 ]; do
	case "$1" in
		--jobs) JOBS=$2; shift ;;
		--keep) KEEP=$2; shift ;;
		*) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "bench/stepreport.sh: needs root (files of other users)" >&2; exit 2; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_build_opt //cli:forkguard //cli:job_generator_main
bench_root "$KEEP" fg-bench-step
export FG="$BIN/cli/forkguard" GEN="$BIN/cli/job_generator_main" ROOT JOBS
# Not exec: the EXIT trap removes a temporary ROOT after it.
/usr/bin/python3 - <<'PY'
import json, os, subprocess, sys, time
E = os.environ
FG, GEN, ROOT, JOBS = E["FG"], E["GEN"], E["ROOT"], int(E["JOBS"])
VICTIM, VICTIM_UID = "700001", 1000
logs = os.path.join(ROOT, "fg")  # the shared log root, 1777 as docs/launchers.md says
os.makedirs(logs, exist_ok=True)
os.chmod(logs, 0o1777)

def chown_tree(d, uid):
    for r, dirs, files in os.walk(d):
        os.lchown(r, uid, uid)
        for f in files:
            os.lchown(os.path.join(r, f), uid, uid)

def generate(job, ranks, procs_per_rank, uid):
    d = os.path.join(logs, job)
    if os.path.exists(d):
        return d
    tmp = d + ".tmp"
    subprocess.run([GEN, tmp, "--job", job, "--ranks", str(ranks), "--procs-per-rank",
                    str(procs_per_rank), "--hazard-ranks", str(ranks), "--hosts", "2"],
                   check=True, stdout=subprocess.DEVNULL)
    chown_tree(tmp, uid)
    os.chmod(tmp, 0o700)
    os.rename(tmp, d)
    return d

t = time.monotonic()
victim = generate(VICTIM, 4, 2, VICTIM_UID)
# The other jobs: one generated, copied with its job id replaced (a generator run each
# would take minutes).
template = generate("1", 1, 2, 2000)
files = []
for r, _, fs in os.walk(template):
    for f in fs:
        p = os.path.join(r, f)
        files.append((os.path.relpath(p, template), open(p, "rb").read()))
made = 0
for i in range(2, JOBS + 1):
    d = os.path.join(logs, str(i))
    if os.path.exists(d):
        continue
    uid = 2000 + i % 50
    for rel, data in files:
        p = os.path.join(d, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data.replace(b'"job":"1"', b'"job":"%d"' % i))
    chown_tree(d, uid)
    made += 1
nfiles = sum(len(fs) for _, _, fs in os.walk(logs))
print(f"stepreport: {JOBS} other jobs + the victim's, {nfiles} files under {logs} "
      f"(made {made} jobs in {time.monotonic() - t:.1f} s)")

def run(args):
    t = time.monotonic()
    p = subprocess.run([FG, "report"] + args, capture_output=True)
    return time.monotonic() - t, p.returncode, p.stdout, p.stderr

job_dir = ["--job", VICTIM, "--owner", str(VICTIM_UID), "--format", "html", "--fail-on",
           "never", "--", os.path.join(logs, VICTIM)]
whole = ["--job", VICTIM, "--format", "html", "--fail-on", "never", "--", logs]
before = run(job_dir)
json_before = run(job_dir[:4] + ["--format", "json", "--", os.path.join(logs, VICTIM)])

# The planting: as another user (uid 65534), in the root and in the victim's job directory.
hostile = (b'{"schema":"forkguard.event/1","event":"fork","pid":7,"job":"%s",'
           b'"ts_ns":-9223372036854775807,"verdict":"hazard"}\n'
           b'{"schema":"forkguard.event/1","event":"fork","pid":7,"job":"%s",'
           b'"ts_ns":9223372036854775807,"verdict":"hazard"}\n') % (VICTIM.encode(), VICTIM.encode())
planted = []
for d in (logs, victim):
    for name, data in (("forkguard.evil.7.1.jsonl", hostile),
                       ("forkguard.x.9999999999999999999.1.jsonl", hostile)):
        p = os.path.join(d, name)
        with open(p, "wb") as f:
            f.write(data)
        os.chown(p, 65534, 65534)
        planted.append(p)
    link = os.path.join(d, "evil-root")
    if not os.path.lexists(link):
        os.symlink("/", link)
    os.lchown(link, 65534, 65534)
    planted.append(link)

after = run(job_dir)
json_after = run(job_dir[:4] + ["--format", "json", "--", os.path.join(logs, VICTIM)])
old = run(whole)
print()
print(f"{'case':<46} {'wall s':>8} {'exit':>5}")
print(f"{'job dir, --owner (now), before planting':<46} {before[0]:8.3f} {before[1]:5d}")
print(f"{'job dir, --owner (now), after planting':<46} {after[0]:8.3f} {after[1]:5d}")
print(f"{'whole root (before), after planting':<46} {old[0]:8.3f} {old[1]:5d}")
print(f"ratio: job dir / whole root = {after[0] / old[0]:.4f} ({old[0] / after[0]:.0f}x faster)")
def findings(out):
    """The JSON report without what describes the input (notes, files read, lines skipped)."""
    doc = json.loads(out)
    notes = doc.pop("notes", [])
    for k in ("files_read", "lines_skipped", "lines_used"):
        doc.get("summary", {}).pop(k, None)
    return doc, notes
fb, _ = findings(json_before[2])
fa, notes = findings(json_after[2])
same = fa == fb
print(f"victim's report (json, notes aside) identical before and after planting: "
      f"{'yes' if same else 'NO'}")
skipped = [p for p in planted if p.startswith(victim + "/") and
           any(n.get("where", "").startswith(p) or p in str(n) for n in notes)]
print(f"planted entries in the victim's directory skipped with a note: {len(skipped)} of 3")
contaminated = b"forkguard.evil.7.1.jsonl" in old[2]
print(f"whole-root report (before) names the planted log: {'yes' if contaminated else 'no'}")
for p in planted:
    os.unlink(p)
if not same or len(skipped) != 3 or before[1] != 0 or after[1] != 0:
    print("stepreport: FAILED: the victim's report changed or failed", file=sys.stderr)
    sys.exit(1)
PY
