#!/bin/bash
# The pair itself: each node has rxe0 ACTIVE on the wire, RDMA traffic crosses it
# (ibv_rc_pingpong node1 -> node0), and the shared directory is coherent.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
check "rxe0 ACTIVE on $ME" grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state
check_eq "hostname" "$ME" "$(hostname)"
echo "written by $ME" > "$WORK/from.$ME"
cluster-barrier written 60
check_grep "sees the peer's file on the shared dir" "written by node$((1 - CLUSTER_NODE))" "$WORK/from.node$((1 - CLUSTER_NODE))"
if [ "$CLUSTER_NODE" = 0 ]; then
	timeout 60 ibv_rc_pingpong -d rxe0 -g "$RXE_GID_INDEX" -n 200 > "$WORK/pp.server" 2>&1 &
	srv=$!
	cluster-wait-listen 18515 30 && cluster-signal pp-listening
	wait $srv; rc=$?
	check_eq "ibv_rc_pingpong server exit" 0 "$rc"
	check_grep "200 iters across the wire" '200 iters' "$WORK/pp.server"
else
	cluster-wait pp-listening 60
	timeout 60 ibv_rc_pingpong -d rxe0 -g "$RXE_GID_INDEX" -n 200 "$CLUSTER_PEER_IP" > "$WORK/pp.client" 2>&1
	check_eq "ibv_rc_pingpong client exit" 0 "$?"
	check_grep "client figures" 'usec/iter' "$WORK/pp.client"
fi
finish
