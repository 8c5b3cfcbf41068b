"""Frame writers: RGB frames (H, W, 3 uint8) in, GIF / MP4 / PNG out, through imageio.

GIF: quantising every frame with Pillow's adaptive palette costs ~60 ms a 1280x720 frame and
makes files 20x larger (no colour index is left for the 'unchanged pixel' transparency of
delta frames). The app draws with few colours, so one palette is chosen up front from a few
sample frames plus the app's own colours, and each frame is mapped through a 64^3 lookup
table (~5 ms); imageio's pillow plugin then writes palette frames with delta optimisation.
Pillow keeps every GIF frame in memory until the file is closed (options.py limits the size),
and it merges a frame identical to the one before into it (same playback, one frame fewer).
MP4: H.264 through imageio-ffmpeg (the ffmpeg binary ships in its wheel), streamed.
"""

from __future__ import annotations

import errno
import math
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import imageio.v2 as iio2
import imageio.v3 as iio
import numpy as np
from PIL import Image

from matviz.errors import MatvizError

GIF_COLOURS = 255  # one index stays free: Pillow marks unchanged pixels with it
LUT_BITS = 6  # bits per channel of the colour lookup table (64^3 entries)
# Pixels of the sample frames the palette is chosen from: larger samples are thinned (every
# n-th row and column), so an 8K GIF does not hold five full RGB copies and Pillow's of them.
PALETTE_SAMPLE_PIXELS = 8_000_000
FULL_DISK_BYTES = 1 << 20  # less free space than this after a failed write: the disk filled
INDEX_CHUNK_PIXELS = 1 << 20  # frame.index() works in slabs: its int32 copies stay small
MP4_PARAMS = ["-preset", "veryfast", "-crf", "18", "-movflags", "+faststart"]

RGB = tuple[int, int, int]


class FrameWriter(Protocol):
    def write(self, frame: np.ndarray) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None:
        """Release the file without finishing it (the caller deletes it)."""


