"""cuBLAS GFLOP/s on square n x n x n problems, for the simulator's device file (on the GPU):

    python -m matviz.bench.cublas_sizes [--dtypes float16,bfloat16] --json FILE

Each type's inputs are those the recorder gives a kernel of that type (uniform in [-1, 1],
rounded to the type) and cuBLAS is called as the recorder calls it
(:func:`matviz.backends.cuda_build.blas_matmul`); median of 30 CUDA-event timings after 5
warm-up runs, each after a spacer kernel so that host launch cost is not timed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

SIZES = (128, 256, 512, 1024, 2048, 4096, 8192)
REPEATS = 30


def measure(dtype: str, n: int) -> float:
    import cupy

    from matviz.backends.cuda_build import SPACER_CYCLES, blas_matmul, spacer
    from matviz.core import elements

    rng = cupy.random.default_rng(n)
    A = elements.rounded(cupy, rng.uniform(-1, 1, (n, n), dtype=cupy.float32), dtype)
    B = elements.rounded(cupy, rng.uniform(-1, 1, (n, n), dtype=cupy.float32), dtype)
    run = blas_matmul(A, B, dtype)
    for _ in range(5):
        run()
    times = []
    for _ in range(REPEATS):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        spacer()((1,), (1,), (np.int64(SPACER_CYCLES),))
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return round(2 * n**3 / float(np.median(times)) / 1e6, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args(argv)
    out = {}
    for dtype in args.dtypes.split(","):
        out[dtype] = {str(n): measure(dtype, n) for n in SIZES}
        print(dtype, out[dtype], flush=True)
    args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
