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


PLACEMENT_CHUNK = 1 << 18  # blocks per placement chunk: ~25 MB of temporaries


@dataclass
class Fluid:
    """Lockstep result: ``events[j, s]`` = when SM s retired its j-th block (NaN past its last).

    The only per-block array is ``events`` (8 bytes a block); which block ran where comes from
    :meth:`placements`, in chunks, so a huge launch holds no other per-block temporaries.
    """

    events: np.ndarray
    counts: np.ndarray  # blocks per SM
    quota: np.ndarray  # per SM: its retirements that hand out a queued block (-1: no queue)
    n_blocks: int
    per_sm: int
    shares: np.ndarray
    stagger: float

    def placements(self, chunk: int = 0):
        """Yield (first block, smid, local, join) for consecutive blocks in linear order, in
        chunks of about ``chunk`` blocks (default ``PLACEMENT_CHUNK``): ``local`` is the
        block's position on its SM (= its retirement index), ``join`` when it joined the SM.

        The first wave goes round robin; the i-th queued block takes the i-th retirement that
        hands out a block, in (time, step, smid) order: a k-way merge of the SMs' sorted event
        columns, cut into time slices so that each slice is sorted on its own.
        """
        chunk = chunk or PLACEMENT_CHUNK
        b, n_sms = self.per_sm, self.events.shape[1]
        first = min(self.n_blocks, n_sms * b)
        for lo in range(0, first, chunk):
            i = np.arange(lo, min(first, lo + chunk))
            yield lo, i % n_sms, i // n_sms, i * self.stagger
        if self.n_blocks == first:
            return
        quota = self.quota
        steps = max(1, chunk // n_sms)
        cuts = self.events[steps : quota[0] : steps, 0]  # any SM's times cut the merge
        bounds = np.empty((n_sms, len(cuts) + 2), np.int64)
        bounds[:, 0] = 0
        bounds[:, -1] = quota
        for s in range(n_sms):
            bounds[s, 1:-1] = np.searchsorted(self.events[: quota[s], s], cuts, side="left")
        done = first
        for c in range(len(cuts) + 1):
            since, until = bounds[:, c], bounds[:, c + 1]
            size = until - since
            total = int(size.sum())
            if not total:
                continue
            smid = np.repeat(np.arange(n_sms), size)
            step = np.arange(total) - np.repeat(np.cumsum(size) - size - since, size)
            join = self.events[step, smid]
            order = np.lexsort((smid, step, join))
            yield done, smid[order], b + step[order], join[order]
            done += total


class WorkRows:
    """Rows (one value per SM) of the j-th block each SM runs, drawn in fixed chunks.

    :meth:`forget` drops rows that are no longer needed: a huge launch draws one row per
    step, 8 bytes a block in all.
    """

    def __init__(self, draw, chunk: int = 64):
        self.draw, self.chunk = draw, chunk
        self.rows: list = []
        self.first = 0  # index of rows[0]

    def more(self, n: int) -> list:
        new = list(self.draw(n))
        self.rows.extend(new)
        return new

    def __call__(self, j: int) -> np.ndarray:
        while self.first + len(self.rows) <= j:
            self.more(self.chunk)
        return self.rows[j - self.first]

    def forget(self, j: int) -> None:
        """Drop the rows before row ``j``."""
        drop = min(max(0, j - self.first), len(self.rows))
        del self.rows[:drop]
        self.first += drop


def _retire(rem, t, u):
    """One lockstep step: the oldest block of each SM finishes; ``u`` its shares (n_sms, b)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        dt = np.where(u[:, 0] > 0, rem[:, 0] / u[:, 0], 0.0)
    t = t + dt
    rem = np.maximum(rem - u * dt[:, None], 0.0)
    rem[:, :-1] = rem[:, 1:]
    rem[:, -1] = 0.0
    return rem, t


def _retire_full(rem, t, u):
    """:func:`_retire` with the same shares ``u`` (u[0] > 0) on every SM, the last column left
    for the refill: the same arithmetic in fewer calls (it runs once per step of the launch)."""
    dt = rem[:, 0] / u[0]
    t = t + dt
    out = rem - u[None, :] * dt[:, None]
    np.maximum(out, 0.0, out=out)
    out[:, :-1] = out[:, 1:]
    return out, t


def fluid_schedule(
    n_blocks: int, n_sms: int, per_sm: int, shares: np.ndarray, new_work, stagger: float
) -> Fluid:
    """Run the SMs (module docstring); ``stagger`` ns between first-wave dispatches.

    ``new_work()`` returns a fresh :class:`WorkRows`; a second one replays the same rows in
    the rare case that the first pass kept too few of them.
    """
    b = per_sm
    work = new_work()
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
        got = _refill(rem.copy(), t.copy(), shares[b], work, queued, low)
        if got is None:  # pragma: no cover - far off the average: replay from the start
            work = new_work()
            for k in range(b):
                work(k)
            got = _refill(rem, t, shares[b], work, queued, 0)
            assert got is not None
        events, filled, quota, rem, t = got
        active = np.full(n_sms, b - 1)
    else:
        events, filled = np.zeros((b, n_sms)), 0
        quota, active = np.full(n_sms, -1), count0
    counts = np.where(quota >= 0, b + quota, count0)
    rows = int(counts.max())
    if len(events) < rows:  # pragma: no cover - the refill allots b + 16 spare steps
        events = np.concatenate([events, np.empty((rows - len(events), n_sms))])
    events = events[:rows]
    events[filled:] = np.nan
    for d in range(int(active.max())):  # drain: no more blocks to hand out
        n_now = np.maximum(active - d, 0)
        rem, t = _retire(rem, t, shares[n_now])
        live = n_now > 0
        events[(quota + 1 + d)[live], np.flatnonzero(live)] = t[live]
    for s in range(n_sms):  # per column: no (rows, SMs) mask
        events[counts[s] :, s] = np.nan
    return Fluid(events, counts, quota, n_blocks, b, shares, stagger)


def _refill(rem, t, u, work: WorkRows, queued: int, low: int):
    """Steps with every SM full until the ``queued`` earliest retirements are known.

    Returns the retirement times (rows past ``filled`` unset), ``filled``, each SM's quota (its
    retirements that hand out a block) and the SMs' states right after the retirement at their
    quota, before the refill: an SM's drain starts from there. None when a quota lies below
    ``low``: the states are replayed from a copy taken at step ``low`` (rows before it are
    dropped as the run goes).
    """
    n_sms, b = rem.shape
    events = np.empty((math.ceil(queued / n_sms * 1.02) + b + 16, n_sms))
    check = (rem.copy(), t.copy()) if low == 0 else None
    j = 0
    target = len(events)
    while True:
        if target > len(events):  # pragma: no cover - rare: grow by doubling
            grown = np.empty((max(target, 2 * len(events)), n_sms))
            grown[:j] = events[:j]
            events = grown
        while j < target:
            if j == low:
                check = (rem.copy(), t.copy())
            rem, t = _retire_full(rem, t, u)
            events[j] = t
            rem[:, -1] = work(b + j)
            j += 1
            if j % 4096 == 0:
                work.forget(b + min(j, low))
        quota = _quotas(events[:j], queued, low)
        if quota is None:
            return None
        tau = events[quota - 1, np.arange(n_sms)].max() if quota.min() else -math.inf
        if quota.max() < j and tau <= events[j - 1].min():
            break
        target = j + b + 16
    assert check is not None
    return (events, j, quota, *_states_at(check, low, quota, u, work))


def _quotas(events: np.ndarray, queued: int, low: int) -> np.ndarray | None:
    """Per SM, how many of the ``queued`` earliest retirements (time, then step, then smid)
    are its own; each SM's events are sorted. Only steps from ``low`` on are ranked: the
    earlier ones are among the earliest when every SM gets at least one later one (an earlier
    event of an SM precedes that one, which precedes every unselected event). None otherwise.
    """
    n_sms = events.shape[1]
    rest = queued - low * n_sms
    if rest <= 0:
        return None
    picked = _first_events(events[low:], rest)
    quota = low + np.bincount(picked % n_sms, minlength=n_sms)
    if low and quota.min() <= low:
        return None
    return quota


def _states_at(check, low: int, quota: np.ndarray, u: np.ndarray, work: WorkRows):
    """Each SM's state right after its retirement number ``quota``: the refill steps replayed
    from ``check``, the state before step ``low`` (same arithmetic, so the same bits)."""
    rem, t = check
    b = rem.shape[1]
    out_rem, out_t = np.empty_like(rem), np.empty_like(t)
    for j in range(low, int(quota.max()) + 1):
        rem, t = _retire(rem, t, u[None, :])
        hit = quota == j
        out_rem[hit], out_t[hit] = rem[hit], t[hit]
        rem[:, -1] = work(b + j)
    return out_rem, out_t


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


def progress_times(
    fl: Fluid, smid, local, join, begin, finish, fractions, row0: int = 0
) -> np.ndarray:
    """When blocks reached ``fractions`` (rows, marks) of the work between two times.

    A block (``smid``, ``local``, ``join`` from :meth:`Fluid.placements`, one per row) accrues
    work at its share of its SM, step by step (its age rank falls by one per retirement);
    ``begin``/``finish`` (per row) are the times that map to fraction 0 and 1. ``row0``: the
    first row's index among all rows, so a chunk of rows gets the same bits as one call.
    """
    b, ev = fl.per_sm, fl.events
    s, k = smid, local
    joined = join[:, None]
    m = k[:, None] - b + 1 + np.arange(b)[None, :]  # the steps this block lives through
    valid = m >= 0
    mc = np.maximum(m, 0)
    t_end = ev[mc, s[:, None]]
    t_beg = np.where(mc >= 1, ev[np.maximum(mc - 1, 0), s[:, None]], joined)
    first = m == np.maximum(k - b + 1, 0)[:, None]
    t_beg = np.where(first, joined, t_beg)
    t_beg = np.where(valid, t_beg, joined)
    t_end = np.where(valid, t_end, joined)
    n_now = np.clip(fl.counts[s][:, None] - mc, 0, b)
    share = np.where(valid, fl.shares[n_now, np.clip(k[:, None] - mc, 0, b - 1)], 0.0)
    times = np.concatenate([t_beg[:, :1], t_end], axis=1)
    work = np.concatenate(
        [np.zeros((len(s), 1)), np.cumsum(share * (t_end - t_beg), axis=1)], axis=1
    )
    span = np.maximum(work[:, -1:], 1e-30)
    work = work / span + np.arange(b + 1) * 1e-12  # strictly increasing, 0..1 per row
    w0 = _interp_rows(begin[:, None], times, work, row0)
    w1 = _interp_rows(finish[:, None], times, work, row0)
    offset = 3.0 * np.arange(row0, row0 + len(s))[:, None]
    target = fractions * (w1 - w0)
    target += w0 + offset
    return np.interp(target.ravel(), (work + offset).ravel(), times.ravel()).reshape(target.shape)


def _interp_rows(x: np.ndarray, xp: np.ndarray, fp: np.ndarray, row0: int = 0) -> np.ndarray:
    """``np.interp`` row by row (xp non-decreasing in each row), in one flat call."""
    lo = xp[:, :1]
    span = np.maximum(xp[:, -1:] - lo, 1e-30)
    offset = 3.0 * np.arange(row0, row0 + len(xp))[:, None]
    xs = (xp - lo) / span + offset
    xq = np.clip((x - lo) / span, 0.0, 1.0) + offset
    return np.interp(xq.ravel(), xs.ravel(), fp.ravel()).reshape(x.shape)
