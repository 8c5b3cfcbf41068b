#!/usr/bin/env bash
# Shared-store wavefronts with and without L1 fills (see matviz/bench/ncu_store_fills.py), from
# the repository root on the GPU machine: bash matviz/bench/ncu_store_fills.sh > $OUT/fills.txt
set -uo pipefail
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
M=smsp__inst_executed_op_shared_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,\
smsp__inst_executed_op_shared_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
for cfg in 'tiled {"tile":32,"pad":0}' 'tiled {"tile":16,"pad":0}' 'tiled {"tile":8,"pad":0}' \
  'tiled_transposed {"tile":32,"pad":2}' 'tiled_transposed {"tile":32,"pad":4}' \
  'tiled_transposed {"tile":8,"pad":0}' 'tiled_transposed {"tile":32,"pad":1}' \
  'register_tiling_1d {"BM":64,"BN":64,"BK":8,"TM":8}'; do
  set -- $cfg
  for v in plain ldcg const; do
    r=$(ncu --clock-control none --kernel-name regex:mv_ --launch-count 1 --csv --metrics "$M" \
      python3 -m matviz.bench.ncu_store_fills "$v" "$1" "$2" 2>&1 | grep '"mv_' |
      awk -F'","' '{print $(NF-2)"="$NF}' | tr -d '"' | tr '\n' ' ')
    echo "$1 $2 $v $r"
  done
done
