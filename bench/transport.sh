#!/bin/bash
# bench/transport.sh (scripts/bench transport) - streaming bandwidth of the RDMA
# transport (//rdma:transport_tool: credit-flow-controlled WRITE WITH IMM into
# receiver slots, one RC QP) against perftest's ib_write_bw on the same device
# (rxe0, GID index 1, server and client on 10.11.12.1), in ONE boot of the
# Soft-RoCE guest, at 64 KiB and 1 MiB messages. Prints MiB/s of each and the
# ratio transport / ib_write_bw (target >= 0.9 at 1 MiB). Both are measured by
# the receiving/reporting side from the first to the last message, setup
# excluded; perftest reports MiB/s (2^20), so the transport's figure is too.
#
#   transport runs without CRC32C (ib_write_bw checks nothing); a 1 MiB run
#   with CRC32C on both ends is shown for information.
#   pipeline depth: 64 KiB -> 64 slots, 1 MiB -> 16 slots (ib_write_bw: 128 WRs)
#
# --two-hosts: the same comparison ACROSS the wire of the two-guest pair
#   (scripts/guests/rxe-cluster): transport sender on node0 -> receiver on node1, and
#   ib_write_bw client on node0 -> server on node1 (the same direction), in one
#   boot of the pair.
#
# Usage: bench/transport.sh [--two-hosts] [--rounds N] [--mb MB]   (default 2 rounds, ~200 MB per run)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2 mb=200 two_hosts=0
while [ $# -gt 0 ]; do
	case "$1" in
		--rounds) rounds=$2; shift 2 ;;
		--mb) mb=$2; shift 2 ;;
		--two-hosts) two_hosts=1; shift ;;
		-h|--help) sed -n "2,21p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) echo "bench/transport.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
command -v ib_write_bw >/dev/null || { echo "bench/transport.sh: ib_write_bw missing (scripts/setup installs perftest)" >&2; exit 1; }

# Optimized build, without touching the shared bazel-* convenience symlinks.
bazel build -c opt --symlink_prefix=/ --noshow_progress //rdma:transport_tool >/dev/null 2>&1 ||
	{ echo "bench/transport.sh: build failed" >&2; exit 1; }
TOOL=$(bazel info -c opt bazel-bin 2>/dev/null)/rdma/transport_tool
if [ "$two_hosts" = 1 ]; then
	# Both nodes run this job; each step is one measurement, its two ends meeting
	# through cluster-signal/cluster-wait. Results land on the shared directory.
	JOB=$(mktemp /tmp/forkguard-bench-transport2.XXXXXX.sh)
	trap 'rm -f "$JOB"' EXIT
	printf '#!/bin/bash\nTOOL=%q ROUNDS=%q MB=%q\n' "$TOOL" "$rounds" "$mb" > "$JOB"
	cat >> "$JOB" <<'EOS'
