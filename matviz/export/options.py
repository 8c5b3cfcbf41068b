"""What an export should produce, checked before any work starts (shared by the CLI and the GUI).

Times on the command line and in the dialog are microseconds from kernel start; inside they are
integer nanoseconds like everywhere else. Every mistake is a one-line MatvizError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from matviz.errors import MatvizError
from matviz.export.perfetto import MAX_EVENTS

VIEWS = (
    "all", "grid", "sm", "tiles", "banks", "coalescing", "fragments", "source", "errors",
    "throughput",
)  # fmt: skip
FORMATS = ("gif", "mp4", "png", "perfetto")
VIDEO_FORMATS = ("gif", "mp4")
SUFFIXES = {"gif": (".gif",), "mp4": (".mp4",), "png": (".png",), "perfetto": (".json", ".json.gz")}
MIN_SIDE, MAX_SIDE = 64, 7680
MAX_FRAMES = 100_000
MAX_GIF_FPS = 50  # browsers slow down GIF frames shorter than 20 ms
GIF_MEMORY_LIMIT = 3 * 2**30  # what a GIF export may hold beyond the app itself
# Bytes a GIF export holds, per pixel (P: of a frame, L: of the logical layout it is drawn at):
# every frame twice until the file is closed: imageio keeps each one's palette indices, and
# Pillow copies them all again (delta frames) while it encodes. Per frame in flight: Qt's grab
# (RGB32 pixmap and its image, at L), the scaled image (RGB32), the RGB888 copy and numpy's,
# the palette indices, Pillow's per-frame copies while it encodes.
GIF_HELD_PER_PIXEL = 2
GIF_FRAME_PER_LOGICAL_PIXEL = 8
GIF_FRAME_PER_PIXEL = 12
# Smallest logical size at which each view's texts and panels fit; smaller outputs are
# rendered at this size (same aspect as asked) and scaled down (matviz.app.export_render).
LAYOUT_MIN = {
    "all": (1760, 990),
    "grid": (640, 520),
    "sm": (900, 520),
    "tiles": (960, 600),
    "banks": (760, 520),
    "coalescing": (760, 520),
    "fragments": (760, 520),
    "source": (760, 600),
    "errors": (900, 600),
    "throughput": (760, 520),
}
DEFAULTS = {"fps": 30, "duration": 10.0, "size": (1280, 720), "caption": True, "view": "all"}
# Options that mean nothing for a format: giving one is a mistake worth one line.
NOT_FOR = {
    "gif": ("at", "max_events"),
    "mp4": ("at", "max_events"),
    "png": ("fps", "duration", "from", "to", "max_events"),
    "perfetto": (
        "view",
        "fps",
        "duration",
        "size",
        "block",
        "from",
        "to",
        "at",
        "caption",
        "note",
        "access",
    ),
}


@dataclass(frozen=True)
class ExportOptions:
    format: str = "gif"
    views: tuple[str, ...] = ("all",)
    fps: int = 30
    duration_s: float = 10.0
    size: tuple[int, int] = (1280, 720)
    block: tuple[int, int] | None = None  # selected block (bx, by); None: middle of the grid
    t0_us: float | None = None  # None: kernel start
    t1_us: float | None = None  # None: kernel end
    at_us: float | None = None  # PNG still; None: middle of the kernel
    caption: bool = True
    max_events: int = MAX_EVENTS  # Perfetto: block and phase events kept (blocks sampled)
    note: str = ""  # text over the caption on every frame (a lesson step's explanation)
    access: str = ""  # the banks instruction or coalescing request the views show (a site)

    @property
    def n_frames(self) -> int:
        """Frames of a video (fps x duration, at least 1); 1 for a still."""
        if self.format == "png":
            return 1
        return max(1, round(self.fps * self.duration_s))

    @property
    def view_label(self) -> str:
        return ",".join(self.views)


def parse_size(text: str) -> tuple[int, int]:
    """'1280x720' -> (1280, 720)."""
    try:
        w, h = (int(v) for v in text.lower().replace("×", "x").split("x"))
    except ValueError:
        raise MatvizError(f"size '{text}' is not of the form WIDTHxHEIGHT, e.g. 1280x720") from None
    for side in (w, h):
        if not MIN_SIDE <= side <= MAX_SIDE:
            raise MatvizError(f"size '{text}': each side must be {MIN_SIDE} to {MAX_SIDE} pixels")
    return w, h


def parse_views(text: str) -> tuple[str, ...]:
    """'all', 'grid' or a comma list such as 'grid,sm' (shown side by side)."""
    views = tuple(v.strip().lower() for v in text.split(",") if v.strip())
    unknown = [v for v in views if v not in VIEWS]
    if not views or unknown:
        bad = ", ".join(unknown) or repr(text)
        raise MatvizError(f"unknown view {bad} (use {', '.join(VIEWS)} or a comma list)")
    if "all" in views and len(views) > 1:
        raise MatvizError("'all' already shows every view: give it alone")
    if len(set(views)) != len(views):
        raise MatvizError(f"view list '{text}' names a view twice")
    return views


def format_for(path: Path, fmt: str | None) -> str:
    """The format given, or the one the output's suffix names; the two must agree."""
    name = path.name.lower()
    every = tuple(suffix for suffixes in SUFFIXES.values() for suffix in suffixes)
    if name in every:  # '.mp4': ffmpeg reads it as a name with no suffix and fails
        raise MatvizError(
            f"output '{path.name}' is only a suffix: give it a name, e.g. anim{path.name}"
        )
    if fmt is None:
        for candidate, suffixes in SUFFIXES.items():
            if name.endswith(suffixes):
                return candidate
        raise MatvizError(
            f"cannot tell the format from '{path.name}': use --format {'|'.join(FORMATS)}"
        )
    if fmt not in FORMATS:
        raise MatvizError(f"unknown format '{fmt}' (use {', '.join(FORMATS)})")
    if not name.endswith(SUFFIXES[fmt]):
        wanted = " or ".join(SUFFIXES[fmt])
        raise MatvizError(f"output '{path.name}' should end in {wanted} for --format {fmt}")
    return fmt


