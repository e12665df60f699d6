# tests/cluster/slurm_torch_lib.sh - sourced by the Slurm tests that run the 2x2 pyverbs +
# DataLoader job (slurm_torch.py -> torch_job.py, TORCH_JOB=orders: right order, then wrong
# order, warn mode), after lib.sh and slurm_lib.sh.
#   run_torch NAME [srun options]   srun -N2 -n4 of it, one output/error file per task in
#                                   $WORK/NAME/, and the checks of each rank; sets JOB
#   report_job NAME JOB             the job's report over $LOGS: one site x8, ranks 0-3,
#                                   both hosts, the job id
TORCH_PY=$(readlink -f "$HERE/slurm_torch.py")
LOGS=$WORK/fglog
SITE="optional $PLUGIN shim=$SHIM log=$LOGS/%j/%h"

# run_torch NAME [srun options]: the 2x2 job, one output/error file per task
run_torch() {
	local name=$1 rc t0=$SECONDS; shift
	mkdir -p "$WORK/$name"
	TORCH_JOB=orders timeout 540 srun -N2 -n4 "$@" \
		--output="$WORK/$name/task-%t.out" --error="$WORK/$name/task-%t.err" \
		/usr/bin/python3 "$TORCH_PY" > "$WORK/$name/srun.out" 2>&1
	rc=$?
	echo "node0: $name: srun exit $rc in $((SECONDS - t0)) s"
	check_eq "$name: srun -N2 -n4 exits 0 (warn mode: the job runs on)" 0 "$rc"
	JOB=$(sed -n 's/^slurm_torch: job \([0-9]*\) .*/\1/p' "$WORK/$name/task-0.out" | head -1)
	for r in 0 1 2 3; do
		local h=node$((r / 2)) out=$WORK/$name/task-$r.out err=$WORK/$name/task-$r.err
		check_grep "$name: rank $r runs on $h in job $JOB" "^slurm_torch: job $JOB step 0 rank $r on $h" "$out"
		check_grep "$name: rank $r finished OK" "rank $r on $h: OK" "$out"
		check_grep "$name: rank $r epoch after the right order" "rank $r on $h: right order done: sum 140" "$err"
		check_eq "$name: rank $r right order silent" 0 "$(sed -n '/right order done/q;p' "$err" | grep -c forkguard)"
		check_grep "$name: rank $r hazard names its rank and host" \
			"forkguard: fork after RDMA init in pid [0-9]+ \(python3[^)]*, rank $r on $h\)" "$err"
	done
}
# report_job NAME JOB: the job's merged report over the site's log directory
report_job() {
	local name=$1 job=$2 j=$WORK/$1/report.json
	"$FG" report --job "$job" --format json "$LOGS" > "$j" 2> "$j.err"
	check_json "$j" \
		"$name report: one hazardous site" 1 'len(d["findings"])' \
		"$name report: x8 (2 DataLoader workers x 4 ranks)" 8 'd["findings"][0]["count"]' \
		"$name report: in 4 processes" 4 'd["findings"][0]["process_count"]' \
		"$name report: ranks 0-3" "[0, 1, 2, 3]" 'sorted(d["findings"][0]["ranks"])' \
		"$name report: both hosts" "['node0', 'node1']" 'sorted(d["findings"][0]["hosts"])' \
		"$name report: the Slurm job id" "['$job']" '[x["job"] for x in d["summary"]["jobs"]]' \
		"$name report: the right order's forks are clean" 8 'd["summary"]["hazard_forks"]'
}

