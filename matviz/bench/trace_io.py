"""Trace file benchmark (not a test): ``python -m matviz.bench.trace_io [--repeats 3]``.

Writes and reads a few traces in the current format and in format 2 (numpy's
``savez_compressed`` of uint32 deltas from block start, what matviz wrote before), side by side
in one run, and prints the best write time, read time and file size of each.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from matviz.backends.contract import RunRequest
from matviz.backends.simulator import simulate
from matviz.cli.record import DEFAULT_LEVEL
from matviz.core.trace import BLOCK_DTYPE, PROBE_DTYPE, Trace
from matviz.core.trace_io import load_trace, save_trace
from matviz.paths import TRACE_DIR

BUNDLED = "tiled_t32_p0_1024.mvz"


def save_format_2(trace: Trace, path: Path) -> None:
    """The writer matviz had before format 3, kept here only to compare against."""
    blocks = np.asarray(trace.blocks, BLOCK_DTYPE)
    arrays = {
        "blocks": blocks,
        "phase_blocks": np.asarray(trace.phase_blocks, np.int64),
        "warp_blocks": np.asarray(trace.warp_blocks, np.int64),
        "probe": np.asarray(trace.probe, PROBE_DTYPE),
    }
    flags = []
    for name, rows in (("marks", "phase_blocks"), ("barrier_wait", "warp_blocks")):
        times = np.asarray(getattr(trace, name), np.int64)
        starts = blocks["start"][arrays[rows]] if name == "marks" else np.zeros(len(arrays[rows]))
        delta = times - starts.astype(np.int64).reshape(-1, *(1,) * (times.ndim - 1))
        fits = bool(np.all((delta >= 0) & (delta <= np.iinfo(np.uint32).max)))
        arrays[name] = delta.astype(np.uint32) if fits else times
        flags.append(fits)
    arrays["delta_encoded"] = np.array(flags, np.bool_)
    npz = io.BytesIO()
    np.savez_compressed(npz, **arrays)  # type: ignore[arg-type]
    with zipfile.ZipFile(path, "w") as zf:
        manifest = {**trace.manifest, "format_version": 2}
        zf.writestr("manifest.json", json.dumps(manifest, default=str), zipfile.ZIP_DEFLATED)
        zf.writestr("arrays.npz", npz.getvalue(), zipfile.ZIP_STORED)


def _best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _traces() -> dict[str, Callable[[], Trace]]:
    def sim(n: int) -> Callable[[], Trace]:
        params = {"tile": 32, "pad": 0}
        return lambda: simulate(RunRequest("tiled", n, n, n, params=params, level=DEFAULT_LEVEL))

    return {
        "sim tiled 1024^3 T32": sim(1024),
        "sim tiled 4096^3 T32": sim(4096),
        f"recorded {BUNDLED}": lambda: load_trace(TRACE_DIR / BUNDLED),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matviz.bench.trace_io", description=__doc__)
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    args = parser.parse_args(argv)
    print(f"{'trace':<44} {'format':<9} {'write s':>8} {'read s':>8} {'size MB':>8}")
    with tempfile.TemporaryDirectory(prefix="matviz-bench-") as tmp:
        for label, make in _traces().items():
            trace = make()
            for fmt, writer in (("2 (old)", save_format_2), ("3 (new)", save_trace)):
                path = Path(tmp) / f"bench-{fmt[0]}.mvz"
                write = _best(lambda w=writer, p=path, t=trace: w(t, p), args.repeats)
                read = _best(lambda p=path: load_trace(p), args.repeats)
                size = path.stat().st_size / 1e6
                print(f"{label:<44} {fmt:<9} {write:8.3f} {read:8.3f} {size:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
