"""The ``matviz export`` and ``matviz sweep`` commands (wired into ``matviz.cli``).

Heavy parts load lazily: ``export --format perfetto`` and ``sweep`` without ``--plot`` never
import Qt; rendering frames or a plot does.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from matviz.cli import _pair, _positive_int, choose_backend
from matviz.errors import MatvizError

QT_MODULES = ("PySide6", "shiboken6", "pyqtgraph")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a number > 0")
    return value


def _time_us(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a time in µs") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"'{text}' is not a time in µs")
    return value


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma list of whole numbers") from None
    if not values:
        raise argparse.ArgumentTypeError("the list is empty")
    return values


def _add_export(sub) -> None:
    exp = sub.add_parser(
        "export", help="the views as GIF / MP4 / PNG, or the trace as Perfetto JSON"
    )
    exp.add_argument("file", type=Path, help="FILE.mvz")
    exp.add_argument("--view", help="all (default), grid, sm, tiles, banks, throughput or a list")
    exp.add_argument(
        "--format",
        choices=("gif", "mp4", "png", "perfetto"),
        help="default: from the -o suffix (.gif .mp4 .png .json .json.gz)",
    )
    exp.add_argument("--fps", type=_positive_int, help="frames per second (default 30)")
    exp.add_argument("--duration", type=_positive_float, help="seconds of video (default 10)")
    exp.add_argument("--size", help="WIDTHxHEIGHT in pixels (default 1280x720)")
    exp.add_argument(
        "--block", type=_pair, metavar="BX,BY", help="block the tiles view and caption follow"
    )
    exp.add_argument("--from", dest="t0", type=_time_us, metavar="T0", help="µs (default 0)")
    exp.add_argument("--to", dest="t1", type=_time_us, metavar="T1", help="µs (default: end)")
    exp.add_argument("--at", type=_time_us, metavar="T", help="µs, for png (default: middle)")
    exp.add_argument(
        "--caption",
        action=argparse.BooleanOptionalAction,
        help="time, phase, configuration and source on every frame (default on)",
    )
    exp.add_argument("-o", "--output", required=True, type=Path, help="output file")


def _add_sweep(sub) -> None:
    sw = sub.add_parser("sweep", help="run every tile x pad of a kernel: table, CSV, plot")
    sw.add_argument("kernel", help="catalog name, e.g. tiled")
    sw.add_argument("--tile", type=_int_list, help="comma list (default: every allowed tile)")
    sw.add_argument("--pad", type=_int_list, help="comma list (default: the kernel's default)")
    sw.add_argument("-M", type=_positive_int, default=1024)
    sw.add_argument("-N", type=_positive_int, default=1024)
    sw.add_argument("-K", type=_positive_int, default=1024)
    sw.add_argument("--backend", default="auto", choices=("auto", "cuda", "sim"))
    sw.add_argument("--level", type=int, default=1, choices=(0, 1, 2, 3), help="default 1")
    sw.add_argument(
        "--isolate", action="store_true", help="simulations too each in a worker process"
    )
    sw.add_argument("-o", "--output", required=True, type=Path, help="FILE.csv")
    sw.add_argument("--plot", type=Path, help="FILE.png: a bar chart of GFLOP/s")


def add_parsers(sub) -> None:
    _add_export(sub)
    _add_sweep(sub)


# -- commands ---------------------------------------------------------------------------------
@contextmanager
def _needs_qt(what: str) -> Iterator[None]:
    """A machine without PySide6 / pyqtgraph (a bare GPU box) gets one line, not a traceback."""
    try:
        yield
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in QT_MODULES:
            raise
        raise MatvizError(
            f"{what} draws with Qt, but {exc.name.split('.')[0]} is not installed: pip install -e ."
        ) from None


def _progress_bar(done: int, total: int) -> None:
    """A frame counter on a terminal; nothing when stderr is a file or a pipe."""
    if sys.stderr.isatty():
        end = "\n" if done >= total else ""
        print(f"\rexporting  frame {done}/{total}", end=end, file=sys.stderr, flush=True)


def cmd_export(args) -> int:
    from matviz.core.trace_io import load_trace
    from matviz.export.atomic import check_writable
    from matviz.export.options import build_options

    given = {"from": args.t0, "to": args.t1, "at": args.at, "block": args.block}
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
    if opts.format == "perfetto":  # no Qt: a trace, not a picture
        from matviz.export.perfetto import write_perfetto

        stats = write_perfetto(trace, args.output)
        what = f"{stats.blocks} block and {stats.phases} phase events"
    else:
        from matviz.app.export_job import ExportJob  # Qt is imported when rendering starts

        job = ExportJob(trace, opts, args.output)  # checks times and block first
        with _needs_qt("--format " + opts.format):
            job.run(_progress_bar)
        w, h = opts.size
        what = f"{job.total} frame{'s' * (job.total > 1)} of {opts.view_label} at {w}x{h}"
    mib = args.output.stat().st_size / 2**20
    seconds = time.perf_counter() - started
    print(f"wrote      {args.output} ({what}, {mib:.1f} MiB, {seconds:.1f} s)")
    return 0


def _check_suffix(path: Path, suffix: str, what: str) -> None:
    from matviz.export.atomic import check_writable

    if path.suffix.lower() != suffix:
        raise MatvizError(f"{what} '{path}' must end in {suffix}")
    check_writable(path)


def cmd_sweep(args) -> int:
    from matviz.core.catalog import get_kernel
    from matviz.export import sweep

    _check_suffix(args.output, ".csv", "output")
    if args.plot is not None:
        _check_suffix(args.plot, ".png", "plot")
    get_kernel(args.kernel)  # an unknown kernel is the one error, before any note
    backend, note = choose_backend(args.backend)
    if note:
        print(f"note: {note}", file=sys.stderr)
    rows = sweep.plan(args.kernel, args.tile, args.pad, args.M, args.N, args.K, backend, args.level)

    def progress(i: int, total: int, row, finished: bool) -> None:
        if not finished:
            print(f"[{i}/{total}] {row.label} ...", end=" ", file=sys.stderr, flush=True)
        else:
            print(sweep.result_text(row), file=sys.stderr, flush=True)

    sweep.run_sweep(rows, progress, isolate=args.isolate)
    print("\n".join(sweep.table_lines(rows)))
    ran = sum(r.status == sweep.OK for r in rows)
    print(f"ran        {ran} of {len(rows)} configurations ({backend})")
    sweep.write_csv(rows, args.output)
    print(f"saved      {args.output}")
    if args.plot is not None:
        with _needs_qt("--plot"):
            from matviz.app.sweep_plot import render_plot  # Qt only for the picture

            render_plot(rows, args.plot)
        print(f"saved      {args.plot}")
    return 0


COMMANDS = {"export": cmd_export, "sweep": cmd_sweep}
