#!/bin/bash
# Open MPI across both hosts: mpirun on node0 starts 2 ranks per node, its daemon
# on node1 launched through the rsh agent (cluster-rsh, the pair's ssh stand-in);
# ranks talk RDMA through Open MPI (--mca pml cm --mca mtl ofi, libfabric
# verbs;ofi_rxm on rxe0); the shim reaches them with -x LD_PRELOAD -x FORKGUARD_LOG;
# each rank forks after MPI_Init. The merged report over the shared directory has
# every rank: one site x4 in 4 processes, ranks 0-3 (OMPI_COMM_WORLD_RANK), 2 hosts,
# and RDMA initialized on rxe0 in every rank.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
JOB_PY=$(readlink -f "$HERE/mpi_job.py")
LOG=$WORK/fglog; mkdir -p "$LOG"
if [ "$CLUSTER_NODE" = 0 ]; then
	export LD_PRELOAD=$SHIM FORKGUARD_LOG=$LOG
	export FI_PROVIDER='verbs;ofi_rxm' FI_UNIVERSE_SIZE=8 PYTHONDONTWRITEBYTECODE=1
	t0=$SECONDS
	timeout 240 mpirun --allow-run-as-root -np 4 --host node0:2,node1:2 \
		--mca plm_rsh_agent cluster-rsh \
		--mca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 \
		--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include 'verbs;ofi_rxm' \
		-x LD_PRELOAD -x FORKGUARD_LOG -x FI_PROVIDER -x FI_UNIVERSE_SIZE -x PYTHONDONTWRITEBYTECODE \
		/usr/bin/python3 "$JOB_PY" > "$WORK/mpirun.out" 2> "$WORK/mpirun.err"
	rc=$?
	unset LD_PRELOAD
	echo "node0: mpirun exit $rc in $((SECONDS - t0)) s"
	sed 's/^/  | /' "$WORK/mpirun.out"; tail -n 30 "$WORK/mpirun.err" | sed 's/^/  ! /'
	check_eq "mpirun across both hosts exits 0" 0 "$rc"
	for r in 0 1 2 3; do
		h=node$((r / 2))
		check_grep "rank $r on $h: ring over RDMA OK, forked after MPI_Init" \
			"mpi_job: rank $r of 4 on $h: ring sendrecv of 1 MiB OK, forked child [0-9]+ after MPI_Init; 4/4 ranks OK" "$WORK/mpirun.out"
		check_grep "rank $r's hazard names its rank and host" \
			"forkguard: fork after RDMA init in pid [0-9]+ \(python3[^)]*, rank $r on $h\)" "$WORK/mpirun.err"
	done
	"$FG" report --format json "$LOG" > "$WORK/report.json" 2>"$WORK/report.err"
	"$FG" report "$LOG" > "$WORK/report.txt" 2>&1
	check_eq "report: one hazardous site" 1 "$(json_get "$WORK/report.json" 'len(d["findings"])')"
	check_eq "report: x4" 4 "$(json_get "$WORK/report.json" 'd["findings"][0]["count"]')"
	check_eq "report: in 4 processes" 4 "$(json_get "$WORK/report.json" 'd["findings"][0]["process_count"]')"
	check_eq "report: ranks 0-3" "[0, 1, 2, 3]" "$(json_get "$WORK/report.json" 'sorted(d["findings"][0]["ranks"])')"
	check_eq "report: 2 hosts" "['node0', 'node1']" "$(json_get "$WORK/report.json" 'sorted(d["findings"][0]["hosts"])')"
	line=$(grep -n 'MARK:fork-after-init' "$JOB_PY" | cut -d: -f1)
	check_eq "report: the fork is at mpi_job.py's fork line" "mpi_job.py:$line" \
		"$(json_get "$WORK/report.json" 'd["findings"][0]["location"].rsplit("/", 1)[-1]')"
	check_eq "report: RDMA initialized on rxe0 in every rank" "[0, 1, 2, 3]" \
		"$(json_get "$WORK/report.json" 'sorted({r for i in d["rdma_inits"] if i["device"] == "rxe0" for r in i["ranks"]})')"
	head -8 "$WORK/report.txt"
	cluster-signal mpi-done
else
	# node1's half: its orted is started by cluster-rsh from node0; wait for the job
	cluster-wait mpi-done 300
	check "node1 ran its ranks (log files of node1 on the shared dir)" \
		bash -c "ls '$LOG' | grep -q '^forkguard\.node1\.'"
fi
finish
