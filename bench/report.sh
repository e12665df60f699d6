#!/bin/bash
# bench/report.sh (scripts/bench report) - `forkguard report` at job scale,
# side by side in one run over the same generated logs:
#   forkguard report --format json   (the report, symbolizing)
#   python3 json.loads loop          (/usr/bin/python3, line by line, every file)
#   cat > /dev/null                  (the I/O floor; run first, it warms the page cache)
# and prints wall time, peak RSS (getrusage of each child) and the ratios, then
# checks that the report's counts are the generator's truth. forkguard runs
# under an address-space limit (--as-limit, default 4 GiB): a report that needs
# more ends in bad_alloc instead of taking the shared machine's memory.
# Usage: scripts/bench report [--processes N] [--procs-per-rank N] [--hosts N]
#          [--events N] [--sites N] [--as-limit MiB] [--keep DIR] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
PROCS=4096 PPR=8 HOSTS=64 EVENTS=85 SITES=16 AS_MIB=4096 KEEP= THREADS=
while [ $# -gt 0 ]; do
	case "$1" in
		--processes) PROCS=$2; shift ;;
		--procs-per-rank) PPR=$2; shift ;;
		--hosts) HOSTS=$2; shift ;;
		--events) EVENTS=$2; shift ;;
		--sites) SITES=$2; shift ;;
		--as-limit) AS_MIB=$2; shift ;;
		--keep) KEEP=$2; shift ;;
		--threads) THREADS=$2; shift ;;
		*) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
RANKS=$((PROCS / PPR))
bazel build --noshow_progress -c opt //cli:forkguard //cli:job_generator_main >/dev/null 2>&1 ||
	bazel build --noshow_progress -c opt //cli:forkguard //cli:job_generator_main
BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
if [ -n "$KEEP" ]; then
	DIR=$KEEP
else
	DIR=$(mktemp -d /tmp/fg-bench-report.XXXXXX)
	trap 'rm -rf "$DIR"' EXIT
fi
if [ ! -f "$DIR/truth.json" ]; then
	mkdir -p "$DIR/logs"
	"$BIN/cli/job_generator_main" "$DIR/logs" --ranks "$RANKS" --procs-per-rank "$PPR" \
		--hosts "$HOSTS" --hazard-ranks $((RANKS * 3 / 4)) --events-per-process "$EVENTS" \
		--sites "$SITES" > "$DIR/truth.json.tmp"
	mv "$DIR/truth.json.tmp" "$DIR/truth.json"
fi
export FG="$BIN/cli/forkguard" DIR AS_MIB THREADS
exec /usr/bin/python3 - <<'PY'
import json, os, resource, subprocess, sys, time
D = os.environ["DIR"]; logs = f"{D}/logs"
files = sum(len(f) for _, _, f in os.walk(logs))
size = sum(os.path.getsize(os.path.join(r, n)) for r, _, fs in os.walk(logs) for n in fs)
lines = 0
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
    rc = os.waitstatus_to_exitcode(status)
    return dict(name=name, wall=wall, rss=ru.ru_maxrss / 1024, rc=rc, err=err[-300:])
env_threads = os.environ.get("THREADS")
fg = [os.environ["FG"], "report", "--format", "json"] + (["--threads", env_threads] if env_threads else []) + [logs]
load = os.getloadavg()
res = [run("cat > /dev/null", ["/bin/sh", "-c", f"find {logs} -type f -print0 | xargs -0 cat"], "/dev/null"),
       run("forkguard report", fg, f"{D}/report.json", os.environ["AS_MIB"]),
       run("python3 json.loads", ["/usr/bin/python3", "-c", PYLOOP, logs], f"{D}/py.txt")]
load2 = os.getloadavg()
truth = json.load(open(f"{D}/truth.json"))
print(f"job: {files} files, {size/1e6:.0f} MB, truth {truth['processes']} processes, "
      f"{truth['hosts']} hosts, {truth['hazard_forks']} hazard forks")
print(f"load average before/after: {load[0]:.2f} / {load2[0]:.2f} (nproc {os.cpu_count()})")
py_lines = open(f"{D}/py.txt").read().split()
print(f"{'':22} {'wall s':>8} {'peak RSS MiB':>13} {'MB/s':>8}  exit")
for r in res:
    mbs = size / 1e6 / r["wall"] if r["wall"] > 0 else 0
    print(f"{r['name']:22} {r['wall']:8.2f} {r['rss']:13.1f} {mbs:8.0f}  {r['rc']}")
    if r["rc"] != 0 and r["err"]:
        print(f"    stderr: {r['err']}")
cat, fgr, py = res
if fgr["rc"] == 0:
    print(f"forkguard throughput vs python: {py['wall']/fgr['wall']:.2f}x; "
          f"vs cat: {fgr['wall']/cat['wall']:.1f}x cat's time; "
          f"RSS: {fgr['rss']/max(py['rss'],1):.1f}x python's, {fgr['rss']*1048576/size:.3f}x the input")
    rep = json.load(open(f"{D}/report.json"))
    s = rep["summary"]
    ok = (s["processes"] == truth["processes"] and len(s["hosts"]) == truth["hosts"]
          and s["hazard_forks"] == truth["hazard_forks"] and s["hazard_sites"] == truth["hazard_sites"]
          and s["children_segv"] == truth["segv"])
    print(f"findings: {s['processes']} processes, {len(s['hosts'])} hosts, {s['hazard_forks']} hazard forks "
          f"at {s['hazard_sites']} sites, {s['children_segv']} children SIGSEGV, lines used {s['lines_used']} "
          f"(python parsed {py_lines[0] if py_lines else '?'}) - {'match' if ok else 'MISMATCH'} the truth")
    sys.exit(0 if ok else 1)
print("forkguard report failed")
sys.exit(1)
PY
