#!/bin/bash
# bench/shim.sh (scripts/bench shim) - what libforkguard.so costs, measured side
# by side: every case runs REPS times alternating without / with the shim, each
# run reports its median; the ratio of the medians of those medians is printed.
#   host:   (a) fork+_exit+waitpid small and with 256 MiB touched, (d) a libc path
#           the shim does not watch
#   guest:  (b) fork with live RDMA resources on rxe0 (warn mode, once per site,
#           log on), (c) ibv_reg_mr+ibv_dereg_mr of 4 KiB and 4 MiB on rxe0
# Usage: scripts/bench shim [--reps N] [--host-only]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=9
HOST_ONLY=0
while [ $# -gt 0 ]; do
	case "$1" in
		--reps) REPS=$2; shift ;;
		--host-only) HOST_ONLY=1 ;;
		*) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
bazel build --noshow_progress -c opt //bench:shim_bench //shim:libforkguard.so >/dev/null 2>&1 ||
	bazel build --noshow_progress -c opt //bench:shim_bench //shim:libforkguard.so
BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
JOB=$(mktemp /tmp/forkguard-bench.XXXXXX.sh)
trap 'rm -f "$JOB"' EXIT
cat > "$JOB" <<EOS
#!/bin/bash
set -euo pipefail
B=$BIN/bench/shim_bench
SHIM=$BIN/shim/libforkguard.so
REPS=$REPS
EOS
cat >> "$JOB" <<'EOS'
LOGDIR=$(mktemp -d /tmp/fg-bench-log.XXXXXX)
# case-name target-ratio args...
measure() {
	local name=$1 target=$2; shift 2
	local base=() shim=() i
	for ((i = 0; i < REPS; i++)); do
		base+=("$("$B" "$@" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')")
		shim+=("$(LD_PRELOAD=$SHIM FORKGUARD_MODE=warn FORKGUARD_LOG=$LOGDIR "$B" "$@" 2>/dev/null |
			sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')")
	done
	local mb ms
	mb=$(printf '%s\n' "${base[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	ms=$(printf '%s\n' "${shim[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	awk -v n="$name" -v b="$mb" -v s="$ms" -v t="$target" -v r="$REPS" 'BEGIN {
		ratio = s / b
		printf "%-28s baseline %10.1f us   shim %10.1f us   ratio %.3fx   target <= %s   %s  (median of %d runs)\n",
			n, b / 1000, s / 1000, ratio, t, (ratio <= t ? "met" : "MISSED"), r }'
}
case "${1:-host}" in
	host)
		measure "(a) fork small" 1.15 fork-small 2000
		measure "(a) fork 256 MiB touched" 1.05 fork-256m 100
		measure "(d) unwatched libc path" 1.02 libc 20000 ;;
	guest)
		measure "(b) fork with live RDMA" 1.15 fork-rdma 100 "$RXE_DEV"
		measure "(c) reg+dereg 4 KiB" 1.10 reg 4096 2000 "$RXE_DEV"
		measure "(c) reg+dereg 4 MiB" 1.02 reg 4194304 100 "$RXE_DEV" ;;
esac
rm -rf "$LOGDIR"
EOS
chmod +x "$JOB"
echo "== scripts/bench shim: host ($(nproc) cores, $(uname -r)) =="
"$JOB" host
if [ "$HOST_ONLY" = 0 ]; then
	echo "== scripts/bench shim: Soft-RoCE guest (rxe0, TCG) =="
	scripts/rxe-vm -- "$JOB" guest
fi
