#!/bin/bash
# bench/report.sh (scripts/bench report) - `forkguard report` at job scale, side by side in
# one run over the same generated logs (forkguard.event/2, as the shim writes them):
#   cat > /dev/null                (the I/O floor; run first, it warms the page cache)
#   python3 json.loads loop        (/usr/bin/python3, line by line, every file)
#   forkguard report --format text, json, html and trace (symbolizing)
# and prints wall time, peak RSS (getrusage of each child) and the ratios against the Python
# loop and cat, then checks that the report's counts are the generator's truth.
# The jobs have the shapes of a trainer whose DataLoader forks its workers every epoch: every
# process forks (8 workers an epoch, each child a distinct pid without a log), each rank's
# first forks make pool workers that have logs of their own, padded with registrations and
# other verbs calls to the lines asked.
# Default: 4096 processes (512 ranks x 8) x 1000 lines with 200 forks per process, the same
# with 800 forks per process, and the flatness series: 512 processes (64 ranks x 8) with 100,
# 200, 400 and 800 forks each (peak RSS must not grow with forks), each against the Python
# loop and cat; then a summary of every job and format. About 10 minutes on 2 busy cores
# (generating the jobs included; --keep DIR keeps them for the next run).
# --quick runs only the first job (--processes, --forks ... shape it); --flat only the series.
# forkguard runs under an address-space limit (--as-limit MiB, default 4096).
# Usage: scripts/bench report [--quick | --flat] [--processes N] [--procs-per-rank N]
#          [--hosts N] [--events N] [--forks N] [--sites N] [--as-limit MiB] [--keep DIR]
#          [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
PROCS=4096 PPR=8 HOSTS=64 EVENTS=1000 FORKS=200 SITES=16 AS_MIB=4096 KEEP= THREADS= FULL=1
while [ $# -gt 0 ]; do
	case "$1" in
		--full) FULL=1; shift; continue ;;  # the default (kept for old command lines)
		--quick) FULL=0; shift; continue ;;
		--flat) FULL=2; shift; continue ;;
		--processes) PROCS=$2; shift ;;
		--procs-per-rank) PPR=$2; shift ;;
		--hosts) HOSTS=$2; shift ;;
		--events) EVENTS=$2; shift ;;
		--forks) FORKS=$2; shift ;;
		--sites) SITES=$2; shift ;;
		--as-limit) AS_MIB=$2; shift ;;
		--keep) KEEP=$2; shift ;;
		--threads) THREADS=$2; shift ;;
		*) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_build_opt //cli:forkguard //cli:job_generator_main
bench_root "$KEEP" fg-bench-report
export FG="$BIN/cli/forkguard" GEN="$BIN/cli/job_generator_main" ROOT AS_MIB THREADS FULL \
	PROCS PPR HOSTS EVENTS FORKS SITES
# Not exec: the EXIT trap removes a temporary ROOT after it.
/usr/bin/python3 - <<'PY'
import json, os, resource, subprocess, sys, time
E = os.environ
T_START = time.monotonic()
ROOT = E["ROOT"]
PYLOOP = r'''
import json, os, sys
n = bad = 0
for root, _, files in os.walk(sys.argv[1]):
    for name in sorted(files):
        with open(os.path.join(root, name), "rb") as f:
            for line in f:
                try:
                    json.loads(line); n += 1
                except ValueError:
                    bad += 1
print(n, bad)
'''

