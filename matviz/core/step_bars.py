"""One block's k-steps as bars in time, a row per channel of marks.

A kernel that runs one k-step at a time has one channel: its row alternates load and compute.
A pipeline has a copy channel and a compute channel: the copy of step t + S - 1 runs on its row
while step t computes on the other, as the block stamped them (measured, not drawn from a
model). Read from the trace's description, so any kernel's k-step fits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matviz.core.trace import Trace


@dataclass(frozen=True)
class StepBars:
    """Bars of one sampled block: ``rows`` names each channel by its phases."""

    block: int
    rows: tuple[tuple[str, ...], ...]  # per channel, its phases: ("copy",), ("load", "compute")
    row: np.ndarray  # channel of each bar
    step: np.ndarray  # k-step of each bar
    phase: np.ndarray  # index into the layout's phases
    lane: np.ndarray  # sub-row inside its channel: bars of one channel that overlap differ
    depth: tuple[int, ...]  # per channel: sub-rows, the most of its bars that overlap
    state: tuple[str, ...]  # per phase of the layout: "loading" or "computing"
    begin: np.ndarray  # ns, the trace's time base
    end: np.ndarray

    def overlap_ns(self) -> int:
        """Time during which phases of two rows run at once (0 with a single channel)."""
        if len(self.rows) < 2:
            return 0
        times, steps = [], []
        for r in range(len(self.rows)):
            on = self.row == r
            begin, end = _union(self.begin[on], self.end[on])
            times += [begin, end]
            steps += [np.ones(len(begin), np.int64), -np.ones(len(end), np.int64)]
        t, step = np.concatenate(times), np.concatenate(steps)
        order = np.lexsort((step, t))  # at one instant, a row ends before another begins
        t, running = t[order], np.cumsum(step[order])
        return int(np.sum(np.diff(t)[running[:-1] >= 2]))


def _union(begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals [begin, end) merged where they overlap or touch."""
    if not len(begin):
        return begin, end
    order = np.argsort(begin, kind="stable")
    begin, end = begin[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.r_[True, begin[1:] > reach[:-1]]  # a gap before this interval starts a segment
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(begin) - 1]
    return begin[first], reach[last]


def step_bars(trace: Trace, block: int) -> StepBars | None:
    """The k-step phases of ``block``, or None where it has no marks (not sampled, level < 2,
    or a kernel without k-steps)."""
    row = trace.phase_row(block) if trace.n_tiles else None
    if row is None:
        return None
    layout = trace.layout
    marks = trace.marks[row]  # (steps, marks)
    n = marks.shape[0]
    rows, bar_row, steps, phases, begins, ends = [], [], [], [], [], []
    for c in range(len(layout.channels)):
        rows.append(tuple(ph.phase.name for ph in layout.phases if ph.channel == c))
    for i, ph in enumerate(layout.phases):
        begin, end = marks[:, ph.begin], marks[:, ph.end]
        kept = end > begin  # a step that did not run (zero length) draws nothing
        bar_row.append(np.full(int(kept.sum()), ph.channel))
        steps.append(np.arange(n)[kept])
        phases.append(np.full(int(kept.sum()), i))
        begins.append(begin[kept])
        ends.append(end[kept])
    order = np.argsort(np.concatenate(begins), kind="stable")
    row_of, step_of = np.concatenate(bar_row)[order], np.concatenate(steps)[order]
    begin_of, end_of = np.concatenate(begins)[order], np.concatenate(ends)[order]
    depth = tuple(_depth(begin_of[row_of == c], end_of[row_of == c]) for c in range(len(rows)))
    return StepBars(
        block=int(block),
        rows=tuple(rows),
        row=row_of,
        step=step_of,
        phase=np.concatenate(phases)[order],
        lane=step_of % np.asarray(depth, np.int64)[row_of],
        depth=depth,
        state=tuple(ph.phase.state for ph in layout.phases),
        begin=begin_of.astype(np.int64),
        end=end_of.astype(np.int64),
    )


def _depth(begin: np.ndarray, end: np.ndarray) -> int:
    """How many of a channel's bars (in step order, begins rising) overlap at most: bar i
    overlaps the later bars that begin before it ends. Steps t and t + depth never overlap,
    so step % depth is a sub-row that keeps every bar visible."""
    if not len(begin):
        return 1
    i = np.arange(len(begin))
    return int(max((np.searchsorted(begin, end, side="left") - i).max(), 1))


SUB_ROWS = 12  # image rows per channel: divides evenly into 1, 2, 3, 4 or 6 sub-rows
FILL = 0.7  # the share of a sub-row its bars fill (the rest separates the sub-rows)


def raster(bars: StepBars, start: int, end: int, bins: int) -> np.ndarray:
    """The bars as an image (channels x ``SUB_ROWS`` rows, ``bins`` columns over [start,
    end)): 1 + the phase index where a bar is, 0 elsewhere. One image whatever the number of
    k-steps; a bar keeps at least one column and, when it spans three or more, gives its last
    to a gap, so neighbours stay apart."""
    image = np.zeros((len(bars.rows) * SUB_ROWS, bins), np.uint8)
    if not len(bars.begin):
        return image
    scale = bins / max(end - start, 1)
    b0 = np.clip(np.floor((bars.begin - start) * scale).astype(np.int64), 0, bins - 1)
    # floor both ends: a bar that ends where the next begins leaves that column to the next
    b1 = np.clip(np.floor((bars.end - start) * scale).astype(np.int64), b0 + 1, bins)
    b1 = np.where(b1 - b0 >= 3, b1 - 1, b1)
    cols = b1 - b0
    first = np.repeat(b0 - np.cumsum(cols) + cols, cols) + np.arange(int(cols.sum()))
    depth = np.asarray(bars.depth, np.int64)[bars.row]
    row0, code = np.repeat(bars.row * SUB_ROWS, cols), np.repeat(bars.phase + 1, cols)
    for fill_row in range(SUB_ROWS):
        # the sub-row of each bar that covers this image row, if its filled part does
        lane = fill_row * depth // SUB_ROWS
        top = lane * SUB_ROWS / depth
        inside = (fill_row - top + 0.5) / (SUB_ROWS / depth)
        keep = np.repeat((lane == bars.lane) & (np.abs(inside - 0.5) <= FILL / 2), cols)
        image[row0[keep] + fill_row, first[keep]] = code[keep]
    return image
