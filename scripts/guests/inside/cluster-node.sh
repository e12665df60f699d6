# shellcheck shell=bash
# The guest side of scripts/guests/rxe-cluster, sourced by the job it writes for each node (after
# the lines that set NODE, PEER, IP, PEER_IP, MAC, PEER_MAC, MTU, SHARED_MNT, STATIC_ARP,
# CLOCK_SYNC, PEER_WAIT, TICKER, SLURM and SLURM_PAIR; before the command): mounts, eth0 and
# rxe0 on the wire, the start barrier with the peer, the variables the command sees.
# run_command CMD runs CMD (bash -c), records its status and powers off. The control share is /run/cluster.
export PATH=/run/cluster/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
C=/run/cluster; ME=$C/node$NODE; PD=$C/node$PEER
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
# a file created over 9p gets the *host's* clock as mtime: the host reads all
# stamps with stat; the content has the guest's uptime and wall clock
stamp() { echo "$(up) $(date +%s.%N)" > "$ME/$1"; }
infra() { echo "rxe-cluster node$NODE: $*"; echo "infra: $*" > "$ME/infra" 2>/dev/null; bye; }
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/pts /dev/shm /run/cluster
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
# What systemd mounts on a real machine, for `forkguard watch`: the active LSM list, the
# tracepoints' ids, the BPF filesystem (pinned links).
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
# devtmpfs has no /dev/fd (bash process substitution, /dev/stdin...): udev is not there to make it
ln -sfn /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 clusterctl /run/cluster || infra "cannot mount the control share"
stamp boot
hostname "node$NODE"; echo "node$NODE" > /etc/hostname
# gloo binds to whatever the hostname resolves to, and torchrun's c10d rendezvous
# recognises the endpoint host by it: node names must resolve to the wire addresses
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n10.20.0.1\tnode0\n10.20.0.2\tnode1\n' > /etc/hosts
# the shared "cluster filesystem": cache=mmap = uncached, coherent read/write
# between the nodes, and MAP_SHARED writable mmap works (cache=none refuses it)
{ mkdir -p "$SHARED_MNT" && mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap jobfs "$SHARED_MNT"; } ||
	infra "cannot mount the shared directory at $SHARED_MNT"
clock_offset() { # prints "OFFSET_us RTT_us" (host minus guest clock), best of 5 round trips
	# bash's $EPOCHREALTIME costs no process (a fork+exec is ~40 ms under TCG)
	local i t0 t1 h off w best='' bestw=
	for i in 1 2 3 4 5; do
		t0=${EPOCHREALTIME/./}; : > "$ME/.clk$i"; t1=${EPOCHREALTIME/./}
		h=$(stat -c %.6Y "$ME/.clk$i"); h=${h/./}
		w=$((t1 - t0)); off=$((h - (t0 + t1) / 2))
		if [ -z "$bestw" ] || [ "$w" -lt "$bestw" ]; then best=$off; bestw=$w; fi
	done
	rm -f "$ME"/.clk[1-5]
	echo "$best $bestw"
}
fmt_us() { local v=$1 s=+; [ "$v" -lt 0 ] && { s=-; v=$((-v)); }; printf '%s%d.%06d' $s $((v / 1000000)) $((v % 1000000)); }
read -r off w < <(clock_offset)
if [ "$CLOCK_SYNC" = 1 ]; then
	# "now +X seconds" is evaluated inside date itself: no exec latency in the step
	date -s "now $(fmt_us "$off") seconds" >/dev/null
	read -r off2 _ < <(clock_offset)
	echo "start: host-guest $(fmt_us "$off")s (9p rtt $(fmt_us "$w")s), stepped; after step $(fmt_us "$off2")s" > "$ME/clock"
else
	echo "start: host-guest $(fmt_us "$off")s (9p rtt $(fmt_us "$w")s), not stepped" > "$ME/clock"
