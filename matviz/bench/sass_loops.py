"""The k loop ptxas emits: what one k-step issues, read from the SASS of the level-0 build.

    python -m matviz.bench.sass_loops --table     # every configuration (nvcc, cuobjdump; no GPU)
    python -m matviz.bench.sass_loops [LADDER.json] [--readme README.md]   # anywhere

``--table`` writes ``resources/bench/sass_sm90_k_loops.json``, which the app's explanation and
the ladder report read. An SM sub-partition issues one warp instruction a clock, and at the FP32
peak each of them issues an FFMA every clock (Hopper: 4 x 32 FP32 lanes an SM, no dual issue).
So the share of FFMA among a k loop's instructions bounds the rate an SIMT kernel can reach, as
a share of the FP32 peak, before any stall. Tensor Core loops are given as instructions per
HMMA: each HMMA keeps the Tensor Cores busy for several clocks, so issue is not what binds
them. Kernels whose loop only waits for asynchronous wgmma (kernel 11) have no row: their
instructions say nothing of the Tensor Cores' rate.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from matviz.bench import run_script
from matviz.bench.ladder import LADDER_H200, load_rows
from matviz.bench.sass_table import write as write_json_table
from matviz.core import sass_table
from matviz.core.config import KernelConfig
from matviz.core.registry import get_kernel, kernels
from matviz.toolchain import sass
from matviz.toolchain.nvcc import release

START, END = "<!-- sassloops:start -->", "<!-- sassloops:end -->"
SHARED_LOADS = ("LDS", "LDSM")
COPIES = ("LDG", "LDGSTS", "STS")


def _family(text: str) -> str:
    return sass.opcode(text).split(".")[0]


def _shared_load(text: str) -> bool:
    """LDS or ldmatrix that runs (not ptxas's ``@!PT LDS RZ, [RZ]`` after a cp.async wait)."""
    op = sass.shared_op(text)
    return op is not None and op.startswith(SHARED_LOADS)


def count(config: KernelConfig) -> sass_table.KLoop | None:
    """One k-step of ``config``'s fast k loop (``sass.fast_loop``), level 0; None where the
    kernel has no FFMA or HMMA loop."""
    body = sass.fast_loop(sass.sass(config, 0))
    kinds = Counter(map(_family, body))
    op = "HMMA" if kinds["HMMA"] else "FFMA"
    if not kinds[op]:
        return None
    barriers = sum(1 for text in body if "BAR.SYNC" in text)
    steps = barriers // config.n_barriers if config.n_barriers and barriers else 1
    return sass_table.KLoop(
        instructions=len(body) / steps,
        math_op=op,
        math=kinds[op] / steps,
        shared_loads=sum(1 for text in body if _shared_load(text)) / steps,
        copies=sum(kinds[k] for k in COPIES) / steps,
    )


def write_table(out: Path) -> int:
    jobs = [(k, p) for k in kernels().values() for p in k.configurations()]

    def row(job) -> tuple[str, sass_table.KLoop | None]:
        kernel, params = job
        loop = count(kernel.configure(params, 64, 64, 64))  # the code is the same at any size
        return sass_table.key(kernel.stem, kernel.labels(params)), loop

    def table() -> dict:
        with ThreadPoolExecutor(max_workers=4) as pool:  # nvcc runs in its own processes
            rows = {key: loop.model_dump() for key, loop in pool.map(row, jobs) if loop}
        return {
            "source": "ptxas for each kernel's architecture, level-0 build, the k loop of "
            f"aligned rows and whole tiles: {release()}",
            "per_k_step": rows,
        }

    written = write_json_table(out, table)  # a failed write leaves the old table
    rows = len(written["per_k_step"])
    print(f"wrote {out}: {rows} of {len(jobs)} configurations have a multiply-add loop")
    return 0


def markdown(rows: list[dict], source: str) -> str:
    """The ladder's rungs with their k loops (the bundled table's), as a README table."""
    lines = [
        "| kernel | configuration | instructions per k-step | multiply-adds | shared loads "
        "| global copies and shared stores | multiply-adds, % of instructions | measured, % of "
        "peak | measured, % of what issue allows |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        kernel = get_kernel(row["kernel"])
        labels = kernel.labels(row["params"])
        loop = sass_table.k_loop(kernel.stem, labels)
        if loop is None:
            continue
        pct = float(row["pct_peak"])
        reached = f"{100.0 * pct / loop.math_share:.0f}" if loop.math_op == "FFMA" else "n/a"
        lines.append(
            f"| {kernel.name} | {labels} | {loop.instructions:g} "
            f"| {loop.math:g} {loop.math_op} | {loop.shared_loads:g} | {loop.copies:g} "
            f"| {loop.math_share:.1f} | {pct:.1f} | {reached} |"
        )
    lines += [
        "",
        f"The k loop of aligned rows and whole tiles of each configuration in `{source}`, "
        "level-0 build (`resources/bench/sass_sm90_k_loops.json`); the measured rates are the "
        "ladder's. An FFMA loop cannot run the FP32 pipe faster than its share of FFMA: one "
        "warp instruction issues per clock and sub-partition. A Tensor Core loop (HMMA) is not "
        "bound by issue. A kernel with no barrier (naive) counts one pass of its loop as the "
        "k-step.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ladder", nargs="?", default=str(LADDER_H200))
    parser.add_argument("--readme", type=Path, help="rewrite its sassloops section")
    parser.add_argument("--table", action="store_true", help="write the table (needs nvcc)")
    parser.add_argument("--out", type=Path, default=sass_table.K_LOOPS)
    args = parser.parse_args(argv)

    def work() -> int:
        if args.table:
            return write_table(args.out)
        rows = load_rows(Path(args.ladder))
        source = Path(args.ladder)
        if source.is_absolute() and source.is_relative_to(Path.cwd()):
            source = source.relative_to(Path.cwd())
        text = markdown(rows, str(source))
        print(text)
        if args.readme:
            from matviz.bench.readme_table import rewrite_section

            rewrite_section(args.readme, START, END, text)
        return 0

    return run_script("matviz", work)  # the README and the table are kept (AtomicOutput)


if __name__ == "__main__":
    sys.exit(main())
