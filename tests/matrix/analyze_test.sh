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

# cell DIR RUN JSON-OVERRIDES [REASONS [RANGES]]: one fork_truth run and (shim runs) its fork
# event, RANGES its "ranges" entries (fix mode: what it did to each)
cell() {
	local d=$RAW/kernel-5.10/44/$1 run=$2 over=$3 reasons=${4:-} ranges=${5:-}
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
		echo "{\"event\":\"fork\",\"verdict\":\"hazard\",\"reasons\":[$reasons],\"kernel_cof\":false,\"ranges\":[$ranges]}" \
			> "$d/$run-log/forkguard.h.1.1.jsonl"
	fi
}
# right: nothing happened, the verdict names neither; fix changed nothing
cell anon-off bare '{}'; cell anon-off warn '{}' '"inherited-rdma"'
cell anon-off fix '{}' '"inherited-rdma"' '{"dontfork":false}'
# right: the child died, child-segv; under fix the kernel copies anon (anon-off): it lives
cell anon-env bare '{"child":"segv"}'; cell anon-env warn '{"child":"segv"}' '"child-segv","inherited-rdma"'
cell anon-env fix '{}' '"child-segv","inherited-rdma"' '{"dontfork":true,"fixed":"copied"}'
# right: stale, parent-corruption, error mode intact; fix withholds it: the child dies, the
# parent's data is intact
cell hugetlb-off bare '{"device_reads":"stale","device_writes":"lost"}'
cell hugetlb-off warn '{"device_reads":"stale","device_writes":"lost"}' '"parent-corruption"'
cell hugetlb-off error '{"fork":"refused","fork_errno":1,"child":"none"}' '"parent-corruption"'
cell hugetlb-off fix '{"child":"segv"}' '"parent-corruption"' '{"dontfork":false,"fixed":"withheld"}'
# wrong: under fix the child still dies where the kernel copies anon memory
cell anon-init bare '{"child":"segv"}'; cell anon-init warn '{"child":"segv"}' '"child-segv"'
cell anon-init fix '{"child":"segv"}' '"child-segv"' '{"dontfork":true}'
# wrong: under fix the data went stale
cell hugetlb-init+hp bare '{"child":"segv"}'; cell hugetlb-init+hp warn '{"child":"segv"}' '"child-segv"'
cell hugetlb-init+hp fix '{"device_reads":"stale"}' '"child-segv"' '{"dontfork":false}'
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

# doctor with rdma-core 44: what the cells above measured (a warning for the stale hugetlb)
doctor() { # rc off|env status body [advice]
	{
		printf '%-6s%-18s%s\n' "$3" "fork support" "$4"
		[ -z "${5:-}" ] || printf '%24s-> %s\n' "" "$5"
		echo "ok    memlock limit     unlimited"
	} > "$RAW/kernel-5.10/$1/doctor-$2"
}
doctor 44 off warn "not turned on by the environment; rdma-core 44. Without fork support a fork after registration leaves anonymous and thp memory intact, hugetlb memory STALE in the parent (measured)" "fork workers before RDMA init"
doctor 44 env warn "on: a forked child that touches registered memory dies with SIGSEGV. Without fork support a fork after registration leaves anonymous and thp memory intact, hugetlb memory STALE in the parent"

# rdma-core 33: one process per fork support measured several kinds (group-<fs>/)
G=$RAW/kernel-5.10/33
mkdir -p "$G/group-off/warn-log" "$G/group-off/error-log" "$G/group-env"
L33='"libibverbs":"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.11.33.2","reg":"ok","reg_errno":0,"dontfork":false,"fork_errno":0'
echo anon,hugetlb > "$G/group-off/kinds"
for run in bare warn fix; do
	{
		echo "{\"kind\":\"anon\",\"pid\":7,$L33,\"fork\":\"ok\",\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"alive\"}"
		echo "{\"kind\":\"hugetlb\",\"pid\":7,$L33,\"fork\":\"ok\",\"device_reads\":\"stale\",\"device_writes\":\"lost\",\"child\":\"alive\"}"
	} > "$G/group-off/$run.json"
	echo 0 > "$G/group-off/$run.rc"
