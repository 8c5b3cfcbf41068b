"""``matviz compare A.mvz B.mvz -o out.png|gif|mp4``: two traces on one time axis, with what
each requests from memory and the rate it reaches against the DRAM ceiling."""

from __future__ import annotations

import time
from pathlib import Path

import matviz.cli.common as common
from matviz.errors import MatvizError

NAME = "compare"
SUFFIXES = (".png", ".gif", ".mp4")


def add_parser(sub) -> None:
    cmp = sub.add_parser(NAME, help="two traces side by side: SM lanes on one time axis, traffic")
    cmp.add_argument("first", type=Path, help="A.mvz")
    cmp.add_argument("second", type=Path, help="B.mvz")
    cmp.add_argument("--size", help="WIDTHxHEIGHT in pixels (default 1280x720)")
    cmp.add_argument("--fps", type=common.positive_int, help="frames per second (default 15)")
    cmp.add_argument("--duration", type=common.positive_float, help="seconds (default 6)")
    cmp.add_argument("--lang", choices=("en", "zh_CN"), help="language of the texts")
    cmp.add_argument("-o", "--output", required=True, type=Path, help="out.png, .gif or .mp4")


def run(args) -> int:
    from matviz.app.export_job import ExportJob  # imports Qt only when rendering starts
    from matviz.backends.devices import load_device
    from matviz.core.trace_io import load_trace
    from matviz.export.options import build_options

    common.check_name(args.output)
    suffix = args.output.suffix.lower()
    if suffix not in SUFFIXES:
        raise MatvizError(f"-o {args.output.name}: write .png, .gif or .mp4")
    if suffix == ".png" and (args.fps or args.duration):
        raise MatvizError("--fps and --duration do not apply to a .png")
    opts = build_options(
        args.output,
        None,
        fps=args.fps or (None if suffix == ".png" else 15),
        duration=args.duration or (None if suffix == ".png" else 6.0),
        size=args.size,
    )
    traces = (load_trace(args.first), load_trace(args.second))
    bandwidth = float(load_device()["copy_bandwidth_gbs"])
    started = time.perf_counter()
    with common.needs_qt(
        "matviz compare", "matviz.app.compare_render", "matviz.app.export_render", "matviz.app.i18n"
    ):
        from matviz.app.compare_render import CompareRenderer

        if args.lang:
            from matviz.app.export_render import ensure_app
            from matviz.app.i18n import set_language

            ensure_app()
            set_language(args.lang)
        job = ExportJob(
            traces[0],
            opts,
            args.output,
            renderer=lambda: CompareRenderer(traces, bandwidth, opts.size),
            duration_ns=max(t.duration_ns for t in traces),
        )
        job.run()
    mib = args.output.stat().st_size / 2**20
    seconds = time.perf_counter() - started
    frames = job.total
    print(f"wrote      {args.output} ({frames} frame{'s' * (frames > 1)}, {mib:.1f} MiB, "
          f"{seconds:.1f} s)")  # fmt: skip
    return 0
