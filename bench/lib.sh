# shellcheck shell=bash
# bench/lib.sh - what the report benches share; sourced, not run.

# Builds TARGET... with -c opt (quietly; again with its errors when that fails) and sets BIN
# to the opt bazel-bin.
bench_build_opt() {
	bazel build --noshow_progress -c opt "$@" >/dev/null 2>&1 ||
		bazel build --noshow_progress -c opt "$@"
	# shellcheck disable=SC2034  # read by the script that sources this
	BIN=$(bazel info -c opt bazel-bin 2>/dev/null)
}

# Sets ROOT to KEEP (made if missing) or, when KEEP is empty, a new directory named after
# NAME under /tmp, removed when the script exits.
bench_root() {
	local keep=$1 name=$2
	if [ -n "$keep" ]; then
		ROOT=$keep
		mkdir -p "$ROOT"
	else
		ROOT=$(mktemp -d "/tmp/$name.XXXXXX")
		trap 'rm -rf "$ROOT"' EXIT
	fi
}
