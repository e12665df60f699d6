# tests/cluster/slurm_lib.sh - sourced after lib.sh by the tests that run under the real
# Slurm of the pair (tag "slurm": scripts/lanes/cluster-lane boots the pair with
# CLUSTER_SLURM=1, scripts/guests/inside/slurm-pair). node0 submits; node1's slurmd runs its tasks.
#   PLUGIN                 spank_forkguard.so of this build
#   srun, sbatch, salloc   the commands, each under a timeout of SLURM_CALL_TIMEOUT s (420)
#   plugstack LINE...      writes the pair's plugstack.conf (on the shared directory, read
#                          by srun/sbatch on node0 and slurmstepd on both nodes)
#   slurmd_log N           node N's slurmd log (the control share: readable from both)
#   maps_count FILE        sums the "N" of the "maps N" lines tasks printed
#   slurm_logs_if_failed   after the checks: the tails of the Slurm logs, when one failed
#   slurm_node1_half       node0 says it is done; node1 waits for that and checks that its
#                          slurmd ran this test's tasks
PLUGIN=$(readlink -f "$R/slurm/spank_forkguard.so")
PLUGSTACK=$CLUSTER_SHARED/slurm/plugstack.conf
export PYTHONDONTWRITEBYTECODE=1 RDMAV_FORK_SAFE= IBV_FORK_SAFE=
# Every Slurm client call is bounded: a job that cannot get its nodes (a slurmd that died,
# a job of an earlier test that never completed) fails its test within minutes, instead of
# holding the lane to its per-test timeout while the tests after it wait.
SLURM_CALL_TIMEOUT=${SLURM_CALL_TIMEOUT:-420}
srun() { timeout -k 10 "$SLURM_CALL_TIMEOUT" srun "$@"; }
sbatch() { timeout -k 10 "$SLURM_CALL_TIMEOUT" sbatch "$@"; }
salloc() { timeout -k 10 "$SLURM_CALL_TIMEOUT" salloc "$@"; }
plugstack() { printf '%s\n' "$@" > "$PLUGSTACK"; }
slurmd_log() { echo "$CLUSTER_CTL/node$1/slurm/slurmd.log"; }
# Each task prints "maps N" (N: mappings of libforkguard.so in its own /proc/PID/maps).
MAPS_TASK='echo "maps $(grep -c libforkguard /proc/$$/maps) on $(hostname) rank $SLURM_PROCID job $SLURM_JOB_ID"'
maps_count() { awk '$1 == "maps" { n += ($2 > 0) } END { print n + 0 }' "$1"; }
slurm_logs_if_failed() {
	[ "$_nfail" = 0 ] && return
	for f in "$CLUSTER_CTL"/node*/slurm/*.log; do
		echo "----- $f (last 20 lines) -----"; tail -n 20 "$f"
	done
}
slurm_node1_half() {
	if [ "$CLUSTER_NODE" = 0 ]; then
		cluster-signal "$CLUSTER_TEST_NAME-done"
	else
		cluster-wait "$CLUSTER_TEST_NAME-done" 590
		check_grep "node1's slurmd started tasks of this test's jobs" 'launch task StepId=' "$(slurmd_log 1)"
	fi
}
if [ "$CLUSTER_NODE" = 0 ]; then
	# a previous test's job may still be completing
	for i in $(seq 1 120); do
		idle=$(sinfo -h -N -p pair -o '%N %t' 2>&1 | sort -u | tr '\n' ' ')
		[ "$idle" = "node0 idle node1 idle " ] && break
		sleep 0.5
	done
	check_eq "sinfo: both nodes idle before the test" "node0 idle node1 idle " "$idle"
	plugstack "# empty: no plugin"
fi
