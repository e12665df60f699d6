#!/bin/bash
# The fork matrix's judge (analyze.py) on made-up cells: a cell passes only when its truth
# was established and the verdict equals it; every way a truth can go unestablished fails.
set -uo pipefail
ANALYZE=$1
T=${TEST_TMPDIR:-$(mktemp -d)}
RAW=$T/raw
OUT=$T/out
rm -rf "$RAW" "$OUT"
mkdir -p "$RAW/kernel-5.10" "$OUT"
echo 5.10.0-32-amd64 > "$RAW/kernel-5.10/uname"
echo done > "$RAW/kernel-5.10/finished"
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi; }

# cell DIR RUN JSON-OVERRIDES [REASONS]: one fork_truth run and (shim runs) its fork event
cell() {
	local d=$RAW/kernel-5.10/44/$1 run=$2 over=$3 reasons=${4:-}
	mkdir -p "$d"
	/usr/bin/python3 - "$d/$run.json" "$over" <<'PY'
import json, sys
m = {"kind": "anon", "libibverbs": "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", "reg": "ok",
     "reg_errno": 0, "dontfork": False, "fork": "ok", "fork_errno": 0, "device_reads": "fresh",
     "device_writes": "seen", "child": "alive"}
m.update(json.loads(sys.argv[2]))
open(sys.argv[1], "w").write(json.dumps(m) + "\n")
PY
	echo 0 > "$d/$run.rc"
	if [ "$run" != bare ]; then
		mkdir -p "$d/$run-log"
		echo "{\"event\":\"fork\",\"verdict\":\"hazard\",\"reasons\":[$reasons],\"kernel_cof\":false}" \
			> "$d/$run-log/forkguard.h.1.1.jsonl"
	fi
}
# right: nothing happened, the verdict names neither
cell anon-off bare '{}'; cell anon-off warn '{}' '"inherited-rdma"'
# right: the child died, child-segv
cell anon-env bare '{"child":"segv"}'; cell anon-env warn '{"child":"segv"}' '"child-segv","inherited-rdma"'
# right: stale, parent-corruption, error mode intact
cell hugetlb-off bare '{"device_reads":"stale","device_writes":"lost"}'
cell hugetlb-off warn '{"device_reads":"stale","device_writes":"lost"}' '"parent-corruption"'
cell hugetlb-off error '{"fork":"refused","fork_errno":1,"child":"none"}' '"parent-corruption"'
# wrong: corruption claimed where nothing happened
cell thp-off bare '{}'; cell thp-off warn '{}' '"parent-corruption"'
# unestablished: the device read neither pattern
cell thp-env bare '{"device_reads":"other"}'; cell thp-env warn '{}' '"child-segv"'
# unestablished: another rdma-core was loaded
cell shared-off bare '{"libibverbs":"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.11.33.2"}'
cell shared-off warn '{}' ''
# unestablished: the measuring program failed
mkdir -p "$RAW/kernel-5.10/44/file-off"; echo 2 > "$RAW/kernel-5.10/44/file-off/bare.rc"
echo "fork_truth: error: no RDMA device" > "$RAW/kernel-5.10/44/file-off/bare.err"
# wrong: stale, but error mode let the fork happen
cell hugetlb-env bare '{"device_reads":"stale"}'; cell hugetlb-env warn '{"device_reads":"stale"}' '"parent-corruption"'
cell hugetlb-env error '{"device_reads":"stale"}' '"parent-corruption"'
# wrong: the shim changed the outcome
cell hugetlb-init bare '{}'; cell hugetlb-init warn '{"child":"segv"}' '"child-segv"'

/usr/bin/python3 "$ANALYZE" junit "$RAW" "$OUT" --kernels=5.10,6.12 --rdma-cores=44,56 > "$T/log" 2>&1
rc=$?
cat "$T/log"
check "exit 1 when a cell failed" '[ $rc = 1 ]'
x() { grep -c "$1" "$OUT/matrix.xml"; }
check "pass: anon off (nothing)" 'grep -q "anon / fork support off: truth nothing, verdict inherited-rdma only\"/>" "$OUT/matrix.xml"'
check "pass: anon env (child-segv)" 'grep -q "anon / fork support RDMAV_FORK_SAFE=1: truth child-segv, verdict child-segv\"/>" "$OUT/matrix.xml"'
check "pass: hugetlb off (stale)" 'grep -q "hugetlb / fork support off: truth stale, verdict parent-corruption\"/>" "$OUT/matrix.xml"'
check "fail: corruption claimed" 'grep -q "thp / fork support off: truth nothing, verdict parent-corruption\"><failure message=\"verdict claims parent-corruption\"" "$OUT/matrix.xml"'
check "fail: neither pattern" 'grep -q "thp / fork support RDMAV_FORK_SAFE=1: truth unknown.*truth not established: the device" "$OUT/matrix.xml"'
check "fail: wrong rdma-core" 'grep -q "shared / fork support off: truth unknown.*not rdma-core 44" "$OUT/matrix.xml"'
check "fail: program error" 'grep -q "file / fork support off: truth unknown.*exit 2: fork_truth: error: no RDMA device" "$OUT/matrix.xml"'
check "fail: error mode did not refuse" 'grep -q "RDMAV_FORK_SAFE=1: truth stale.*did not refuse the fork" "$OUT/matrix.xml"'
check "fail: shim changed the outcome" 'grep -q "the shim changed the outcome" "$OUT/matrix.xml"'
check "fail: kernel 6.12 never ran" 'grep -q "kernel 6.12: the guest ran every cell\"><failure" "$OUT/matrix.xml"'
check "fail: rdma-core 56 never laid" 'grep -q "rdma-core 56: laid over / in the guest\"><failure" "$OUT/matrix.xml"'
check "11 testcases, 8 failed" '[ "$(x "<testcase")" = 11 ] && [ "$(x "<failure")" = 8 ]'
check "results.json counts" '/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not (r[\"counts\"][\"stale\"]==2 and r[\"counts\"][\"unknown\"]==3))" "$OUT/results.json"'
/usr/bin/python3 "$ANALYZE" doc "$OUT/results.json" > "$T/doc.md"
check "the doc marks a wrong verdict" 'grep -q "nothing \*\*✗ parent-corruption\*\*" "$T/doc.md"'
check "the doc shows stale with error mode" 'grep -q "fork refused, data intact" "$T/doc.md"'
[ $fails = 0 ]
