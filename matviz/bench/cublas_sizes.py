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


def median_ms(run, *args, repeats: int = REPEATS) -> float:
    """Median CUDA-event time of ``run(*args)`` over ``repeats`` runs after 5 warm-up runs,
    each timed after a spacer kernel so that host launch cost is not."""
    import cupy

    from matviz.backends.cuda_build import SPACER_CYCLES, spacer

    for _ in range(5):
        run(*args)
    times = []
    for _ in range(repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        spacer()((1,), (1,), (np.int64(SPACER_CYCLES),))
        start.record()
        run(*args)
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(np.median(times))


def measure(dtype: str, n: int) -> float:
    """cuBLAS GFLOP/s on n x n x n inputs of ``dtype``."""
    import cupy

    from matviz.backends.cuda_build import blas_matmul
    from matviz.core import elements

    rng = cupy.random.default_rng(n)
    A = elements.rounded(cupy, rng.uniform(-1, 1, (n, n), dtype=cupy.float32), dtype)
    B = elements.rounded(cupy, rng.uniform(-1, 1, (n, n), dtype=cupy.float32), dtype)
    return round(2 * n**3 / median_ms(blas_matmul(A, B, dtype)) / 1e6, 1)


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
