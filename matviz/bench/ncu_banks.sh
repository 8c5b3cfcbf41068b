#!/usr/bin/env bash
# Shared-memory wavefronts per instruction measured with ncu against the model, for every
# kernel x configuration with shared-memory sites (issue 10, item 5). From the repository root
# on the GPU machine; results go to $OUT/ncu_banks (table.md is the table for the closing note):
#   bash matviz/bench/ncu_banks.sh
#   SIZE=1024   problem size (M = N = K)
#   ONLY=regex  only configurations whose tag matches (e.g. ONLY='02_tiled_T32')
#   NCU=path    the ncu binary (default: ncu on PATH, else /usr/local/cuda*/bin/ncu)
set -uo pipefail
OUT=${OUT:-/tmp/matviz-out}
SIZE=${SIZE:-1024}
dir="$OUT/ncu_banks"
mkdir -p "$dir"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
METRICS=$(python3 -m matviz.bench.ncu_banks metrics) || exit 2
COPY_METRICS=$(python3 -m matviz.bench.ncu_banks metrics --copies) || exit 2

NCU=${NCU:-$(command -v ncu || true)}
if [ -z "$NCU" ]; then
  NCU=$(ls -1 /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -n 1)
fi
if [ -z "$NCU" ] || [ ! -x "$NCU" ]; then
  echo "ncu_banks: ncu not found (install Nsight Compute or set NCU=/path/to/ncu)" >&2
  exit 2
fi
"$NCU" --version | tee "$dir/ncu_version.txt"
# the LDGSTS counters this ncu has for this GPU (a name it does not know would fail the run)
known=$("$NCU" --query-metrics 2>/dev/null | awk '{print $1}')
COPY_METRICS=$(tr ',' '\n' <<<"$COPY_METRICS" | while read -r m; do
  grep -qx "${m%.sum}" <<<"$known" && printf '%s,' "$m"; done)
COPY_METRICS=${COPY_METRICS%,}
[ -n "$COPY_METRICS" ] || COPY_METRICS=$METRICS

if ! python3 -m matviz.bench.ncu_banks list >"$dir/index.all.tsv"; then
  echo "ncu_banks: could not list the configurations" >&2
  exit 2
fi
if [ -n "${ONLY:-}" ]; then
  awk -F '\t' -v re="$ONLY" '$1 ~ re' "$dir/index.all.tsv" >"$dir/index.tsv"
else
  cp "$dir/index.all.tsv" "$dir/index.tsv"
fi
total=$(wc -l <"$dir/index.tsv")
echo "ncu_banks: $total configurations at ${SIZE}^3"

failed=0
n=0
while IFS=$'\t' read -r tag kernel params entry copies matrix; do
  [ -n "$tag" ] || continue
  n=$((n + 1))
  echo "[$n/$total] $tag"
  if ! "$NCU" --clock-control none --target-processes all --kernel-name "$entry" \
    --launch-count 1 --csv --metrics "$([ "$copies" = 1 ] && echo "$COPY_METRICS" || echo "$METRICS")" \
    python3 -m matviz.bench.ncu_banks launch "$kernel" "$params" --size "$SIZE" \
    >"$dir/$tag.csv" 2>"$dir/$tag.err" </dev/null; then
    echo "  ncu or the launch failed: see $dir/$tag.err" >&2
    tail -n 3 "$dir/$tag.err" >&2
    failed=$((failed + 1))
  fi
  # ldmatrix kernels stage C through shared memory after the k loop: measure that alone (K = 0)
  # so that the comparison counts the k loop's accesses only
  if [ "${matrix:-0}" = 1 ] && ! "$NCU" --clock-control none --target-processes all \
    --kernel-name "$entry" --launch-count 1 --csv --metrics "$METRICS" \
    python3 -m matviz.bench.ncu_banks launch "$kernel" "$params" --size "$SIZE" --epilogue \
    >"$dir/$tag.k0.csv" 2>"$dir/$tag.k0.err" </dev/null; then
    echo "  ncu or the epilogue launch failed: see $dir/$tag.k0.err" >&2
    failed=$((failed + 1))
  fi
done <"$dir/index.tsv"

python3 -m matviz.bench.ncu_banks compare "$dir" --size "$SIZE" --json "$dir/rows.json" \
  | tee "$dir/table.md"
echo "ncu_banks: $failed of $total configurations failed; table in $dir/table.md"
