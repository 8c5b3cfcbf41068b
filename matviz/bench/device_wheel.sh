#!/usr/bin/env bash
# On the GPU machine: install the wheel in dist/ (no PYTHONPATH), record from outside the
# repository, then the GPU tests from the checkout. Results go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/matviz-out}
mkdir -p "$OUT"
repo=$PWD
python3 -m pip install -q --no-deps --no-index --force-reinstall dist/matviz-*.whl 2>&1 | tail -3
(
  cd /tmp && unset PYTHONPATH
  python3 -c 'import matviz.paths as p; print("kernels from", p.KERNEL_DIR)'
  for spec in ${RECORD:-}; do
    IFS=: read -r kernel args name <<<"$spec"
    matviz record "$kernel" -M 1024 -N 1024 -K 1024 ${args//,/ } --level 3 --backend cuda \
      -o "$OUT/$name.mvz"
  done
) 2>&1 | tee "$OUT/wheel.txt"
python3 -m pip uninstall -q -y matviz
cd "$repo" && TESTS="${TESTS:-}" bash matviz/bench/gpu_tests.sh
