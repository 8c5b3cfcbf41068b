"""The k loop ptxas emits for each rung of a saved ladder: what a k-step issues, read from the
SASS of the level-0 build (nvcc and cuobjdump, no GPU needed).

    python -m matviz.bench.sass_loops [LADDER.json] [--readme README.md]

An SM sub-partition issues one warp instruction a clock, and at the FP32 peak each of them
issues an FFMA every clock (Hopper: 4 x 32 FP32 lanes an SM, no dual issue). So the share of
FFMA among a k loop's instructions bounds the rate an SIMT kernel can reach, as a share of the
FP32 peak, before any stall. Tensor Core loops are given as instructions per HMMA: each HMMA
keeps the Tensor Cores busy for several clocks, so issue is not what binds them. Kernels whose
loop only waits for asynchronous wgmma (kernel 11) are left out: their instructions say nothing
of the Tensor Cores' rate.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from matviz.bench.ladder import LADDER_H200, load_rows
from matviz.core.registry import get_kernel
from matviz.errors import MatvizError
from matviz.toolchain import sass

START, END = "<!-- sassloops:start -->", "<!-- sassloops:end -->"
SHARED_LOADS = ("LDS", "LDSM")
COPIES = ("LDG", "LDGSTS", "STS", "STG")


@dataclass(frozen=True)
class KLoop:
    """One k-step of a configuration's fast k loop (``sass.fast_loop``), by instruction kind."""

    kernel: str
    config: str
    instructions: float
    math_op: str  # FFMA or HMMA
    math: float
    shared_loads: float
    copies: float
    pct_peak: float  # the rung's measured rate, % of the peak of its math

    @property
    def math_share(self) -> float:
        return 100.0 * self.math / self.instructions

    @property
    def bound_reached(self) -> float:
        """The measured rate as a share of what issue allows (FFMA loops only)."""
        return 100.0 * self.pct_peak / self.math_share


def _family(text: str) -> str:
    return sass.opcode(text).split(".")[0]


def k_loop(row: dict) -> KLoop | None:
    """The k loop of one ladder row's configuration (None: no FFMA or HMMA loop)."""
    kernel = get_kernel(row["kernel"])
    size = int(row["size"])
    config = kernel.configure(row["params"], size, size, size)
    body = sass.fast_loop(sass.sass(config, 0))
    kinds = Counter(map(_family, body))
    op = "HMMA" if kinds["HMMA"] else "FFMA"
    if not kinds[op]:
        return None
    barriers = sum(1 for text in body if "BAR.SYNC" in text)
    steps = barriers // config.n_barriers if config.n_barriers and barriers else 1
    return KLoop(
        kernel=kernel.name,
        config=kernel.labels(row["params"]),
        instructions=len(body) / steps,
        math_op=op,
        math=kinds[op] / steps,
        shared_loads=sum(kinds[k] for k in SHARED_LOADS) / steps,
        copies=sum(kinds[k] for k in COPIES) / steps,
        pct_peak=float(row["pct_peak"]),
    )


def markdown(loops: list[KLoop], source: str) -> str:
    lines = [
        "| kernel | configuration | instructions per k-step | multiply-adds | shared loads "
        "| global copies and shared stores | multiply-adds, % of instructions | measured, % of "
        "peak | measured, % of what issue allows |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for loop in loops:
        simt = loop.math_op == "FFMA"
        lines.append(
            f"| {loop.kernel} | {loop.config} | {loop.instructions:g} "
            f"| {loop.math:g} {loop.math_op} | {loop.shared_loads:g} | {loop.copies:g} "
            f"| {loop.math_share:.1f} | {loop.pct_peak:.1f} "
            f"| {f'{loop.bound_reached:.0f}' if simt else 'n/a (Tensor Cores)'} |"
        )
    lines += [
        "",
        f"The fast k loop (16-byte aligned rows, whole tiles) of each configuration in `{source}`, "
        "level-0 build, ptxas for the kernel's architecture (`python -m matviz.bench.sass_loops`); "
        "the measured rates are the ladder's. An FFMA loop cannot run the FP32 pipe faster than "
        "its share of FFMA: one warp instruction issues per clock and sub-partition. A kernel "
        "with no barrier (naive) counts one pass of its loop as the k-step.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ladder", nargs="?", default=str(LADDER_H200))
    parser.add_argument("--readme", type=Path, help="rewrite its sassloops section")
    args = parser.parse_args(argv)
    try:
        rows = load_rows(Path(args.ladder))
        with ThreadPoolExecutor(max_workers=4) as pool:  # nvcc runs in its own processes
            loops = [loop for loop in pool.map(k_loop, rows) if loop]
        source = args.ladder
        if Path(source).is_absolute():
            try:
                source = str(Path(source).relative_to(Path.cwd()))
            except ValueError:
                pass
        text = markdown(loops, source)
        print(text)
        if args.readme:
            from matviz.bench.readme_table import rewrite_section

            rewrite_section(args.readme, START, END, text)
    except MatvizError as exc:
        print(f"matviz: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
