"""Wavefronts per LDS.128 for chosen lane -> address patterns, for ncu to count on the GPU.

One block of one warp reads a 16-byte element of shared memory 4096 times, each lane at the
pattern's element (the index depends on the previous value, so the load stays in the loop).
``matviz/bench/ncu_lds_patterns.sh`` runs it under ncu; ``compare CSV`` prints ncu's wavefronts
per instruction beside the bank model's (:func:`matviz.core.banks.wavefronts`). The H200
results are ``resources/bench/h200_ncu_lds_patterns.md``.

    python3 -m matviz.bench.ncu_lds_patterns launch        # needs CuPy and a GPU
    python3 -m matviz.bench.ncu_lds_patterns compare F.csv # anywhere
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

SOURCE = r"""
extern "C" __global__ void lds_pattern(float *out, const int *element, int iters) {
    __shared__ float4 s[512];
    for (int i = threadIdx.x; i < 512; i += blockDim.x) s[i] = make_float4(i, i, i, i);
    __syncthreads();
    const int at = element[threadIdx.x & 31];
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int it = 0; it < iters; ++it) {
        const float4 v = s[at + (int)(acc.x * 0.0f)];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    out[threadIdx.x] = acc.x + acc.y + acc.z + acc.w;
}
"""
ITERS = 4096
LANE = np.arange(32)
# the float4 element each lane reads, by name; the first two are kernel 08's at WNITER=4
PATTERNS: dict[str, np.ndarray] = {
    "lane % 4 (08 WNI4 Bs: 4 elements, every 4th lane)": LANE % 4,
    "lane / 4 * 2 (08 WNI4 As: 8 elements 32 B apart, 4 lanes each)": LANE // 4 * 2,
    "0 (warp-wide broadcast)": LANE * 0,
    "lane % 8 (8 elements, every 8th lane)": LANE % 8,
    "lane / 8 * 2 (4 elements 32 B apart, 8 lanes each)": LANE // 8 * 2,
    "lane (32 elements)": LANE,
    "lane % 2 (2 elements, every other lane)": LANE % 2,
    "lane / 8 (4 elements, 8 lanes each)": LANE // 8,
}


def model(pattern: np.ndarray) -> int:
    from matviz.core import banks

    return int(banks.wavefronts((pattern * 16)[None, :], 16)[0])


def cmd_launch(_args) -> int:
    import cupy as cp

    kernel = cp.RawKernel(SOURCE, "lds_pattern")
    out = cp.zeros(32, cp.float32)
    for pattern in PATTERNS.values():  # in order: ncu numbers the launches the same way
        kernel((1,), (32,), (out, cp.asarray(pattern.astype(np.int32)), np.int32(ITERS)))
    cp.cuda.runtime.deviceSynchronize()
    return 0


def read_csv(path: Path) -> list[float]:
    """Wavefronts per instruction of each launch, in launch order, from ncu's --csv output."""
    from matviz.bench.ncu_banks import parse_ncu_lines

    lines = path.read_text(errors="replace").splitlines()
    header = [ln for ln in lines if ln.startswith('"ID"')]
    out = []
    for launch in range(len(PATTERNS)):
        rows = [ln for ln in lines if ln.startswith(f'"{launch}",')]
        got = parse_ncu_lines(header + rows)
        inst, waves = got.get("ld_inst"), got.get("ld_wavefronts")
        out.append(waves / inst if inst else float("nan"))
    return out


def table(measured: list[float]) -> str:
    lines = [
        "| lanes read float4 element | model | ncu |",
        "| --- | --- | --- |",
    ]
    for (name, pattern), ncu in zip(PATTERNS.items(), measured, strict=True):
        lines.append(f"| {name} | {model(pattern)} | {ncu:.3f} |")
    return "\n".join(lines)


def cmd_compare(args) -> int:
    print(table(read_csv(Path(args.csv))))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.bench.ncu_lds_patterns",
                                     description=__doc__)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("launch").set_defaults(fn=cmd_launch)
    compare = sub.add_parser("compare")
    compare.add_argument("csv")
    compare.set_defaults(fn=cmd_compare)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
