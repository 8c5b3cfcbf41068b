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
_MANIFEST_KEYS = (
    "dtype", "level", "description", "device", "timer", "sampling", "stats", "occupancy"
)


@dataclass(frozen=True)
class PerfettoStats:
    blocks: int  # block events
    phases: int  # phase events: one per phase and k-step of every block with marks
    bytes: int  # written (before gzip)


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

    def __init__(self, trace: Trace) -> None:
        blocks = trace.blocks
        self.trace = trace
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
        self.order = np.lexsort((self.start, self.tid, self.pid))  # track by track, in time
        if self.n_tiles:
            rows = trace.phase_blocks  # the first row of a block counts, as in Timeline
            self.row[rows[::-1]] = np.arange(len(rows))[::-1]
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
    for key in np.unique(layout.pid * width + layout.slot).tolist():
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


def _blocks_per_piece(trace: Trace, events_per_chunk: int) -> int:
    return max(1, events_per_chunk // _events_per_block(trace))


def piece_count(trace: Trace, events_per_chunk: int = EVENTS_PER_CHUNK) -> int:
    """How many pieces :func:`iter_json` yields (for a progress bar)."""
    return 3 + -(-len(trace.blocks) // _blocks_per_piece(trace, events_per_chunk))


def iter_json(trace: Trace, events_per_chunk: int = EVENTS_PER_CHUNK) -> Iterator[bytes]:
    """The whole JSON document in pieces (a few MB each), ready to stream to a file."""
    layout = _Layout(trace)
    meta = trace_metadata(trace)
    head = {"displayTimeUnit": "ns", "metadata": meta}
    yield (_dumps(head)[:-1] + ',"traceEvents":[\n').encode()
    yield "".join(_dumps(e) + ",\n" for e in _metadata_events(trace, layout, meta)).encode()
    step = _blocks_per_piece(trace, events_per_chunk)
    for i in range(0, len(layout.order), step):
        yield layout.chunk(layout.order[i : i + step])
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


def write_perfetto(trace: Trace, path: str | os.PathLike[str]) -> PerfettoStats:
    """Write the JSON to ``path`` (gzip-compressed when it ends in .gz), atomically."""
    path = Path(path)
    written = 0
    with AtomicOutput(path) as tmp:
        try:
            with open_output(tmp, path) as fh:
                for piece in iter_json(trace):
                    fh.write(piece)
                    written += len(piece)
        except OSError as exc:
            raise MatvizError(f"cannot write '{path}': {exc.strerror or exc}") from None
    n_phased = len(np.unique(trace.phase_blocks)) if trace.n_tiles else 0
    return PerfettoStats(len(trace.blocks), n_phased * (_events_per_block(trace) - 1), written)
