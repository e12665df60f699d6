#!/bin/bash
# spank_forkguard.so on by the site's default (plugstack default=on), no option: the 2x2
# pyverbs + DataLoader(num_workers=2) job of slurm_srun_test.sh (right order silent, each
# rank's wrong order caught and named), and its report: one site x8, ranks 0-3, both hosts,
# the Slurm job id.
. "${TEST_SRCDIR:?run by scripts/cluster-lane}/forkguard/tests/cluster/lib.sh"
. "$HERE/slurm_lib.sh"
. "$HERE/slurm_torch_lib.sh"
LOGS=$WORK/fglog

if [ "$CLUSTER_NODE" = 0 ]; then
	plugstack "optional $PLUGIN shim=$SHIM log=$LOGS/%j/%h default=on"
	run_torch B
	report_job B "$JOB"
	plugstack "# empty: no plugin"
	slurm_logs_if_failed
fi
slurm_node1_half
finish
