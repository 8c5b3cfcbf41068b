"""Simulated correctness: C's wrong elements and what the probed warp read, without a GPU.

A kernel that keeps its barriers is simulated as correct: the map of wrong elements is empty
and every shared load reads the value its k-step stored.

A kernel with a barrier left out on purpose (``config.broken``: 02_tiled's ``drop_sync``) runs a
race model, deterministic in ``request.seed``. Per block, k-step t and warp w, in cycles (the
device file's ``race_*`` model constants, :data:`RACE_DEFAULTS` where a file lacks them):

* w's stores of step t land at its load issue + ``race_load_latency_cycles`` + an exponential
  spread of mean ``race_load_spread_cycles`` (a draw per block, step and warp);
* w starts its k loop when barrier 1 releases (the last warp's stores + ``barrier_ns``) or,
  without barrier 1, as soon as its own stores landed; plus an exponential issue delay of mean
  ``race_issue_delay_cycles`` (the scheduler serves the SM's other ready warps first);
* its i-th shared load of the loop reads at that start + i x ``race_read_cycles`` (its share of
  the shared-memory pipe), and the loop ends after the last load;
* its loads of step t + 1 issue when barrier 2 releases (the last warp's loop end +
  ``barrier_ns``) or, without barrier 2, as soon as its own loop ended.

A read of a cell that another warp stores is *before written* when it comes before that warp's
store of the same step (it reads the previous step's value; at step 0 whatever shared memory
held: a seeded value), *overwritten* when it comes at or after that warp's store of the next
step. A warp's own stores precede its own reads (program order). With both barriers every read
is current: the model needs no special case for correct kernels, they just skip it.

The spread and the delay are set so that the H200 recordings' wrong fractions come out at
1024^3 (tiled T16 without barrier 1: 99.96% of C, model 99.8%; T32 without barrier 2: 6.7%,
model 7.1%). The recordings show what the model leaves out: without barrier 2 the low warps of
a block are the late readers (warp 0's elements 18% wrong, warp 31's 0.2%), where the model's
warps are all alike; and without barrier 1 the probed warp read 0.6% of its values stale where
the model's warps read ~0.8%.

For every block (numpy over chunks of blocks x warps x warps, a Python loop over k-steps), an
element of C is wrong when at least one of its products used a stale read whose correct factor
is not a padding zero (beyond K the last tile holds zeros on both sides, so a stale factor
times the other's zero changes nothing). One wrong product is ~0.3 against a tolerance of
~3e-3, so a stale product inside the tolerance is rare (under 1% of the elements counted wrong,
in value-by-value replays) and counted wrong anyway. ``max_abs_error`` is exact but sampled:
the largest error of the wrong elements in up to :data:`ERROR_SAMPLE_BLOCKS` blocks (a seeded
choice), each replayed value by value as the stale reads fed it (a lower bound of the true
maximum).

Random draws come from a counter-based stream (Philox) at a position of (step, block, warp), so
a block draws the same whichever chunk it falls in, and the probe's replay of one block matches
the map's.

The model assumes what 02_tiled does: every block and step stores and reads the same shared
cells (only the global elements move), each thread computes one element of C as a sum of
products of one A and one B read per k, and a block's k-steps run stores, barrier 1, loads,
barrier 2. :class:`_Layout` checks this and refuses other kernels.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from matviz.backends.contract import RunRequest
from matviz.backends.devices import load_device
from matviz.backends.sim_model import constant
from matviz.core import access, correctness
from matviz.core.config import KernelConfig
from matviz.core.kernel import WARP, Lanes
from matviz.core.manifest import Correctness
from matviz.errors import MatvizError

# Defaults of the race constants for device files written before them: the H200's (its device
# file says where they come from).
RACE_DEFAULTS = {
    "race_load_latency_cycles": 600.0,
    "race_load_spread_cycles": 30.0,
    "race_read_cycles": 6.0,
    "race_issue_delay_cycles": 110.0,
}
# max_abs_error replays up to this many blocks of wrong elements, of at most this many threads
ERROR_SAMPLE_BLOCKS, ERROR_SAMPLE_THREADS = 4, 2048
# (block, reader warp, writer warp) triples per chunk: the lane test is 32 x that in bools
CHUNK_TRIPLES = 1 << 18

_DRAWS, _GARBAGE = 0, 1  # Philox streams (the second key word): timing draws, step 0 garbage
# what a modelled read got (internal; classify_reads turns values into correctness codes)
_NOW, _BEFORE, _OVER = 0, 1, 2


def _inputs(config: KernelConfig, seed: int):
    """Seeded stand-ins for A and B, fetched element by element (never the whole matrix)."""

    def fetch(matrix: str, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        shape = config.matrix_shape(matrix)
        flat = rows.astype(np.uint64) * np.uint64(shape[1]) + cols.astype(np.uint64)
        key = np.uint64(seed * 2 + (matrix == "B"))
        mixed = (flat * np.uint64(0x9E3779B97F4A7C15) + key) & np.uint64(0xFFFFFFFF)
        return (mixed.astype(np.float64) / 2**31 - 1.0).astype(np.float32)

    return fetch


def simulate_correctness(
    config: KernelConfig, request: RunRequest, dev: dict[str, Any] | None = None
) -> tuple[Correctness, np.ndarray, np.ndarray]:
    """(manifest section, c_wrong map, stale reads) of a simulated run of ``request`` on
    ``dev`` (a loaded device description; its ``race_*`` constants, else the defaults)."""
    M, N = config.M, config.N
    cy, cx = correctness.cell_shape(M, N)
    stale = np.zeros((0, 0, 32), np.int8)
    fetch = _inputs(config, request.seed)
    checked, worst = "simulated", 0.0
    probe = request.level >= 3 and bool(config.sites) and bool(config.n_steps)
    if config.broken:
        race = _Race.of(config, dev)
        lay = _Layout.of(config)
        c_wrong, per_block = _wrong_map(config, lay, race, request.seed)
        worst, sampled = _sampled_error(config, lay, race, request.seed, per_block, fetch)
        checked = f"simulated: race model, largest error of {sampled} sampled wrong elements"
        if probe:
            values = _probe_values(config, lay, race, request, fetch)
            stale = correctness.classify_reads(
                config, request.probe_block, request.probe_warp, values, fetch
            )
    else:
        c_wrong = np.zeros((-(-M // cy), -(-N // cx)), np.uint32)
        if probe:
            stale = correctness.classify_reads(
                config, request.probe_block, request.probe_warp,
                _current_values(config, request, fetch), fetch,
            )  # fmt: skip
    section = Correctness(
        broken=config.broken,
        wrong=int(c_wrong.sum()),
        total=M * N,
        tolerance=correctness.tolerance(config.K),
        max_abs_error=worst,
        cell=[cy, cx],
        checked=checked,
        stale_reads=correctness.read_counts(stale) if stale.size else None,
    )
    return section, c_wrong, stale


def _current_values(config: KernelConfig, request: RunRequest, fetch) -> np.ndarray:
    """The probed warp's reads of a correct kernel: what its own k-step stored."""
    values = np.full((config.value_tiles, config.probe_slots, 32), 0xFFFFFFFF, np.uint32)
    warp, block = request.probe_warp, request.probe_block
    loads = [rs for rs in config.sites if rs.site.kind == "load"]
    fixed = {
        (rs.name, k): access.step_free(config, rs.site.at, warp, block, k)
        for rs in loads
        for k in range(rs.repeat)
    }
    for t in range(config.value_tiles):
        filled = correctness.staged(config, block, t, fetch)
        for rs in loads:
            for k in range(rs.repeat):
                r, c, mask = fixed[rs.name, k] or access.evaluate(
                    config, rs.site.at, warp, block, t, k
                )
                read = filled[rs.site.array][r, c].view(np.uint32)
                values[t, rs.slot + k] = np.where(mask, read, 0xFFFFFFFF)
    return values


