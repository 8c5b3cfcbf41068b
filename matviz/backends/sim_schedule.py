"""Which SM runs each simulated block, and when: the SM as a shared pipe with age priority.

What the H200 recordings show (``resources/traces``): blocks that share an SM do not progress
evenly. The oldest block runs at nearly its alone speed and younger ones take what is left (at
T=32 a second block crawls at a third of the speed until the first one ends, then speeds up), so
the first wave's blocks end one after another and each SM then retires a block every X ns (X =
the SM time one block uses up), with a spread of well under 1% between SMs. Every SM therefore
runs floor or ceil(blocks / SMs) blocks: the most balanced split.

The model, per SM: resident blocks ranked by age share the SM's capacity (1). A block of rank r
(r older blocks, each of ``warps`` warps) weighs 2^(-r warps / ``priority_halving_warps``); the
shares are the weights water-filled to 1, none above ``cap`` = X / D (D: the block's alone
duration), so a block never beats its latency path. A block with work X finishes when its shares
integrate to X. Blocks finish oldest first, so with refills every SM retires one block per step
and the simulation runs in lockstep over the SMs, vectorised.

Dispatch: the first wave fills the SMs round robin (block i on SM i % SMs, ``dispatch_ns``
apart); after that each block in linear blockIdx order takes the slot that frees first (ties:
lowest fill round, then lowest smid), starting ``block_launch_ns`` later. :func:`schedule` is
the plain slot scheduler for blocks of fixed durations (no sharing).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np


def schedule(
    durations: np.ndarray,
    n_sms: int,
    blocks_per_sm: int,
    *,
    launch_ns: float = 0.0,
    dispatch_ns: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Start times (float ns) and SM ids of fixed-duration blocks in linear launch order.

    Round robin first wave, then each block takes the slot that frees first (ties: lowest fill
    round, then lowest smid), ``launch_ns`` later.
    """
    n = len(durations)
    first = min(n, n_sms * blocks_per_sm)
    idx = np.arange(first)
    start = np.empty(n)
    smid = np.empty(n, np.int64)
    start[:first] = idx * dispatch_ns
    smid[:first] = idx % n_sms
    ends = start[:first] + durations[:first]
    heap = list(zip(ends.tolist(), (idx // n_sms).tolist(), smid[:first].tolist(), strict=True))
    heapq.heapify(heap)
    rest_start, rest_sm = [], []
    for d in durations[first:].tolist():  # O(blocks log slots): one heap step per block
        t, rnd, sm = heap[0]
        t += launch_ns
        heapq.heapreplace(heap, (t + d, rnd, sm))
        rest_start.append(t)
        rest_sm.append(sm)
    start[first:] = rest_start
    smid[first:] = rest_sm
    return start, smid


def share_table(per_sm: int, cap: float, warps: int, halving_warps: float) -> np.ndarray:
    """Shares (per_sm + 1, per_sm): row n for n resident blocks, column r for age rank r."""
    table = np.zeros((per_sm + 1, per_sm))
    decay = 0.0 if halving_warps <= 0 else 2.0 ** (-warps / halving_warps)
    for n in range(1, per_sm + 1):
        if n * cap <= 1.0:
            table[n, :n] = cap
            continue
        w = decay ** np.arange(n) if decay else (np.arange(n) == 0).astype(float)
        for k in range(n):  # the k oldest capped, the rest in proportion to their weights
            lam = (1.0 - k * cap) / w[k:].sum() if w[k:].sum() else math.inf
            if lam * w[k] <= cap:
                table[n, :k] = cap
                table[n, k:n] = lam * w[k:]
                break
    return table


@dataclass
class Fluid:
    """Lockstep result: ``events[j, s]`` = when SM s retired its j-th block (NaN past its last)."""

    events: np.ndarray
    counts: np.ndarray  # blocks per SM
    smid: np.ndarray  # per block, linear order
    local: np.ndarray  # per block: its position on its SM (= its retirement index)
    join: np.ndarray  # per block: when it joined its SM
    per_sm: int
    shares: np.ndarray


class WorkRows:
    """Rows (one value per SM) of the j-th block each SM runs, drawn in fixed chunks."""

    def __init__(self, draw, chunk: int = 64):
        self.draw, self.chunk = draw, chunk
        self.rows: list = []

    def more(self, n: int) -> list:
        new = list(self.draw(n))
        self.rows.extend(new)
        return new

    def __call__(self, j: int) -> np.ndarray:
        while len(self.rows) <= j:
            self.more(self.chunk)
        return self.rows[j]


def _retire(rem, t, u):
    """One lockstep step: the oldest block of each SM finishes; ``u`` its shares (n_sms, b)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dt = np.where(u[:, 0] > 0, rem[:, 0] / u[:, 0], 0.0)
    t = t + dt
    rem = np.maximum(rem - u * dt[:, None], 0.0)
    rem[:, :-1] = rem[:, 1:]
    rem[:, -1] = 0.0
    return rem, t


def fluid_schedule(
    n_blocks: int, n_sms: int, per_sm: int, shares: np.ndarray, work: WorkRows, stagger: float
) -> Fluid:
    """Run the SMs (module docstring); ``stagger`` ns between first-wave dispatches."""
    b = per_sm
    first = min(n_blocks, n_sms * b)
    count0 = np.bincount(np.arange(first) % n_sms, minlength=n_sms)
    rem = np.stack([work(k) for k in range(b)], axis=1)
    rem[np.arange(b)[None, :] >= count0[:, None]] = 0.0
    t = np.arange(n_sms) * stagger
    for k in range(1, int(count0.max())):  # the first wave arrives: no block can finish yet
        arriving = count0 > k
        dt = n_sms * stagger
        rem[arriving] = np.maximum(rem[arriving] - shares[k] * dt, 1e-9)
        t[arriving] += dt
    queued = n_blocks - first
    if queued:
        avg = queued // n_sms  # quotas lie within a few steps (and 2%) of the average
        low = max(0, avg - 64 - avg // 50)
        events, order, quota, keep = _refill(rem.copy(), t, shares[b], work, queued, low)
        if quota.min() < low:  # pragma: no cover - far off the average: keep every step
            events, order, quota, keep = _refill(rem, t, shares[b], work, queued, 0)
        rem = np.stack([keep[q][0][s] for s, q in enumerate(quota)])
        t = np.array([keep[q][1][s] for s, q in enumerate(quota)])
        active = np.full(n_sms, b - 1)
    else:
        events, quota, active = np.zeros((0, n_sms)), np.full(n_sms, -1), count0
    counts = np.where(quota >= 0, b + quota, count0)
    rows = int(counts.max())
    out = np.full((rows, n_sms), np.nan)
    out[: len(events)] = events[:rows]
    for d in range(int(active.max())):  # drain: no more blocks to hand out
        n_now = np.maximum(active - d, 0)
        rem, t = _retire(rem, t, shares[n_now])
        live = n_now > 0
        out[(quota + 1 + d)[live], np.flatnonzero(live)] = t[live]
    out[np.arange(rows)[:, None] >= counts[None, :]] = np.nan
    smid = np.empty(n_blocks, np.int64)
    local = np.empty(n_blocks, np.int64)
    join = np.empty(n_blocks)
    i = np.arange(first)
    smid[:first], local[:first], join[:first] = i % n_sms, i // n_sms, i * stagger
    if queued:
        j, s = np.divmod(order, n_sms)
        smid[first:], local[first:], join[first:] = s, b + j, events[j, s]
    return Fluid(out, counts, smid, local, join, b, shares)


def _refill(rem, t, u, work: WorkRows, queued: int, low: int):
    """Steps with every SM full until the ``queued`` earliest retirements are known.

    Returns the retirement times, the flat indices of the first ``queued`` in time order, each
    SM's quota (its retirements that hand out a block) and the SMs' states (from step ``low``
    on) right after a retirement, before the refill: an SM's drain starts from the one at its
    quota.
    """
    n_sms, b = rem.shape
    events: list[np.ndarray] = []
    keep: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    j = 0
    while True:
        target = (math.ceil(queued / n_sms * 1.02) if not events else len(events)) + b + 16
        while j < target:
            rem, t = _retire(rem, t, u[None, :])
            events.append(t)
            if j >= low:
                keep[j] = (rem.copy(), t)
            rem[:, -1] = work(b + j)
            j += 1
        ev = np.array(events)
        order = _first_events(ev, queued)
        quota = np.bincount(order % n_sms, minlength=n_sms)
        if quota.max() < len(ev) and ev.flat[order[-1]] <= ev[-1].min():
            return ev, order, quota, keep


def _first_events(events: np.ndarray, queued: int) -> np.ndarray:
    """Flat (step * SMs + smid) indices of the ``queued`` earliest retirements, in time order."""
    flat = events.ravel()
    if queued < len(flat):  # the earliest ones; at a tie the lowest step, then the lowest smid
        tau = flat[np.argpartition(flat, queued - 1)[queued - 1]]
        below = np.flatnonzero(flat < tau)
        part = np.concatenate([below, np.flatnonzero(flat == tau)[: queued - len(below)]])
    else:
        part = np.arange(len(flat))
    return part[np.lexsort((part, flat[part]))]


def progress_times(fl: Fluid, rows: np.ndarray, begin, finish, fractions) -> np.ndarray:
    """When blocks ``rows`` reached ``fractions`` (rows, marks) of the work between two times.

    A block's work accrues at its share of its SM, step by step (its age rank falls by one per
    retirement); ``begin``/``finish`` (per row) are the times that map to fraction 0 and 1.
    """
    b, ev = fl.per_sm, fl.events
    s, k = fl.smid[rows], fl.local[rows]
    m = k[:, None] - b + 1 + np.arange(b)[None, :]  # the steps this block lives through
    valid = m >= 0
    mc = np.maximum(m, 0)
    t_end = ev[mc, s[:, None]]
    t_beg = np.where(mc >= 1, ev[np.maximum(mc - 1, 0), s[:, None]], fl.join[rows][:, None])
    first = m == np.maximum(k - b + 1, 0)[:, None]
    t_beg = np.where(first, fl.join[rows][:, None], t_beg)
    t_beg = np.where(valid, t_beg, fl.join[rows][:, None])
    t_end = np.where(valid, t_end, fl.join[rows][:, None])
    n_now = np.clip(fl.counts[s][:, None] - mc, 0, b)
    share = np.where(valid, fl.shares[n_now, np.clip(k[:, None] - mc, 0, b - 1)], 0.0)
    times = np.concatenate([t_beg[:, :1], t_end], axis=1)
    work = np.concatenate(
        [np.zeros((len(rows), 1)), np.cumsum(share * (t_end - t_beg), axis=1)], axis=1
    )
    span = np.maximum(work[:, -1:], 1e-30)
    work = work / span + np.arange(b + 1) * 1e-12  # strictly increasing, 0..1 per row
    w0 = _interp_rows(begin[:, None], times, work)
    w1 = _interp_rows(finish[:, None], times, work)
    offset = 3.0 * np.arange(len(rows))[:, None]
    target = fractions * (w1 - w0)
    target += w0 + offset
    return np.interp(target.ravel(), (work + offset).ravel(), times.ravel()).reshape(target.shape)


def _interp_rows(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """``np.interp`` row by row (xp non-decreasing in each row), in one flat call."""
    lo = xp[:, :1]
    span = np.maximum(xp[:, -1:] - lo, 1e-30)
    offset = 3.0 * np.arange(len(xp))[:, None]
    xs = (xp - lo) / span + offset
    xq = np.clip((x - lo) / span, 0.0, 1.0) + offset
    return np.interp(xq.ravel(), xs.ravel(), fp.ravel()).reshape(x.shape)
