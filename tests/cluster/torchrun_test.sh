#!/bin/bash
# torchrun across the pair, 2 nodes x 2 processes (c10d rendezvous on node0, gloo
# over TCP; every rank opens rxe0 with pyverbs, registers memory and iterates a
# DataLoader(num_workers=2)), launched both ways a user would:
#   A: `forkguard run --log SHARED -- python3 -m torch.distributed.run ...` on each
#      node, ranks running the right order (silent) then the wrong order (hazard);
#   B: LD_PRELOAD/FORKGUARD_LOG/FORKGUARD_MODE=error exported into the launcher:
#      every rank's DataLoader start fails with the explanation.
# Then one `forkguard report` over the shared directory: one site x8 in 4
# processes, ranks 0-3, 2 hosts; the two launches' logs stay apart as two jobs
# (TORCHELASTIC_RUN_ID), B's log directory comes from a %j/%h template, and every
# line the shim prints carries the host/rank/pid prefix.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
JOB_PY=$(readlink -f "$HERE/torch_job.py")
N=$CLUSTER_NODE
torchrun_args() { # rdzv-id port log-dir
	echo --redirects 2 --tee 2 --nnodes 2 --nproc_per_node 2 --node_rank "$N" \
		--rdzv_backend c10d --rdzv_endpoint "$CLUSTER_MASTER:$2" --rdzv_id "$1" \
		--log_dir "$3" "$JOB_PY"
}
launch() { # name what out-prefix command...: the command under a 300 s timeout (with the
	# caller's variable assignments), its output in OUT-PREFIX.out and .err; $rc is its exit
	local name=$1 what=$2 out=$3 t0=$SECONDS
	shift 3
	timeout 300 "$@" > "$out.out" 2> "$out.err"
	rc=$?
	echo "$ME: launch $name ($what) exit $rc in $((SECONDS - t0)) s"
}
rank_stderr() { # torch-log-dir local-rank
	find "$1" -path "*/attempt_*/$2/stderr.log" 2>/dev/null | head -1
}
export PYTHONDONTWRITEBYTECODE=1 RDMAV_FORK_SAFE= IBV_FORK_SAFE=

# ---- A: forkguard run -- torchrun, right order then wrong order (warn) -------------
LOGA=$WORK/fglog-orders; mkdir -p "$LOGA" "$WORK/torch-orders-$ME"
TORCH_JOB=orders launch A "forkguard run -- torchrun" "$WORK/orders.$ME" "$FG" run --log "$LOGA" -- \
	/usr/bin/python3 -m torch.distributed.run $(torchrun_args fg-orders 29500 "$WORK/torch-orders-$ME")
check_eq "A: forkguard run -- torchrun exits 0 (warn mode: the job runs on)" 0 "$rc"
for lr in 0 1; do
	r=$((N * 2 + lr)); f=$(rank_stderr "$WORK/torch-orders-$ME" $lr)
	check_grep "A: rank $r epoch after the right order" "rank $r on $ME: right order done: sum 140" "${f:-/dev/null}"
	check_grep "A: rank $r finished OK" "rank $r on $ME: OK" "$WORK/orders.$ME.out"
	# the right order is silent: nothing from forkguard before the marker
	check_eq "A: rank $r right order silent" 0 \
		"$(sed -n "/right order done/q;p" "${f:-/dev/null}" | grep -c 'forkguard')"
	check_grep "A: rank $r hazard names its rank and host" \
		"forkguard: fork after RDMA init in pid [0-9]+ \(python3[^)]*, rank $r on $ME\)" "${f:-/dev/null}"
	check_grep "A: rank $r hazard names the Python line" 'torch_job.py", line [0-9]+, in main' "${f:-/dev/null}"
done
check_grep "A: forkguard run's own report on $ME" 'hazard: fork\(\) after RDMA initialization' "$WORK/orders.$ME.err"

# ---- B: LD_PRELOAD + FORKGUARD_LOG exported into the launcher, error mode ----------
cluster-barrier torch-b 300
LOGB=$WORK/fglog-error; mkdir -p "$WORK/torch-error-$ME"
# FORKGUARD_LOG templates (%j job id, %h host): the shim creates the directories.
FGLOG_B="$LOGB/%j/%h"
LD_PRELOAD=$SHIM FORKGUARD_LOG=$FGLOG_B FORKGUARD_MODE=error TORCH_JOB=error \
	launch B "exported LD_PRELOAD, error mode" "$WORK/error.$ME" \
	/usr/bin/python3 -m torch.distributed.run $(torchrun_args fg-error 29501 "$WORK/torch-error-$ME")