# -- the model's constants and the kernel's layout ------------------------------------------------
@dataclass(frozen=True)
class _Race:
    """The race model's constants in cycles and which barriers the kernel keeps."""

    latency: float
    spread: float
    read: float
    delay: float
    barrier: float
    barrier1: bool  # after the tile stores
    barrier2: bool  # after the k loop

    @classmethod
    def of(cls, config: KernelConfig, dev: dict[str, Any] | None) -> _Race:
        if dev is None:
            dev = load_device()
        values = {}
        for name, default in RACE_DEFAULTS.items():
            value = dev["model"].get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise MatvizError(f"device model '{name}' must be a number >= 0 (got {value!r})")
            values[name] = float(value)
        if values["race_read_cycles"] <= 0:
            raise MatvizError("device model 'race_read_cycles' must be positive")
        # which barriers the description leaves out at these parameters, by the state of the
        # phase they end: the one after the tile stores, the one after the k loop
        phases = config.kstep.phases if config.kstep else ()
        dropped = {ph.state for ph in phases if config.left_out(ph)}
        if config.broken and not dropped:
            names = ", ".join(f"{n}={config.params[n]}" for n in config.broken)
            raise MatvizError(f"the simulator has no race model for {names}")
        return cls(
            latency=values["race_load_latency_cycles"],
            spread=values["race_load_spread_cycles"],
            read=values["race_read_cycles"],
            delay=values["race_issue_delay_cycles"],
            barrier=constant(dev, "barrier_ns") * dev["clock_mhz"] / 1000.0,
            barrier1="loading" not in dropped,
            barrier2="computing" not in dropped,
        )


