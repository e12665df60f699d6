#!/bin/bash
# spank_forkguard.so on by the site's default (plugstack default=on), no option: the 2x2
# pyverbs + DataLoader(num_workers=2) job of slurm_srun_test.sh (right order silent, each
# rank's wrong order caught and named), and its report: one site x8, ranks 0-3, both hosts,
# the Slurm job id; the report srun writes when the step ends (plugstack report=DIR, root's
# and 0755: the report goes in DIR itself): an HTML page, mode 0600, that names the Slurm job.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
. "$HERE/slurm_lib.sh"
. "$HERE/slurm_torch_lib.sh"
LOGS=$WORK/fglog

if [ "$CLUSTER_NODE" = 0 ]; then
	mkdir -p "$WORK/B/reports" && chmod 0755 "$WORK/B/reports"
	plugstack "optional $PLUGIN shim=$SHIM log=$LOGS/%j/%h default=on report=$WORK/B/reports forkguard=$FG"
	run_torch B
	report_job B "$JOB"
	check_eq "B: srun wrote the step's report, and nothing else" "forkguard-$JOB.0.html" \
		"$(ls "$WORK/B/reports" 2>&1 | tr '\n' ' ' | sed 's/ $//')"
	check_grep "B: the step's HTML report names the Slurm job" \
		"\"summary_line\":\"job $JOB: 4 processes \(4 ranks\) on 2 hosts" "$WORK/B/reports/forkguard-$JOB.0.html"
	check_eq "B: the step's report is the user's only" 600 \
		"$(stat -c %a "$WORK/B/reports/forkguard-$JOB.0.html" 2>&1)"
	plugstack "# empty: no plugin"
	slurm_logs_if_failed
fi
slurm_node1_half
finish
