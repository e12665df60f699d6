# shellcheck shell=bash
# What both guests' jobs use (scripts/guests/inside/rxe-vm-job.sh, scripts/guests/inside/cluster-node.sh).

# The guest's uptime in seconds.
up() { cut -d' ' -f1 /proc/uptime; }

# Power the guest off now (the host sees QEMU exit).
bye() { sync; busybox poweroff -f 2>/dev/null; echo o > /proc/sysrq-trigger; sleep 30; }

# QEMU TCG only resizes its soft-TLB when the guest flushes it (context switch); a lone
# CPU-bound process can otherwise stay on a tiny TLB and run 10-30x slower (seen: 0.45 s vs
# 8-17 s for the same loop). A sleeper per vCPU that wakes every 20 ms makes timings stable.
# $1 = the sleepers' process name.
start_tlb_tickers() {
	local c
	command -v perl >/dev/null || return 0
	for c in $(seq 0 $(($(nproc) - 1))); do
		# shellcheck disable=SC2016 # Perl code: $0 is Perl's, not the shell's
		taskset -c "$c" perl -e '$0="'"$1"'"; select(undef,undef,undef,0.02) while 1' &
	done
}
