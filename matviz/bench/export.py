"""Export benchmark (not a test): ``python -m matviz.bench.export [--size 4096] [--seconds 10]``.

Simulates a 4096^3 T=32 trace (level 3: 16,384 blocks, ~2.1 M k-tiles of 3 marks, a probe) and
exports ``--view all`` at 1280x720 and 30 fps for 10 s as GIF and as MP4, printing the seconds
each took (target: at most 30 s each on a 2-core machine), the file sizes, and the time of the
Perfetto JSON export of the same trace.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from matviz.app.export_job import ExportJob  # noqa: E402
from matviz.backends.contract import RunRequest  # noqa: E402
from matviz.backends.simulator import simulate  # noqa: E402
from matviz.export.options import ExportOptions  # noqa: E402
from matviz.export.perfetto import write_perfetto  # noqa: E402


def _timed(label: str, fn) -> float:
    t0 = time.perf_counter()
    path = fn()
    seconds = time.perf_counter() - t0
    print(f"{label:<40} {seconds:6.1f} s   {Path(path).stat().st_size / 2**20:7.1f} MiB")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.bench.export", description=__doc__)
    parser.add_argument("--size", type=int, default=4096, help="M = N = K")
    parser.add_argument("--tile", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--frame", default="1280x720")
    parser.add_argument("--no-perfetto", action="store_true")
    args = parser.parse_args(argv)
    w, h = (int(v) for v in args.frame.split("x"))

    t0 = time.perf_counter()
    n = args.size
    trace = simulate(RunRequest("tiled", n, n, n, params={"tile": args.tile, "pad": 0}, level=3))
    print(
        f"simulated tiled {args.size}^3 T={args.tile}: {len(trace.blocks)} blocks, "
        f"{trace.marks.size} phase marks ({time.perf_counter() - t0:.1f} s)"
    )
    frames = round(args.fps * args.seconds)
    with tempfile.TemporaryDirectory(prefix="matviz-bench-") as tmp:
        for fmt in ("gif", "mp4"):
            opts = ExportOptions(
                format=fmt, views=("all",), fps=args.fps, duration_s=args.seconds, size=(w, h)
            )
            out = Path(tmp) / f"bench.{fmt}"
            label = f"{fmt}: {frames} frames, all, {w}x{h}"
            _timed(label, lambda o=opts, p=out: ExportJob(trace, o, p).run())
        if not args.no_perfetto:
            out = Path(tmp) / "bench.json"
            label = f"perfetto: {trace.marks.shape[0] * trace.n_tiles} k-tiles"
            _timed(label, lambda: (write_perfetto(trace, out), out)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