fi
[ "$TICKER" = 1 ] && start_tlb_tickers cluster-tlb-ticker
ip link set lo up
modprobe virtio_net || infra "modprobe virtio_net failed"
NIC=
for i in $(seq 1 50); do
	for d in /sys/class/net/*; do [ "$(cat "$d/address" 2>/dev/null)" = "$MAC" ] && NIC=${d##*/}; done
	[ -n "$NIC" ] && break; sleep 0.1
done
[ -n "$NIC" ] || infra "no NIC with mac $MAC"
{ ip link set "$NIC" mtu "$MTU" && ip addr add "$IP/24" dev "$NIC" && ip link set "$NIC" up; } || infra "$NIC setup failed"
[ "$STATIC_ARP" = 1 ] && ip neigh replace "$PEER_IP" lladdr "$PEER_MAC" dev "$NIC" nud permanent
modprobe rdma_rxe || infra "modprobe rdma_rxe failed"
modprobe rdma_ucm 2>/dev/null   # rdma_cm from user space (rping, rdma_cm apps)
rdma link add rxe0 type rxe netdev "$NIC" || infra "rdma link add failed"
IFS=. read -r -a OCTETS <<< "$IP"
WANT=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${OCTETS[@]}")
GIDX=
for i in $(seq 1 100); do
	st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
	for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		[ "$(cat "$g" 2>/dev/null)" = "$WANT" ] && { GIDX=${g##*/}; break; }
	done
	case "$st" in *ACTIVE*) [ -n "$GIDX" ] && break;; esac
	sleep 0.1
done
case "$st" in *ACTIVE*) ;; *) infra "rxe0 not ACTIVE: $st";; esac
[ -n "$GIDX" ] || infra "rxe0 has no GID $WANT"
echo "$(up) $(date +%s.%N) nic=$NIC gid_index=$GIDX mtu=$(cat "/sys/class/net/$NIC/mtu") active_mtu=$(ibv_devinfo -d rxe0 2>/dev/null | awk '/active_mtu/ { print $2 }')" > "$ME/ready"
# start barrier: the peer's rxe0 is ready and it answers ping over the wire
end=$((SECONDS + PEER_WAIT)); pinged=
while :; do
	if [ -e "$PD/ready" ]; then
		pinged=$(busybox ping -c 1 -W 1 "$PEER_IP" 2>&1 | grep -o 'time=[0-9.]* ms') && break
	fi
	[ $SECONDS -ge $end ] && infra "peer node$PEER not reachable at $PEER_IP within ${PEER_WAIT}s (ready file: $([ -e "$PD/ready" ] && echo yes || echo no))"
	sleep 0.1
done
echo "$(up) $(date +%s.%N) ping $pinged" > "$ME/start"
ulimit -l unlimited
export CLUSTER_NODE=$NODE CLUSTER_NNODES=2 CLUSTER_IP=$IP CLUSTER_PEER_IP=$PEER_IP CLUSTER_MASTER=10.20.0.1
export CLUSTER_SHARED=$SHARED_MNT CLUSTER_CTL=$C
cluster-rshd >/dev/null 2>&1 &
export RXE_DEV=rxe0 RXE_NETDEV=$NIC RXE_IP=$IP RXE_GID_INDEX=$GIDX
export GLOO_SOCKET_IFNAME=$NIC TP_SOCKET_IFNAME=$NIC NCCL_SOCKET_IFNAME=$NIC
if [ "$SLURM" = 1 ]; then
	"$SLURM_PAIR" start 2>>"$ME/stderr" || infra "Slurm did not come up (logs: nodeN.slurm/)"
fi

run_command() {
	local rc off
	bash -c "$1" </dev/null >>"$ME/stdout" 2>>"$ME/stderr"
	rc=$?
	stamp end
	read -r off _ < <(clock_offset); echo "; end: host-guest $(fmt_us "$off")s" >> "$ME/clock"
	echo "$rc" > "$ME/rc"
	bye
}