done
{
	echo '{"event":"header","pid":7}'
	echo '{"event":"fork","verdict":"hazard","reasons":["inherited-rdma"]}'
	echo '{"event":"fork","verdict":"hazard","reasons":["parent-corruption","inherited-rdma"]}'
} > "$G/group-off/warn-log/forkguard.h.7.1.jsonl"
mkdir -p "$G/group-off/fix-log"
# fix: the same outcomes as without it here (nothing for anon; the run's hugetlb line says
# stale: a failure, below)
{
	echo '{"event":"header","pid":7}'
	echo '{"event":"fork","verdict":"hazard","reasons":["inherited-rdma"],"ranges":[]}'
	echo '{"event":"fork","verdict":"hazard","reasons":["parent-corruption","inherited-rdma"],"ranges":[{"fixed":"withheld"}]}'
} > "$G/group-off/fix-log/forkguard.h.7.1.jsonl"
echo '{"event":"header","pid":8}' > "$G/group-off/warn-log/forkguard.h.8.1.jsonl"  # the child's
echo hugetlb > "$G/group-off/error.kinds"
echo "{\"kind\":\"hugetlb\",\"pid\":9,$L33,\"fork\":\"refused\",\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"none\"}" > "$G/group-off/error.json"
echo 0 > "$G/group-off/error.rc"
{ echo '{"event":"header","pid":9}'; echo '{"event":"fork","verdict":"hazard","reasons":["parent-corruption"]}'; } > "$G/group-off/error-log/forkguard.h.9.1.jsonl"
# fork support from the environment: anon measured, then the thp run failed (exit 2)
echo anon,thp > "$G/group-env/kinds"
echo "{\"kind\":\"anon\",\"pid\":5,$L33,\"fork\":\"ok\",\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"segv\"}" > "$G/group-env/bare.json"
echo 2 > "$G/group-env/bare.rc"
echo "fork_truth: error: the thp buffer is not backed by a huge page" > "$G/group-env/bare.err"
mkdir -p "$G/group-env/warn-log"
echo "{\"kind\":\"anon\",\"pid\":6,$L33,\"fork\":\"ok\",\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"segv\"}" > "$G/group-env/warn.json"
echo 2 > "$G/group-env/warn.rc"
mkdir -p "$G/group-env/fix-log"
echo "{\"kind\":\"anon\",\"pid\":4,$L33,\"fork\":\"ok\",\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"alive\"}" > "$G/group-env/fix.json"
echo 2 > "$G/group-env/fix.rc"
{ echo '{"event":"header","pid":4}'; echo '{"event":"fork","verdict":"hazard","reasons":["child-segv","inherited-rdma"],"ranges":[{"dontfork":true,"fixed":"copied"}]}'; } > "$G/group-env/fix-log/forkguard.h.4.1.jsonl"
{ echo '{"event":"header","pid":6}'; echo '{"event":"fork","verdict":"hazard","reasons":["child-segv","inherited-rdma"]}'; } > "$G/group-env/warn-log/forkguard.h.6.1.jsonl"
# forkguard watch --enforce memory over rdma-core 33's cells: anon off let through (right),
# hugetlb off let through (wrong: stale), anon env refused (right)
mkdir -p "$G/watch"; : > "$G/watch/ready"; echo 0 > "$G/watch/watch.rc"
{
	echo "{\"kind\":\"anon\",\"pid\":11,$L33,\"fork\":\"ok\",\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"alive\"}"
	echo "{\"kind\":\"hugetlb\",\"pid\":11,$L33,\"fork\":\"ok\",\"device_reads\":\"stale\",\"device_writes\":\"lost\",\"child\":\"alive\"}"
} > "$G/group-off/enforce.json"
echo 0 > "$G/group-off/enforce.rc"
echo "{\"kind\":\"anon\",\"pid\":12,\"fork\":\"refused\",\"fork_errno\":1,\"device_reads\":\"fresh\",\"device_writes\":\"seen\",\"child\":\"none\"}" > "$G/group-env/enforce.json"
echo 2 > "$G/group-env/enforce.rc"
# doctor with rdma-core 33 is wrong without fork support: anonymous memory is not stale
doctor 33 off warn "Without fork support a fork after registration leaves thp memory intact, anonymous and hugetlb memory STALE in the parent" "fork workers before RDMA init"
doctor 33 env warn "on: a forked child that touches registered memory dies with SIGSEGV" "unset RDMAV_FORK_SAFE"

