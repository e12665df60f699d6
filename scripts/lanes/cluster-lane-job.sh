# shellcheck shell=bash
# The job scripts/lanes/cluster-lane runs on both nodes of scripts/guests/rxe-cluster, sourced after the
# lines that set RES and PER_TEST_TIMEOUT: run_one INDEX LABEL BINARY KILLS_NODE runs one
# test binary as `bazel test` would (cwd = its runfiles, TEST_SRCDIR/TEST_WORKSPACE/
# TEST_TMPDIR), with CLUSTER_TEST_WORK = its own directory on the shared filesystem and
# CLUSTER_TEST_CHECKS = the file its checks are recorded in; both nodes meet before and
# after each test. lane_done records when this node finished.
me=node$CLUSTER_NODE
lane_t0=$(date +%s.%N)
run_one() { # index label binary kills-node
	local i=$1 label=$2 bin=$3 kills=$4 name rc t0 t1 tmp secs
	name=$(echo "${label#//}" | tr ':/' '__')
	# both halves start together (bounded: a peer that is gone fails this test, not the lane)
	cluster-barrier "start-$i" 120 || echo "cluster-lane: $me: peer did not reach the start of $label" >> "$RES/$name.$me.log"
	tmp=$(mktemp -d /tmp/lane-test.XXXXXX)
	mkdir -p "$CLUSTER_SHARED/work/$name"
	t0=$(date +%s.%N)
	( cd "$bin.runfiles/forkguard" 2>/dev/null || cd "$(dirname "$bin")" || exit 127
	  export TEST_SRCDIR=$bin.runfiles TEST_WORKSPACE=forkguard TEST_TMPDIR=$tmp \
		RUNFILES_DIR=$bin.runfiles FORKGUARD_IN_CLUSTER_LANE=1 \
		CLUSTER_TEST_NAME=$name CLUSTER_TEST_WORK=$CLUSTER_SHARED/work/$name \
		CLUSTER_TEST_CHECKS=$RES/$name.$me.checks CLUSTER_TEST_STEP=$i
	  exec timeout -k 10 "$PER_TEST_TIMEOUT" "$bin" ) >> "$RES/$name.$me.log" 2>&1
	rc=$?
	t1=$(date +%s.%N)
	rm -rf "$tmp"
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	echo "$rc $secs" > "$RES/$name.$me.rc"
	echo "cluster-lane: $me: $label exit $rc (${secs}s)"
	# both halves end before the next test starts (not after one that kills a node)
	[ "$kills" = 1 ] || cluster-barrier "end-$i" $((PER_TEST_TIMEOUT + 60)) ||
		echo "cluster-lane: $me: peer did not finish $label" >> "$RES/$name.$me.log"
}
lane_done() {
	echo "$(date +%s.%N) $lane_t0" > "$RES/done.$me"
}
