#!/usr/bin/env bash
# On the GPU machine, from the repository root: the GPU tests, then (BENCH=1) the benchmark of
# every registered kernel configuration. Results go to $OUT.
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/matviz-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/env.txt"
python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider ${TESTS:-} 2>&1 | tail -30 | tee "$OUT/gpu_tests.txt"
if [ "${BENCH:-0}" = 1 ]; then
  python3 -m matviz.bench.kernels --size "${BENCH_SIZE:-4096}" --json "$OUT/bench.json" \
    ${BENCH_KERNELS:+--kernels $BENCH_KERNELS} 2>&1 | tee "$OUT/bench.txt"
fi
