# shellcheck shell=bash
# The guest side of scripts/guests/rxe-vm, sourced by the job it writes (after the lines that set
# RXE_VM_PAIR, RXE_VM_TICKER, KVER, MODDIR and OVERLAY, before the command): mounts, the
# Soft-RoCE device rxe0 on dummy0 (and with RXE_VM_PAIR=1 rxea <-> rxeb over a veth pair),
# the variables the command sees. finish RC reports the command's status and powers off.
# The host's rxehost share is /run/rxe-host: stdout, stderr, rc, ready, infra, out/.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
# shellcheck source=SCRIPTDIR/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
infra() { echo "rxe-vm: $*"; echo "infra: $*" > /run/rxe-host/infra 2>/dev/null; bye; }
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /dev/pts /dev/shm /run/rxe-host
mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
# What systemd mounts on a real machine, for `forkguard watch`: the active LSM list, the
# tracepoints' ids, the BPF filesystem (pinned links); and the cgroup2 hierarchy, which crun
# checks at every container start (podman's --cgroups=disabled included).
mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 rxehost /run/rxe-host || infra "cannot mount rxehost share"
hostname rxe-vm
# A kernel extracted elsewhere (not installed on the host): its modules appear at
# their usual path in the guest only.
if [ "$MODDIR" != "/lib/modules/$KVER" ]; then
	{ mkdir -p "/lib/modules/$KVER" && mount --bind "$MODDIR" "/lib/modules/$KVER"; } || infra "cannot bind $MODDIR at /lib/modules/$KVER"
fi
# Another userspace (an rdma-core) over the throw-away root, before anything loads it.
if [ -n "$OVERLAY" ]; then
	cp -a "$OVERLAY/." / || infra "cannot lay $OVERLAY over /"
fi
[ "$RXE_VM_TICKER" = 1 ] && start_tlb_tickers rxe-vm-tlb-ticker
ip link set lo up
modprobe rdma_rxe || infra "modprobe rdma_rxe failed"
modprobe rdma_ucm 2>/dev/null   # rdma_cm user access (rping, rdma_cm apps)
{ ip link add dummy0 type dummy && ip addr add 10.11.12.1/24 dev dummy0 && ip link set dummy0 up; } || infra "dummy0 setup failed"
rdma link add rxe0 type rxe netdev dummy0 || infra "rdma link add failed"
for i in $(seq 1 100); do
	st=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
	gid=$(cat /sys/class/infiniband/rxe0/ports/1/gids/1 2>/dev/null)
	case "$st:$gid" in *ACTIVE*:0000:0000:0000:0000:0000:ffff:0a0b:0c01) break;; esac
	sleep 0.1
done
case "$st:$gid" in *ACTIVE*:0000:0000:0000:0000:0000:ffff:0a0b:0c01) ;; *) infra "rxe0 not ready: state=$st gid1=$gid";; esac
if [ "${RXE_VM_PAIR:-0}" = 1 ]; then
	# second topology: rxea (veth0, 10.11.13.1) <-> rxeb (veth1, 10.11.13.2), two
	# devices in one netns; policy routing forces their traffic over the veth
	# wire instead of the local shortcut (rxe in 6.1 has no netns support).
	{ ip link add veth0 type veth peer name veth1 &&
	  ip addr add 10.11.13.1/24 dev veth0 && ip addr add 10.11.13.2/24 dev veth1 &&
	  ip link set veth0 up && ip link set veth1 up; } || infra "veth setup failed"
	for i in all veth0 veth1; do sysctl -qw net.ipv4.conf.$i.accept_local=1 net.ipv4.conf.$i.rp_filter=0; done
	ip neigh replace 10.11.13.2 lladdr "$(cat /sys/class/net/veth1/address)" dev veth0 nud permanent
	ip neigh replace 10.11.13.1 lladdr "$(cat /sys/class/net/veth0/address)" dev veth1 nud permanent
	ip route add 10.11.13.2/32 dev veth0 src 10.11.13.1 table 10
	ip route add 10.11.13.1/32 dev veth1 src 10.11.13.2 table 10
	{ ip rule add pref 10 iif lo lookup 10 && ip rule add pref 100 lookup local &&
	  ip rule del pref 0 lookup local; } || infra "policy routing setup failed"
	{ rdma link add rxea type rxe netdev veth0 && rdma link add rxeb type rxe netdev veth1; } || infra "rxea/rxeb failed"
	for d in a:0a0b:0d01 b:0a0b:0d02; do
		for i in $(seq 1 100); do
			grep -q ":ffff:${d#*:}" /sys/class/infiniband/rxe${d%%:*}/ports/1/gids/1 2>/dev/null && break
			sleep 0.1
		done
		grep -q ":ffff:${d#*:}" /sys/class/infiniband/rxe${d%%:*}/ports/1/gids/1 || infra "rxe${d%%:*} GID not ready"
	done
	export RXE_PAIR_A_DEV=rxea RXE_PAIR_A_IP=10.11.13.1 RXE_PAIR_B_DEV=rxeb RXE_PAIR_B_IP=10.11.13.2
fi
ulimit -l unlimited
export RXE_VM=1 RXE_DEV=rxe0 RXE_NETDEV=dummy0 RXE_IP=10.11.12.1 RXE_GID_INDEX=1 RXE_VM_OUT=/run/rxe-host/out
echo "rxe-vm: rxe0 ready at $(up)s uptime"
up > /run/rxe-host/ready

finish() {
	echo "rxe-vm: command exited with $1 at $(up)s uptime"
	echo "$1" > /run/rxe-host/rc
	bye
}
