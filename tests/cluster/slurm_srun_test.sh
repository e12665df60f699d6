#!/bin/bash
# spank_forkguard.so under the pair's real Slurm, `srun -N2 -n4` (2 tasks a node):
#   (quick ones first: C, D, E; then A)
#   A: --forkguard on the command line: the pyverbs + DataLoader(num_workers=2) job
#      (torch_job.py through slurm_torch.py), right order then wrong order, warn mode;
#      one `forkguard report --job <Slurm job id>` over the site's log directory
#      (plugstack log=.../%j/%h): one site x8, ranks 0-3, both hosts, the job id, and
#      an HTML page that names the job; every process's log names job, step and rank;
#   (B, the same job on by the site's default: slurm_default_test.sh)
#   C: default=on and `srun --forkguard=off`: no task has the shim (/proc/PID/maps);
#   D: default=off and no option: no shim; with --forkguard: the shim (the control);
#   E: a plugstack whose shim path is missing: the job runs, without the shim, and each
#      node's slurmd log has one line about it for that job.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
. "$HERE/slurm_lib.sh"
. "$HERE/slurm_torch_lib.sh"
if [ "$CLUSTER_NODE" = 0 ]; then
	# ---- C: default=on, srun --forkguard=off ---------------------------------------------
	plugstack "$SITE default=on"
	check_grep "srun --help lists --forkguard" '--forkguard=.warn.error.abort.fix.off.' <(srun --help 2>&1)
	srun -N2 -n4 bash -c "$MAPS_TASK" > "$WORK/C-on.out" 2>&1
	check_eq "C (control): default=on: the shim in all 4 tasks' maps" 4 "$(maps_count "$WORK/C-on.out")"
	srun -N2 -n4 --forkguard=off bash -c "$MAPS_TASK" > "$WORK/C.out" 2>&1
	check_eq "C: srun --forkguard=off: 4 tasks ran" 4 "$(grep -c '^maps ' "$WORK/C.out")"
	check_eq "C: srun --forkguard=off: no task has the shim in its maps" 0 "$(maps_count "$WORK/C.out")"

	# ---- D: default=off, no option ---------------------------------------------------------
	plugstack "$SITE default=off"
	srun -N2 -n4 bash -c "$MAPS_TASK" > "$WORK/D.out" 2>&1
	check_eq "D: default=off, no option: 4 tasks ran" 4 "$(grep -c '^maps ' "$WORK/D.out")"
	check_eq "D: default=off, no option: no task has the shim in its maps" 0 "$(maps_count "$WORK/D.out")"
	srun -N2 -n4 --forkguard=error bash -c "$MAPS_TASK"' FORKGUARD_MODE=$FORKGUARD_MODE' > "$WORK/D-on.out" 2>&1
	check_eq "D (control): --forkguard=error: the shim in all 4 tasks' maps" 4 "$(maps_count "$WORK/D-on.out")"
	check_eq "D: --forkguard=error sets FORKGUARD_MODE=error in every task" 4 "$(grep -c 'FORKGUARD_MODE=error$' "$WORK/D-on.out")"

	# ---- E: the shim path is missing -------------------------------------------------------
	plugstack "optional $PLUGIN default=on shim=/nonexistent/forkguard/libforkguard.so"
	srun -N2 -n4 bash -c "$MAPS_TASK" > "$WORK/E.out" 2>&1
	rc=$?
	check_eq "E: missing shim: srun exits 0" 0 "$rc"
	check_eq "E: missing shim: 4 tasks ran" 4 "$(grep -c '^maps ' "$WORK/E.out")"
	check_eq "E: missing shim: no task has a shim" 0 "$(maps_count "$WORK/E.out")"
	JOB_E=$(sed -n 's/.* job \([0-9]*\)$/\1/p' "$WORK/E.out" | head -1)
	sleep 1 # slurmstepd's log line reaches the file over 9p
	for n in 0 1; do
		check_eq "E: node$n's slurmd log: one line about the missing shim for job $JOB_E" 1 \
			"$(grep -c "forkguard: shim /nonexistent/forkguard/libforkguard.so not readable.*job $JOB_E step 0 " "$(slurmd_log $n)")"
	done
	grep -h 'forkguard' "$(slurmd_log 0)" "$(slurmd_log 1)" | sed 's/^/  slurmd: /'

	# ---- A: --forkguard on the command line --------------------------------------------
	plugstack "$SITE"
	run_torch A --forkguard
	JOB_A=$JOB
	report_job A "$JOB_A"
	"$FG" report --job "$JOB_A" --format html "$LOGS" > "$WORK/A/report.html" 2> "$WORK/A/report.html.err"
	check_grep "A: the HTML report names the Slurm job" "\"summary_line\":\"job $JOB_A: 4 processes \(4 ranks\) on 2 hosts" "$WORK/A/report.html"
	check_eq "A: FORKGUARD_LOG=.../%j/%h: one directory per host under the job's" "node0 node1" \
		"$(ls "$LOGS/$JOB_A" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
	# every process's log header: the Slurm job, step 0 and its task rank
	check_eq "A: every rank's log header has job $JOB_A, step 0 and its rank" \
		"[(0, 0), (0, 1), (0, 2), (0, 3)]" \
		"$(cat "$LOGS/$JOB_A"/*/*.jsonl | /usr/bin/python3 -c '
import json, sys
h = [json.loads(l) for l in sys.stdin if "\"header\"" in l]
print(sorted({(x.get("step"), x["rank"]) for x in h if x["job"] == sys.argv[1] and x["prog"].startswith("python3")}))' "$JOB_A")"
	plugstack "# empty: no plugin"
	slurm_logs_if_failed
fi
slurm_node1_half
finish