@dataclass(frozen=True)
class _Layout:
    """Who stores and who reads which shared cell, the same in every block and k-step.

    Load rows are the program's shared loads in order (position i reads at start + i x the
    read cost); per (warp, load row, lane): the cell, the warp that stores it, its k inside
    the step and the matrix it stages.
    """

    warps: int
    rows: tuple[tuple[str, int], ...]  # (site, k) of each load row
    arrays: tuple[str, ...]  # shared array of each load row
    row: np.ndarray  # int64 [warps, loads, 32] cell row
    col: np.ndarray  # cell column
    mask: np.ndarray  # bool: the lane reads
    writer: np.ndarray  # int64: the warp whose store fills the cell (-1: none)
    kidx: np.ndarray  # int64: the cell's k inside the step
    from_a: np.ndarray  # bool [loads]: the row reads a tile of A (else B)
    depth: int  # k per step
    c_row: np.ndarray  # int64 [warps, 32] the lane's row of C in block (0, 0)
    c_col: np.ndarray
    c_mask: np.ndarray
    c_tile: tuple[int, int]

    @property
    def loads(self) -> int:
        return len(self.rows)

    @classmethod
    def of(cls, config: KernelConfig) -> _Layout:
        refuse = f"the race model does not cover {config.kernel.name}"
        phases = [ph.name for ph in config.kstep.phases] if config.kstep else []
        if phases != ["load", "compute"] or not config.sites:
            raise MatvizError(f"{refuse}: it needs k-steps of stores, barrier, loads, barrier")
        W = config.warps
        writer, kcell = {}, {}
        for arr in config.shared:
            writer[arr.name] = np.full((arr.rows, arr.stride), -1, np.int64)
            kcell[arr.name] = np.full((arr.rows, arr.stride), -1, np.int64)
        depth = config.step_depth
        for rs in config.sites:
            if rs.site.kind != "store":
                continue
            if rs.site.source is None:
                raise MatvizError(f"{refuse}: store {rs.name} copies nothing from A or B")
            name = rs.site.array
            k_axis = 1 if config.array(name).source == "A" else 0  # A[m][k], B[k][n]
            for k in range(rs.repeat):
                r, c, m = _same_everywhere(config, rs.site.at, k, refuse)
                s0 = _block_lanes(config, rs.site.source, (0, 0), 0, k)[k_axis]
                s1 = _block_lanes(config, rs.site.source, (0, 0), 1, k)[k_axis]
                if np.any((s1 - s0)[m] != depth):
                    raise MatvizError(f"{refuse}: a step's tile does not move by {depth} in k")
                writer[name][r[m], c[m]] = np.broadcast_to(np.arange(W)[:, None], m.shape)[m]
                kcell[name][r[m], c[m]] = s0[m]
        rows = tuple((s, k) for s, k in config.program if config.site(s).site.kind == "load")
        shape = (W, len(rows), WARP)
        row, col, wr, kid = (np.zeros(shape, np.int64) for _ in range(4))
        mask = np.zeros(shape, bool)
        for j, (site, k) in enumerate(rows):
            rs = config.site(site)
            r, c, m = _same_everywhere(config, rs.site.at, k, refuse)
            row[:, j], col[:, j], mask[:, j] = r, c, m
            rr, cc = np.where(m, r, 0), np.where(m, c, 0)
            wr[:, j] = np.where(m, writer[rs.site.array][rr, cc], -1)
            kid[:, j] = np.where(m, kcell[rs.site.array][rr, cc], -1)
        if np.any(mask & (wr < 0)):
            raise MatvizError(f"{refuse}: a load reads a cell no store fills")
        arrays = tuple(config.site(s).site.array for s, _ in rows)
        from_a = np.array([config.array(a).source == "A" for a in arrays], bool)
        stores_c = [g for g, _ in config.global_accesses if g.kind == "store" and g.matrix == "C"]
        if len(stores_c) != 1:
            raise MatvizError(f"{refuse}: it needs one store of C per thread")
        c_tile = config.launch.c_tile
        c_row, c_col, c_mask = _block_lanes(config, stores_c[0].at, (0, 0), 0, 0)
        r1, c1, _ = _block_lanes(config, stores_c[0].at, (1, 1), 0, 0)
        if np.any(r1 != c_row + c_tile[0]) or np.any(c1 != c_col + c_tile[1]):
            raise MatvizError(f"{refuse}: a block's C elements do not move by its C tile")
        # one product per k: every lane reads each k of the step once from A and once from B
        for side in (from_a, ~from_a):
            ks = np.sort(np.where(mask[:, side], kid[:, side], -1), axis=1)
            if ks.shape[1] != depth or np.any(ks != np.arange(depth)[None, :, None]):
                raise MatvizError(f"{refuse}: a thread's reads are not one A x B product per k")
        return cls(W, rows, arrays, row, col, mask, wr, kid, from_a, depth,
                   c_row, c_col, c_mask, (int(c_tile[0]), int(c_tile[1])))  # fmt: skip


