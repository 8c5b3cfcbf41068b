"""A trace as Chrome Trace Event Format JSON, for ui.perfetto.dev and chrome://tracing.

Layout of the file (the format document's JSON Object Format)::

    {"displayTimeUnit": "ns", "metadata": {...}, "traceEvents": [
      metadata events (ph "M"): process_name "SM 17", thread_name "slot 0", sort indices,
      per block, in (SM, slot, start) order: one complete event (ph "X") "block (bx,by)",
        then per k-step one event per phase of the description, "<phase> k=3" (its begin
        mark -> its end mark; for the seed kernels "load k=3" and "compute k=3"),
      last: the "kernel ..." event of the "matviz" process, whose args are the metadata
    ]}

``ts`` and ``dur`` are microseconds from kernel start with three decimals (exact ns). One
process per SM and one or more threads per resident-block slot (``Timeline.sm_slots``); because
Perfetto treats pid 0 and tid 0 specially (the kernel's idle task), pid = SM + 1 and the
threads' names carry the real numbers. The block's own track (tid = slot x tracks per slot + 1)
holds its event with the phases of the k-step's first channel nested inside; the phases of other
channels (k-steps in flight beside it) and phases that would partly overlap on one track go to
the slot's next tracks, "slot 3: <phases>". With one channel, tid = slot + 1. Each channel's
marks are clipped into their block and made monotone, so the events of one track never
partly overlap.

The millions of events are built as text by numpy: each event kind is a row template of fixed
byte strings and numeric fields rendered to digits column by column, padded with zero bytes that
are dropped at the end; chunks are streamed to the file (gzip when the name ends in .gz).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

import matviz
from matviz.core.config import StepLayout
from matviz.core.timeline import Timeline
from matviz.core.trace import Trace
from matviz.errors import MatvizError
from matviz.export.atomic import AtomicOutput

MATVIZ_PID = 100_000  # the 'matviz' process holding the kernel event; above any SM
EVENTS_PER_CHUNK = 200_000
# Block and phase events kept by default (~180 bytes each: ~75 MB of JSON, ~12 MB
# gzipped, seconds to write, and a file the Perfetto UI opens). Beyond it blocks are sampled.
MAX_EVENTS = 400_000
# Each SM's 'resident' counter holds every block, sampled or not; past this many changes on
# one SM it is averaged over this many equal time bins instead.
COUNTER_POINTS = 1_000
COUNTER_NAME = "resident"  # Perfetto shows the track as "resident blocks"
_MANIFEST_KEYS = (
    "dtype",
    "level",
    "description",
    "device",
    "timer",
    "sampling",
    "stats",
    "occupancy",
)


@dataclass(frozen=True)
class PerfettoStats:
    blocks: int  # block events
    phases: int  # phase events: one per phase and k-step of every block with marks kept
    bytes: int  # written (before gzip)
    total_blocks: int = 0  # in the trace
    total_phases: int = 0  # phase events the trace holds
    max_events: int = MAX_EVENTS
    counters: int = 0  # 'resident' counter events of all SMs

    @property
    def sampled(self) -> bool:
        return self.blocks < self.total_blocks or self.phases < self.total_phases


@dataclass(frozen=True)
class Selection:
    """Which blocks get their event and which their phase events (block index masks)."""

    blocks: np.ndarray
    phases: np.ndarray
    max_events: int

    def counts(self, trace: Trace) -> tuple[int, int]:
        """(block events, phase events) kept."""
        per = len(trace.layout.phases) * trace.n_tiles
        return int(self.blocks.sum()), int(self.phases.sum()) * per


def _even(m: int, k: int) -> np.ndarray:
    """``k`` of ``range(m)`` spread evenly (each the middle of its m/k share)."""
    k = min(k, m)
    return (2 * np.arange(k, dtype=np.int64) + 1) * m // (2 * k) if k else np.zeros(0, np.int64)


def phased_blocks(trace: Trace) -> np.ndarray:
    """Blocks with recorded phases (sorted, each once)."""
    if not trace.n_tiles or not len(trace.layout.phases):
        return np.zeros(0, np.int64)
    return np.unique(np.asarray(trace.phase_blocks, np.int64))


def select(trace: Trace, max_events: int = MAX_EVENTS) -> Selection:
    """At most ``max_events`` block and phase events, blocks chosen evenly by index.

    Phase events are the detail: when blocks alone would fill half the cap, phases get the
    other half (whole blocks' phases, evenly among the blocks that have them) and the block
    events the rest; a block whose phases are kept always keeps its own event too.
    """
    if max_events < 1:
        raise MatvizError(f"--max-events must be at least 1 (got {max_events})")
    n = len(trace.blocks)
    phased = phased_blocks(trace)
    per = len(trace.layout.phases) * trace.n_tiles if len(phased) else 0
    blocks = np.zeros(n, bool)
    phases = np.zeros(n, bool)
    if n + len(phased) * per <= max_events:
        blocks[:] = True
        phases[phased] = True
        return Selection(blocks, phases, max_events)
    share = max_events - min(n, max_events // 2)
    kept_phased = min(len(phased), share // per) if per else 0
    while kept_phased and kept_phased * (per + 1) > max_events:
        kept_phased -= 1
    kept = max(kept_phased, min(n, max_events - kept_phased * per))
    with_phases = phased[_even(len(phased), kept_phased)]
    phases[with_phases] = True
    others = np.flatnonzero(~phases)
    blocks[others[_even(len(others), kept - kept_phased)]] = True
    blocks[with_phases] = True
    return Selection(blocks, phases, max_events)


# -- text fields ---------------------------------------------------------------------------------
def _int_text(values: np.ndarray) -> np.ndarray:
    """Decimal digits of non-negative ints, left-aligned, zero bytes after: (n, width) uint8."""
    a = np.asarray(values, np.int64)
    if a.size and a.min() < 0:
        raise ValueError("negative value in a trace time or index")
    nd = np.ones(a.shape, np.int64)
    limit = 10
    while a.size and limit <= a.max():
        nd += a >= limit
        limit *= 10
    width = int(nd.max()) if a.size else 1
    # Column width + (nd - 1 - j) for digit j from the right; digits past nd land in the
    # scratch columns [0, width), which are cut off: no per-row masking needed.
    out = np.zeros((len(a), 2 * width), np.uint8)
    rows = np.arange(len(a))
    rest = a.copy()
    for j in range(width):
        out[rows, width + nd - 1 - j] = 48 + rest % 10
        rest //= 10
    return out[:, width:]


def _us_text(ns: np.ndarray) -> list[np.ndarray | bytes]:
    """Integer ns as microseconds with three decimals ('1234.567'), as template parts."""
    ns = np.asarray(ns, np.int64)
    frac = ns % 1000
    digits = np.stack([frac // 100, frac // 10 % 10, frac % 10], axis=1).astype(np.uint8) + 48
    return [_int_text(ns // 1000), b".", digits]


def _records(n: int, parts: list[np.ndarray | bytes]) -> np.ndarray:
    """Rows of event text: ``parts`` are bytes (the same in every row) or (n, w) text fields."""
    widths = [len(p) if isinstance(p, bytes) else p.shape[1] for p in parts]
    out = np.empty((n, sum(widths)), np.uint8)
    col = 0
    for part, width in zip(parts, widths, strict=True):
        out[:, col : col + width] = (
            np.frombuffer(part, np.uint8) if isinstance(part, bytes) else part
        )
        col += width
    return out


def _complete(cat: bytes, name: list, ts: np.ndarray, dur: np.ndarray, pid, tid, args: list):
    """Template of one kind of complete ("X") event; every row ends in ',\\n'.

    ``pid`` and ``tid`` are text fields (``_int_text``), shared by the kinds of one chunk.
    """
    return [
        b'{"ph":"X","cat":"' + cat + b'","name":"',
        *name,
        b'","ts":',
        *_us_text(ts),
        b',"dur":',
        *_us_text(dur),
        b',"pid":',
        pid,
        b',"tid":',
        tid,
        b',"args":{',
        *args,
        b"}},\n",
    ]


# -- the events ----------------------------------------------------------------------------------
def _tracks(layout: StepLayout) -> tuple[list[int], int]:
    """Track of each phase (0: the block's own) and the tracks one slot needs.

    Each channel's phases go to tracks where they never partly overlap: a phase shares a track
    with phases it is disjoint from or nested in (by mark positions in the channel; a channel's
    steps follow one another). Channel 0's first track is the block's, so its phases nest in
    the block's event; every other channel starts its own tracks, next to the block's slot.
    """
    phases = layout.phases
    track = [0] * len(phases)
    used = 0
    for c, marks in enumerate(layout.channels):
        pos = {m: i for i, m in enumerate(marks)}
        mine = [i for i, ph in enumerate(phases) if ph.channel == c]
        mine.sort(key=lambda i: (pos[phases[i].begin], -pos[phases[i].end]))
        lanes: list[list[tuple[int, int]]] = []
        for i in mine:
            lo, hi = sorted((pos[phases[i].begin], pos[phases[i].end]))
            fits = (  # disjoint from, or nested in, every phase already on the lane
                n
                for n, lane in enumerate(lanes)
                if all(e <= lo or hi <= b or (b <= lo and hi <= e) for b, e in lane)
            )
            n = next(fits, len(lanes))
            if n == len(lanes):
                lanes.append([])
            lanes[n].append((lo, hi))
            track[i] = used + n
        used += len(lanes) if c or lanes else 1
    return track, max(used, 1)


class _Layout:
    """Per-trace arrays: track of every block, phase rows, monotone clipped marks."""

    def __init__(self, trace: Trace, selection: Selection | None = None) -> None:
        blocks = trace.blocks
        self.trace = trace
        self.selection = selection or select(trace, max(1, _total_events(trace)))
        self.row = np.full(len(blocks), -1, np.int64)
        self.n_tiles = trace.n_tiles if len(trace.phase_blocks) else 0
        layout = trace.layout  # from the manifest: a trace of any kernel exports
        self.phases = layout.phases if self.n_tiles else ()
        self.channels = layout.channels
        track, self.per_slot = _tracks(layout) if self.phases else ([], 1)
        slot, _ = Timeline(trace).sm_slots()
        self.pid = blocks["smid"].astype(np.int64) + 1
        self.slot = slot.astype(np.int64)
        self.tid = self.slot * self.per_slot + 1  # the block's track; its slot's others follow
        self.start = blocks["start"].astype(np.int64)
        self.end = blocks["end"].astype(np.int64)
        kept = np.flatnonzero(self.selection.blocks)
        self.kept = self.selection.blocks
        # track by track, in time
        self.order = kept[np.lexsort((self.start[kept], self.tid[kept], self.pid[kept]))]
        if self.n_tiles:
            rows = trace.phase_blocks  # the first row of a block counts, as in Timeline
            self.row[rows[::-1]] = np.arange(len(rows))[::-1]
            self.row[~self.selection.phases] = -1  # sampled out: the block event only
        # Events of one (block, k-step) in file order: an enclosing phase before those it holds.
        by_mark = {m: i for ch in self.channels for i, m in enumerate(ch)}
        rank = sorted(
            range(len(self.phases)),
            key=lambda i: (by_mark[self.phases[i].begin], -by_mark[self.phases[i].end], i),
        )
        self.kinds = [
            (self.phases[i], track[i], position, json.dumps(self.phases[i].name)[1:-1].encode())
            for position, i in enumerate(rank)
        ]
        self.tracks = sorted(set(track) - {0})
        self.track_names = {
            n: ", ".join(ph.name for ph, t, _, _ in self.kinds if t == n) for n in self.tracks
        }

    def marks(self, blocks: np.ndarray) -> np.ndarray:
        """(len(blocks), n_tiles, marks): each channel's marks clipped into the block and
        monotone along the channel (step after step)."""
        r = self.row[blocks]
        src = self.trace.marks[r]
        out = np.empty_like(src)
        lo, hi = self.start[blocks, None], self.end[blocks, None]
        for channel in self.channels:
            cols = list(channel)
            marks = np.clip(src[:, :, cols].reshape(len(r), -1), lo, hi)
            marks = np.maximum.accumulate(marks, axis=1)
            out[:, :, cols] = marks.reshape(len(r), self.n_tiles, len(cols))
        return out

    def chunk(self, blocks: np.ndarray) -> bytes:
        """Text of ``blocks`` (in track order): each block event followed by its phases."""
        b = self.trace.blocks
        bx, by = b["bx"][blocks].astype(np.int64), b["by"][blocks].astype(np.int64)
        pid, tid = self.pid[blocks], self.tid[blocks]
        start = self.start[blocks]
        ids = [_int_text(blocks), b',"bx":', _int_text(bx), b',"by":', _int_text(by)]
        block_rec = _records(
            len(blocks),
            _complete(
                b"block",
                [b"block (", _int_text(bx), b",", _int_text(by), b")"],
                start,
                self.end[blocks] - start,
                _int_text(pid),
                _int_text(tid),
                [b'"block":', *ids, b',"sm":', _int_text(pid - 1), b',"slot":',
                 _int_text(self.slot[blocks])],
            ),
        )  # fmt: skip
        phased = np.flatnonzero(self.row[blocks] >= 0) if self.n_tiles else np.zeros(0, np.int64)
        count = np.ones(len(blocks), np.int64)
        count[phased] += len(self.phases) * self.n_tiles
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        recs = [(first, block_rec)]
        if len(phased) and self.phases:
            recs += self._phases(blocks[phased], first[phased])
        width = max(rec.shape[1] for _, rec in recs)
        text = np.zeros((int(count.sum()), width), np.uint8)
        for pos, rec in recs:
            text[pos, : rec.shape[1]] = rec
        flat = text.ravel()
        return flat[flat != 0].tobytes()

    def _phases(self, blocks: np.ndarray, first: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        n_t, n_p = self.n_tiles, len(self.phases)
        marks = self.marks(blocks)
        b = self.trace.blocks
        per = np.repeat  # one row per (block, k-tile), block-major like the positions below
        bx = per(b["bx"][blocks].astype(np.int64), n_t)
        by = per(b["by"][blocks].astype(np.int64), n_t)
        pid, tid = per(self.pid[blocks], n_t), per(self.tid[blocks], n_t)
        k = np.tile(np.arange(n_t, dtype=np.int64), len(blocks))
        k_text = _int_text(k)
        ids = [b'"block":', _int_text(per(blocks, n_t)), b',"bx":', _int_text(bx)]
        ids += [b',"by":', _int_text(by), b',"ktile":', k_text]
        pid_text, tid_text = _int_text(pid), {0: _int_text(tid)}
        out = []
        for phase, track, position, name in self.kinds:
            if track not in tid_text:
                tid_text[track] = _int_text(tid + track)
            ts = marks[:, :, phase.begin].ravel()
            dur = np.maximum(marks[:, :, phase.end].ravel() - ts, 0)
            rec = _records(
                len(k),
                _complete(
                    name,
                    [name + b" k=", k_text],
                    ts,
                    dur,
                    pid_text,
                    tid_text[track],
                    [*ids, b',"phase":"' + name + b'"'],
                ),
            )
            pos = (first[:, None] + 1 + position + n_p * np.arange(n_t)[None, :]).ravel()
            out.append((pos, rec))
        return out


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, default=_json_default, separators=(",", ":"))


def trace_metadata(trace: Trace) -> dict[str, Any]:
    """What the file says about where the data came from (top-level ``metadata``)."""
    m = trace.manifest
    M, N, K = trace.shape
    meta: dict[str, Any] = {
        "generator": f"matviz {matviz.__version__}",
        "kernel": trace.kernel,
        "params": dict(trace.params),
        "shape": {"M": M, "N": N, "K": K},
        "backend": trace.backend,
        "source": trace.provenance,
        "grid": list(trace.grid),
        "n_tiles": trace.n_tiles,
        "phase_blocks": len(trace.phase_blocks),
        "time_unit": "ts and dur in microseconds from kernel start",
        "tracks": "pid = SM + 1, tid = resident-block slot + 1 (Perfetto reserves 0)",
    }
    meta.update({key: m[key] for key in _MANIFEST_KEYS if key in m})
    return meta


def _title(trace: Trace) -> str:
    """'tiled T32 P0 1024x1024x1024' (labels from the description)."""
    config = trace.config
    M, N, K = trace.shape
    return f"{trace.kernel} {config.kernel.labels(config.params)} {M}x{N}x{K}"


def _metadata_events(trace: Trace, layout: _Layout, meta: dict[str, Any]) -> list[dict]:
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": MATVIZ_PID,
         "args": {"name": f"matviz: {_title(trace)}, {trace.provenance}", **meta}},
        {"ph": "M", "name": "process_sort_index", "pid": MATVIZ_PID, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_name", "pid": MATVIZ_PID, "tid": 1, "args": {"name": "kernel"}},
    ]  # fmt: skip
    for pid in np.unique(layout.pid).tolist():
        events.append({"ph": "M", "name": "process_name", "pid": pid,
                       "args": {"name": f"SM {pid - 1}"}})  # fmt: skip
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid,
                       "args": {"sort_index": pid}})  # fmt: skip
    per = layout.per_slot
    width = int(layout.slot.max()) + 1 if len(layout.slot) else 1
    kept = layout.kept
    for key in np.unique(layout.pid[kept] * width + layout.slot[kept]).tolist():
        pid, slot = divmod(key, width)
        tid = slot * per + 1
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"slot {slot}"}})  # fmt: skip
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": tid}})  # fmt: skip
    phased = layout.row >= 0
    for key in np.unique(layout.pid[phased] * width + layout.slot[phased]).tolist():
        pid, slot = divmod(key, width)
        for track in layout.tracks:  # the slot's phases that do not nest in its blocks
            tid = slot * per + 1 + track
            name = f"slot {slot}: {layout.track_names[track]}"
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": name}})  # fmt: skip
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": tid}})  # fmt: skip
    return events


def _events_per_block(trace: Trace) -> int:
    """Events of a block with phases: itself and one per phase and k-step."""
    n_tiles = trace.n_tiles if len(trace.phase_blocks) else 0
    return 1 + len(trace.layout.phases) * n_tiles


def _total_events(trace: Trace) -> int:
    return len(trace.blocks) + len(phased_blocks(trace)) * (_events_per_block(trace) - 1)


def _blocks_per_piece(trace: Trace, events_per_chunk: int) -> int:
    return max(1, events_per_chunk // _events_per_block(trace))


# -- the SMs' 'resident' counters --------------------------------------------------------------
def resident_counters(trace: Trace, points: int = COUNTER_POINTS):
    """(pid, ts ns, resident blocks x 100, binned) of every SM's counter, in (SM, time) order.

    Exact (the count after each change) while no SM changes more than ``points`` times, else
    each SM's time-averaged count over ``points`` equal bins of the kernel, then 0 at its end.
    Every block counts, whichever were sampled for events.
    """
    b = trace.blocks
    start = b["start"].astype(np.int64)
    end = np.maximum(b["end"].astype(np.int64), start)
    sm = b["smid"].astype(np.int64)
    t = np.concatenate([start, end])
    s = np.concatenate([sm, sm])
    step = np.concatenate([np.ones(len(b), np.int64), -np.ones(len(b), np.int64)])
    order = np.lexsort((t, s))
    t, s = t[order], s[order]
    # Sorted by SM, the running sum is each SM's count: every SM's steps add up to 0.
    count = np.cumsum(step[order])
    last = np.ones(len(t), bool)  # the count after all changes at one (SM, time)
    last[:-1] = (s[1:] != s[:-1]) | (t[1:] != t[:-1])
    t, s, count = t[last], s[last], count[last]
    sms, first = np.unique(s, return_index=True)
    bounds = [*first.tolist(), len(s)]
    if not len(t) or max(np.diff(bounds)) <= points:
        return s + 1, t, count * 100, False
    duration = max(int(trace.duration_ns), int(t.max()), 1)
    edges = np.linspace(0, duration, points + 1)
    pids, times, values = [], [], []
    for i, smid in enumerate(sms.tolist()):
        ts, cs = t[bounds[i] : bounds[i + 1]], count[bounds[i] : bounds[i + 1]]
        # area under the step function up to each change, then at the bin edges
        area = np.concatenate([[0], np.cumsum(cs[:-1] * np.diff(ts))]).astype(np.float64)
        knots_t = np.concatenate([[0], ts]).astype(np.float64)
        knots_a = np.concatenate([[0], area])
        at_edges = np.interp(edges, knots_t, knots_a, right=area[-1])
        mean = np.diff(at_edges) / np.diff(edges)
        pids.append(np.full(points + 1, smid + 1, np.int64))
        times.append(np.concatenate([np.rint(edges[:-1]).astype(np.int64), [duration]]))
        values.append(np.concatenate([np.rint(mean * 100).astype(np.int64), [0]]))
    return np.concatenate(pids), np.concatenate(times), np.concatenate(values), True


def _counter_text(pid: np.ndarray, ts: np.ndarray, hundredths: np.ndarray) -> bytes:
    """'{"ph":"C",...,"args":{"blocks":2.50}},' rows."""
    hundredths = np.maximum(hundredths, 0)
    frac = hundredths % 100
    digits = np.stack([frac // 10, frac % 10], axis=1).astype(np.uint8) + 48
    rows = _records(
        len(pid),
        [
            b'{"ph":"C","name":"' + COUNTER_NAME.encode() + b'","pid":',
            _int_text(pid),
            b',"ts":',
            *_us_text(ts),
            b',"args":{"blocks":',
            _int_text(hundredths // 100),
            b".",
            digits,
            b"}},\n",
        ],
    )
    flat = rows.ravel()
    return flat[flat != 0].tobytes()


# -- the document ------------------------------------------------------------------------------
class Plan:
    """What one export writes: the selection, the counters, the pieces."""

    def __init__(
        self,
        trace: Trace,
        max_events: int = MAX_EVENTS,
        events_per_chunk: int = EVENTS_PER_CHUNK,
    ) -> None:
        self.trace = trace
        self.selection = select(trace, max_events)
        self.kept_blocks, self.kept_phases = self.selection.counts(trace)
        self.step = _blocks_per_piece(trace, events_per_chunk)
        self.block_pieces = -(-self.kept_blocks // self.step)
        self.counter_rows = max(1, events_per_chunk)
        self._counters: tuple[np.ndarray, np.ndarray, np.ndarray, bool] | None = None

    @property
    def counters(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        if self._counters is None:
            self._counters = resident_counters(self.trace)
        return self._counters

    @property
    def counter_pieces(self) -> int:
        return -(-len(self.counters[0]) // self.counter_rows)

    def pieces(self) -> int:
        return 3 + self.block_pieces + self.counter_pieces

    def stats(self, written: int) -> PerfettoStats:
        """What was kept, once ``written`` bytes of JSON are out."""
        return PerfettoStats(
            blocks=self.kept_blocks,
            phases=self.kept_phases,
            bytes=written,
            total_blocks=len(self.trace.blocks),
            total_phases=_total_events(self.trace) - len(self.trace.blocks),
            max_events=self.selection.max_events,
            counters=len(self.counters[0]),
        )

    def metadata(self) -> dict[str, Any]:
        trace = self.trace
        binned = self.counters[3]
        meta = trace_metadata(trace)
        total_phases = _total_events(trace) - len(trace.blocks)
        meta["export"] = {
            "max_events": self.selection.max_events,
            "sampled": self.kept_blocks < len(trace.blocks) or self.kept_phases < total_phases,
            "block_events": self.kept_blocks,
            "blocks": len(trace.blocks),
            "phase_events": self.kept_phases,
            "phase_events_recorded": total_phases,
            "chosen": "blocks evenly by index; a block with phases keeps all of them",
            "counters": (
                f"'{COUNTER_NAME} blocks' of every SM counts every block: "
                + (f"averaged over {COUNTER_POINTS} equal time bins" if binned else "exact")
            ),
        }
        return meta


def piece_count(
    trace: Trace, events_per_chunk: int = EVENTS_PER_CHUNK, max_events: int = MAX_EVENTS
) -> int:
    """How many pieces :func:`iter_json` yields (for a progress bar)."""
    return Plan(trace, max_events, events_per_chunk).pieces()


def iter_json(
    trace: Trace,
    events_per_chunk: int = EVENTS_PER_CHUNK,
    max_events: int = MAX_EVENTS,
    plan: Plan | None = None,
) -> Iterator[bytes]:
    """The whole JSON document in pieces (a few MB each), ready to stream to a file."""
    plan = plan or Plan(trace, max_events, events_per_chunk)
    layout = _Layout(trace, plan.selection)
    meta = plan.metadata()
    head = {"displayTimeUnit": "ns", "metadata": meta}
    yield (_dumps(head)[:-1] + ',"traceEvents":[\n').encode()
    yield "".join(_dumps(e) + ",\n" for e in _metadata_events(trace, layout, meta)).encode()
    for i in range(0, len(layout.order), plan.step):
        yield layout.chunk(layout.order[i : i + plan.step])
    pid, ts, value, _ = plan.counters
    for i in range(0, len(pid), plan.counter_rows):
        part = slice(i, i + plan.counter_rows)
        yield _counter_text(pid[part], ts[part], value[part])
    kernel = {
        "ph": "X", "cat": "kernel", "name": f"kernel {_title(trace)}", "ts": 0,
        "dur": trace.duration_ns / 1000, "pid": MATVIZ_PID, "tid": 1, "args": meta,
    }  # fmt: skip
    yield (_dumps(kernel) + "\n]}\n").encode()


def open_output(tmp: Path, target: Path) -> IO[bytes]:
    """The binary stream to write ``target``'s JSON into: gzip when its name ends in .gz.

    Level 3: ~10x smaller at ~0.3 s per 100 MB; level 6 gains 20% for 3x the time.
    """
    if target.name.lower().endswith(".gz"):
        return gzip.open(tmp, "wb", compresslevel=3)
    return open(tmp, "wb")


def write_perfetto(
    trace: Trace, path: str | os.PathLike[str], max_events: int = MAX_EVENTS
) -> PerfettoStats:
    """Write the JSON to ``path`` (gzip-compressed when it ends in .gz), atomically; at most
    ``max_events`` block and phase events (blocks sampled evenly beyond that)."""
    path = Path(path)
    plan = Plan(trace, max_events, EVENTS_PER_CHUNK)
    written = 0
    with AtomicOutput(path) as tmp, open_output(tmp, path) as fh:
        for piece in iter_json(trace, plan=plan):
            fh.write(piece)
            written += len(piece)
    return plan.stats(written)
