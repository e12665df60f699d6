#!/bin/bash
# An Open MPI job launched by srun (no mpirun): `srun -N2 -n4 --mpi=pmix --forkguard`
# of mpi_job.py (mpi4py; Open MPI 4.1's ofi MTL over libfabric verbs;ofi_rxm on rxe0,
# MCA settings as environment variables), each rank forking after MPI_Init. The report of
# the Slurm job: one site x4, ranks 0-3, both hosts, RDMA initialized on rxe0 in every rank.
. "${TEST_SRCDIR:?run by scripts/lanes/cluster-lane}/forkguard/tests/cluster/lib.sh"
. "$HERE/slurm_lib.sh"
JOB_PY=$(readlink -f "$HERE/mpi_job.py")

if [ "$CLUSTER_NODE" = 0 ]; then
	cd "$WORK"
	plugstack "optional $PLUGIN shim=$SHIM log=$WORK/fglog/%j/%h"
	check_grep "srun --mpi=list has pmix" 'pmix' <(srun --mpi=list 2>&1)
	export OMPI_MCA_pml=cm OMPI_MCA_mtl=ofi OMPI_MCA_mtl_ofi_provider_include='verbs;ofi_rxm' \
		OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0 \
		FI_PROVIDER='verbs;ofi_rxm' FI_UNIVERSE_SIZE=8
	t0=$SECONDS
	timeout 300 srun -N2 -n4 --mpi=pmix --forkguard /usr/bin/python3 "$JOB_PY" > srun.out 2> srun.err
	rc=$?
	echo "node0: srun --mpi=pmix exit $rc in $((SECONDS - t0)) s"
	sed 's/^/  | /' srun.out; tail -n 30 srun.err | sed 's/^/  ! /'
	check_eq "srun --mpi=pmix -N2 -n4 exits 0" 0 "$rc"
	for r in 0 1 2 3; do
		h=node$((r / 2))
		check_grep "rank $r on $h: ring over RDMA OK, forked after MPI_Init" \
			"mpi_job: rank $r of 4 on $h: ring sendrecv of 1 MiB OK, forked child [0-9]+ after MPI_Init; 4/4 ranks OK" srun.out
		check_grep "rank $r's hazard names its rank and host" \
			"forkguard: fork after RDMA init in pid [0-9]+ \(python3[^)]*, rank $r on $h\)" srun.err
	done
	job=$(sed -n 's/.*"job":"\([0-9]*\)".*/\1/p' $(find fglog -name '*.jsonl' | head -1) | head -1)
	"$FG" report --job "$job" --format json fglog > report.json 2> report.err
	check_eq "report: one site x4 in 4 processes" "1 4 4" \
		"$(json_get report.json 'len(d["findings"]), d["findings"][0]["count"], d["findings"][0]["process_count"]' | tr -d '(),')"
	check_eq "report: ranks 0-3" "[0, 1, 2, 3]" "$(json_get report.json 'sorted(d["findings"][0]["ranks"])')"
	check_eq "report: both hosts" "['node0', 'node1']" "$(json_get report.json 'sorted(d["findings"][0]["hosts"])')"
	check_eq "report: RDMA initialized on rxe0 in every rank" "[0, 1, 2, 3]" \
		"$(json_get report.json 'sorted({r for i in d["rdma_inits"] if i["device"] == "rxe0" for r in i["ranks"]})')"
	plugstack "# empty: no plugin"
	slurm_logs_if_failed
fi
slurm_node1_half
finish
