#!/bin/bash
# bench/loader.sh (scripts/bench loader) - refloader against a PyTorch DataLoader
# on the same generated TFRecord files, in one run, reported as ratios.
#
#   small records: uniform 1-4 KiB, 2 workers each, batch 64, 4 KiB output
#                  tensor per sample, CRC32C verify + decode in both; samples/s
#                  of each and refloader/PyTorch (target >= 3x)
#                  (also shown: PyTorch with a BatchSampler handing whole
#                  batches to __getitem__, the expert variant)
#   1 MiB records: refloader's MB/s against single-core memcpy bandwidth
#                  measured in the same run (target >= 0.5x); PyTorch shown too
#   CRC32C:        ISA-L (what the loader and transport use) against the
#                  hand-written SSE4.2 code it replaced, MB/s at 1 KiB-1 MiB
#                  (target: not slower, ratio >= 1.0)
#
# Each measurement is repeated --rounds times, interleaved, and the median is
# reported (this machine is shared: single runs are noisy). Epoch 0 (worker
# start, cold page cache) is left out of every figure.
#
# Usage: bench/loader.sh [--rounds N] [--small-records N] [--large-records N] [--workers N]
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=3 small_records=60000 large_records=512 workers=2
while [ $# -gt 0 ]; do
	case "$1" in
		--rounds) rounds=$2; shift 2 ;;
		--small-records) small_records=$2; shift 2 ;;
		--large-records) large_records=$2; shift 2 ;;
		--workers) workers=$2; shift 2 ;;
		-h|--help) sed -n "2,18p" "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
		*) echo "bench/loader.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

PY=/usr/bin/python3  # Debian's, with python3-torch (not the python3 on PATH)
if ! $PY -c 'import torch, crc32c, numpy' 2>/dev/null; then
	echo "bench/loader.sh: $PY needs python3-torch, python3-crc32c and python3-numpy (scripts/setup)" >&2
	exit 1
fi

# Optimized build, without touching the shared bazel-* convenience symlinks.
bazel build -c opt --symlink_prefix=/ //refloader //bench:crc32c_bench >/dev/null 2>&1 ||
	{ bazel build -c opt --symlink_prefix=/ //refloader //bench:crc32c_bench; exit 1; }
BIN="$(bazel info -c opt bazel-bin 2>/dev/null)/refloader/refloader"
CRC_BENCH="$(bazel info -c opt bazel-bin 2>/dev/null)/bench/crc32c_bench"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/forkguard-bench-loader.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# field NAME < "summary: ... NAME=V ..."
field() { sed -n "s/.*summary:.* $1=\([0-9.]*\).*/\1/p; s/^memcpy:.* $1=\([0-9.]*\).*/\1/p" | tail -1; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "== refloader vs PyTorch DataLoader ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds, medians)"
"$BIN" make-dataset --out "$tmp/small" --records "$small_records" --size uniform:1K:4K --seed 3 | sed 's/^/   /'
"$BIN" make-dataset --out "$tmp/large" --records "$large_records" --size fixed:1M --seed 4 | sed 's/^/   /'

ref_s=() torch_s=() torchb_s=() mem=() ref_l=()
for r in $(seq "$rounds"); do
	ref_s+=("$("$BIN" run --data "$tmp/small" --workers "$workers" --batch-size 64 --sample-bytes 4K \
		--sampler shuffle --epochs 3 --skip-first-epoch-in-total | field samples_per_s)")
	torch_s+=("$($PY bench/loader_torch.py --data "$tmp/small" --workers "$workers" --batch-size 64 \
		--sample-bytes 4096 --epochs 3 --skip-first-epoch-in-total | field samples_per_s)")
	torchb_s+=("$($PY bench/loader_torch.py --data "$tmp/small" --workers "$workers" --batch-size 64 \
		--sample-bytes 4096 --epochs 3 --skip-first-epoch-in-total --batched | field samples_per_s)")
	mem+=("$("$BIN" memcpy-bandwidth --size 1M --seconds 0.5 | field MB_per_s)")
	ref_l+=("$("$BIN" run --data "$tmp/large" --workers "$workers" --batch-size 8 --sample-bytes 1M \
		--sampler shuffle --epochs 4 --skip-first-epoch-in-total | field MB_per_s)")
	echo "   round $r: small refloader ${ref_s[-1]} / torch ${torch_s[-1]} / torch batched ${torchb_s[-1]} samples/s;" \
		"1 MiB refloader ${ref_l[-1]} MB/s, memcpy ${mem[-1]} MB/s"
done
torch_l=$($PY bench/loader_torch.py --data "$tmp/large" --workers "$workers" --batch-size 8 \
	--sample-bytes 1048576 --epochs 3 --skip-first-epoch-in-total | field MB_per_s)

rs=$(printf '%s\n' "${ref_s[@]}" | median)
ts=$(printf '%s\n' "${torch_s[@]}" | median)
tb=$(printf '%s\n' "${torchb_s[@]}" | median)
rl=$(printf '%s\n' "${ref_l[@]}" | median)
mm=$(printf '%s\n' "${mem[@]}" | median)
small_ratio=$(ratio "$rs" "$ts")
large_ratio=$(ratio "$rl" "$mm")
echo
printf '%-44s %14s %14s %8s\n' "case ($workers workers)" refloader baseline ratio
printf '%-44s %14.0f %14.0f %7sx   (target >= 3x)\n' "1-4 KiB records, samples/s vs PyTorch" "$rs" "$ts" "$small_ratio"
printf '%-44s %14.0f %14.0f %7sx   (for reference)\n' "1-4 KiB records, vs PyTorch whole-batch" "$rs" "$tb" "$(ratio "$rs" "$tb")"
printf '%-44s %14.0f %14.0f %7sx   (target >= 0.5x)\n' "1 MiB records, MB/s vs 1-core memcpy" "$rl" "$mm" "$large_ratio"
printf '%-44s %14.0f %14.0f %7sx   (for reference)\n' "1 MiB records, MB/s vs PyTorch" "$rl" "$torch_l" "$(ratio "$rl" "$torch_l")"
echo
printf '%-44s %14s %14s %8s\n' "CRC32C, MB/s (1 core)" ISA-L "old SSE4.2" ratio
"$CRC_BENCH" "$rounds" | while read -r _ size isal base ratio; do
	printf '%-44s %14s %14s %7sx   (target >= 1.0x)\n' "  ${size#size=} B buffers" "${isal#*=}" "${base#*=}" "${ratio#*=}"
done