def _block_lanes(config: KernelConfig, fn, block: tuple[int, int], t: int, k: int):
    """(row, col, mask) of a per-lane function for every warp of a block at once, [warps, 32]
    (what access.evaluate gives warp by warp)."""
    tid = np.arange(config.warps * WARP)
    lanes = Lanes(warp=0, tid=tid, tx=tid % config.block[0], ty=tid // config.block[0],
                  active=tid < config.threads, bx=int(block[0]), by=int(block[1]), t=int(t),
                  k=int(k))  # fmt: skip
    out = fn(lanes, config.p)
    row, col = (np.broadcast_to(np.asarray(v, np.int64), tid.shape) for v in out[:2])
    mask = lanes.active.copy()
    if len(out) > 2:
        mask &= np.broadcast_to(np.asarray(out[2], bool), tid.shape)
    shape = (config.warps, WARP)
    return row.reshape(shape), col.reshape(shape), mask.reshape(shape)


def _same_everywhere(config: KernelConfig, fn, k: int, refuse: str):
    """A site's (row, col, mask) [warps, 32], checked to be the same in another block and
    k-step (the race model draws one layout for all of them)."""
    r, c, m = _block_lanes(config, fn, (0, 0), 0, k)
    r1, c1, m1 = _block_lanes(config, fn, (1, 1), 1, k)
    if np.any(m != m1) or np.any((r != r1)[m]) or np.any((c != c1)[m]):
        raise MatvizError(f"{refuse}: its shared cells differ between blocks or k-steps")
    return r, c, m


