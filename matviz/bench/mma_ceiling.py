"""How fast mma.sync alone runs on this GPU, against cuBLAS on the same GPU (on the GPU):

    python -m matviz.bench.mma_ceiling [--json FILE]

Each warp issues CHAINS independent ``mma.sync.m16n8k16`` (fp16 or bf16 in, fp32 sums) per
iteration on fragments held in registers: no memory traffic in the loop, so the figure is the
most a kernel built on mma.sync (kernels 09 and 10) could reach, as a function of the warps per
SM. cuBLAS runs at 4096^3 on inputs of the same type in the same process
(:func:`matviz.bench.cublas_sizes.measure`). Medians of CUDA-event timings after warm-up
(:func:`matviz.bench.cublas_sizes.median_ms`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

MMA_SOURCE = r"""
extern "C" __global__ void mv_mma_only(const unsigned *seed, float *out, int iters) {
    const unsigned a0 = seed[0] ^ threadIdx.x, a1 = seed[1], a2 = seed[2], a3 = seed[3];
    const unsigned b0 = seed[4], b1 = seed[5] ^ threadIdx.x;
    float c[CHAINS][4];
#pragma unroll
    for (int i = 0; i < CHAINS; ++i) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < CHAINS; ++i)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 "
                         "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                         : "+f"(c[i][0]), "+f"(c[i][1]), "+f"(c[i][2]), "+f"(c[i][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float s = 0.0f;  // stored, so that no mma.sync is dead code
#pragma unroll
    for (int i = 0; i < CHAINS; ++i) s += c[i][0] + c[i][1] + c[i][2] + c[i][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
TYPES = {"float16": "f16", "bfloat16": "bf16"}
CHAINS = (4, 8, 16)  # independent accumulators a warp keeps in flight
WARPS_PER_SM = ((4, 1), (4, 2), (8, 1), (8, 2), (16, 1), (16, 2))  # (warps a block, blocks an SM)
ITERS = 4096
CUBLAS_SIZE = 4096
REPEATS = 15
MMA_FLOP = 2 * 16 * 8 * 16  # one m16n8k16


def flop(chains: int, iters: int, warps: int, blocks: int) -> int:
    """Multiply-adds times two of one launch: every warp issues chains x iters mma.sync."""
    return MMA_FLOP * chains * iters * warps * blocks


def defines(dtype: str, chains: int) -> tuple[str, ...]:
    return (f"-DCHAINS={chains}", f'-DTYPE="{TYPES[dtype]}"')


def measure(dtype: str) -> list[dict]:
    """One row per chains x (warps a block, blocks an SM) that fits: TFLOP/s of mma.sync alone
    and its share of cuBLAS's at 4096^3 on the same type."""
    import cupy

    from matviz.backends.cuda_build import device_info
    from matviz.bench.cublas_sizes import measure as cublas_gflops
    from matviz.bench.cublas_sizes import median_ms
    from matviz.core.occupancy import resource_limits

    device = device_info()
    sms = device["sm_count"]
    seed = cupy.full(6, 0x3C003C00, cupy.uint32)  # 1.0 in both halves (fp16); finite in bf16
    blas = cublas_gflops(dtype, CUBLAS_SIZE) / 1e3
    rows = []
    for chains in CHAINS:
        kernel = cupy.RawModule(code=MMA_SOURCE, options=("-arch=sm_90", *defines(dtype, chains)))
        run = kernel.get_function("mv_mma_only")
        for warps, per_sm in WARPS_PER_SM:
            threads, grid = warps * 32, sms * per_sm
            if min(resource_limits(threads, 0, run.num_regs, device).values()) < per_sm:
                continue  # the blocks would not all be resident at once
            out = cupy.empty(grid * threads, cupy.float32)
            launch = ((grid,), (threads,), (seed, out, np.int32(ITERS)))
            ms = median_ms(run, *launch, repeats=REPEATS)
            tflops = flop(chains, ITERS, warps, grid) / ms / 1e9
            rows.append(dict(dtype=dtype, chains=chains, warps_per_sm=warps * per_sm,
                             registers=run.num_regs, tflops=round(tflops, 1),
                             cublas_tflops=round(blas, 1),
                             pct_cublas=round(100 * tflops / blas, 1)))  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    from matviz.backends.cuda_status import cuda_status
    from matviz.errors import MatvizError
    from matviz.export.atomic import AtomicOutput, check_writable

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="float16,bfloat16", help="float16,bfloat16 or one")
    parser.add_argument("--json", type=Path, help="FILE.json: save the rows")
    args = parser.parse_args(argv)
    dtypes = args.dtypes.split(",")
    try:
        if not set(dtypes) <= set(TYPES):
            raise MatvizError(f"--dtypes takes {', '.join(sorted(TYPES))}, not {args.dtypes!r}")
        if args.json:
            check_writable(args.json)  # before minutes on the GPU, not after
        ok, device = cuda_status()
        if not ok:
            raise MatvizError(f"needs a CUDA GPU: {device}")
        rows = []
        for dtype in dtypes:
            for row in measure(dtype):
                rows.append(row)
                print(f"{device} {dtype} chains {row['chains']:2d} warps/SM "
                      f"{row['warps_per_sm']:2d}: {row['tflops']:7.1f} TFLOP/s, "
                      f"{row['pct_cublas']:5.1f}% of cuBLAS ({row['cublas_tflops']:.1f})",
                      flush=True)  # fmt: skip
        if args.json:
            with AtomicOutput(args.json) as tmp:
                Path(tmp).write_text(json.dumps(dict(device=device, rows=rows), indent=1) + "\n")
    except MatvizError as exc:
        print(f"mma_ceiling: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mma_ceiling: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
