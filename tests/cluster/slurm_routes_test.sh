#!/bin/bash
# The routes to the shim under Slurm that need no plugin (the pair's plugstack is empty),
# `srun -N2 -n4` of a light pyverbs job that forks after RDMA init (fork_job.py):
#   1: srun --export=ALL,LD_PRELOAD=<shim>,FORKGUARD_LOG=<shared>/%j/%h
#   2: srun --task-prolog=<script printing "export LD_PRELOAD=..." lines> (what a site's
#      TaskProlog= in slurm.conf does for every job)
#   3: srun forkguard run --log <shared> -- CMD
# Each: all 4 tasks ran, each one's hazard message names its rank and host, and the job's
# report over its log directory has the site x4 in ranks 0-3 on both hosts, with the job id.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
. "$HERE/slurm_lib.sh"
FORK_PY=$(readlink -f "$HERE/fork_job.py")

# checks NAME LOGDIR: the tasks' output in $WORK/NAME.out, their stderr in $WORK/NAME.err
checks() {
	local name=$1 logs=$2 job j=$WORK/$1.report.json
	for r in 0 1 2 3; do
		local h=node$((r / 2))
		check_grep "$name: rank $r on $h forked after RDMA init" "^fork_job: rank $r on $h: forked after RDMA init OK" "$WORK/$name.out"
		check_grep "$name: rank $r's hazard message names its rank and host" \
			"forkguard: fork after RDMA init in pid [0-9]+ \(python3[^)]*, rank $r on $h\)" "$WORK/$name.err"
	done
	job=$(sed -n 's/.*"job":"\([0-9]*\)".*/\1/p' $(find "$logs" -name '*.jsonl' | head -1) | head -1)
	"$FG" report --job "$job" --format json "$logs" > "$j" 2> "$j.err"
	check_eq "$name report: one site x4" "1 4" "$(json_get "$j" 'len(d["findings"]), d["findings"][0]["count"]' | tr -d '(),')"
	check_eq "$name report: ranks 0-3" "[0, 1, 2, 3]" "$(json_get "$j" 'sorted(d["findings"][0]["ranks"])')"
	check_eq "$name report: both hosts" "['node0', 'node1']" "$(json_get "$j" 'sorted(d["findings"][0]["hosts"])')"
	check_eq "$name report: one job, the Slurm job $job" "['$job']" "$(json_get "$j" '[x["job"] for x in d["summary"]["jobs"]]')"
}

if [ "$CLUSTER_NODE" = 0 ]; then
	cd "$WORK"
	# 1: --export
	srun -N2 -n4 --export=ALL,LD_PRELOAD=$SHIM,FORKGUARD_LOG=$WORK/fg-export/%j/%h \
		/usr/bin/python3 "$FORK_PY" > export.out 2> export.err
	check_eq "export: srun --export=ALL,LD_PRELOAD=... exits 0" 0 "$?"
	checks export "$WORK/fg-export"

	# 2: a task prolog that prints export lines
	cat > "$WORK/fg-task-prolog.sh" <<PROLOG
#!/bin/sh
# Slurm TaskProlog: each "export NAME=VALUE" line on stdout goes into the task's environment
echo "export LD_PRELOAD=$SHIM\${LD_PRELOAD:+:\$LD_PRELOAD}"
echo "export FORKGUARD_LOG=$WORK/fg-prolog/%j/%h"
PROLOG
	chmod +x "$WORK/fg-task-prolog.sh"
	srun -N2 -n4 --task-prolog="$WORK/fg-task-prolog.sh" /usr/bin/python3 "$FORK_PY" > prolog.out 2> prolog.err
	check_eq "prolog: srun --task-prolog=... exits 0" 0 "$?"
	checks prolog "$WORK/fg-prolog"

	# 3: forkguard run around each task
	srun -N2 -n4 "$FG" run --log "$WORK/fg-run" -- /usr/bin/python3 "$FORK_PY" > run.out 2> run.err
	check_eq "run: srun forkguard run -- CMD exits 0" 0 "$?"
	checks run "$WORK/fg-run"
	check_eq "run: each task's forkguard run printed its own report" 4 "$(grep -c 'hazard: fork() after RDMA initialization' run.err)"
	slurm_logs_if_failed
fi
slurm_node1_half
finish
