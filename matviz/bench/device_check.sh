#!/usr/bin/env bash
# One device call: GPU tests, the kernel benchmark, the bundled recordings, SASS load widths.
# Run from the repository root on the GPU machine; results go to $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/matviz-out}
mkdir -p "$OUT/traces"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
  python3 -c 'import cupy, numpy; print("cupy", cupy.__version__, "numpy", numpy.__version__)'
  python3 -m matviz.cli info
} 2>&1 | tee "$OUT/env.txt"

if [ -n "${EXTRA:-}" ]; then python3 $EXTRA 2>&1 | tee "$OUT/extra.txt"; fi

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  python3 -m pytest -m gpu tests/gpu -q -x -p no:cacheprovider 2>&1 | tail -40 | tee "$OUT/gpu_tests.txt"
fi

for spec in "naive 16 -" "tiled 16 0" "tiled 32 0" "tiled_transposed 32 0" "tiled_transposed 32 1"; do
  set -- $spec
  pad=(); name="$1_t$2"
  if [ "$3" != - ]; then pad=(--pad "$3"); name="$name""_p$3"; fi
  python3 -m matviz.cli record "$1" -M 1024 -N 1024 -K 1024 --tile "$2" "${pad[@]}" --level 3 \
    --backend cuda -o "$OUT/traces/$name""_1024.mvz" 2>&1 | tee -a "$OUT/recordings.txt"
done
ls -l "$OUT/traces" | tee -a "$OUT/recordings.txt"
# the device tool brings back at most 8 files: ship the recordings as one archive
tar -C "$OUT" -cf "$OUT/traces.tar" traces && rm -r "$OUT/traces"

# Which shared loads did ptxas vectorise? (padding [32][33] is said to stop LDS.128)
python3 - <<'EOF' 2>&1 | tee "$OUT/sass.txt"
import itertools
from matviz.core.registry import kernels
from matviz.toolchain import sass
for k in kernels().values():
    if not k.sites:
        continue
    for values in itertools.product(*(p.values for p in k.params)):
        params = dict(zip(k.param_names, values))
        widths = sass.shared_load_widths(sass.sass(k.configure(params, 64, 64, 64), 0))
        print(f"{k.stem} {k.labels(params)}: {dict(sorted(widths.items()))}")
EOF

python3 -m matviz.bench.kernels --size "${BENCH_SIZE:-4096}" --json "$OUT/bench.json" 2>&1 | tee "$OUT/bench.txt"
