#!/usr/bin/env bash
# Sectors per global request measured with ncu against the coalescing model, for every kernel x
# configuration (issue 12, item 4). From the repository root on the GPU machine; the table goes
# to $OUT/ncu_coalescing/table.md.   ONLY=regex: only configurations whose tag matches.
set -uo pipefail
OUT=${OUT:-/tmp/matviz-out}
dir="$OUT/ncu_coalescing"
mkdir -p "$dir"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
METRICS=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
NCU=${NCU:-$(command -v ncu || ls -1 /usr/local/cuda*/bin/ncu 2>/dev/null | tail -n 1)}
[ -x "$NCU" ] || { echo "ncu_coalescing: ncu not found" >&2; exit 2; }
python3 -m matviz.bench.ncu_coalescing list | awk -F '\t' -v re="${ONLY:-.}" '$1 ~ re' >"$dir/index.tsv"
while IFS=$'\t' read -r tag kernel params entry _; do
  "$NCU" --clock-control none --kernel-name "$entry" --launch-count 1 --csv --metrics "$METRICS" \
    python3 -m matviz.bench.ncu_coalescing launch "$kernel" "$params" \
    >"$dir/$tag.csv" 2>"$dir/$tag.err" </dev/null || echo "$tag failed: $(tail -n 2 "$dir/$tag.err")" >&2
done <"$dir/index.tsv"
python3 -m matviz.bench.ncu_coalescing compare "$dir" | tee "$dir/table.md"
