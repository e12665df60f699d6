#!/bin/bash
# The RDMA transport between the two hosts, over the wire:
#   1. transport_tool: 1,000 mixed batches (1 KiB .. 4 MiB, 229.5 MB) node0 -> node1,
#      CRC32C on every batch and every byte compared by the receiver;
#   2. the pipeline: `refloader serve` on node0 (loader workers forked first, then
#      RDMA) -> `refloader consume --check-sequential` on node1, both under
#      `forkguard run` with their logs on the shared directory: every batch
#      verified, and the merged report has no hazard.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
TOOL=$(readlink -f "$R/rdma/transport_tool")
REFLOADER=$(readlink -f "$R/refloader/refloader")
wait_for() { # pattern file secs
	local end=$((SECONDS + $3))
	until grep -q -- "$1" "$2" 2>/dev/null; do [ $SECONDS -ge $end ] && return 1; sleep 0.1; done
}

# ---- 1. 1,000 mixed batches ------------------------------------------------------
if [ "$CLUSTER_NODE" = 0 ]; then
	timeout 200 "$TOOL" send --listen "$CLUSTER_IP:7601" --count 1000 --size mixed > "$WORK/send.out" 2>&1 &
	sp=$!
	wait_for "send: listening" "$WORK/send.out" 60 && cluster-signal mixed-listening
	wait $sp; rc=$?
	check_eq "sender of 1,000 mixed batches exits 0" 0 "$rc"
	check_grep "sender: 1000 batches sent and acknowledged" '^send: 1000 batches' "$WORK/send.out"
else
	cluster-wait mixed-listening 60
	timeout 200 "$TOOL" recv --connect "$CLUSTER_PEER_IP:7601" --size mixed --verify > "$WORK/recv.out" 2>&1
	check_eq "receiver of 1,000 mixed batches exits 0" 0 "$?"
	check_grep "receiver: 1000 batches, every byte verified" '^recv: 1000 batches, 229' "$WORK/recv.out"
	check_grep "receiver came over rxe0" 'recv: connected to .*rxe0' "$WORK/recv.out"
fi
sed 's/^/  /' "$WORK/send.out" "$WORK/recv.out" 2>/dev/null | grep -E 'batches' | head -2
cluster-barrier mixed-done 120

# ---- 2. refloader serve (node0) -> consume (node1), under forkguard run ---------
LOG=$WORK/fglog-pipeline; mkdir -p "$LOG"
if [ "$CLUSTER_NODE" = 0 ]; then
	timeout 200 "$FG" run --log "$LOG" -- "$REFLOADER" serve --listen "$CLUSTER_IP:7602" --epochs 2 \
		> "$WORK/serve.out" 2> "$WORK/serve.err" &
	sp=$!
	wait_for "listening on" "$WORK/serve.out" 90 && cluster-signal serve-listening
	wait $sp; rc=$?
	check_eq "forkguard run -- refloader serve exits 0" 0 "$rc"
	check_grep "serve: workers forked before any RDMA init" 'before any RDMA init' "$WORK/serve.out"
	check_grep "serve: every batch released after verification" '^serve: sent 128 batches \(2 epochs\)' "$WORK/serve.out"
else
	cluster-wait serve-listening 120
	timeout 200 "$FG" run --log "$LOG" -- "$REFLOADER" consume --connect "$CLUSTER_PEER_IP:7602" --check-sequential \
		> "$WORK/consume.out" 2> "$WORK/consume.err"
	check_eq "forkguard run -- refloader consume exits 0" 0 "$?"
	check_grep "consume: every batch CRC32C- and order-checked" 'CRC32C verified on 128/128 batches, record order checked' "$WORK/consume.out"
fi
cluster-barrier pipeline-done 120
if [ "$CLUSTER_NODE" = 0 ]; then
	"$FG" report --format json "$LOG" > "$WORK/report.json" 2>/dev/null
	check_eq "merged report: both hosts" "['node0', 'node1']" "$(json_get "$WORK/report.json" 'sorted(d["summary"]["hosts"])')"
	check_eq "merged report: no hazard (right order)" 0 "$(json_get "$WORK/report.json" 'd["summary"]["hazard_forks"]')"
	check_eq "merged report: the loader's 2 worker forks, clean" 2 "$(json_get "$WORK/report.json" 'd["summary"]["clean_forks"]')"
fi
finish
