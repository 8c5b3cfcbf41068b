"""What every block is doing at a given instant, derived once from a Trace.

A block is WAITING before its start and DONE from its end on. In between, a block with marks
walks its k-steps as the kernel's description lays them out (``Trace.layout``): each channel
of marks is one sequence of steps, and each phase of a step runs from one of its marks to
another. A block is in a phase's state (LOADING or COMPUTING) while the phase runs; when
several channels are in flight (the copy of step t + 1 beside the compute of step t), the
higher state wins: COMPUTING over LOADING. In a chained channel (the last mark
of step t is the first of step t + 1) the instant between two steps already belongs to the
next step's first phase, so the colour does not flicker. Before the first mark (prologue: row,
col, sum = 0) and after the last (epilogue: the store to C) the block is RUNNING, as is a
block without marks (sampled out, or a kernel without k-steps).

Every state comes from this run's own marks and block times only. Per-warp barrier waits
(``Trace.barrier_wait``) are measured in a separate level-3 run, which is much slower, so they
are not on this time axis and never change a state: a phase that a barrier ends includes the
wait at it. ``waits_at`` and ``nearest_warp_block`` hand them to the diagnostics panel.

Per-frame work is proportional to the blocks alive at ``t`` (a few SMs' worth), not to the
size of the mark arrays: the marks are searched only for resident blocks. Marks are assumed
monotone within a channel of a block (each mark <= the next, each step's last <= the next
step's first), as both backends write them.
"""

from __future__ import annotations

import enum
import math
from functools import cached_property

import numpy as np

from matviz.core import metrics
from matviz.core.trace import Trace


class BlockState(enum.IntEnum):
    WAITING = 0  # not started
    LOADING = 1  # issue <= t < loaded: copying A/B tiles to shared memory, incl. barrier 1
    # Never produced: barrier waits come from another run (see the module docstring). The value
    # stays reserved so state codes in files, colour tables and exports keep their meaning.
    AT_BARRIER = 2
    COMPUTING = 3  # loaded <= t < computed
    DONE = 4  # t >= end
    RUNNING = 5  # started, not done, no per-tile phase at t


# (t >= start) + (t >= end) -> state of a block without looking at its phases
_LIFE = np.array([BlockState.WAITING, BlockState.RUNNING, BlockState.DONE], np.uint8)


_STATE_OF = {"loading": 1, "computing": 3}  # BlockState values of the phase states