# the first processes of the boot: hugetlb right (parent-corruption from the boot's probe,
# withheld under fix); anonymous wrong (its verdict claims parent-corruption)
FB=$RAW/kernel-5.10/fg-matrix-firstboot
mkdir -p "$FB/warn-log" "$FB/fix-log"
echo 0 > "$FB/unit.rc"; echo "/usr/bin/forkguard probe --system" > "$FB/unit-command"
L44='"libibverbs":"/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0","reg":"ok","reg_errno":0,"dontfork":false,"fork_errno":0,"fork":"ok","device_writes":"seen"'
{
	echo "{\"kind\":\"hugetlb\",\"pid\":3,$L44,\"device_reads\":\"stale\",\"child\":\"alive\"}"
	echo "{\"kind\":\"anon\",\"pid\":3,$L44,\"device_reads\":\"fresh\",\"child\":\"alive\"}"
} > "$FB/warn.json"
{
	echo "{\"kind\":\"hugetlb\",\"pid\":2,$L44,\"device_reads\":\"fresh\",\"child\":\"segv\"}"
	echo "{\"kind\":\"anon\",\"pid\":2,$L44,\"device_reads\":\"fresh\",\"child\":\"alive\"}"
} > "$FB/fix.json"
echo 0 > "$FB/warn.rc"; echo 0 > "$FB/fix.rc"
PP='"pin_probe":{"anonymous":"intact","thp":"intact","hugetlb":"stale"}'
{
	echo '{"event":"header","pid":3}'
	echo "{\"event\":\"fork\",\"reasons\":[\"parent-corruption\",\"inherited-rdma\"],$PP,\"ranges\":[{}]}"
	echo "{\"event\":\"fork\",\"reasons\":[\"parent-corruption\",\"inherited-rdma\"],$PP,\"ranges\":[{}]}"
} > "$FB/warn-log/forkguard.h.3.1.jsonl"
{
	echo '{"event":"header","pid":2}'
	echo "{\"event\":\"fork\",\"action\":\"fixed\",\"reasons\":[\"parent-corruption\"],$PP,\"ranges\":[{\"fixed\":\"withheld\"}]}"
	echo "{\"event\":\"fork\",\"reasons\":[\"inherited-rdma\"],$PP,\"ranges\":[{}]}"
} > "$FB/fix-log/forkguard.h.2.1.jsonl"

