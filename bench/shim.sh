#!/bin/bash
# bench/shim.sh (scripts/bench shim) - what libforkguard.so costs, measured side
# by side: every case runs REPS times (the small fork and (c) 3 x REPS) alternating without /
# with the shim, each run reports its median; the ratio of the medians of those medians is
# printed (and judged), then the median of the per-round ratios.
#   host:   (a) fork+_exit+waitpid small and with 256 MiB touched, (d) a libc path
#           the shim does not watch, (e) a bash loop of 300 fork+exec of /bin/true (every
#           process starts with the shim preloaded)
#           (f) start-up: sh running 300 fork+exec of /bin/true, and of a small C++ program
#           linked with libibverbs that never touches RDMA, with no preload, an empty
#           `gcc -shared` library (the target's baseline), an empty library linked as the
#           shim is (Bazel's toolchain, libc only: a stricter baseline, reported), the shim,
#           the shim with its LD_AUDIT module (as `forkguard run` sets them), interleaved in
#           every round (REPS + 2 rounds; judged on the median of the per-round ratios)
#   guest:  (b) fork with live RDMA resources on rxe0 (once per site, log on), without
#           fork support and with RDMAV_FORK_SAFE=1, (c) ibv_reg_mr+ibv_dereg_mr of 4 KiB
#           and 4 MiB on rxe0
#   Every case but (b) and (f) runs twice: shim with FORKGUARD_LOG (log) and without (the
#   default a cluster-wide LD_PRELOAD would have: no log). The shim runs FORKGUARD_MODE=warn;
#   the small fork (a), (b) and (c) 4 KiB without a log also run FORKGUARD_MODE=fix in the
#   same rounds (no shim, warn, fix; every other round backwards), judged on a "fix / warn"
#   line under the case's: (a) <= 1.03 (a clean fork unchanged), (b) <= 1.10, (c) <= 1.05.
# Usage: scripts/bench shim [--reps N] [--host-only] [--guest-only] [--start-only]
#                          [--cases LETTERS]  (only these cases, e.g. `--cases a` or `--cases bc`)
#                          [--shim PATH]   (measure that libforkguard.so, e.g. an older build)
#                          [--start-true]  (the start-up case with /bin/true only: quicker)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=9
HOST_ONLY=0
GUEST_ONLY=0
START_ONLY=0
SHIM_SO=
START_TRUE=0
CASES=abcdef
while [ $# -gt 0 ]; do
	case "$1" in
		--reps) REPS=$2; shift ;;
		--host-only) HOST_ONLY=1 ;;
		--guest-only) GUEST_ONLY=1 ;;
		--start-only) START_ONLY=1; HOST_ONLY=1 ;;
		--shim) SHIM_SO=$(realpath "$2"); shift ;;
		--start-true) START_ONLY=1; HOST_ONLY=1; START_TRUE=1 ;;
		--cases) CASES=$2; shift ;;
		*) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
	shift
