#!/bin/bash
# sbatch of a script with `#SBATCH --forkguard=error` (spank_forkguard.so in the pair's
# plugstack, off by default): the script's `srun -N2 -n4` of a pyverbs job that forks
# after RDMA init (fork_job.py) inherits the option; every task's fork fails with EPERM,
# the job fails, and forkguard's explanation is in the job's output file. Then salloc
# (the other allocator context): `salloc --forkguard` puts the shim into the tasks of the
# srun it runs, and `salloc --forkguard=off` under a site default of on keeps it out.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
. "$HERE/slurm_lib.sh"
FORK_PY=$(readlink -f "$HERE/fork_job.py")

if [ "$CLUSTER_NODE" = 0 ]; then
	cd "$WORK"
	plugstack "optional $PLUGIN shim=$SHIM log=$WORK/fglog/%j/%h"
	cat > job.sh <<JOB
#!/bin/bash
#SBATCH --forkguard=error
#SBATCH --nodes=2 --ntasks=4
#SBATCH --output=$WORK/slurm-%j.out
srun /usr/bin/python3 $FORK_PY
JOB
	job=$(sbatch --parsable --wait job.sh)
	rc=$?
	echo "node0: sbatch --wait: job $job, exit $rc"
	out=$WORK/slurm-$job.out
	check "sbatch --wait: the job failed (its tasks' forks failed)" test "$rc" != 0
	check "the job's output file $out exists" test -s "$out"
	for r in 0 1 2 3; do
		h=node$((r / 2))
		check_grep "rank $r on $h: the fork failed with EPERM" "^fork_job: rank $r on $h: fork failed: \[Errno 1\] Operation not permitted" "$out"
		check_grep "rank $r: forkguard's message names its rank and host" \
			"forkguard: fork after RDMA init in pid [0-9]+ \(python3[^)]*, rank $r on $h\)" "$out"
	done
	check_eq "the output file says mode error, 4 times" 4 "$(grep -c 'mode: error' "$out")"
	"$FG" report --job "$job" --format json "$WORK/fglog" > report.json 2> report.err
	check_eq "report: every rank's fork failed" "{'failed': 4}" \
		"$(json_get report.json 'd["findings"][0]["actions"] if len(d["findings"]) == 1 else d["findings"]')"

	# ---- salloc: the option holds for the steps of the allocation --------------------------
	plugstack "optional $PLUGIN shim=$SHIM"
	salloc -N2 -n4 --forkguard=warn srun bash -c "$MAPS_TASK"' FORKGUARD_MODE=$FORKGUARD_MODE' \
		> "$WORK/salloc-on.out" 2>&1
	check_eq "salloc --forkguard=warn: the shim in all 4 tasks' maps" 4 "$(maps_count "$WORK/salloc-on.out")"
	check_eq "salloc --forkguard=warn: FORKGUARD_MODE=warn in every task" 4 \
		"$(grep -c 'FORKGUARD_MODE=warn$' "$WORK/salloc-on.out")"
	plugstack "optional $PLUGIN shim=$SHIM default=on"
	salloc -N2 -n4 --forkguard=off srun bash -c "$MAPS_TASK" > "$WORK/salloc-off.out" 2>&1
	check_eq "salloc --forkguard=off (site default on): 4 tasks ran" 4 "$(grep -c '^maps ' "$WORK/salloc-off.out")"
	check_eq "salloc --forkguard=off (site default on): no task has the shim" 0 \
		"$(maps_count "$WORK/salloc-off.out")"
	plugstack "# empty: no plugin"
	slurm_logs_if_failed
fi
slurm_node1_half
finish
