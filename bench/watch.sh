#!/bin/bash
# bench/watch.sh (scripts/bench watch) - what `forkguard watch` costs the node, measured side
# by side in one boot of the Soft-RoCE guest (the watcher loads BPF programs: root, a kernel
# with BTF): every case runs REPS rounds alternating without / with the watcher running
# (every other round the other way round), each run reports its median; the ratio of the
# medians of those medians is printed and judged, then the median of the per-round ratios.
#   (1) sh running 300 fork+exec of /bin/true (shim_bench start): target <= 1.03
#   (2) ibv_reg_mr + ibv_dereg_mr of 4 KiB on rxe0 (shim_bench reg): target <= 1.02
#   (3) the fork storm (16 threads forking while 4 register, cli/testdata/fork_storm) under
#       the watcher: the watcher's own CPU time (user + system of its process), the BPF
#       programs' run time (kernel.bpf_stats_enabled), and the records lost, reported
# The guest's clock is the TSC (tsc=reliable), as on a node: under TCG the guest's kernel finds
# its vCPUs' TSCs unsynchronized and falls back to the HPET, whose every read is an emulated
# device access of microseconds, charged to each watcher record's timestamp (and to every
# clock_gettime of the benchmark itself). --guest-clock default keeps the guest's own choice.
# Usage: scripts/bench watch [--reps N] [--guest-clock tsc|default]
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=7
CLOCK=tsc
while [ $# -gt 0 ]; do
	case "$1" in
		--reps) REPS=$2; shift ;;
		--guest-clock) CLOCK=$2; shift ;;
		*) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_build_opt //bench:shim_bench //cli:forkguard //cli:testdata/fork_storm
ART=$(mktemp -d /tmp/forkguard-bench-watch.XXXXXX)
trap 'rm -rf "$ART"' EXIT
cp "$BIN/bench/shim_bench" "$BIN/cli/forkguard" "$BIN/cli/testdata/fork_storm" "$ART/"
JOB=$ART/job.sh
cat > "$JOB" <<EOS
#!/bin/bash
set -uo pipefail
ART=$ART
REPS=$REPS
EOS
cat >> "$JOB" <<'EOS'
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
LOGS=$(mktemp -d /tmp/watch-bench-logs.XXXXXX)
WPID=
start_watcher() {
	rm -f "$LOGS/ready"
	"$ART/forkguard" watch --log "$LOGS/w" --ready-file "$LOGS/ready" 2> "$LOGS/watch.err" &
	WPID=$!
	for _ in $(seq 600); do [ -e "$LOGS/ready" ] && return 0; sleep 0.05; done
	echo "bench watch: the watcher did not start:"; cat "$LOGS/watch.err"; exit 1
}
stop_watcher() { kill -TERM "$WPID"; wait "$WPID" || true; rm -rf "$LOGS/w"; }
# measure NAME TARGET ARGS...: shim_bench ARGS without and with the watcher, REPS rounds.
measure() {
	local name=$1 target=$2 i v b=() w=()
	shift 2
	for ((i = 0; i < REPS; i++)); do
		for v in $( ((i % 2)) && echo "with without" || echo "without with"); do
			if [ "$v" = with ]; then
				start_watcher
				w+=("$("$ART/shim_bench" "$@" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p' | head -n 1)")
				stop_watcher
			else
				b+=("$("$ART/shim_bench" "$@" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p' | head -n 1)")
			fi
		done
	done
	local mb mw pr
	mb=$(printf '%s\n' "${b[@]}" | median)
	mw=$(printf '%s\n' "${w[@]}" | median)
	pr=$(for ((i = 0; i < REPS; i++)); do echo "${w[i]} ${b[i]}"; done | awk '{print $1 / $2}' | median)
	awk -v n="$name" -v b="$mb" -v w="$mw" -v t="$target" -v p="$pr" 'BEGIN {
		r = w / b
		printf "    %-34s without %10.0f ns  with %10.0f ns  %.3fx (target <= %.2fx: %s)  per-round median %.3fx\n",
			n, b, w, r, t, (r <= t ? "met" : "MISSED"), p }'
	echo "        each round's median, without: ${b[*]}"
	echo "        each round's median, with:    ${w[*]}"
	BASE=$mb
}
echo "    kernel $(uname -r), LSM: $(cat /sys/kernel/security/lsm 2>/dev/null || echo unknown), clock $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), $REPS rounds"
measure "(1) 300x fork+exec /bin/true" 1.03 start 3 /bin/true
measure "(2) reg+dereg 4 KiB on $RXE_DEV" 1.02 reg 4096 1000 "$RXE_DEV"
# The watcher's programs' own time per registration and release (kernel.bpf_stats_enabled),
# steadier than the ratio: rxe's registrations get slower as its MR indices advance, by more
# than the watcher's cost between two runs at times.
sysctl -qw kernel.bpf_stats_enabled=1
start_watcher
"$ART/shim_bench" reg 4096 1000 "$RXE_DEV" > /dev/null
bpftool prog show 2>/dev/null | awk -v base="$BASE" '/ name fg_umem_/ {
	for (i = 1; i <= NF; i++) { if ($i == "name") n = $(i + 1); if ($i == "run_time_ns") t = $(i + 1); if ($i == "run_cnt") c = $(i + 1) }
	if (c >= 1000) { printf "        %s: %d runs, %.0f ns each\n", n, c, t / c; s += t / c } }
	END { printf "        the programs per reg+dereg: %.0f ns, %.1f%% of the median without\n", s, 100 * s / base }'
stop_watcher
sysctl -qw kernel.bpf_stats_enabled=0
# (3) the storm, the watcher's own cost
sysctl -qw kernel.bpf_stats_enabled=1
start_watcher
"$ART/fork_storm" 50 200 > "$LOGS/storm.out"
read -r utime stime <<<"$(awk '{print $14, $15}' "/proc/$WPID/stat")"
hz=$(getconf CLK_TCK)
bpf_ns=$(bpftool prog show 2>/dev/null | awk '/ name fg_/ { for (i = 1; i <= NF; i++) if ($i == "run_time_ns") s += $(i + 1) } END { print s + 0 }')
stop_watcher
lost=$(sed -n 's/.* \([0-9]*\) records lost$/\1/p' "$LOGS/watch.err" | tail -n 1)
sysctl -qw kernel.bpf_stats_enabled=0
awk -v u="$utime" -v s="$stime" -v hz="$hz" -v b="$bpf_ns" -v st="$(cat "$LOGS/storm.out")" -v l="${lost:-?}" 'BEGIN {
	printf "    %-34s %s: watcher CPU %.2f s (user %.2f, system %.2f), BPF programs %.3f s, records lost %s   reported, not targeted\n",
		"(3) fork storm 16x50 forks, 4x200 regs", st, (u + s) / hz, u / hz, s / hz, b / 1e9, l }'
rm -rf "$LOGS"
EOS
chmod +x "$JOB"
echo "== scripts/bench watch: Soft-RoCE guest (rxe0, TCG) =="
case "$CLOCK" in
	tsc) ARGS="tsc=reliable" ;;
	default) ARGS= ;;
	*) echo "scripts/bench watch: --guest-clock tsc or default, not '$CLOCK'" >&2; exit 2 ;;
esac
RXE_VM_KERNEL_ARGS="${RXE_VM_KERNEL_ARGS:-} $ARGS" RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1800} \
	scripts/guests/rxe-vm -- "$JOB"
