"""``matviz export``: the views as GIF / MP4 / PNG, or the trace as Perfetto JSON.

Heavy parts load lazily: a Perfetto export never imports Qt; rendering frames does.
"""

from __future__ import annotations

import argparse
import html
import sys
import time
from dataclasses import replace
from pathlib import Path

import matviz.cli.common as common
from matviz.errors import MatvizError

NAME = "export"


def add_parser(sub) -> None:
    exp = sub.add_parser(NAME, help="the views as GIF / MP4 / PNG, or the trace as Perfetto JSON")
    exp.add_argument("file", type=Path, nargs="?", help="FILE.mvz (not with --lesson)")
    exp.add_argument(
        "--lesson",
        type=common.positive_int,
        metavar="N",
        help="step N of the lesson (the app's Lessons panel): its recording (or simulation), "
        "view, block and access, with its explanation over the caption",
    )
    exp.add_argument("--lang", choices=("en", "zh_CN"), help="language of the texts (default en)")
    exp.add_argument(
        "--view",
        help="all (default), grid, sm, tiles, banks, coalescing, source, errors, throughput or "
        "a comma list",
    )
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


# the app's view names where the export names them otherwise
EXPORT_VIEW = {"sm_lanes": "sm"}


def lesson_step(number: int):
    from matviz.core import lessons

    lesson = lessons.load_lesson(lessons.lesson_files()[0])
    if number > len(lesson.steps):
        raise MatvizError(f"--lesson {number}: the lesson has {len(lesson.steps)} steps")
    return lesson.steps[number - 1]


def step_trace(step):
    """The step's recording, or the simulation it names (labelled simulated)."""
    from matviz.backends.contract import RunRequest, run
    from matviz.core.trace_io import load_trace

    if step.trace:
        return load_trace(step.trace_path())
    return run(RunRequest(**step.simulate.model_dump()))


def step_note(step, trace, language: str) -> str:
    from matviz.core import lessons

    body = html.escape(lessons.render(step.text.get(language), trace))
    return f"<b>{html.escape(step.section)} · {html.escape(step.title.get(language))}</b> {body}"


def _progress_bar(done: int, total: int) -> None:
    """A frame counter on a terminal; nothing when stderr is a file or a pipe."""
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\rexporting  frame {done}/{total}", end=end, file=sys.stderr, flush=True)


def run(args) -> int:
    from matviz.app.export_job import ExportJob  # imports Qt only for pictures
    from matviz.core.trace_io import load_trace
    from matviz.export.atomic import check_writable
    from matviz.export.options import build_options, format_for

    common.check_name(args.output)
    if (args.file is None) == (args.lesson is None):
        raise MatvizError("give a trace file or --lesson N (one of them)")
    given = {"from": args.t0, "to": args.t1, "at": args.at, "block": args.block}
    given["max_events"] = args.max_events
    step = lesson_step(args.lesson) if args.lesson else None
    if step is not None and format_for(args.output, args.format) == "perfetto":
        raise MatvizError("--lesson exports a picture (gif, mp4 or png), not a perfetto trace")
    if step is not None:  # the step's view and block unless given; its text over the caption
        given["block"] = args.block or (None if step.block == "middle" else tuple(step.block))
        given["access"] = step.access
    opts = build_options(
        args.output,
        args.format,
        view=args.view or (EXPORT_VIEW.get(step.view, step.view) if step else None),
        fps=args.fps,
        duration=args.duration,
        size=args.size,
        caption=args.caption,
        **given,
    )
    check_writable(args.output)
    trace = load_trace(args.file) if step is None else step_trace(step)
    if step is not None:
        opts = replace(opts, note=step_note(step, trace, args.lang or "en"))
        if opts.format == "png" and args.at is None:
            opts = replace(opts, at_us=step.at * trace.duration_ns / 1e3)
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
        qt_side = ("matviz.app.export_render", "matviz.app.i18n")
        with common.needs_qt("--format " + opts.format, *qt_side):
            if args.lang:
                from matviz.app.export_render import ensure_app
                from matviz.app.i18n import set_language

                ensure_app()
                set_language(args.lang)
            job.run(_progress_bar)
        w, h = opts.size
        what = f"{job.total} frame{'s' * (job.total > 1)} of {opts.view_label} at {w}x{h}"
    mib = args.output.stat().st_size / 2**20
    seconds = time.perf_counter() - started
    print(f"wrote      {args.output} ({what}, {mib:.1f} MiB, {seconds:.1f} s)")
    return 0
