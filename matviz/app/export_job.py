"""One export as a job that runs in small steps: the CLI loops over it, the GUI's dialog calls
:meth:`ExportJob.step` from a QTimer so its window stays responsive and Cancel works.

Output goes to a temporary file next to the target, renamed at the end; :meth:`abort` (Cancel,
an error, Ctrl-C) removes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

import numpy as np

from matviz.core.runs import RunPoint
from matviz.core.trace import Trace
from matviz.errors import MatvizError
from matviz.export import options as opt
from matviz.export import perfetto, stop_signals
from matviz.export.atomic import AtomicOutput
from matviz.export.stop_signals import Interrupted
from matviz.export.writers import FixedPalette, FrameWriter, open_writer

PALETTE_SAMPLES = 5  # frames the GIF palette is chosen from


class Renderer(Protocol):
    """What draws the frames: :class:`matviz.app.export_render.FrameRenderer` (the app's
    views) or another picture, e.g. two traces compared."""

    def render(self, t_ns: int) -> np.ndarray: ...  # (H, W, 3) uint8 at the output size

    def key_colours(self) -> list[tuple[int, int, int]]: ...  # kept exact in a GIF palette

    def close(self) -> None: ...


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


class ExportJob:
    """``start()``, then ``step()`` until it returns False, then ``finish()``; or ``abort()``.

    Everything the user can get wrong is checked in the constructor (MatvizError).
    """

    def __init__(
        self,
        trace: Trace,
        opts: opt.ExportOptions,
        out: str | Path,
        runs: Sequence[RunPoint] | None = None,  # throughput points (default: this trace's)
        *,
        renderer: Callable[[], Renderer] | None = None,  # default: the app's views
        duration_ns: int | None = None,  # the span the frames cover (default: the trace's)
    ) -> None:
        opt.check(opts)
        self.runs = list(runs) if runs else None
        self.trace, self.opts = trace, opts
        self.path = Path(out)
        opt.format_for(self.path, opts.format)
        self.plan: perfetto.Plan | None = None
        self.written = 0  # bytes of Perfetto JSON (before gzip)
        if opts.format == "perfetto":
            self.times = np.zeros(0, np.int64)
            self.plan = perfetto.Plan(trace, opts.max_events)
            self.total = self.plan.pieces()
        else:
            self.times = opt.frame_times(opts, duration_ns or trace.duration_ns)
            self.block = opt.selected_block(opts, trace.grid)
            self.total = len(self.times)
        self.output = AtomicOutput(self.path)  # checks the folder before any work
        self.done = 0
        self.make_renderer = renderer
        self.renderer: Renderer | None = None
        self.writer: FrameWriter | None = None
        self._pieces: Iterator[bytes] | None = None
        self._file = None

    # -- steps -----------------------------------------------------------------------------------
    def start(self) -> None:
        with self._guard():
            if self.opts.format == "perfetto":
                self._pieces = perfetto.iter_json(self.trace, plan=self.plan)
                self._file = perfetto.open_output(self.output.tmp, self.path)  # closed in finish
                return
            from matviz.app.export_render import FrameRenderer

            o = self.opts
            if self.make_renderer is not None:
                self.renderer = self.make_renderer()
            else:
                self.renderer = FrameRenderer(
                    self.trace, o.views, o.size, self.block, o.caption, self.runs, o.note, o.access
                )
            pal = None
            if o.format == "gif":
                picks = np.unique(np.linspace(0, len(self.times) - 1, PALETTE_SAMPLES).round())
                samples = [self.renderer.render(int(self.times[int(i)])) for i in picks]
                pal = FixedPalette.from_frames(samples, self.renderer.key_colours())
            self.writer = open_writer(o.format, self.output.tmp, o.fps, len(self.times), pal)

    def step(self, budget_s: float = 0.05) -> bool:
        """Do work for about ``budget_s`` (at least one frame or piece); False when all is done."""
        end = time.perf_counter() + budget_s
        with self._guard():
            while self.done < self.total:
                if self._pieces is not None:
                    piece = next(self._pieces)
                    self._file.write(piece)
                    self.written += len(piece)
                else:
                    self.writer.write(self.renderer.render(int(self.times[self.done])))
                self.done += 1
                if time.perf_counter() >= end:
                    break
        return self.done < self.total

    def finish(self, stopped: Callable[[], int] = lambda: 0) -> Path:
        """Close the file (a GIF is encoded now) and move it into place, unless ``stopped()``
        names a signal that came meanwhile."""
        with self._guard():
            if self._file is not None:
                for piece in self._pieces:  # nothing left unless step() was skipped
                    self._file.write(piece)
                    self.written += len(piece)
                self._file.close()
            elif self.writer is not None:
                self.writer.close()
        self._file = self.writer = None
        self._close_renderer()
        if signum := stopped():
            self.abort()
            raise Interrupted(signum)
        return self.output.commit()

    def abort(self) -> None:
        """Stop and remove the partial file; safe to call at any time, more than once."""
        for closer in (getattr(self._file, "close", None), getattr(self.writer, "abort", None)):
            if closer is not None:
                try:
                    closer()
                except Exception:  # a writer that failed may fail again on close: ignore it
                    pass
        self._file = self.writer = None
        self._close_renderer()
        self.output.discard()

    def run(self, progress: Callable[[int, int], None] | None = None) -> Path:
        """The whole export in one call (the CLI). A stop signal (Ctrl-C, SIGTERM, SIGHUP)
        ends it between frames or before the rename: the partial file goes, the old file
        stays, and :class:`Interrupted` says which signal it was."""
        with stop_signals.held() as caught:  # acted on between frames
            self.start()
            while not caught and self.step():
                if progress:
                    progress(self.done, self.total)
            if not caught and progress:
                progress(self.done, self.total)
            if not caught:
                return self.finish(stopped=lambda: caught[0] if caught else 0)
            self.abort()
            raise Interrupted(caught[0])

    # -- helpers ---------------------------------------------------------------------------------
    def _close_renderer(self) -> None:
        if self.renderer is not None:
            self.renderer.close()
            self.renderer = None

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """On any failure remove the partial file; disk full, permission lost or ffmpeg gone
        become one line for the user, anything else (Ctrl-C, bugs) passes on unchanged."""
        try:
            yield
        except OSError as exc:
            self.abort()
            raise MatvizError(f"cannot write '{self.path}': {_one_line(exc)}") from None
        except BaseException:
            self.abort()
            raise
