"""Shared-memory wavefronts per instruction: ncu on the GPU against the model. Used by
``matviz/bench/ncu_banks.sh``, which runs, per configuration::

    ncu --clock-control none --kernel-name mv_<kernel> --launch-count 1 --csv --metrics ... \\
        python3 -m matviz.bench.ncu_banks launch KERNEL 'PARAMS_JSON' --size 1024

Subcommands:

* ``list``: one line per kernel x configuration with shared-memory sites:
  ``tag<TAB>kernel<TAB>params json<TAB>entry point``.
* ``launch KERNEL PARAMS``: one level-0 launch at SIZE^3 (needs CuPy and a GPU).
* ``compare DIR``: reads ``DIR/index.tsv`` (the ``list`` output) and ``DIR/<tag>.csv`` (ncu's
  ``--csv`` output) and prints a markdown table: per configuration, measured wavefronts per
  shared load / store instruction against the model (:func:`matviz.core.instructions.
  block_costs`: every warp and k-step of block (0, 0), which is what the model gives) and the
  difference in %; ``FLAG`` where it exceeds 5% and the model predicts a conflict for that kind.
  Runs anywhere (no GPU): the model is numpy.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

METRICS = {
    "ld_inst": "smsp__inst_executed_op_shared_ld.sum",
    "st_inst": "smsp__inst_executed_op_shared_st.sum",
    "ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    # ldmatrix (LDSM), counted apart from the shared loads
    "ldsm_inst": "smsp__inst_executed_op_ldsm.sum",
}
# Kernels whose stores are cp.async (LDGSTS) add these: ncu counts LDGSTS apart from STS, and
# has no wavefront counter of its own for it, so its wavefronts are all of shared memory's less
# the loads' and the stores'.
ASYNC_METRICS = {
    "ldgsts_inst": "sm__sass_inst_executed_op_ldgsts.sum",
    "ldgsts_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.sum",
    "all_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
}
TOLERANCE = 0.05


def configurations(shared_only: bool = True):
    """(tag, kernel, params) of every configuration (of kernels with shared-memory sites)."""
    from matviz.core import store_fills
    from matviz.core.registry import kernels

    for kernel in kernels().values():
        for params in kernel.configurations():
            if shared_only and not kernel.sites_at(params):
                continue
            tag = store_fills.table_tag(kernel, params)
            yield tag, kernel, params


def print_list(configs) -> int:
    for tag, kernel, params in configs:
        sites = kernel.sites_at(params)
        copies = int(any(site.async_copy for site in sites))
        matrix = int(any(site.matrix_load for site in sites))
        print(f"{tag}\t{kernel.name}\t{json.dumps(params, separators=(',', ':'))}"
              f"\t{kernel.entry_point}\t{copies}\t{matrix}")  # fmt: skip
    return 0


def cmd_metrics(args) -> int:
    """The --metrics list for ncu: every configuration's, plus LDGSTS's with --async."""
    metrics = {**METRICS, **ASYNC_METRICS} if args.copies else METRICS
    print(",".join(metrics.values()))
    return 0


def cmd_list(_args) -> int:
    return print_list(configurations())


def cmd_launch(args) -> int:
    import cupy
    import numpy as np

    from matviz.backends.cuda_build import compiled_kernel
    from matviz.core import elements
    from matviz.core.registry import get_kernel

    n = args.size
    config = get_kernel(args.kernel).configure(json.loads(args.params), n, n, n)
    kernel = compiled_kernel(config, 0)
    # 0.5 and 0.25 are exact in every input type, so the result is exactly 0.125 n
    A = elements.rounded(cupy, cupy.full((n, n), 0.5, cupy.float32), config.input_dtype)
    B = elements.rounded(cupy, cupy.full((n, n), 0.25, cupy.float32), config.input_dtype)
    C = cupy.full((n, n), cupy.nan, cupy.float32)
    # --epilogue: K = 0, no k-step runs, only what the kernel does around its k loop (its C
    # stores, and any staging of C through shared memory), measured to be subtracted
    k = 0 if args.epilogue else n
    kernel(config.grid, config.block, (A, B, C, np.int32(n), np.int32(n), np.int32(k)))
    cupy.cuda.runtime.deviceSynchronize()
    expected = 0.5 * 0.25 * k
    if not bool(cupy.allclose(C, expected, rtol=1e-4)):
        print(f"launch: wrong result (expected {expected} everywhere)", file=sys.stderr)
        return 1
    return 0


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def read_ncu_csv(path: Path, metrics: dict[str, str] = METRICS) -> dict[str, float]:
    """``metrics`` (key -> ncu metric name) from ncu's ``--csv`` output (header row optional,
    other lines such as ``==PROF==`` ignored); summed over kernels if several were profiled."""
    if not path.is_file():
        return {}
    return parse_ncu_lines(path.read_text(errors="replace").splitlines(), metrics)


def parse_ncu_lines(lines: list[str], metrics: dict[str, str] = METRICS) -> dict[str, float]:
    """:func:`read_ncu_csv` on lines already read."""
    wanted = {v: k for k, v in metrics.items()}
    out: dict[str, float] = {}
    lines = [ln for ln in lines if ln.startswith('"')]
    name_col = value_col = None
    for row in csv.reader(lines):
        if "Metric Name" in row and "Metric Value" in row:
            name_col, value_col = row.index("Metric Name"), row.index("Metric Value")
            continue
        if name_col is not None and len(row) > max(name_col, value_col):
            name, value = row[name_col], row[value_col]
        else:  # no header: the metric's name, unit and value are the last three fields
            hits = [i for i, cell in enumerate(row) if cell in wanted]
            if not hits:
                continue
            name, value = row[hits[-1]], row[-1]
        number = _number(value)
        if name in wanted and number is not None:
            out[wanted[name]] = out.get(wanted[name], 0.0) + number
    return out


def model_row(kernel: str, params: dict, size: int) -> dict:
    """Per-instruction wavefronts the model gives for one block at SIZE^3, with its worst
    conflicts, and the instructions it expects over the whole grid."""
    from matviz.core import access
    from matviz.core import instructions as ins
    from matviz.core.registry import get_kernel

    config = get_kernel(kernel).configure(params, size, size, size)
    costs = ins.block_costs(config)
    sites = ins.plan(config)
    degree = {"ld": 1, "st": 1}
    for warp in range(config.warps):
        for i in ins.instructions(config, access.access_records(config, warp), sites):
            key = "ld" if i.kind == "load" else "st"
            degree[key] = max(degree[key], i.conflict_degree)
    out = {"degree_ld": degree["ld"], "degree_st": degree["st"]}
    for key in ("ld", "st"):
        inst = costs[f"{key}_inst"]
        out[f"{key}_per_inst"] = costs[f"{key}_wavefronts"] / inst if inst else float("nan")
        out[f"{key}_inst_grid"] = inst * config.n_blocks
        extra = costs[f"{key}_wavefronts"] - costs[f"{key}_ideal"]
        out[f"{key}_conflicts_per_inst"] = extra / inst if inst else float("nan")
    out["copies"] = any(rs.site.async_copy for rs in config.sites)
    return out


def _model_job(job):
    tag, kernel, params, size = job
    return tag, model_row(kernel, params, size)


def compare_rows(directory: Path, size: int, jobs: int = 0) -> list[dict]:
    index = directory / "index.tsv"
    entries = []
    for line in index.read_text().splitlines():
        if not line.strip():
            continue
        tag, kernel, params = line.split("\t")[:3]
        entries.append((tag, kernel, json.loads(params), size))
    if jobs == 1 or len(entries) < 2:
        models = dict(map(_model_job, entries))
    else:
        with ProcessPoolExecutor(max_workers=jobs or None) as pool:
            models = dict(pool.map(_model_job, entries))
    rows = []
    for tag, kernel, params, _ in entries:
        measured = _with_async_stores(read_ncu_csv(directory / f"{tag}.csv", ALL_METRICS))
        measured = _without_epilogue(measured, read_ncu_csv(directory / f"{tag}.k0.csv"))
        row = {"tag": tag, "kernel": kernel, "params": params, **models[tag]}
        for key in ("ld", "st"):
            inst, waves = measured.get(f"{key}_inst"), measured.get(f"{key}_wavefronts")
            got = waves / inst if inst and waves is not None else None
            want = row[f"{key}_per_inst"]
            row[f"{key}_measured"] = got
            row[f"{key}_inst_measured"] = inst
            row[f"{key}_diff"] = (got / want - 1.0) if got is not None and want else None
            conflict = row[f"degree_{key}"] > 1
            diff = row[f"{key}_diff"]
            row[f"{key}_flag"] = bool(conflict and diff is not None and abs(diff) > TOLERANCE)
        copies, conflicts = measured.get("ldgsts_inst"), measured.get("ldgsts_conflicts")
        row["copy_conflicts_measured"] = conflicts / copies if copies and conflicts is not None \
            else None  # fmt: skip
        rows.append(row)
    return rows


ALL_METRICS = {**METRICS, **ASYNC_METRICS}


def _with_async_stores(measured: dict[str, float]) -> dict[str, float]:
    """A kernel whose stores are all LDGSTS: its stores' instructions and wavefronts are
    LDGSTS's (the model counts a cp.async as a store of its width)."""
    copies = measured.get("ldgsts_inst") or 0.0
    if not copies or measured.get("st_inst") or "all_wavefronts" not in measured:
        return measured
    rest = measured["all_wavefronts"] - measured.get("ld_wavefronts", 0.0)
    rest -= measured.get("st_wavefronts", 0.0)
    return measured | {"st_inst": copies, "st_wavefronts": rest}