class Timeline:
    """Derived, cached views of one trace for playback; see the module docstring."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        blocks = trace.blocks
        self.n_blocks = len(blocks)
        self.duration = trace.duration_ns
        self._start = np.ascontiguousarray(blocks["start"], np.int64)
        self._end = np.ascontiguousarray(blocks["end"], np.int64)
        self.layout = trace.layout
        self.n_tiles = trace.n_tiles if len(trace.phase_blocks) and self.layout.marks else 0
        self.n_marks = len(self.layout.marks)

        self._marks = np.ascontiguousarray(trace.marks, np.int64).reshape(-1)  # flat view
        self._row = np.full(self.n_blocks, -1, np.int64)  # block -> phase row
        if self.n_tiles:
            self._row[trace.phase_blocks[::-1]] = np.arange(len(trace.phase_blocks))[::-1]
        self._phased = self._row >= 0

        # Blocks whose warps' barrier waits were sampled (diagnostics only, another run).
        self._warp_row = np.full(self.n_blocks, -1, np.int64)
        if len(trace.warp_blocks):
            wb = trace.warp_blocks
            self._warp_row[wb[::-1]] = np.arange(len(wb))[::-1]

        self._frame: tuple[int, np.ndarray, np.ndarray] | None = None
        # one block at one time: several views ask for it at each frame of playback
        self._one: tuple[int, int, tuple[BlockState, int]] | None = None
        self._bounds: np.ndarray | None = None
        self._slots: tuple[np.ndarray, int] | None = None

    @cached_property
    def max_resident(self) -> int:
        """Most blocks alive at one instant (metrics.max_resident, computed once)."""
        return metrics.max_resident(self.trace)

    # -- lookups ----------------------------------------------------------------------------
    def phase_row(self, block: int) -> int | None:
        """Row of ``block`` in the marks, or None (O(1), unlike Trace.phase_row)."""
        row = int(self._row[block])
        return row if row >= 0 else None

    def warp_row(self, block: int) -> int | None:
        """Row of ``block`` in ``barrier_wait``, or None when its warps were not sampled."""
        row = int(self._warp_row[block])
        return row if row >= 0 else None

    def waits_at(self, block: int, ktile: int) -> np.ndarray | None:
        """Barrier waits (warps, barriers) in ns of ``block`` at ``ktile``; None if not sampled."""
        row = self.warp_row(block)
        if row is None or not 0 <= ktile < self.n_tiles:
            return None
        return self.trace.barrier_wait[row, ktile]

    def nearest_warp_block(self, block: int) -> int | None:
        """``block`` if its warps' barrier waits were sampled, else the sampled block nearest
        to it in the grid (then the lower index); None when no block was sampled."""
        if self._warp_row[block] >= 0:
            return int(block)
        wb = self.trace.warp_blocks
        if not len(wb):
            return None
        b = self.trace.blocks
        dist = np.abs(b["bx"][wb].astype(np.int64) - int(b["bx"][block])) + np.abs(
            b["by"][wb].astype(np.int64) - int(b["by"][block])
        )
        best = np.flatnonzero(dist == dist.min())
        return int(wb[best].min())

    def phase_at(self, block: int, t_ns: float):
        """The PhaseMarks that sets ``block``'s state at ``t_ns`` (None outside every phase)."""
        row = self.phase_row(block)
        if row is None:
            return None
        _, _, phase = self._classify(np.array([row]), np.array([math.floor(t_ns)], np.int64))
        return self.layout.phases[phase[0]] if phase[0] >= 0 else None

    def _mark(self, rows: np.ndarray, steps: np.ndarray, mark: int) -> np.ndarray:
        return self._marks[(rows * self.n_tiles + steps) * self.n_marks + mark]

    # -- the per-row search ----------------------------------------------------------------
    def _count_started(
        self, rows: np.ndarray, t: np.ndarray, mark: int, strict: bool = False
    ) -> np.ndarray:
        """Per row, how many steps' ``mark`` is <= t (< t when strict): vectorised bisection."""
        n = self.n_tiles
        lo = np.zeros(len(rows), np.int64)
        hi = np.full(len(rows), n, np.int64)
        for _ in range(max(1, math.ceil(math.log2(n + 1)))):
            mid = (lo + hi) >> 1
            value = self._mark(rows, np.minimum(mid, n - 1), mark)
            below = (value < t) if strict else (value <= t)
            below &= mid < hi  # finished searches stay put
            lo = np.where(below, mid + 1, lo)
            hi = np.where(below | (mid >= hi), hi, mid)
        return lo

    def _classify(
        self, rows: np.ndarray, t: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(state, ktile, phase index) of phase ``rows`` at times ``t``, for start <= t < end.

        Phase index -1: no phase runs (prologue, epilogue, or between two steps of an
        unchained channel).
        """
        n, layout = self.n_tiles, self.layout
        state = np.full(len(rows), BlockState.RUNNING, np.uint8)
        rank = np.zeros(len(rows), np.int64)  # the winning phase's state value; 0: none yet
        ktile = np.full(len(rows), -1, np.int32)
        phase = np.full(len(rows), -1, np.int64)
        for c, channel in enumerate(layout.channels):
            k = self._count_started(rows, t, channel[0]) - 1
            step = np.maximum(k, 0)
            candidates = [(step, k >= 0, False)]
            if layout.chained:  # after the step's last mark: the next step's first phase began
                passed = (k >= 0) & (k < n - 1) & (t >= self._mark(rows, step, channel[-1]))
                candidates.append((np.minimum(step + 1, n - 1), passed, True))
            for i, ph in enumerate(layout.phases):
                if ph.channel != c:
                    continue
                for at, valid, early in candidates:
                    if early and ph.begin != channel[0]:
                        continue
                    begin = self._mark(rows, at, ph.begin)
                    end = self._mark(rows, at, ph.end)
                    on = valid & (t < end) & ((t >= begin) | early)
                    value = _STATE_OF[ph.phase.state]
                    better = on & (value > rank)
                    rank[better] = value
                    ktile[better] = at[better]
                    phase[better] = i
        state[rank > 0] = rank[rank > 0]
        return state, ktile, phase

    def _evaluate(self, t_ns: float) -> tuple[np.ndarray, np.ndarray]:
        t = math.floor(t_ns)  # marks are whole ns: floor keeps every comparison exact
        if self._frame is not None and self._frame[0] == t:
            return self._frame[1], self._frame[2]
        life = (t >= self._start).view(np.uint8) + (t >= self._end).view(np.uint8)
        states = _LIFE[life]
        ktiles = np.full(self.n_blocks, -1, np.int32)
        alive = np.flatnonzero(self._phased & (life == 1))  # only resident blocks are searched
        if len(alive):
            s, k, _ = self._classify(self._row[alive], np.full(len(alive), t, np.int64))
            states[alive] = s
            ktiles[alive] = k
        states.flags.writeable = False
        ktiles.flags.writeable = False
        self._frame = (t, states, ktiles)
        return states, ktiles

    # -- per frame ---------------------------------------------------------------------------
    def states(self, t_ns: float) -> np.ndarray:
        """BlockState per block at ``t_ns`` (uint8, read-only, in launch order)."""
        return self._evaluate(t_ns)[0]

    def ktiles(self, t_ns: float) -> np.ndarray:
        """Current k-step per block (int32, read-only); -1 when not started, done or no phase."""
        return self._evaluate(t_ns)[1]

    def block_phase(self, block: int, t_ns: float) -> tuple[BlockState, int]:
        """(state, k-step) of one block at ``t_ns``."""
        t = math.floor(t_ns)
        if self._one is not None and self._one[:2] == (block, t):
            return self._one[2]
        s, k = self._block_states(block, np.array([t], np.int64))
        self._one = (block, t, (BlockState(int(s[0])), int(k[0])))
        return self._one[2]

    def _block_states(self, block: int, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(state, ktile) of one block at many times."""
        life = (t >= self._start[block]).astype(np.intp) + (t >= self._end[block])
        states = _LIFE[life]
        ktiles = np.full(len(t), -1, np.int32)
        row = self._row[block]
        alive = np.flatnonzero(life == 1)
        if row >= 0 and len(alive):
            states[alive], ktiles[alive], _ = self._classify(np.full(len(alive), row), t[alive])
        return states, ktiles

    def phase_span(self, block: int, t_ns: float) -> tuple[int, int]:
        """[begin, end) in ns of the stretch of one (state, k-step) of ``block`` around t."""
        t = min(max(math.floor(t_ns), 0), self.duration)
        points = np.unique(np.concatenate([[0, self.duration], self.boundaries(block)]))
        states, ktiles = self._block_states(block, points)  # constant between points
        code = states.astype(np.int64) * (self.n_tiles + 2) + ktiles
        i = int(np.searchsorted(points, t, side="right")) - 1
        differs = code != code[i]
        before = np.flatnonzero(differs[:i])
        after = np.flatnonzero(differs[i + 1 :])
        begin = int(points[before[-1] + 1]) if len(before) else int(points[0])
        end = int(points[i + 1 + after[0]]) if len(after) else self.duration
        return begin, end

    # -- boundaries and stepping -------------------------------------------------------------
    def _row_marks(self, row: int) -> np.ndarray:
        size = self.n_tiles * self.n_marks
        return self._marks[row * size : (row + 1) * size]

    def boundaries(self, block: int | None = None) -> np.ndarray:
        """Sorted unique times (int64 ns) where a state may change: start, end, every mark.

        Marks are clipped into their block's [start, end]. The global set is cached.
        """
        if block is not None:
            start, end = self._start[block], self._end[block]
            row = self._row[block]
            marks = self._row_marks(int(row)) if row >= 0 else np.zeros(0, np.int64)
            return np.unique(np.concatenate([[start, end], np.clip(marks, start, end)]))
        if self._bounds is None:
            rows = self.trace.phase_blocks if self.n_tiles else np.zeros(0, np.int64)
            lo, hi = self._start[rows, None, None], self._end[rows, None, None]
            parts = [self._start, self._end]
            if self.n_tiles:
                parts.append(np.clip(self.trace.marks, lo, hi).ravel())
            self._bounds = _unique_times(parts)
        return self._bounds

    def step(self, t_ns: float, direction: int, block: int | None = None) -> int:
        """The next (+1) or previous (-1) boundary strictly after/before t, in [0, duration]."""
        if direction not in (1, -1):
            raise ValueError(f"direction must be +1 or -1, not {direction}")
        if block is not None or self._bounds is not None:
            bounds = self.boundaries(block)
            if direction > 0:
                i = np.searchsorted(bounds, t_ns, side="right")
                t = int(bounds[i]) if i < len(bounds) else self.duration
            else:
                i = np.searchsorted(bounds, t_ns, side="left") - 1
                t = int(bounds[i]) if i >= 0 else 0
        else:
            t = self._step_resident(t_ns, direction)
        return int(min(max(t, 0), self.duration))

    def _step_resident(self, t_ns: float, direction: int) -> int:
        """Global step without sorting every mark: only blocks alive at t hold marks near t.

        Per channel, the next mark after t lies in the step that began last (k - 1) or is the
        first mark of the next one; the previous mark before t lies in step k - 1.
        """
        t = math.floor(t_ns) if direction > 0 else math.ceil(t_ns)
        if direction > 0:
            alive = np.flatnonzero(self._phased & (self._start <= t) & (t < self._end))
        else:
            alive = np.flatnonzero(self._phased & (self._start < t) & (t <= self._end))
        pool = [self._start, self._end]
        if len(alive):
            rows, n = self._row[alive], self.n_tiles
            t_rows = np.full(len(rows), t, np.int64)
            cols = []
            for channel in self.layout.channels:
                k = self._count_started(rows, t_rows, channel[0], strict=direction < 0)
                for step in (np.maximum(k - 1, 0), np.minimum(k, n - 1)):
                    cols += [self._mark(rows, step, m) for m in channel]
            marks = np.clip(np.column_stack(cols), self._start[alive, None], None)
            pool.append(np.minimum(marks, self._end[alive, None]).ravel())
        times = np.concatenate(pool)
        if direction > 0:
            times = times[times > t]
            return int(times.min()) if len(times) else self.duration
        times = times[times < t]
        return int(times.max()) if len(times) else 0

    # -- SM lanes ----------------------------------------------------------------------------
    def sm_slots(self) -> tuple[np.ndarray, int]:
        """(slot per block, slots used): blocks of one SM in one slot never overlap in time.

        Interval colouring by start time where each block takes the slot that freed first
        (as the scheduler hands a finished block's slot to the next one); it uses exactly the
        per-SM peak residency. Blocks are [start, max(end, start + 1)): zero-length blocks
        still occupied a slot. Vectorised: sorts, a cumulative max and pointer jumping.
        """
        if self._slots is None:
            self._slots = _fifo_slots(self.trace.blocks)
        return self._slots


def _unique_times(parts: list[np.ndarray]) -> np.ndarray:
    """Sorted unique int64 of all parts; a bitmap over the time range when that is smaller
    than sorting (tens of millions of marks over a few ms of ns)."""
    count = sum(p.size for p in parts)
    if count == 0:
        return np.zeros(0, np.int64)
    lo = min(int(p.min()) for p in parts if p.size)
    hi = max(int(p.max()) for p in parts if p.size)
    if hi - lo + 1 > 8 * count:
        return np.unique(np.concatenate(parts).astype(np.int64))
    seen = np.zeros(hi - lo + 1, bool)
    for p in parts:
        seen[p - lo] = True
    return np.flatnonzero(seen).astype(np.int64) + lo


def _fifo_slots(blocks: np.ndarray) -> tuple[np.ndarray, int]:
    n = len(blocks)
    if n == 0:
        return np.zeros(0, np.int32), 0
    sm = blocks["smid"].astype(np.int64)
    start = blocks["start"].astype(np.int64)
    end = np.maximum(blocks["end"].astype(np.int64), start + 1)
    # Rank times so (sm, time) packs into one int64 key with no overflow.
    _, rank = np.unique(np.concatenate([start, end]), return_inverse=True)
    width = int(rank.max()) + 1
    skey = sm * width + rank[:n]
    ekey = sm * width + rank[n:]
    by_start = np.argsort(skey, kind="stable")
    by_end = np.argsort(ekey, kind="stable")
    skey_s, ekey_s = skey[by_start], ekey[by_end]
    # Both orders group by SM with equal group sizes, so group offsets agree.
    first = np.searchsorted(skey_s, (skey_s // width) * width, side="left")
    pos = np.arange(n) - first  # index of the block among its SM's starts
    freed = np.searchsorted(ekey_s, skey_s, side="right") - first  # ends <= this start
    offset = first * (n + 1)  # grows per SM, so the running max restarts per SM
    used = np.maximum.accumulate(pos + 1 - freed + offset) - offset  # slots opened so far
    opens = np.ones(n, bool)
    opens[1:] = (used[1:] > used[:-1]) | (pos[1:] == 0)
    # The r-th reuse on an SM takes the slot of the r-th block to end there (it has ended).
    parent = np.arange(n)
    reuse = ~opens
    parent[by_start[reuse]] = by_end[first[reuse] + pos[reuse] - used[reuse]]
    root_slot = np.zeros(n, np.int64)
    root_slot[by_start[opens]] = used[opens] - 1
    while True:  # pointer jumping: each pass halves every chain
        nxt = parent[parent]
        if np.array_equal(nxt, parent):
            break
        parent = nxt
    return root_slot[parent].astype(np.int32), int(used.max())