def build_options(path: Path, fmt: str | None = None, **given) -> ExportOptions:
    """Options from the user's values (None = not given); rejects ones the format ignores."""
    fmt = format_for(path, fmt)
    typed = [k for k, v in given.items() if v is not None]
    for name in typed:
        if name in NOT_FOR[fmt]:
            raise MatvizError(f"--{name.replace('_', '-')} does not apply to --format {fmt}")
    values = {**DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    size = values["size"]
    size = parse_size(size) if isinstance(size, str) else tuple(size)
    views = values["view"]
    views = parse_views(views) if isinstance(views, str) else tuple(views)
    opts = ExportOptions(
        format=fmt,
        views=views,
        fps=int(values["fps"]),
        duration_s=float(values["duration"]),
        size=size,
        block=values.get("block"),
        t0_us=values.get("from"),
        t1_us=values.get("to"),
        at_us=values.get("at"),
        caption=bool(values["caption"]),
        max_events=int(values.get("max_events", MAX_EVENTS)),
        note=str(values.get("note") or ""),
        access=str(values.get("access") or ""),
    )
    check(opts)
    return opts


def check(opts: ExportOptions) -> None:
    """The checks that need no trace."""
    if opts.format not in FORMATS:
        raise MatvizError(f"unknown format '{opts.format}' (use {', '.join(FORMATS)})")
    parse_views(",".join(opts.views))
    if opts.format == "perfetto" and opts.max_events < 1:
        raise MatvizError(f"--max-events must be at least 1 (got {opts.max_events})")
    if opts.format not in VIDEO_FORMATS:
        return
    if opts.fps < 1:
        raise MatvizError(f"--fps must be at least 1 (got {opts.fps})")
    if not opts.duration_s > 0 or not math.isfinite(opts.duration_s):
        raise MatvizError(f"--duration must be more than 0 seconds (got {opts.duration_s})")
    if opts.n_frames > MAX_FRAMES:
        raise MatvizError(f"{opts.n_frames} frames is more than {MAX_FRAMES}: lower --fps")
    w, h = opts.size
    if opts.format == "mp4" and (w % 2 or h % 2):
        raise MatvizError(f"mp4 needs an even width and height (got {w}x{h})")
    if opts.format == "gif":
        if opts.fps > MAX_GIF_FPS:
            raise MatvizError(
                f"GIF plays at most {MAX_GIF_FPS} fps in browsers: lower --fps or use mp4"
            )
        need = gif_memory(opts)
        if need > GIF_MEMORY_LIMIT:
            raise MatvizError(
                f"a GIF of {opts.n_frames} frames at {w}x{h} needs ~{need / 2**30:.1f} GiB "
                f"of memory while it is written (at most {GIF_MEMORY_LIMIT / 2**30:g} GiB): "
                "use mp4, a smaller --size or fewer frames"
            )


def logical_size(views: tuple[str, ...], size: tuple[int, int]) -> tuple[int, int]:
    """The size to lay the views out at: ``size`` scaled up (aspect kept) until they fit."""
    if views == ("all",):
        min_w, min_h = LAYOUT_MIN["all"]
    else:
        min_w = sum(LAYOUT_MIN[v][0] for v in views)
        min_h = max(LAYOUT_MIN[v][1] for v in views)
    w, h = size
    scale = max(1.0, min_w / w, min_h / h)
    return round(w * scale), round(h * scale)


def gif_memory(opts: ExportOptions) -> int:
    """Bytes a GIF export holds at its peak, beyond the app itself (see GIF_HELD_PER_PIXEL)."""
    w, h = opts.size
    lw, lh = logical_size(opts.views, opts.size)
    held = GIF_HELD_PER_PIXEL * opts.n_frames * w * h
    return held + GIF_FRAME_PER_LOGICAL_PIXEL * lw * lh + GIF_FRAME_PER_PIXEL * w * h


def _us(ns: float) -> str:
    return f"{ns / 1000:,.1f} µs"


def frame_times(opts: ExportOptions, duration_ns: int) -> np.ndarray:
    """Playhead (int64 ns) of every frame: linear from T0 to T1, both included."""
    if opts.format == "png":
        at = duration_ns / 2 if opts.at_us is None else opts.at_us * 1000
        if not (math.isfinite(at) and 0 <= at <= duration_ns):
            raise MatvizError(
                f"--at {opts.at_us:g} µs is outside the kernel (0 to {_us(duration_ns)})"
            )
        return np.array([round(at)], np.int64)
    if duration_ns <= 0:
        raise MatvizError("the trace's kernel took no time: there is nothing to animate")
    t0 = 0.0 if opts.t0_us is None else opts.t0_us * 1000
    t1 = float(duration_ns) if opts.t1_us is None else opts.t1_us * 1000
    for name, given, t in (("--from", opts.t0_us, t0), ("--to", opts.t1_us, t1)):
        if given is None:  # the defaults: 0 and the end, whatever float makes of it
            continue
        if not math.isfinite(t) or t < 0:
            raise MatvizError(f"{name} must be a time of at least 0 µs")
        if t > duration_ns:
            raise MatvizError(
                f"{name} {t / 1000:g} µs is after the end of the kernel ({_us(duration_ns)})"
            )
    if t1 <= t0:
        raise MatvizError(
            f"empty time range: --to ({t1 / 1000:g} µs) must be later than "
            f"--from ({t0 / 1000:g} µs)"
        )
    n = opts.n_frames
    if n == 1:
        return np.array([round(t0)], np.int64)
    return np.rint(np.linspace(t0, t1, n)).astype(np.int64)


def selected_block(opts: ExportOptions, grid: tuple[int, int]) -> int:
    """Linear index of --block (default: the middle of the grid, as in the screenshot)."""
    gx, gy = grid
    bx, by = opts.block if opts.block is not None else (gx // 2, gy // 2)
    if not (0 <= bx < gx and 0 <= by < gy):
        raise MatvizError(f"--block {bx},{by} is outside the {gx}x{gy} grid")
    return by * gx + bx