def job(name, procs, ppr, hosts, events, forks):
    """Generates a job once (kept with --keep) and returns its directory and truth."""
    d = os.path.join(ROOT, name)
    if not os.path.exists(os.path.join(d, "truth.json")):
        os.makedirs(os.path.join(d, "logs"), exist_ok=True)
        ranks = procs // ppr
        with open(os.path.join(d, "truth.json.tmp"), "w") as out:
            subprocess.run([E["GEN"], os.path.join(d, "logs"), "--ranks", str(ranks),
                            "--procs-per-rank", str(ppr), "--hosts", str(hosts),
                            "--hazard-ranks", str(ranks * 3 // 4), "--events-per-process",
                            str(events), "--sites", E["SITES"], "--forks-per-process", str(forks)],
                           stdout=out, check=True)
        os.rename(os.path.join(d, "truth.json.tmp"), os.path.join(d, "truth.json"))
    return d, json.load(open(os.path.join(d, "truth.json")))

def run(name, argv, out, as_mib=None):
    def limit():
        if as_mib:
            b = int(as_mib) << 20
            resource.setrlimit(resource.RLIMIT_AS, (b, b))
    t0 = time.monotonic()
    with open(out, "wb") as o:
        p = subprocess.Popen(argv, stdout=o, stderr=subprocess.PIPE, preexec_fn=limit)
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace").strip()
    return dict(name=name, wall=wall, rss=ru.ru_maxrss / 1024,
                rc=os.waitstatus_to_exitcode(status), err=err[-300:], out=out)

def fg(fmt, logs, out):
    argv = [E["FG"], "report", "--format", fmt] + (["--threads", E["THREADS"]] if E["THREADS"] else []) + [logs]
    return run(f"forkguard --format {fmt}", argv, out, E["AS_MIB"])

ok = True
SUMMARY = []  # (job, format, wall, x python, x cat time, peak RSS MiB, output MB)

def bench(name, d, truth, formats=("text", "json", "html", "trace"), with_baselines=True):
    global ok
    logs = os.path.join(d, "logs")
    files = sum(len(f) for _, _, f in os.walk(logs))
    size = sum(os.path.getsize(os.path.join(r, n)) for r, _, fs in os.walk(logs) for n in fs)
    res = []
    if with_baselines:
        res.append(run("cat > /dev/null", ["/bin/sh", "-c", f"find {logs} -type f -print0 | xargs -0 cat"], "/dev/null"))
        res.append(run("python3 json.loads", ["/usr/bin/python3", "-c", PYLOOP, logs], os.path.join(d, "py.txt")))
    ext = {"text": "txt", "json": "json", "html": "html", "trace": "trace.json"}
    for fmt in formats:
        res.append(fg(fmt, logs, os.path.join(d, "report." + ext[fmt])))
    print(f"\n== {name}: {files} files, {size/1e6:.0f} MB, truth {truth['processes']} processes, "
          f"{truth['hosts']} hosts, {truth['hazard_forks']} hazard forks ({truth['epoch_forks']} at the epoch site)")
    base = {r["name"]: r for r in res}
    cat, py = base.get("cat > /dev/null"), base.get("python3 json.loads")
    print(f"{'':26} {'wall s':>7} {'peak RSS MiB':>13} {'MB/s':>7} {'x python':>9} {'x cat time':>11}  exit  out MB")
    for r in res:
        mbs = size / 1e6 / r["wall"] if r["wall"] > 0 else 0
        vs_py = f"{py['wall'] / r['wall']:.2f}" if py and r is not py and r is not cat else ""
        vs_cat = f"{r['wall'] / cat['wall']:.1f}" if cat and r is not cat else ""
        out_mb = os.path.getsize(r["out"]) / 1e6 if r["out"] != "/dev/null" else 0
        print(f"{r['name']:26} {r['wall']:7.2f} {r['rss']:13.1f} {mbs:7.0f} {vs_py:>9} {vs_cat:>11}  {r['rc']:4}  {out_mb:6.1f}")
        if r["rc"] != 0:
            ok = False
            if r["err"]:
                print(f"    stderr: {r['err']}")
    for r in res:
        if r is not cat and r is not py:
            SUMMARY.append((name, r["name"].split()[-1], r["wall"], py["wall"] / r["wall"] if py else None,
                            r["wall"] / cat["wall"] if cat else None, r["rss"],
                            os.path.getsize(r["out"]) / 1e6))
    j = base.get("forkguard --format json")
    if j and j["rc"] == 0:
        s = json.load(open(j["out"]))["summary"]
        good = (s["processes"] == truth["processes"] and len(s["hosts"]) == truth["hosts"]
                and s["hazard_forks"] == truth["hazard_forks"] and s["hazard_sites"] == truth["hazard_sites"]
                and s["children_segv"] == truth["segv"])
        ok = ok and good
        print(f"findings: {s['processes']} processes, {len(s['hosts'])} hosts, {s['forks']} forks, "
              f"{s['hazard_forks']} hazardous at {s['hazard_sites']} sites, {s['children_segv']} children SIGSEGV, "
              f"{s.get('forks_sampled', {}).get('listed', s['forks'])} forks listed - "
              f"{'match' if good else 'MISMATCH'} the truth")
    return res

P, PPR, H, EV, F = (int(E[k]) for k in ("PROCS", "PPR", "HOSTS", "EVENTS", "FORKS"))
print(f"load average: {os.getloadavg()[0]:.2f} (nproc {os.cpu_count()})")
if E["FULL"] != "2":
    d, t = job(f"p{P}-f{F}", P, PPR, H, EV, F)
    bench(f"{P} processes x {EV} lines, {F} forks each", d, t)
if E["FULL"] == "1":
    d, t = job(f"p{P}-f800", P, PPR, H, EV, 800)
    bench(f"{P} processes x {EV} lines, 800 forks each", d, t)
if E["FULL"] in ("1", "2"):
    rows = []
    for forks in (100, 200, 400, 800):
        d, t = job(f"p512-f{forks}", 512, 8, 8, EV, forks)
        res = bench(f"512 processes x {EV} lines, {forks} forks each", d, t)
        s = json.load(open(os.path.join(d, "report.json")))["summary"]
        rows.append(f"{forks:>14} {s['forks']:>9} " +
                    " ".join(f"{r['rss']:10.1f}" for r in res if r["name"].startswith("forkguard")))
    print("\n== flatness: 512 processes (64 ranks x 8), peak RSS against forks per process")
    print(f"{'forks/process':>14} {'forks':>9} " + " ".join(f"{f + ' MiB':>10}" for f in ("text", "json", "html", "trace")))
    print("\n".join(rows))
print("\n== summary: forkguard report against the Python loop (x python: how many times faster) "
      "and cat (x cat time: how many times slower)")
print(f"{'job':42} {'format':7} {'wall s':>7} {'x python':>9} {'x cat time':>11} {'peak RSS MiB':>13} {'out MB':>7}")
for job_name, fmt, wall, vs_py, vs_cat, rss, out_mb in SUMMARY:
    print(f"{job_name:42} {fmt:7} {wall:7.2f} {vs_py if vs_py is not None else 0:9.2f} "
          f"{vs_cat if vs_cat is not None else 0:11.1f} {rss:13.1f} {out_mb:7.1f}")
print(f"\nload average after: {os.getloadavg()[0]:.2f}; the bench took {time.monotonic() - T_START:.0f} s")
sys.exit(0 if ok else 1)
PY
