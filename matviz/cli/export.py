"""``matviz export``: the views as GIF / MP4 / PNG, or the trace as Perfetto JSON.

Heavy parts load lazily: a Perfetto export never imports Qt; rendering frames does.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import matviz.cli.common as common

NAME = "export"


def add_parser(sub) -> None:
    exp = sub.add_parser(NAME, help="the views as GIF / MP4 / PNG, or the trace as Perfetto JSON")
    exp.add_argument("file", type=Path, help="FILE.mvz")
    exp.add_argument("--view", help="all (default), grid, sm, tiles, banks, throughput or a list")
    exp.add_argument(
        "--format",
        choices=("gif", "mp4", "png", "perfetto"),
        help="default: from the -o suffix (.gif .mp4 .png .json .json.gz)",
    )
    exp.add_argument("--fps", type=common.positive_int, help="frames per second (default 30)")
    exp.add_argument("--duration", type=common.positive_float, help="seconds of video (default 10)")
    exp.add_argument("--size", help="WIDTHxHEIGHT in pixels (default 1280x720)")
    exp.add_argument(
        "--block", type=common.pair, metavar="BX,BY", help="block the tiles view and caption follow"
    )
    exp.add_argument("--from", dest="t0", type=common.time_us, metavar="T0", help="µs (default 0)")
    exp.add_argument("--to", dest="t1", type=common.time_us, metavar="T1", help="µs (default: end)")
    exp.add_argument("--at", type=common.time_us, metavar="T", help="µs, for png (default: middle)")
    exp.add_argument(
        "--caption",
        action=argparse.BooleanOptionalAction,
        help="time, phase, configuration and source on every frame (default on)",
    )
    exp.add_argument(
        "--max-events",
        type=common.positive_int,
        metavar="N",
        help="perfetto: at most N block and phase events; more blocks than that are sampled "
        "evenly, the SMs' 'resident blocks' counters still count them all (default 400000)",
    )
    exp.add_argument("-o", "--output", required=True, type=Path, help="output file")


def _progress_bar(done: int, total: int) -> None:
    """A frame counter on a terminal; nothing when stderr is a file or a pipe."""
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\rexporting  frame {done}/{total}", end=end, file=sys.stderr, flush=True)


def run(args) -> int:
    from matviz.app.export_job import ExportJob  # imports Qt only for pictures
    from matviz.core.trace_io import load_trace
    from matviz.export.atomic import check_writable
    from matviz.export.options import build_options

    common.check_name(args.output)
    given = {"from": args.t0, "to": args.t1, "at": args.at, "block": args.block}
    given["max_events"] = args.max_events
    opts = build_options(
        args.output,
        args.format,
        view=args.view,
        fps=args.fps,
        duration=args.duration,
        size=args.size,
        caption=args.caption,
        **given,
    )
    check_writable(args.output)
    trace = load_trace(args.file)
    started = time.perf_counter()
    # A job, for Perfetto too: a stop signal then removes the partial file as for a video.
    job = ExportJob(trace, opts, args.output)  # checks times and block first
    if opts.format == "perfetto":  # no Qt: a trace, not a picture
        job.run()
        stats = job.plan.stats(job.written)
        what = f"{stats.blocks} block and {stats.phases} phase events"
        if stats.sampled:
            what += (
                f" of {stats.total_blocks} and {stats.total_phases}: blocks sampled evenly to "
                f"--max-events {stats.max_events}, the SMs' resident-blocks counters hold all"
            )
    else:
        with common.needs_qt("--format " + opts.format):  # Qt comes when rendering starts
            job.run(_progress_bar)
        w, h = opts.size
        what = f"{job.total} frame{'s' * (job.total > 1)} of {opts.view_label} at {w}x{h}"
    mib = args.output.stat().st_size / 2**20
    seconds = time.perf_counter() - started
    print(f"wrote      {args.output} ({what}, {mib:.1f} MiB, {seconds:.1f} s)")
    return 0
