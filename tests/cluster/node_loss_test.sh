#!/bin/bash
# A host lost mid-stream: node0 streams batches to node1 without end; node1's guest
# is killed (its QEMU SIGKILLed by the host: no shutdown, no disconnect on the
# wire). The sender must fail on its own within a bound and say how many batches
# were delivered. Seen on rxe (kernel 6.1): with the peer host gone the sender's
# QP retransmits without end (completer_retry_err grows, retry_exceeded_err stays
# 0, no IBV_WC_RETRY_EXC_ERR), so the transport's no-progress deadline is what
# ends it; the test sets it to 10 s (the default is 60 s) and prints which
# mechanism fired. Powers node1 off for good: runs last in the lane.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
TOOL=$(readlink -f "$R/rdma/transport_tool")
IDLE_MS=10000
BOUND=45 # s: a hang guard, not a performance target (the figure is printed)
if [ "$CLUSTER_NODE" = 0 ]; then
	timeout 300 "$TOOL" send --listen "$CLUSTER_IP:7603" --count 0 --size mixed --idle-timeout-ms $IDLE_MS > "$WORK/send.out" 2>&1 &
	sp=$!
	end=$((SECONDS + 60))
	until grep -q "send: listening" "$WORK/send.out" 2>/dev/null || [ $SECONDS -ge $end ]; do sleep 0.1; done
	cluster-signal loss-listening
	cluster-wait loss-streaming 120
	sleep 3 # mid-stream
	t_kill=${EPOCHREALTIME/./}
	cluster-kill-node 1
	# wait for the sender, at most BOUND s
	end=$((SECONDS + BOUND))
	while kill -0 $sp 2>/dev/null && [ $SECONDS -lt $end ]; do sleep 0.05; done
	t_end=${EPOCHREALTIME/./}
	if kill -0 $sp 2>/dev/null; then
		fail "sender fails within ${BOUND}s of node1's loss" "still running; output: $(cat "$WORK/send.out")"
		kill $sp
	else
		wait $sp; rc=$?
		secs=$(awk -v a=$t_kill -v b=$t_end 'BEGIN { printf "%.1f", (b - a) / 1e6 }')
		echo "node0: the sender failed ${secs} s after node1 was killed (bound ${BOUND} s)"
		echo "node_loss: sender error ${secs}s after the kill" > "$WORK/figure"
		check_eq "sender exits 1 (a transport error, not a crash)" 1 "$rc"
		check_grep "the error names the RDMA sender and the cause" 'RDMA sender \(rxe0\): ' "$WORK/send.out"
		check_grep "the error says what was delivered" '[0-9]+ of [0-9]+ batches were acknowledged by the receiver.s HCA, [0-9]+ released \(consumed\) by the receiver' "$WORK/send.out"
		how=$(grep -q 'no progress' "$WORK/send.out" && echo "the ${IDLE_MS} ms no-progress deadline" || echo "the QP or connection (retry exhaustion / CM event)")
		echo "node0: detected by $how"
		echo "node_loss: detected by $how" >> "$WORK/figure"
		rdma stat show link rxe0/1 2>/dev/null | grep -oE '(completer_retry_err|retry_exceeded_err) [0-9]+' | tr '\n' ' '; echo
		acked=$(grep -oE '[0-9]+ of [0-9]+ batches were acknowledged' "$WORK/send.out" | cut -d' ' -f1)
		check "batches were delivered before the loss (mid-stream)" test "${acked:-0}" -gt 0
		sed 's/^/  /' "$WORK/send.out"
	fi
else
	cluster-wait loss-listening 60
	"$TOOL" recv --connect "$CLUSTER_PEER_IP:7603" --size mixed > "$WORK/recv.out" 2>&1 &
	end=$((SECONDS + 60))
	until grep -q "recv: connected" "$WORK/recv.out" 2>/dev/null || [ $SECONDS -ge $end ]; do sleep 0.1; done
	check_grep "receiver connected across the wire" 'recv: connected' "$WORK/recv.out"
	cluster-signal loss-streaming
	# node1 is killed from here on; its half has nothing more to check
	wait
fi
finish