# -- the timing model -----------------------------------------------------------------------------
def _bits(seed: int, stream: int, start: int, count: int) -> np.ndarray:
    """uint64 [count]: positions start .. start + count - 1 of a counter-based stream (Philox),
    a pure function of (seed, stream, position): any chunk of blocks draws the same values."""
    key = np.array([int(seed) & (2**64 - 1), stream], np.uint64)
    skip = start % 4  # Philox4x64 makes 4 values per counter
    return np.random.Philox(key=key, counter=start // 4).random_raw(skip + count)[skip:]


def _uniforms(bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two uniforms in (0, 1), float64, from the two halves of each 64-bit value."""
    hi = (bits >> np.uint64(32)).astype(np.float64)
    lo = (bits & np.uint64(0xFFFFFFFF)).astype(np.float64)
    hi += 0.5
    lo += 0.5
    return hi * 2.0**-32, lo * 2.0**-32


def _timeline(
    race: _Race, seed: int, ids: np.ndarray, lay: _Layout, steps: int, n_blocks: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(land, begin) per k-step for blocks ``ids`` (consecutive): float64 [warps, blocks]
    cycles since the block began, when each warp's stores land and when its k loop starts.
    Warps lie along the first axis, so a barrier is a maximum over rows of blocks."""
    W, B = lay.warps, len(ids)
    loop = lay.loads * race.read
    issue = np.zeros((W, B))
    for t in range(steps):
        # one 64-bit draw per (step, block, warp) gives its load spread and its issue delay
        bits = _bits(seed, _DRAWS, (t * n_blocks + int(ids[0])) * W, B * W)
        u_load, u_issue = _uniforms(np.ascontiguousarray(bits.reshape(B, W).T))
        land = np.log(u_load, out=u_load)
        land *= -race.spread
        land += issue
        land += race.latency
        ready = land.max(axis=0) + race.barrier if race.barrier1 else land
        begin = np.log(u_issue, out=u_issue)
        begin *= -race.delay
        begin += ready
        yield land, begin
        end = begin + loop
        issue = end.max(axis=0) + race.barrier if race.barrier2 else end


def _gaps(
    race: _Race, seed: int, ids: np.ndarray, lay: _Layout, steps: int, n_blocks: int
) -> Iterator[tuple[int, np.ndarray | None, np.ndarray | None]]:
    """Per k-step t of blocks ``ids``: (t, before, over) float32 [reader warp, writer warp,
    blocks] or None where the barrier rules the race out. A read i x read cost into the reader's
    loop of step t is before the writer's store of step t when i x read < before; over is the
    same for step t - 1 against the writer's store of step t (the read was overwritten when
    i x read >= over). Diagonals are not meaningful (own stores precede own reads). The arrays
    are reused: use them before the next step."""
    W, B = lay.warps, len(ids)
    before = None if race.barrier1 else np.empty((W, W, B), np.float32)
    over = None if race.barrier2 else np.empty((W, W, B), np.float32)
    prev = None
    for t, (land, begin) in enumerate(_timeline(race, seed, ids, lay, steps, n_blocks)):
        # float32 halves the traffic of the [warps, warps, blocks] arrays; times since the
        # step's load issue keep their precision (well under a cycle)
        base = np.minimum(land.min(axis=0), prev.min(axis=0) if prev is not None else np.inf)
        land32 = (land - base).astype(np.float32)
        if before is not None:
            np.subtract(
                land32[None, :, :], (begin - base).astype(np.float32)[:, None, :], out=before
            )
        if over is not None and prev is not None:
            np.subtract(land32[None, :, :], (prev - base).astype(np.float32)[:, None, :], out=over)
        yield t, before, (over if prev is not None else None)
        prev = begin


def _block_gaps(
    config: KernelConfig, race: _Race, seed: int, block_id: int, lay: _Layout, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """(before, over) float64 [steps, reader warp, writer warp] of one block: a read at
    i x read cost into the reader's loop of step t is before written when i x read < before[t],
    overwritten when i x read >= over[t] (the writer's store of step t + 1)."""
    W = lay.warps
    before = np.full((steps, W, W), -np.inf)
    over = np.full((steps, W, W), np.inf)
    ids = np.array([block_id])
    walk = min(steps + 1, config.n_steps)  # step t's overwrites come from step t + 1
    for t, gap_b, gap_o in _gaps(race, seed, ids, lay, walk, config.n_blocks):
        if gap_b is not None and t < steps:
            before[t] = gap_b[:, :, 0]
        if gap_o is not None:
            over[t - 1] = gap_o[:, :, 0]
    eye = np.eye(W, dtype=bool)  # a warp's own stores precede its reads
    before[:, eye], over[:, eye] = -np.inf, np.inf
    return before, over


def _read_times(lay: _Layout, race: _Race) -> np.ndarray:
    """float32 [1, load rows, 1]: cycles from a warp's loop start to each of its reads (float32
    like the gaps: the map and the one-block replay compare the same numbers)."""
    return (np.arange(lay.loads) * race.read).astype(np.float32)[None, :, None]


# -- the whole grid -------------------------------------------------------------------------------
def _positions(lay: _Layout, race: _Race, harmful: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, last) float64 [reader warp, writer warp, lane]: cycles into the loop of the
    lane's first and last ``harmful`` read of a cell the writer stores (+inf / -inf: none)."""
    W = lay.warps
    at = _read_times(lay, race)
    first = np.full((W, W, WARP), np.inf, np.float32)
    last = np.full((W, W, WARP), -np.inf, np.float32)
    for u in range(W):
        own = lay.mask & harmful & (lay.writer == u)
        first[:, u] = np.where(own, at, np.inf).min(axis=1)
        last[:, u] = np.where(own, at, -np.inf).max(axis=1)
    first[np.arange(W), np.arange(W)] = np.inf  # program order: own stores are never stale
    last[np.arange(W), np.arange(W)] = -np.inf
    return first, last


def _wrong_map(
    config: KernelConfig, lay: _Layout, race: _Race, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(c_wrong map, wrong elements per block) over the whole grid."""
    M, N, K = config.M, config.N, config.K
    cy, cx = correctness.cell_shape(M, N)
    rows_map, cols_map = -(-M // cy), -(-N // cx)
    counts = np.zeros(rows_map * cols_map, np.int64)
    gx = config.grid[0]
    n, W = config.n_steps, lay.warps
    per_block = np.zeros(config.n_blocks, np.int64)
    # the last step's reads beyond K meet a zero on the other side: a stale one changes nothing
    in_k = lay.kidx + (n - 1) * lay.depth < K
    first, last = _positions(lay, race, np.ones(lay.mask.shape, bool))
    first_end, _ = _positions(lay, race, in_k)
    chunk = max(1, CHUNK_TRIPLES // (W * W))
    for start in range(0, config.n_blocks, chunk):
        ids = np.arange(start, min(start + chunk, config.n_blocks))
        # the loosest gap over the steps says whether a read at that position was ever stale
        before = np.full((W, W, len(ids)), -np.inf, np.float32)  # steps before the last
        before_end = np.full((W, W, len(ids)), -np.inf, np.float32)  # the last step
        over = np.full((W, W, len(ids)), np.inf, np.float32)
        for t, gap_b, gap_o in _gaps(race, seed, ids, lay, n, config.n_blocks):
            if gap_b is not None:
                target = before if t < n - 1 else before_end
                np.maximum(target, gap_b, out=target)
            if gap_o is not None:
                np.minimum(over, gap_o, out=over)
        wrong = np.zeros((W, WARP, len(ids)), bool)
        # (lane positions [w, u, lane], the loosest gap [w, u, block], when that is stale)
        tests = [(first, before, np.less), (first_end, before_end, np.less),
                 (last, over, np.greater_equal)]  # fmt: skip
        for at, gap, stale in tests:
            if np.isfinite(gap).any():
                for u in range(W):  # one writer at a time keeps the temporaries small
                    wrong |= stale(at[:, u, :, None], gap[:, u, None, :])
        bx, by = ids % gx, ids // gx
        r = by[None, None, :] * lay.c_tile[0] + lay.c_row[:, :, None]
        c = bx[None, None, :] * lay.c_tile[1] + lay.c_col[:, :, None]
        wrong &= lay.c_mask[:, :, None] & (r < M) & (c < N)
        per_block[ids] = wrong.sum(axis=(0, 1))
        cells = (r[wrong] // cy) * cols_map + c[wrong] // cx
        counts += np.bincount(cells, minlength=len(counts))
    return counts.reshape(rows_map, cols_map).astype(np.uint32), per_block


# -- replaying one block value by value -----------------------------------------------------------
def _replay(
    config: KernelConfig, lay: _Layout, race: _Race, seed: int, block: tuple[int, int],
    fetch, steps: int,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:  # fmt: skip
    """Per k-step of ``block``: (read, right, kind), float32 / float32 / int8
    [warps, load rows, 32]: the value each lane read, the value its step stored there, and
    _NOW / _BEFORE / _OVER (NaN where the lane does not read)."""
    gx = config.grid[0]
    block_id = int(block[1]) * gx + int(block[0])
    before, over = _block_gaps(config, race, seed, block_id, lay, steps)
    at = _read_times(lay, race)
    w_idx = np.arange(lay.warps)[:, None, None]
    writer = np.where(lay.mask, lay.writer, 0)
    garbage = {}  # step 0's before-written reads: shared memory's leftovers, seeded
    for i, arr in enumerate(config.shared):
        cells = arr.rows * arr.stride
        noise = _uniforms(_bits(seed, _GARBAGE + i, block_id * cells, cells))[0] * 2 - 1
        garbage[arr.name] = noise.astype(np.float32).reshape(arr.rows, arr.stride)
    groups = []  # per shared array: its load rows and their cells (0, 0 where no lane reads)
    for name in dict.fromkeys(lay.arrays):
        js = np.array([j for j, a in enumerate(lay.arrays) if a == name])
        m = lay.mask[:, js]
        groups.append((name, js, np.where(m, lay.row[:, js], 0), np.where(m, lay.col[:, js], 0)))
    tiles = _tiles(config, block, min(steps + 1, config.n_steps), fetch)
    for t in range(steps):
        kind = np.full(lay.mask.shape, _NOW, np.int8)
        kind[at < before[t][w_idx, writer]] = _BEFORE
        kind[at >= over[t][w_idx, writer]] = _OVER
        kind[~lay.mask] = _NOW
        read = np.empty(lay.mask.shape, np.float32)
        right = np.empty(lay.mask.shape, np.float32)
        for name, js, r, c in groups:
            k = kind[:, js]
            cur = tiles[name][t, r, c]
            prev = tiles[name][t - 1, r, c] if t else garbage[name][r, c]
            got = np.where(k == _BEFORE, prev, cur)
            if t + 1 < len(tiles[name]):
                got = np.where(k == _OVER, tiles[name][t + 1, r, c], got)
            read[:, js], right[:, js] = got, cur
        read[~lay.mask] = right[~lay.mask] = np.nan
        yield read, right, kind


def _tiles(
    config: KernelConfig, block: tuple[int, int], steps: int, fetch
) -> dict[str, np.ndarray]:
    """Each shared array as ``block``'s stores fill it in k-steps 0 .. steps - 1, float32
    [steps, rows, stride]: correctness.staged for all steps in one fetch per store (the
    tile moves by the step depth along k, as _Layout checked)."""
    out = {a.name: np.full((steps, a.rows, a.stride), np.nan, np.float32) for a in config.shared}
    t = np.arange(steps)[:, None, None]
    for rs in config.sites:
        if rs.site.kind != "store" or rs.site.source is None:
            continue
        matrix = config.array(rs.site.array).source
        rows_m, cols_m = config.matrix_shape(matrix)
        for k in range(rs.repeat):
            r, c, m = _block_lanes(config, rs.site.at, block, 0, k)
            sr, sc, _ = _block_lanes(config, rs.site.source, block, 0, k)
            if matrix == "A":  # A[m][k]: the tile moves along A's columns, B's rows
                sc = sc + t * config.step_depth
            else:
                sr = sr + t * config.step_depth
            sr, sc = np.broadcast_arrays(sr, sc)
            inside = (sr >= 0) & (sc >= 0) & (sr < rows_m) & (sc < cols_m) & m
            values = np.zeros(sr.shape, np.float32)
            values[inside] = fetch(matrix, sr[inside], sc[inside])
            out[rs.site.array][:, r[m], c[m]] = values[:, m]
    return out


def _block_errors(
    config: KernelConfig, lay: _Layout, race: _Race, seed: int, block: tuple[int, int], fetch
) -> tuple[np.ndarray, np.ndarray]:
    """(error, inside) float64 / bool [warps, 32] of ``block``: each lane's element of C as its
    stale reads make it minus the right one (float64 sums of the products), and whether the
    element exists."""
    # pair each lane's A read of k with its B read of k (one product per k, _Layout checks):
    # flat indices into a step's [warps, load rows, 32] reads, A's k first, then B's
    order = np.argsort(np.where(lay.from_a[None, :, None], lay.kidx, lay.depth + lay.kidx), axis=1)
    W, n = lay.warps, lay.loads
    flat = (np.arange(W)[:, None, None] * n + order) * WARP + np.arange(WARP)
    a_idx, b_idx = flat[:, : lay.depth], flat[:, lay.depth :]
    err = np.zeros((W, WARP))
    for read, right, _ in _replay(config, lay, race, seed, block, fetch, config.n_steps):
        got, want = read.ravel().astype(np.float64), right.ravel().astype(np.float64)
        err += np.nansum(got[a_idx] * got[b_idx] - want[a_idx] * want[b_idx], axis=1)
    r = block[1] * lay.c_tile[0] + lay.c_row
    c = block[0] * lay.c_tile[1] + lay.c_col
    return err, lay.c_mask & (r < config.M) & (c < config.N)


def _sampled_error(
    config: KernelConfig, lay: _Layout, race: _Race, seed: int, per_block: np.ndarray, fetch
) -> tuple[float, int]:
    """(largest |error| among the wrong elements of a seeded sample of blocks, elements
    sampled)."""
    with_wrong = np.flatnonzero(per_block)
    if not len(with_wrong):
        return 0.0, 0
    rng = np.random.default_rng([int(seed), 0x5A3E])
    blocks = max(1, min(ERROR_SAMPLE_BLOCKS, ERROR_SAMPLE_THREADS // config.threads))
    chosen = np.sort(rng.choice(with_wrong, min(blocks, len(with_wrong)), replace=False))
    gx = config.grid[0]
    worst, sampled = 0.0, 0
    for block_id in chosen:
        block = (int(block_id % gx), int(block_id // gx))
        err, inside = _block_errors(config, lay, race, seed, block, fetch)
        # a stale product whose right factor is no pad zero moves the element: the map's wrong
        wrong = inside & (err != 0)
        sampled += int(wrong.sum())
        if wrong.any():
            worst = max(worst, float(np.abs(err[wrong]).max()))
    return worst, sampled


def _probe_values(
    config: KernelConfig, lay: _Layout, race: _Race, request: RunRequest, fetch
) -> np.ndarray:
    """uint32 [value tiles, probe slots, 32]: the float bits the probed warp read."""
    values = np.full((config.value_tiles, config.probe_slots, 32), 0xFFFFFFFF, np.uint32)
    w = request.probe_warp
    slots = [config.site(s).slot + k for s, k in lay.rows]
    replay = _replay(
        config, lay, race, request.seed, request.probe_block, fetch, config.value_tiles
    )
    for t, (read, _, _) in enumerate(replay):
        bits = read[w].view(np.uint32)
        values[t, slots] = np.where(lay.mask[w], bits, 0xFFFFFFFF)
    return values
