"""The shared-memory instructions ptxas emits per warp and k-step for every configuration of
every kernel with shared-memory sites (level-0 build, sm_90): loads, stores, ldmatrix and
cp.async copies, read from the SASS of the k loop whole tiles run (sass.fast_loop). Writes
``resources/bench/sass_sm90_shared_ops.json``, which the banks view quotes next to the model's
merged instructions:

    python -m matviz.bench.sass_table [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from matviz.bench import run_script
from matviz.core import sass_table
from matviz.core.registry import kernels
from matviz.toolchain import sass
from matviz.toolchain.nvcc import DEFAULT_ARCH, release


def _row(job) -> tuple[str, dict[str, int]]:
    kernel, params = job
    config = kernel.configure(params, 64, 64, 64)
    ops = sass.shared_ops_per_step(sass.sass(config, 0), config.n_barriers)
    return sass_table.key(kernel.stem, kernel.labels(params)), ops


def write(out: str | Path, make_table: Callable[[], dict]) -> dict:
    """Write the table ``make_table()`` builds to the JSON file ``out``, whole or not at all: a
    failed or interrupted write keeps the file that was there (AtomicOutput). ``out`` is
    checked first, so a name that cannot be written fails before minutes of compiling."""
    from matviz.export.atomic import AtomicOutput, check_writable

    check_writable(out)
    table = make_table()
    with AtomicOutput(out) as tmp:
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return table


def _shared_ops_table() -> dict:
    jobs = [(k, p) for k in kernels().values() for p in k.configurations() if k.sites_at(p)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # nvcc runs in its own processes
        rows = dict(pool.map(_row, jobs))
    return {
        "source": f"ptxas for {DEFAULT_ARCH}, level-0 build, k loop of whole tiles: {release()}",
        "per_warp_and_k_step": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(sass_table.TABLE))
    args = parser.parse_args(argv)

    def work() -> None:
        table = write(args.out, _shared_ops_table)
        print(f"wrote {args.out}: {len(table['per_warp_and_k_step'])} configurations")

    return run_script("matviz", work)


if __name__ == "__main__":
    sys.exit(main())
