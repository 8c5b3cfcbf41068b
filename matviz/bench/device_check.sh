#!/usr/bin/env bash
# One device call, from the repository root on the GPU machine; results go to $OUT.
#   WHEEL=1      install dist/matviz-*.whl (no PYTHONPATH) and record from outside the checkout
#   RECORD="kernel:--opt,value:name ..."   recordings at 1024^3, level 3 (with or without WHEEL)
#   TESTS="..."  extra pytest arguments for the GPU tests (SKIP_TESTS=1: none)
#   BENCH=1      python -m matviz.bench.kernels (BENCH_SIZE, BENCH_KERNELS)
#   SASS=1       the shared-load widths ptxas emits for every configuration
#   DEPS=dir     first install matviz's dependencies the machine lacks (pydantic, zstandard) from
#                wheels in dir (the GPU machine has no network: pip download them and carry it)
set -o pipefail
OUT=${OUT:-/tmp/matviz-out}
mkdir -p "$OUT"
repo=$PWD
if [ -n "${DEPS:-}" ]; then
  python3 -m pip install -q --no-index --find-links "$DEPS" pydantic zstandard ||
    python3 -m pip install -q --break-system-packages --no-index --find-links "$DEPS" pydantic zstandard
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/env.txt"
python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)' \
  | tee -a "$OUT/env.txt"

record() {
  for spec in ${RECORD:-}; do
    IFS=: read -r kernel args name <<<"$spec"
    matviz record "$kernel" -M 1024 -N 1024 -K 1024 ${args//,/ } --level 3 --backend cuda \
      -o "$OUT/$name.mvz"
  done
}

if [ "${WHEEL:-0}" = 1 ]; then
  python3 -m pip install -q --no-deps --no-index --force-reinstall dist/matviz-*.whl
  (cd /tmp && unset PYTHONPATH && python3 -c 'import matviz.paths as p; print("kernels", p.KERNEL_DIR)' && record) 2>&1 | tee "$OUT/wheel.txt"
  python3 -m pip uninstall -q -y matviz
fi
export PYTHONPATH=$repo PYTHONUNBUFFERED=1
matviz() { python3 -m matviz.cli "$@"; }
if [ "${WHEEL:-0}" != 1 ]; then record 2>&1 | tee "$OUT/recordings.txt"; fi

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider ${TESTS:-} 2>&1 | tail -30 | tee "$OUT/gpu_tests.txt"
fi

if [ "${SASS:-0}" = 1 ]; then
  python3 - <<'PY' 2>&1 | tee "$OUT/sass.txt"
from matviz.core.registry import kernels
from matviz.toolchain import sass
for k in kernels().values():
    for params in k.configurations() if k.sites else ():
        widths = sass.shared_load_widths(sass.sass(k.configure(params, 64, 64, 64), 0))
        print(f"{k.stem} {k.labels(params)}: {dict(sorted(widths.items()))}")
PY
fi

if [ "${BENCH:-0}" = 1 ]; then
  python3 -m matviz.bench.kernels --size "${BENCH_SIZE:-4096}" --json "$OUT/bench.json" \
    ${BENCH_KERNELS:+--kernels $BENCH_KERNELS} 2>&1 | tee "$OUT/bench.txt"
fi
