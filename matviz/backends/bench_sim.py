"""Time the simulator: ``python -m matviz.backends.bench_sim [--size 4096] [--tile 32] ...``.

The target: 4096^3 at T=32, level 2 (16,384 blocks x 128 k-tiles, ~2.1 M phase marks per
array) in at most 2 s on a laptop-class CPU.
"""

from __future__ import annotations

import argparse
import sys
import time

from matviz.backends.simulator import simulate
from matviz.core.catalog import get_kernel
from matviz.core.compile_report import registers_for


def bench(kernel: str, size: int, tile: int, pad: int | None, level: int, repeats: int) -> float:
    """Best wall time of ``repeats`` simulations, in seconds (register lookup warmed first)."""
    spec = get_kernel(kernel)
    registers_for(spec, spec.resolve_params(tile=tile, pad=pad), level)  # nvcc's disk cache
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        trace = simulate(kernel, size, size, size, tile=tile, pad=pad, level=level)
        best = min(best, time.perf_counter() - t0)
    stats = trace.manifest["stats"]
    marks = trace.issue.size
    print(
        f"{kernel} {size}^3 tile={tile} pad={pad} level={level}: {len(trace.blocks)} blocks, "
        f"{marks} phase marks per array; simulated {stats['time_ms_median']:.3f} ms = "
        f"{stats['gflops']:.0f} GFLOP/s; wall {best:.3f} s (best of {repeats})"
    )
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.backends.bench_sim")
    parser.add_argument("--kernel", default="tiled")
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--tile", type=int, default=32)
    parser.add_argument("--pad", type=int, default=None)
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    bench(args.kernel, args.size, args.tile, args.pad, args.level, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