S=$CLUSTER_SHARED; GIDX=${RXE_GID_INDEX:-1}; step=0; port=7800
wait_for() { local e=$((SECONDS + 60)); until grep -q -- "$1" "$2" 2>/dev/null; do [ $SECONDS -ge $e ] && return 1; sleep 0.1; done; }
ours() { # size slots -> appends MiB/s (receiver's figure) to $S/ours.$size
	local size=$1 slots=$2 bytes n; bytes=$(numfmt --from=iec "$size"); n=$(( MB * 1000000 / bytes ))
	step=$((step + 1)); port=$((port + 1))
	if [ "$CLUSTER_NODE" = 0 ]; then
		timeout 300 $TOOL send --listen 10.20.0.1:$port --count $n --size $size --no-checksum >$S/send.$step 2>&1 & local sp=$!
		wait_for listening $S/send.$step && cluster-signal up.$step
		wait $sp || cat $S/send.$step >&2
		cluster-wait done.$step 300
	else
		cluster-wait up.$step 120
		timeout 300 $TOOL recv --connect 10.20.0.1:$port --slots $slots --slot-bytes $size >$S/recv.$step 2>&1 || cat $S/recv.$step >&2
		awk '/^recv: [0-9]+ batches/ { printf "%.2f\n", $4 / $6 / 1048576 }' $S/recv.$step | tr -d , >> $S/ours.$size
		cluster-signal done.$step
	fi
}
perftest() { # size -> appends MiB/s (BW average, client) to $S/pt.$size
	local size=$1 bytes n; bytes=$(numfmt --from=iec "$1"); n=$(( MB * 1000000 / bytes ))
	step=$((step + 1))
	if [ "$CLUSTER_NODE" = 1 ]; then
		timeout 120 ib_write_bw -d rxe0 -x $GIDX -s $bytes -n $n >$S/pts.$step 2>&1 & local sp=$!
		cluster-wait-listen 18515 60 && cluster-signal up.$step
		wait $sp || cat $S/pts.$step >&2
		cluster-wait done.$step 300
	else
		cluster-wait up.$step 120
		timeout 120 ib_write_bw -d rxe0 -x $GIDX -s $bytes -n $n 10.20.0.2 >$S/ptc.$step 2>&1 || cat $S/ptc.$step >&2
		awk -v b=$bytes '$1 == b && NF >= 4 { print $4 }' $S/ptc.$step | tail -1 >> $S/pt.$size
		cluster-signal done.$step
	fi
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
for spec in 64K:64 1M:16; do
	for r in $(seq $ROUNDS); do ours ${spec%:*} ${spec#*:}; perftest ${spec%:*}; done
done
cluster-barrier results 120
[ "$CLUSTER_NODE" = 0 ] || exit 0
echo "transport vs ib_write_bw ACROSS THE WIRE: node0 (10.20.0.1) -> node1 (10.20.0.2), rxe0 on each, ~$MB MB per run, median of $ROUNDS round(s)"
printf '%-28s %12s %12s %8s\n' "message size" "transport" "ib_write_bw" "ratio"
for size in 64K 1M; do
	o=$(median < $S/ours.$size) p=$(median < $S/pt.$size)
	printf '%-28s %9s MiB/s %7s MiB/s %7s\n' "$size (no checksum)" "$o" "$p" "$(awk -v o=$o -v p=$p 'BEGIN { if (p > 0) printf "%.2fx", o / p; else print "n/a" }')"
done
EOS
	CLUSTER_TIMEOUT=${CLUSTER_TIMEOUT:-900} exec scripts/guests/rxe-cluster -- "bash $JOB" "bash $JOB"
fi

JOB=$(mktemp /tmp/forkguard-bench-transport.XXXXXX.sh)
trap 'rm -f "$JOB"' EXIT
cat > "$JOB" <<EOS
#!/bin/bash
TOOL=$TOOL ROUNDS=$rounds MB=$mb
EOS
cat >> "$JOB" <<'EOS'
IP=${RXE_IP:-10.11.12.1} DEV=${RXE_DEV:-rxe0} GIDX=${RXE_GID_INDEX:-1}
port=7800
ours() { # size slots extra-args... -> MiB/s on stdout
	local size=$1 slots=$2; shift 2
	local bytes=$(numfmt --from=iec "$size") n
	n=$(( MB * 1000000 / bytes )); port=$((port + 1))
	timeout 300 $TOOL send --listen $IP:$port --count $n --size $size "$@" >/tmp/send.out 2>&1 & local sp=$!
	for i in $(seq 50); do grep -q listening /tmp/send.out 2>/dev/null && break; sleep 0.1; done
	timeout 300 $TOOL recv --connect $IP:$port --slots $slots --slot-bytes $size >/tmp/recv.out 2>&1 || { cat /tmp/recv.out /tmp/send.out >&2; }
	wait $sp || cat /tmp/send.out >&2
	awk '/^recv: [0-9]+ batches/ { printf "%.2f\n", $4 / $6 / 1048576 }' /tmp/recv.out | tr -d ,
}
perftest() { # size -> MiB/s (BW average)
	local size=$1 bytes=$(numfmt --from=iec "$1") n
	n=$(( MB * 1000000 / bytes ))
	timeout 120 ib_write_bw -d $DEV -x $GIDX -s $bytes -n $n >/tmp/pt-server.out 2>&1 & local sp=$!
	# The server must be listening (TCP 18515) before the client starts: a
	# client that comes too early fails and leaves the server waiting.
	for i in $(seq 100); do ss -ltn 2>/dev/null | grep -q ':18515 ' && break; sleep 0.1; done
	timeout 120 ib_write_bw -d $DEV -x $GIDX -s $bytes -n $n $IP >/tmp/pt-client.out 2>&1 ||
		cat /tmp/pt-client.out /tmp/pt-server.out >&2
	wait $sp
	awk -v b=$bytes '$1 == b && NF >= 4 { print $4 }' /tmp/pt-client.out | tail -1
}
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "transport vs ib_write_bw on $DEV ($IP, GID index $GIDX), ~$MB MB per run, median of $ROUNDS round(s)"
printf '%-28s %12s %12s %8s\n' "message size" "transport" "ib_write_bw" "ratio"
for spec in 64K:64 1M:16; do
	size=${spec%:*} slots=${spec#*:}
	: > /tmp/o; : > /tmp/p
	for r in $(seq $ROUNDS); do
		ours $size $slots --no-checksum >> /tmp/o
		perftest $size >> /tmp/p
	done
	o=$(median < /tmp/o) p=$(median < /tmp/p)
	printf '%-28s %9s MiB/s %7s MiB/s %7s\n' "$size (no checksum)" "$o" "$p" "$(awk -v o=$o -v p=$p 'BEGIN { if (p > 0) printf "%.2fx", o / p; else print "n/a" }')"
done
c=$(ours 1M 16 | median)
printf '%-28s %9s MiB/s %13s %7s\n' "1M (CRC32C both ends)" "$c" "" "$(awk -v o=$c -v p=$p 'BEGIN { if (p > 0) printf "%.2fx", o / p; else print "n/a" }')"
EOS
chmod +x "$JOB"
RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-900} scripts/guests/rxe-vm -- "$JOB"