check_eq "B: torchrun exits 0 (every rank saw its DataLoader fail as expected)" 0 "$rc"
for lr in 0 1; do
	r=$((N * 2 + lr)); f=$(rank_stderr "$WORK/torch-error-$ME" $lr)
	check_grep "B: rank $r DataLoader start failed with EPERM" \
		"rank $r on $ME: DataLoader start failed: .*(Operation not permitted|Errno 1)" "$WORK/error.$ME.out"
	check_grep "B: rank $r explanation: verdict" "verdict: hazard" "${f:-/dev/null}"
	check_grep "B: rank $r explanation: rank and host" "rank $r on $ME\)" "${f:-/dev/null}"
	check_grep "B: rank $r explanation: the fix" "persistent_workers=True|spawn" "${f:-/dev/null}"
	check_grep "B: rank $r explanation: the fork failed" "mode: error" "${f:-/dev/null}"
done

check "B: FORKGUARD_LOG=.../%j/%h created per job and host" test -d "$LOGB/fg-error/$ME"

# ---- the merged report over the shared directory (node0, once both nodes are done) --
cluster-barrier torch-report 300
if [ "$N" = 0 ]; then
	"$FG" report "$LOGA" > "$WORK/report-orders.txt" 2>&1
	"$FG" report --format json "$LOGA" > "$WORK/report-orders.json" 2>"$WORK/report-orders.json.err"
	check_json "$WORK/report-orders.json" \
		"A report: one hazardous site" 1 'len(d["findings"])' \
		"A report: x8" 8 'd["findings"][0]["count"]' \
		"A report: in 4 processes" 4 'd["findings"][0]["process_count"]' \
		"A report: ranks 0-3" "[0, 1, 2, 3]" 'sorted(d["findings"][0]["ranks"])' \
		"A report: 2 hosts" "['node0', 'node1']" 'sorted(d["findings"][0]["hosts"])' \
		"A report: 8 hazard forks in all (the right order's forks are clean)" 8 'd["summary"]["hazard_forks"]'
	check_grep "A report (text): the site x8 in 4 processes" '×8 in' "$WORK/report-orders.txt"
	check_grep "A report (text): 4 processes, ranks 0-3, 2 hosts" '4 processes \(ranks 0.3, 2 hosts\)' "$WORK/report-orders.txt"
	"$FG" report --format json "$LOGB" > "$WORK/report-error.json" 2>/dev/null
	check_json "$WORK/report-error.json" \
		"B report: every rank's fork failed" "{'failed': 4}" \
		'd["findings"][0]["actions"] if len(d["findings"]) == 1 else d["findings"]' \
		"B report: ranks 0-3" "[0, 1, 2, 3]" 'sorted(d["findings"][0]["ranks"])'
	# Job identity from TORCHELASTIC_RUN_ID: both jobs' logs in one report stay apart.
	"$FG" report --format json "$LOGA" "$LOGB" > "$WORK/report-both.json" 2>/dev/null
	# (the torchrun agents themselves have no TORCHELASTIC_RUN_ID: their processes are job null)
	check_eq "both jobs in one report stay apart" "['fg-error', 'fg-orders']" \
		"$(json_get "$WORK/report-both.json" 'sorted(j["job"] for j in d["summary"]["jobs"] if j["job"])')"
	"$FG" report --job fg-orders --format json "$LOGA" "$LOGB" > "$WORK/report-job.json" 2>/dev/null
	check_eq "--job fg-orders: its 8 forks only" 8 \
		"$(json_get "$WORK/report-job.json" 'd["summary"]["hazard_forks"]')"
fi
# Every line the shim prints starts with the host/rank/pid prefix.
f=$(rank_stderr "$WORK/torch-orders-$ME" 0)
check_eq "every hazard line of rank $((N * 2)) carries the host/rank prefix" 0 \
	"$(sed -n '/forkguard: fork after RDMA init/,/  mode:/p' "${f:-/dev/null}" | grep -vc "^\[$ME r$((N * 2)) [0-9]*\] ")"
check_grep "rank $((N * 2))'s hazard lines exist" "^\[$ME r$((N * 2)) [0-9]+\] forkguard: fork after RDMA init" "${f:-/dev/null}"
finish
