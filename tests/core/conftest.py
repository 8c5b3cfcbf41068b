"""Synthetic but self-consistent traces for the core tests."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from matviz.core import registry
from matviz.core.manifest import Correctness, Geometry, Sampling, Stats, Timer, build_manifest
from matviz.core.trace import PROBE_DTYPE, Trace, make_blocks

TILE = 16


def build_trace(
    grid: tuple[int, int] = (4, 3),
    n_tiles: int = 5,
    *,
    phases: bool = True,
    sample: int | None = None,
    warps: bool = False,
    probe: bool = False,
    n_sms: int = 2,
    time_scale: int = 1,
    seed: int = 0,
) -> Trace:
    """A trace of a tiled GEMM of shape (gy*16) x (gx*16) x (n_tiles*16).

    Blocks run round-robin on ``n_sms`` SMs, one at a time per SM; phase times are monotone
    inside each block. ``sample`` keeps phase rows for only that many blocks; ``time_scale``
    stretches every time (to push deltas past uint32).
    """
    rng = np.random.default_rng(seed)
    gx, gy = grid
    blocks = make_blocks(gx, gy)
    n_blocks = gx * gy
    tiles = max(n_tiles, 1)

    # Per block: issue, loaded, computed for each tile, then end; all gaps positive.
    gaps = rng.integers(1, 50, size=(n_blocks, 3 * tiles + 1))
    marks = np.cumsum(gaps, axis=1)
    durations = marks[:, -1] + 1
    smid = np.arange(n_blocks) % n_sms
    starts = np.zeros(n_blocks, np.int64)
    for sm in range(n_sms):  # test helper: a loop over a handful of SMs is fine
        mine = np.flatnonzero(smid == sm)
        starts[mine] = np.concatenate([[0], np.cumsum(durations[mine])[:-1]])
    blocks["smid"] = smid
    blocks["start"] = starts * time_scale
    blocks["end"] = (starts + durations) * time_scale

    config = registry.configure("tiled", {"tile": TILE}, gy * TILE, gx * TILE, tiles * TILE)
    kept = n_blocks if sample is None else min(sample, -(-n_blocks // 2))
    manifest = build_manifest(
        config,
        backend="sim",
        level=3 if (warps or probe) else 2,
        device={"name": "Test GPU", "sm_count": n_sms},
        timer=Timer("globaltimer", 32),
        geometry=Geometry.of(config, {}),
        sampling=Sampling(budget_bytes=2**20, timeline_level=2, phase_blocks=kept),
        software={"matviz": "test"},
        stats=Stats(0.25, 0.25, 0.26, 2, config.flops / 0.25e6, None, None),
        occupancy={},
        correctness=Correctness([], 0, config.M * config.N, 1e-3, 0.0, [1, 1], "synthetic"),
        details={},
    )
    kwargs: dict = {}
    if phases and n_tiles > 0:
        rows = np.arange(n_blocks) if sample is None else np.arange(0, n_blocks, 2)[:sample]
        abs_marks = (starts[:, None] + marks[:, :-1]) * time_scale
        abs_marks = abs_marks.reshape(n_blocks, tiles, 3)[rows]
        kwargs.update(phase_blocks=rows.astype(np.int64), marks=abs_marks.copy())
        if warps:
            warp_rows = rows[:2]
            n_warps = 8
            # Each warp waits at each barrier for the slowest one.
            wait = rng.integers(0, 2, size=(len(warp_rows), tiles, n_warps, 2)) * time_scale
            kwargs.update(warp_blocks=warp_rows, barrier_wait=wait.astype(np.int64))
    if probe:
        rec = np.zeros(4, PROBE_DTYPE)
        rec["site"] = ["st_As", "st_Bs", "ld_As", "ld_Bs"]  # the sites of the tiled description
        rec["k"] = [0, 0, 3, 3]
        rec["kind"] = ["store", "store", "load", "load"]
        rec["width"] = [4, 4, 4, 16]
        lanes = np.arange(32)
        rec["offsets"] = [lanes * 4, lanes * 68, lanes * 0 + 12, lanes * 16]
        rec["offsets"][0, 20:] = -1
        kwargs["probe"] = rec
    return Trace(manifest=manifest, blocks=blocks, **kwargs)


@pytest.fixture(scope="session")
def make_trace() -> Callable[..., Trace]:
    """The trace builder; session-scoped so hypothesis tests may use it."""
    return build_trace


@pytest.fixture
def trace() -> Trace:
    return build_trace()
