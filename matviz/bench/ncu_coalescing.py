"""Sectors per global request: ncu on the GPU against the coalescing model
(:mod:`matviz.core.coalescing`). ``matviz/bench/ncu_coalescing.sh`` runs, per configuration::

    ncu --clock-control none --kernel-name mv_<kernel> --launch-count 1 --csv --metrics ... \\
        python3 -m matviz.bench.ncu_coalescing launch KERNEL 'PARAMS_JSON'

Subcommands: ``list`` (every kernel x configuration: tag, kernel, params, entry point),
``launch KERNEL PARAMS`` (one level-0 launch at 1024³ on fresh inputs, in the layouts the
description asks for; needs CuPy) and ``compare DIR`` (a markdown table of model against
ncu, loads and stores; FLAG beyond 5%).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from matviz.bench import ncu_banks

METRICS = {
    "ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "st_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
}
TOLERANCE = 0.05
SIZE = 1024


def configurations():
    return ncu_banks.configurations(shared_only=False)


def cmd_list(_args) -> int:
    return ncu_banks.print_list(configurations())


def cmd_launch(args) -> int:
    import cupy

    from matviz.backends.contract import RunRequest
    from matviz.backends.cuda_build import compiled_kernel
    from matviz.backends.cupy_recorder import Recorder

    n = SIZE
    request = RunRequest(args.kernel, n, n, n, json.loads(args.params), backend="cuda", level=0)
    recorder = Recorder(request)
    recorder._fresh_inputs()
    C = cupy.full((n, n), cupy.nan, cupy.float32)
    recorder._launch(compiled_kernel(recorder.config, 0), C)
    cupy.cuda.runtime.deviceSynchronize()
    error = recorder._check_output(C, "the launch")
    if error > 1e-5:
        print(f"launch: wrong result (relative error {error:.1e})", file=sys.stderr)
        return 1
    return 0


def compare_rows(directory: Path) -> list[dict]:
    from matviz.core import coalescing
    from matviz.core.registry import get_kernel

    rows = []
    for line in (directory / "index.tsv").read_text().splitlines():
        if not line.strip():
            continue
        tag, kernel, params = line.split("\t")[:3]
        config = get_kernel(kernel).configure(json.loads(params), SIZE, SIZE, SIZE)
        measured = ncu_banks.read_ncu_csv(directory / f"{tag}.csv", METRICS)
        row: dict = {"tag": tag}
        for key, kind in (("ld", "load"), ("st", "store")):
            model = coalescing.sectors_per_request(config, kind)
            sectors, requests = measured.get(f"{key}_sectors"), measured.get(f"{key}_requests")
            got = sectors / requests if sectors is not None and requests else None
            diff = got / model - 1.0 if got is not None and model else None
            row.update({f"{key}_model": model, f"{key}_ncu": got, f"{key}_diff": diff,
                        f"{key}_flag": diff is not None and abs(diff) > TOLERANCE})  # fmt: skip
        rows.append(row)
    return rows


def _fmt(x, spec=".3f") -> str:
    return "–" if x is None else format(x, spec)


def format_table(rows: list[dict]) -> str:
    lines = [
        f"Sectors per global request, ncu (--clock-control none, one level-0 launch at {SIZE}³) "
        f"against the coalescing model (block (0, 0), every warp). FLAG: more than "
        f"{TOLERANCE:.0%} off.\n",
        "| configuration | load model | load ncu | diff | store model | store ncu | diff | flag |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        flags = [k for k in ("ld", "st") if r[f"{k}_flag"]]
        lines.append(
            f"| {r['tag']} | {r['ld_model']:.3f} | {_fmt(r['ld_ncu'])}"
            f" | {_fmt(r['ld_diff'], '+.1%')} | {r['st_model']:.3f} | {_fmt(r['st_ncu'])}"
            f" | {_fmt(r['st_diff'], '+.1%')}"
            f" | {'FLAG ' + '+'.join(flags) if flags else ''} |"
        )
    flagged = [r["tag"] for r in rows if r["ld_flag"] or r["st_flag"]]
    lines.append(f"\nflagged: {', '.join(flagged) if flagged else 'none'}")
    return "\n".join(lines)


def cmd_compare(args) -> int:
    rows = compare_rows(Path(args.directory))
    print(format_table(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.bench.ncu_coalescing")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list").set_defaults(fn=cmd_list)
    launch = sub.add_parser("launch")
    launch.add_argument("kernel")
    launch.add_argument("params", help="the kernel's parameters as JSON")
    launch.set_defaults(fn=cmd_launch)
    compare = sub.add_parser("compare")
    compare.add_argument("directory")
    compare.set_defaults(fn=cmd_compare)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