done
TARGETS=(//bench:shim_bench //bench:libempty_preload.so //shim:libforkguard.so //shim:libforkguard_audit.so)
bazel build --noshow_progress -c opt "${TARGETS[@]}" >/dev/null 2>&1 ||
	bazel build --noshow_progress -c opt "${TARGETS[@]}"
BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
# The run measures copies: a build in this workspace while it runs changes nothing measured.
ART=$(mktemp -d /tmp/forkguard-bench.XXXXXX)
JOB=$ART/job.sh
trap 'rm -rf "$ART"' EXIT
cp "$BIN/bench/shim_bench" "$BIN/bench/libempty_preload.so" "$BIN/shim/libforkguard.so" \
	"$BIN/shim/libforkguard_audit.so" "$ART/"
[ -z "$SHIM_SO" ] || cp "$SHIM_SO" "$ART/libforkguard.so"
# The start-up target's baseline: an empty library as `gcc -shared` makes it by default
# (four mappings, libc needed), what a site would compare a preload with.
${CC:-cc} -shared -fPIC -o "$ART/libempty_gcc.so" bench/empty_preload.c
cat > "$JOB" <<EOS
#!/bin/bash
set -euo pipefail
B=$ART/shim_bench
SHIM=$ART/libforkguard.so
AUDIT=$ART/libforkguard_audit.so
EMPTY=$ART/libempty_preload.so
EMPTY_GCC=$ART/libempty_gcc.so
REPS=$REPS
START_TRUE=$START_TRUE
CASES=$CASES
EOS
cat >> "$JOB" <<'EOS'
LOGDIR=$(mktemp -d /tmp/fg-bench-log.XXXXXX)
# Bytes of the log of the last run. A registration at a site its file already has a line
# for is counted (mr_counts: the counts go out with the next line, at exit, or at most every
# 100 ms), not written: bytes per registration at a seen site = the bytes of the mr_counts
# lines (and of any mr_register line at a seen site: none expected) over the registrations
# they count. Also fork events and the whole log per process.
line_sizes() {
	awk -v n="$1" '
		FNR == 1 { files++ }
		{ total += length($0) + 1 }
		/^\{"event":"mr_register"/ {
			if (seen[FILENAME]++) { rn++; rb += length($0) + 1 }
		}
		/^\{"event":"mr_counts"/ {
			cl++; cb += length($0) + 1; s = $0
			while (match(s, /"n":[0-9]+/)) { cn += substr(s, RSTART + 4, RLENGTH - 4); s = substr(s, RSTART + RLENGTH) }
		}
		/^\{"event":"fork"/ { fn++; fb += length($0) + 1 }
		END {
			if (rn + cn) printf "%-36s bytes per registration at a seen site: %.4f (%d registrations: %d counted in %d mr_counts lines of %.0f bytes, %d mr_register lines)\n", n, (cb + rb) / (cn + rn), cn + rn, cn, cl, (cl ? cb / cl : 0), rn
			if (fn) printf "%-36s bytes per fork event: mean %.1f (%d lines)\n", n, fb / fn, fn
			if (files) printf "%-36s log bytes per process: %.0f (%d files)\n", n, total / files, files
		}' "$LOGDIR"/*.jsonl 2>/dev/null || true
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# case-name target-ratio log|nolog args...   (REPS runs of each; CASE_REPS overrides)
measure() {
	local name=$1 target=$2 log=$3; shift 3
	local base=() shim=() i logenv=() reps=${CASE_REPS:-$REPS}
	[ "$log" = log ] && logenv=("FORKGUARD_LOG=$LOGDIR")
	name="$name [$log]"
	for ((i = 0; i < reps; i++)); do
		base+=("$("$B" "$@" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')")
		shim+=("$(env LD_PRELOAD="$SHIM" FORKGUARD_MODE=warn "${logenv[@]}" "$B" "$@" 2>/dev/null |
			sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')")
		[ "$log" = log ] && [ $((i + 1)) = "$reps" ] && line_sizes "$name"
		rm -f "$LOGDIR"/*.jsonl
	done
	local mb ms
	mb=$(printf '%s\n' "${base[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	ms=$(printf '%s\n' "${shim[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	# Also the median of the per-round ratios (run i with the shim / run i without): the
	# runs alternate, so this one cancels what drifts between rounds. The target is judged
	# on the ratio of the medians, as always.
	local mr
	mr=$(for ((i = 0; i < reps; i++)); do echo "${shim[i]} ${base[i]}"; done |
		awk '{print $1 / $2}' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	awk -v n="$name" -v b="$mb" -v s="$ms" -v t="$target" -v r="$reps" -v pr="$mr" 'BEGIN {
		ratio = s / b
		printf "%-36s baseline %10.1f us   shim %10.1f us   ratio %.3fx   target <= %s   %s  (median of %d runs; per-round %.3fx)\n",
			n, b / 1000, s / 1000, ratio, t, (ratio <= t ? "met" : "MISSED"), r, pr }'
}
# The same case with FORKGUARD_MODE=fix beside warn: one round runs it without the shim, with
# it in warn mode and in fix mode, backwards every other round (so neither mode always
# follows the other). Prints measure's line (warn / no shim) and under it a "fix / warn"
# line (ratio of the medians, judged; the median of the per-round ratios beside it). With a
# log, the fix runs' fork events say what fix did: how many were "fixed" and how many
# ranges it copied and withheld. ENV (- for none) is set for all three runs.
#   case-name target-warn target-fix log|nolog ENV args...
# The medians of the last call: FIX_WARN_NS, FIX_FIX_NS.
measure_fix() {
	local name=$1 target=$2 ftarget=$3 log=$4 extra=$5; shift 5
	local base=() warn=() fix=() i v logenv=() env=() reps=${CASE_REPS:-$REPS} order
	[ "$extra" = - ] || read -r -a env <<<"$extra"
	[ "$log" = log ] && logenv=("FORKGUARD_LOG=$LOGDIR")
	name="$name [$log]"
	local forks=0 fixed=0 copied=0 withheld=0 v1 v2 v3 v4
	for ((i = 0; i < reps; i++)); do
		if ((i % 2)); then order="fix warn none"; else order="none warn fix"; fi
		for v in $order; do
			rm -f "$LOGDIR"/*.jsonl
			case $v in
				none) base+=("$(env "${env[@]}" "$B" "$@" | sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')") ;;
				warn)
					warn+=("$(env "${env[@]}" LD_PRELOAD="$SHIM" FORKGUARD_MODE=warn "${logenv[@]}" "$B" "$@" 2>/dev/null |
						sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')")
					[ "$log" = log ] && [ $((i + 1)) = "$reps" ] && line_sizes "$name" ;;
				fix)
					fix+=("$(env "${env[@]}" LD_PRELOAD="$SHIM" FORKGUARD_MODE=fix "${logenv[@]}" "$B" "$@" 2>/dev/null |
						sed -n 's/.*median_ns=\([0-9]*\).*/\1/p')")
					if [ "$log" = log ]; then
						# (No process substitution: the guest has no /dev/fd.)
						read -r v1 v2 v3 v4 <<<"$(cat "$LOGDIR"/*.jsonl 2>/dev/null | awk '
							/^\{"event":"fork"/ {
								f++; if (index($0, "\"action\":\"fixed\"")) x++
								c += gsub(/"fixed":"copied"/, ""); w += gsub(/"fixed":"withheld"/, "") }
							END { print f + 0, x + 0, c + 0, w + 0 }')"
						forks=$((forks + v1)) fixed=$((fixed + v2)) copied=$((copied + v3)) withheld=$((withheld + v4))
					fi ;;
			esac
		done
		rm -f "$LOGDIR"/*.jsonl
	done
	local mb mw mf
	mb=$(printf '%s\n' "${base[@]}" | median)
	mw=$(printf '%s\n' "${warn[@]}" | median)
	mf=$(printf '%s\n' "${fix[@]}" | median)
	FIX_WARN_NS=$mw FIX_FIX_NS=$mf
	local pw pf
	pw=$(for ((i = 0; i < reps; i++)); do echo "${warn[i]} ${base[i]}"; done | awk '{print $1 / $2}' | median)
	pf=$(for ((i = 0; i < reps; i++)); do echo "${fix[i]} ${warn[i]}"; done | awk '{print $1 / $2}' | median)
	local what=""
	[ "$log" = log ] && what="; fix's fork events: $fixed of $forks fixed, $copied ranges copied, $withheld withheld"
	awk -v n="$name" -v b="$mb" -v s="$mw" -v f="$mf" -v t="$target" -v ft="$ftarget" -v r="$reps" \
		-v pw="$pw" -v pf="$pf" -v what="$what" 'BEGIN {
		ratio = s / b
		printf "%-36s baseline %10.1f us   shim %10.1f us   ratio %.3fx   target <= %s   %s  (median of %d runs; per-round %.3fx)\n",
			n, b / 1000, s / 1000, ratio, t, (ratio <= t ? "met" : "MISSED"), r, pw
		ratio = f / s
		printf "    %-32s warn %10.1f us    fix %10.1f us   ratio %.3fx   target <= %s   %s  (median of %d runs; per-round %.3fx%s)\n",
			"fix / warn", s / 1000, f / 1000, ratio, ft, (ratio <= ft ? "met" : "MISSED"), r, pf, what }'
}
# Start-up: what a preload costs every process (a site-wide switch preloads every task's
# sh, cat, srun). One round runs `shim_bench start 1 PROG` (sh: 300 fork+exec of PROG) with
# each preload, in an order that rotates from round to round and runs backwards every other
# round (so no preload always follows the same one); each ratio is the median of its
# per-round ratios (they cancel what drifts between rounds), the ratio of the medians beside
# it. Two empty libraries: `gcc -shared`'s (the target's baseline) and one linked as the
# shim is, by Bazel's toolchain with libc only and two mappings (cheaper to load: reported,
# the stricter figure).  start_case name prog args...
start_case() {
	local name=$1; shift
	local reps=$((REPS + 2)) i k v n
	local -a t_none=() t_empty=() t_gcc=() t_shim=() t_audit=() order=(none gcc empty shim audit)
	local -a c_none=() c_empty=() c_gcc=() c_shim=() c_audit=()
	n=${#order[@]}
	for ((i = 0; i < reps; i++)); do
		for ((k = 0; k < n; k++)); do
			if ((i % 2)); then v=${order[(i + n - 1 - k) % n]}; else v=${order[(i + k) % n]}; fi
			local pre=()
			case $v in
				none) pre=() ;;
				empty) pre=("LD_PRELOAD=$EMPTY") ;;
				gcc) pre=("LD_PRELOAD=$EMPTY_GCC") ;;
				shim) pre=("LD_PRELOAD=$SHIM") ;;
				audit) pre=("LD_PRELOAD=$SHIM" "LD_AUDIT=$AUDIT") ;;
			esac
			local out ns cpu
			out=$(env "${pre[@]}" "$B" start 1 "$@")
			ns=$(sed -n 's/.*median_ns=\([0-9]*\).*/\1/p' <<<"$out")
			cpu=$(sed -n 's/.*cpu_ns=\([0-9]*\).*/\1/p' <<<"$out")
			eval "t_$v+=($ns)"
			eval "c_$v+=($cpu)"
		done
	done
	ms() { printf '%s\n' "$@" | median | awk '{printf "%.1f", $1 / 1e6}'; }
	printf '%-36s none %s ms   empty gcc -shared %s ms   empty as the shim %s ms   shim %s ms   shim+audit %s ms  (medians of %d rounds, 300 processes each)\n' \
		"$name" "$(ms "${t_none[@]}")" "$(ms "${t_gcc[@]}")" "$(ms "${t_empty[@]}")" "$(ms "${t_shim[@]}")" "$(ms "${t_audit[@]}")" "$reps"
	start_ratio "shim / empty gcc -shared" t_shim t_gcc 1.03
	start_ratio "shim / no preload" t_shim t_none 1.10
	start_ratio "shim / empty as the shim" t_shim t_empty -
	start_ratio "empty gcc -shared / no preload" t_gcc t_none -
	start_ratio "empty as the shim / no preload" t_empty t_none -
	start_ratio "shim+audit / no preload" t_audit t_none -
	start_ratio "shim+audit / shim" t_audit t_shim -
	# The CPU time (user + system) of the 301 processes, from wait4: what the preload costs
	# without the time spent waiting for a CPU, so it moves less with the host's load.
	echo "    CPU time of the 301 processes: none $(ms "${c_none[@]}") ms   empty gcc -shared $(ms "${c_gcc[@]}") ms   empty as the shim $(ms "${c_empty[@]}") ms   shim $(ms "${c_shim[@]}") ms"
	start_ratio "CPU: shim / empty gcc -shared" c_shim c_gcc -
	start_ratio "CPU: shim / empty as the shim" c_shim c_empty -
	start_ratio "CPU: shim / no preload" c_shim c_none -
}
# label numerator[] denominator[] target (- for none): the median of the per-round ratios
# (judged) and the ratio of the medians. Reads start_case's rounds.
start_ratio() {
	local label=$1 target=$4
	local -n num=$2 den=$3
	local pr mr j
	pr=$(for ((j = 0; j < ${#num[@]}; j++)); do echo "${num[j]} ${den[j]}"; done |
		awk '{print $1 / $2}' | median)
	mr=$(awk -v a="$(printf '%s\n' "${num[@]}" | median)" -v b="$(printf '%s\n' "${den[@]}" | median)" 'BEGIN {print a / b}')
	awk -v l="$label" -v pr="$pr" -v mr="$mr" -v t="$target" 'BEGIN {
		if (t == "-") printf "    %-32s %.3fx per round (ratio of medians %.3fx)   reported, not targeted\n", l, pr, mr
		else printf "    %-32s %.3fx per round (ratio of medians %.3fx)   target <= %s   %s\n", l, pr, mr, t, (pr <= t ? "met" : "MISSED") }'
}
start_cases() {
	start_case "(f) start-up: 300x /bin/true" /bin/true
	[ "$START_TRUE" = 1 ] || start_case "(f) start-up: 300x C++ noop" "$B" noop
}
# The cases --cases names (all by default).
want() { [[ $CASES == *$1* ]]; }
case "${1:-host}" in
	start) start_cases ;;
	host)
		for log in nolog log; do
			# Target: <= 1.03 without a log (the default); with one every fork writes two events.
			# One run's median of a small fork moves +-15% from process to process on this
			# host (CPU placement, the stack's random offset: a fork's frames straddle two
			# pages in ~15% of processes) while the shim adds ~1-2%: three times the runs.
			# Fix mode leaves a clean fork as warn does (no RDMA: nothing to fix): <= 1.03.
			if want a; then
				CASE_REPS=$((REPS * 3)) measure_fix "(a) fork small" "$([ $log = nolog ] && echo 1.03 || echo 1.15)" 1.03 $log - fork-small 2000
				measure "(a) fork 256 MiB touched" 1.05 $log fork-256m 100
			fi
			if want d; then measure "(d) unwatched libc path" 1.02 $log libc 20000; fi
		done
		if want e; then measure "(e) 300x fork+exec /bin/true" 1.15 nolog exec-loop 5; fi
		if want f; then start_cases; fi ;;
	guest)
		if want b; then
			# Without fork support the kernel copies the MR's anonymous pages at fork in every
			# mode: fix has nothing to change (its fork events say "proceeded").
			measure_fix "(b) fork with live RDMA" 1.15 1.10 log - fork-rdma 100 "$RXE_DEV"
			plain_warn=$FIX_WARN_NS
			# With fork support rdma-core marks the MR MADV_DONTFORK; this kernel copies
			# anonymous memory, so fix makes it MADV_DOFORK for each fork and back after it:
			# the child gets a copy of the 4 MiB (what a fork without fork support costs).
			measure_fix "(b) with RDMAV_FORK_SAFE=1" 1.15 1.10 log RDMAV_FORK_SAFE=1 fork-rdma 100 "$RXE_DEV"
			awk -v f="$FIX_FIX_NS" -v w="$plain_warn" 'BEGIN {
				printf "    %-32s %.3fx (ratio of the two cases'"'"' medians)   reported, not targeted\n",
					"fix, FORK_SAFE / warn, none", f / w }'
		fi
		if want c; then
			# A run's median of a registration in the TCG guest moves by several percent from run
			# to run (the 4 MiB pair's between ~190 and ~250 us) while the shim adds ~1-3%:
			# three times the runs, as the small fork.
			CASE_REPS=$((REPS * 3)) measure_fix "(c) reg+dereg 4 KiB" 1.05 1.05 nolog - reg 4096 1000 "$RXE_DEV"
			CASE_REPS=$((REPS * 3)) measure "(c) reg+dereg 4 MiB" 1.02 nolog reg 4194304 100 "$RXE_DEV"
			# With a log a registration at a seen site is counted, not written (mr_counts, with
			# the next line, the exit, or every 100 ms at most); the site's first one is a line.
			CASE_REPS=$((REPS * 3)) measure "(c) reg+dereg 4 KiB" 1.15 log reg 4096 1000 "$RXE_DEV"
			CASE_REPS=$((REPS * 3)) measure "(c) reg+dereg 4 MiB" 1.05 log reg 4194304 100 "$RXE_DEV"
		fi ;;
esac
rm -rf "$LOGDIR"
EOS
chmod +x "$JOB"
if [ "$START_ONLY" = 1 ]; then
	echo "== scripts/bench shim: start-up, host ($(nproc) cores, $(uname -r)) =="
	"$JOB" start
elif [ "$GUEST_ONLY" = 0 ]; then
	echo "== scripts/bench shim: host ($(nproc) cores, $(uname -r)) =="
	"$JOB" host
fi
if [ "$HOST_ONLY" = 0 ]; then
	echo "== scripts/bench shim: Soft-RoCE guest (rxe0, TCG) =="
	RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1500} scripts/guests/rxe-vm -- "$JOB" guest
fi