class FixedPalette:
    """At most 255 colours and a lookup table from 6-bit-per-channel RGB to the nearest one."""

    def __init__(self, colours: np.ndarray) -> None:
        self.colours = np.asarray(colours, np.uint8).reshape(-1, 3)
        if not 1 <= len(self.colours) <= 256:
            raise ValueError(f"a GIF palette holds 1 to 256 colours, not {len(self.colours)}")
        levels = (np.arange(1 << LUT_BITS) << (8 - LUT_BITS)) + (1 << (7 - LUT_BITS))
        grid = np.stack(np.meshgrid(levels, levels, levels, indexing="ij"), -1).reshape(-1, 3)
        grid = grid.astype(np.float32)
        pal = self.colours.astype(np.float32)
        self.lut = np.empty(len(grid), np.uint8)
        step = 1 << 15  # chunks of the nearest-colour search keep the distance matrix small
        for i in range(0, len(grid), step):
            # |g - p|^2 = |g|^2 - 2 g.p + |p|^2; |g|^2 is the same for every p
            dist = (pal**2).sum(1)[None, :] - 2 * grid[i : i + step] @ pal.T
            self.lut[i : i + step] = dist.argmin(1)

    @classmethod
    def from_frames(
        cls, frames: Sequence[np.ndarray], fixed: Sequence[RGB] = (), size: int = GIF_COLOURS
    ) -> FixedPalette:
        """The ``fixed`` colours plus the most needed ones of ``frames`` (median cut)."""
        fixed_arr = np.unique(np.asarray(fixed, np.uint8).reshape(-1, 3), axis=0)[:size]
        pixels = sum(np.asarray(f).shape[0] * np.asarray(f).shape[1] for f in frames)
        step = max(1, math.ceil(math.sqrt(pixels / PALETTE_SAMPLE_PIXELS)))
        montage = np.concatenate([np.asarray(f, np.uint8)[::step, ::step] for f in frames], axis=0)
        spare = max(size - len(fixed_arr), 1)
        quant = Image.fromarray(montage).quantize(spare, method=Image.Quantize.MEDIANCUT)
        found = np.asarray(quant.getpalette()[: 3 * spare], np.uint8).reshape(-1, 3)
        colours = np.unique(np.concatenate([fixed_arr, found]), axis=0)[:size]
        return cls(colours)

    def index(self, frame: np.ndarray) -> np.ndarray:
        """(H, W) palette indices of an RGB frame."""
        frame = np.asarray(frame, np.uint8)
        out = np.empty(frame.shape[:2], np.uint8)
        shift = 8 - LUT_BITS
        rows = max(1, INDEX_CHUNK_PIXELS // max(frame.shape[1], 1))
        for y in range(0, frame.shape[0], rows):
            q = (frame[y : y + rows] >> shift).astype(np.int32)
            out[y : y + rows] = self.lut[
                (q[..., 0] << (2 * LUT_BITS)) | (q[..., 1] << LUT_BITS) | q[..., 2]
            ]
        return out


def gif_durations(n_frames: int, fps: float) -> list[int]:
    """Per-frame delays in ms; GIF counts in 10 ms, so 30 fps alternates 30 and 40 ms to keep
    the total length right instead of playing 10% fast."""
    edges = np.rint(np.arange(n_frames + 1) * 100.0 / fps).astype(np.int64)
    return (np.maximum(np.diff(edges), 1) * 10).tolist()


class GifWriter:
    def __init__(self, path: Path, fps: float, n_frames: int, palette: FixedPalette) -> None:
        self.palette = palette
        self.pal_bytes = palette.colours.tobytes()
        durations = gif_durations(n_frames, fps)
        # Pillow takes a list only when it writes several frames; one frame needs a number
        self.duration: int | list[int] = durations[0] if n_frames == 1 else durations
        self.file = iio.imopen(path, "w", plugin="pillow", extension=".gif")

    def write(self, frame: np.ndarray) -> None:
        self.file.write(
            self.palette.index(frame),
            mode="P",
            is_batch=False,
            palette=self.pal_bytes,
            duration=self.duration,
            loop=0,
            optimize=True,
        )

    def close(self) -> None:
        self.file.close()  # Pillow encodes and writes every frame now

    def abort(self) -> None:
        # Drop the frames imageio holds for Pillow, or closing would encode them all first.
        pending = getattr(self.file, "images_to_write", None)
        if pending is not None:
            pending.clear()
        self.file.close()


class Mp4Writer:
    """ffmpeg in a subprocess, kept quiet: its own error lines would break the one-line promise,
    so a write that fails says why here (a full disk shows only as a broken pipe)."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path = path
        self.file = iio2.get_writer(
            path,
            format="FFMPEG",
            mode="I",
            fps=fps,
            codec="libx264",
            pixelformat="yuv420p",  # what browsers and slide software play
            macro_block_size=1,  # options.py insists on even sizes; never rescale
            quality=None,
            output_params=MP4_PARAMS,
            ffmpeg_log_level="quiet",
        )

    def write(self, frame: np.ndarray) -> None:
        with self._reason():
            self.file.append_data(frame)

    def close(self) -> None:
        with self._reason():
            self.file.close()

    @contextmanager
    def _reason(self) -> Iterator[None]:
        try:
            yield
        except (OSError, RuntimeError) as exc:
            if shutil.disk_usage(self.path.parent).free < FULL_DISK_BYTES:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from exc
            raise

    def abort(self) -> None:
        self.file.close()  # ffmpeg ends the partial video; the caller deletes it


class PngWriter:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.frame: np.ndarray | None = None

    def write(self, frame: np.ndarray) -> None:
        self.frame = frame

    def close(self) -> None:
        if self.frame is None:
            raise MatvizError("no frame was rendered")
        # encoded in memory, then written by a plain file: when the disk is full, imageio's own
        # file handle would fail again while it is collected and print a second traceback
        data = iio.imwrite("<bytes>", self.frame, extension=".png")
        with open(self.path, "wb") as out:
            out.write(data)

    def abort(self) -> None:
        self.frame = None


def open_writer(fmt: str, path: Path, fps: float, n_frames: int, palette: FixedPalette | None):
    """The writer for ``fmt``; a GIF needs its palette already chosen."""
    if fmt == "gif":
        if palette is None:
            raise ValueError("a GIF writer needs a palette")
        return GifWriter(path, fps, n_frames, palette)
    if fmt == "mp4":
        return Mp4Writer(path, fps)
    if fmt == "png":
        return PngWriter(path)
    raise ValueError(f"no frame writer for {fmt!r}")
