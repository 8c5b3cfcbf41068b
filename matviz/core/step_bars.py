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
        edges = np.unique(np.concatenate([self.begin, self.end]))
        mid = (edges[:-1] + edges[1:]) / 2
        running = [np.zeros(len(mid), bool) for _ in self.rows]  # per row: a bar covers it
        for r in range(len(self.rows)):
            on = self.row == r
            if on.any():
                b, e = self.begin[on], self.end[on]
                inside = (mid[:, None] >= b[None, :]) & (mid[:, None] < e[None, :])
                running[r] = inside.any(axis=1)
        both = np.sum(running, axis=0) >= 2
        return int(np.sum(np.diff(edges)[both]))


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