/usr/bin/python3 "$ANALYZE" junit "$RAW" "$OUT" --kernels=5.10,6.12 --rdma-cores=44,33,56 > "$T/log" 2>&1
rc=$?
cat "$T/log"
check "exit 1 when a cell failed" '[ $rc = 1 ]'
x() { grep -c "$1" "$OUT/matrix.xml"; }
check "pass: anon off (nothing)" 'grep -q "anon / fork support off: truth nothing, verdict inherited-rdma only, under fix nothing, under watch --enforce memory not run\"/>" "$OUT/matrix.xml"'
check "pass: anon env (child-segv)" 'grep -q "anon / fork support RDMAV_FORK_SAFE=1: truth child-segv, verdict child-segv, under fix nothing, under watch --enforce memory not run\"/>" "$OUT/matrix.xml"'
check "pass: hugetlb off (stale), withheld under fix" 'grep -q "hugetlb / fork support off: truth stale, verdict parent-corruption, under fix child-segv, under watch --enforce memory not run\"/>" "$OUT/matrix.xml"'
check "fail: fix left the child dying where the kernel copies" 'grep -q "anon / fork support ibv_fork_init(): truth child-segv, verdict child-segv, under fix child-segv, under watch --enforce memory not run\"><failure message=\"under FORKGUARD_MODE=fix child-segv, where this kernel copies anon memory" "$OUT/matrix.xml"'
check "fail: stale under fix" 'grep -q "under fix stale, under watch --enforce memory not run\"><failure message=\"under FORKGUARD_MODE=fix the data went stale" "$OUT/matrix.xml"'
check "fail: corruption claimed" 'grep -q "thp / fork support off: truth nothing, verdict parent-corruption, under fix not measured, under watch --enforce memory not run\"><failure message=\"verdict claims parent-corruption;" "$OUT/matrix.xml"'
check "fail: neither pattern" 'grep -q "thp / fork support RDMAV_FORK_SAFE=1: truth unknown.*truth not established: the device" "$OUT/matrix.xml"'
check "fail: wrong rdma-core" 'grep -q "shared / fork support off: truth unknown.*not rdma-core 44" "$OUT/matrix.xml"'
check "fail: program error" 'grep -q "file / fork support off: truth unknown.*exit 2: fork_truth: error: no RDMA device" "$OUT/matrix.xml"'
check "fail: error mode did not refuse" 'grep -q "RDMAV_FORK_SAFE=1: truth stale.*did not refuse the fork" "$OUT/matrix.xml"'
check "fail: shim changed the outcome" 'grep -q "the shim changed the outcome" "$OUT/matrix.xml"'
check "fail: kernel 6.12 never ran" 'grep -q "kernel 6.12: the guest ran every cell\"><failure" "$OUT/matrix.xml"'
check "fail: rdma-core 56 never laid" 'grep -q "rdma-core 56: laid over / in the guest\"><failure" "$OUT/matrix.xml"'
check "pass: doctor 44 off" 'grep -q "rdma-core 44 / doctor with fork support off says what the cells measured\"/>" "$OUT/matrix.xml"'
check "pass: doctor 44 env" 'grep -q "rdma-core 44 / doctor with fork support RDMAV_FORK_SAFE=1 says what the cells measured\"/>" "$OUT/matrix.xml"'
check "fail: doctor 33 calls anonymous memory stale" 'grep -q "rdma-core 33 / doctor with fork support off.*leaves anonymous memory STALE, measured nothing" "$OUT/matrix.xml"'
check "pass: doctor 33 env" 'grep -q "rdma-core 33 / doctor with fork support RDMAV_FORK_SAFE=1 says what the cells measured\"/>" "$OUT/matrix.xml"'
check "group: anon off split out" 'grep -q "rdma-core 33 / anon / fork support off: truth nothing, verdict inherited-rdma only, under fix nothing, under watch --enforce memory let through\"/>" "$OUT/matrix.xml"'
check "group: hugetlb off, its own fork event and error run; stale under fix fails" 'grep -q "rdma-core 33 / hugetlb / fork support off: truth stale, verdict parent-corruption, under fix stale, under watch --enforce memory let through\"><failure message=\"under FORKGUARD_MODE=fix the data went stale; forkguard watch --enforce memory let through a fork whose truth is stale" "$OUT/matrix.xml"'
check "group: anon env before the failure" 'grep -q "rdma-core 33 / anon / fork support RDMAV_FORK_SAFE=1: truth child-segv, verdict child-segv, under fix nothing, under watch --enforce memory refused\"/>" "$OUT/matrix.xml"'
check "group: the kind that failed fails" 'grep -q "rdma-core 33 / thp / fork support RDMAV_FORK_SAFE=1: truth unknown.*exit 2: fork_truth: error: the thp buffer" "$OUT/matrix.xml"'
check "pass: first process of the boot, hugetlb" 'grep -q "first process of the boot / hugetlb: the verdict from the boot.s probe, and fix\"/>" "$OUT/matrix.xml"'
check "fail: first process of the boot, anonymous" 'grep -q "first process of the boot / anon: .*><failure message=\"the first process.s verdict is \[.parent-corruption.\]; the cell measured nothing" "$OUT/matrix.xml"'
check "23 testcases, 14 failed" '[ "$(x "<testcase")" = 23 ] && [ "$(x "<failure")" = 14 ]'
check "results.json counts" '/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); sys.exit(not (r[\"counts\"][\"stale\"]==3 and r[\"counts\"][\"unknown\"]==4))" "$OUT/results.json"'
/usr/bin/python3 "$ANALYZE" doc "$OUT/results.json" > "$T/doc.md"
check "the doc marks a wrong verdict" 'grep -q "nothing \*\*✗ parent-corruption\*\*" "$T/doc.md"'
check "the doc shows stale with error mode" 'grep -q "fork refused, data intact" "$T/doc.md"'
check "the doc counts the watcher's refusals against the truth" 'grep -q "1 of 3 cells.* forks refused by the kernel; 2 cells are child-segv or stale without forkguard, 1 of them refused; \*\*0 refused wrongly, 1 let through wrongly\*\*" "$T/doc.md"'
[ $fails = 0 ]