def _without_epilogue(measured: dict[str, float], epilogue: dict[str, float]) -> dict[str, float]:
    """The k loop's shared accesses alone: what the same launch with K = 0 (its epilogue, e.g.
    C staged through shared memory) counted, subtracted; ldmatrix instructions count as loads
    (ncu counts LDSM apart from LDS, but its wavefronts among the loads')."""
    out = dict(measured)
    for key, value in epilogue.items():
        if key in out:
            out[key] = out[key] - value
    if out.get("ldsm_inst"):
        out["ld_inst"] = out.get("ld_inst", 0.0) + out["ldsm_inst"]
    return out


def _fmt(x, spec=".3f") -> str:
    return "–" if x is None else format(x, spec)


def format_table(rows: list[dict], size: int) -> str:
    head = (
        f"Shared-memory wavefronts per instruction, ncu (--clock-control none, one level-0 "
        f"launch at {size}³) against the model (every warp and k-step of one block). FLAG: "
        f"more than {TOLERANCE:.0%} off where the model predicts a conflict.\n\n"
        "| configuration | LDS model | LDS ncu | diff | ld way | STS model | STS ncu | diff "
        "| st way | inst. ld model/ncu | inst. st model/ncu | flag |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    )
    lines = [head]
    for r in rows:
        flags = [k for k in ("ld", "st") if r[f"{k}_flag"]]
        inst = [
            f"{r[f'{k}_inst_grid']:.0f}/{_fmt(r[f'{k}_inst_measured'], '.0f')}"
            for k in ("ld", "st")
        ]
        lines.append(
            f"| {r['tag']} | {r['ld_per_inst']:.3f} | {_fmt(r['ld_measured'])} "
            f"| {_fmt(r['ld_diff'], '+.1%')} | {r['degree_ld']} | {r['st_per_inst']:.3f} "
            f"| {_fmt(r['st_measured'])} | {_fmt(r['st_diff'], '+.1%')} | {r['degree_st']} "
            f"| {inst[0]} | {inst[1]} | {'FLAG ' + '+'.join(flags) if flags else ''} |"
        )
    copying = [r for r in rows if r.get("copies")]
    if copying:
        lines.append(
            "\nStores by cp.async (LDGSTS, in the STS columns above): bank conflicts per "
            "instruction, the model's extra wavefronts against ncu's "
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ldgsts.\n\n"
            "| configuration | model | ncu |\n| --- | --- | --- |"
        )
        for r in copying:
            lines.append(f"| {r['tag']} | {r['st_conflicts_per_inst']:.3f} "
                         f"| {_fmt(r['copy_conflicts_measured'])} |")  # fmt: skip
    missing = [r["tag"] for r in rows if r["ld_measured"] is None and r["st_measured"] is None]
    if missing:
        lines.append(f"\nno ncu data for: {', '.join(missing)}")
    flagged = [r["tag"] for r in rows if r["ld_flag"] or r["st_flag"]]
    lines.append(f"\nflagged: {', '.join(flagged) if flagged else 'none'}")
    return "\n".join(lines)


def cmd_compare(args) -> int:
    rows = compare_rows(Path(args.directory), args.size, args.jobs)
    print(format_table(rows, args.size))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.bench.ncu_banks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list").set_defaults(fn=cmd_list)
    metrics = sub.add_parser("metrics")
    metrics.add_argument("--copies", action="store_true", help="add the LDGSTS counters")
    metrics.set_defaults(fn=cmd_metrics)
    launch = sub.add_parser("launch")
    launch.add_argument("kernel")
    launch.add_argument("params", help="the kernel's parameters as JSON")
    launch.add_argument("--size", type=int, default=1024)
    launch.add_argument("--epilogue", action="store_true", help="K = 0: the epilogue alone")
    launch.set_defaults(fn=cmd_launch)
    compare = sub.add_parser("compare")
    compare.add_argument("directory")
    compare.add_argument("--size", type=int, default=1024)
    compare.add_argument("--jobs", type=int, default=0, help="model processes (0: all cores)")
    compare.add_argument("--json", help="also write the rows here")
    compare.set_defaults(fn=cmd_compare)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
