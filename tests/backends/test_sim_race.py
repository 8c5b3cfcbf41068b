"""The simulator's race model of a missing barrier (matviz.backends.sim_race)."""

import copy
import dataclasses

import numpy as np
import pytest

from matviz.backends import sim_race
from matviz.backends.contract import RunRequest
from matviz.backends.devices import load_device
from matviz.backends.simulator import simulate
from matviz.core import correctness
from matviz.core.correctness import BEFORE_WRITTEN, CURRENT, OTHER, OVERWRITTEN, UNCHECKED
from matviz.core.trace_io import load_trace, save_trace
from matviz.core.trace_schema import Correctness as CorrectnessSchema
from matviz.errors import MatvizError

H200 = load_device("h200")
TILES = (8, 16, 32)
DEFAULT = 1024  # the CLI's default size


def request(M, N=None, K=None, *, level=3, seed=0, block=(0, 0), warp=0, **params):
    N, K = N or M, K or M
    return RunRequest("tiled", M, N, K, params=params, level=level, seed=seed,
                      probe_block=block, probe_warp=warp)  # fmt: skip


def correct(req, dev=H200):
    return sim_race.simulate_correctness(req.config(), req, dev)


def lane_elements(config, block, warp):
    """(row, col) of C of each lane of ``warp`` in ``block`` (02_tiled: one element per thread)."""
    T = config.params["tile"]
    tid = warp * 32 + np.arange(32)
    return block[1] * T + tid // T, block[0] * T + tid % T


def harmful_stale_lanes(config, stale):
    """bool [32]: lanes with a stale read at a k inside K (beyond K both factors are 0)."""
    T = config.params["tile"]
    out = np.zeros(32, bool)
    for row, (site, k) in enumerate(config.program):
        if config.site(site).site.kind != "load":
            continue
        steps = np.arange(stale.shape[0])
        hit = (
            np.isin(stale[:, row], (BEFORE_WRITTEN, OVERWRITTEN))
            & (steps * T + k < config.K)[:, None]
        )
        out |= hit.any(axis=0)
    return out


# -- determinism -------------------------------------------------------------------------------
@pytest.mark.parametrize(("K", "drop"), [(48, 1), (512, 2)])  # K: some elements right
def test_same_seed_same_result_another_seed_another(K, drop):
    first = correct(request(512, 512, K, tile=16, drop_sync=drop, seed=3))
    again = correct(request(512, 512, K, tile=16, drop_sync=drop, seed=3))
    other = correct(request(512, 512, K, tile=16, drop_sync=drop, seed=4))
    assert 0 < first[0].wrong < first[0].total  # else the comparison below says nothing
    assert first[0] == again[0]
    assert np.array_equal(first[1], again[1]) and np.array_equal(first[2], again[2])
    assert not np.array_equal(first[1], other[1])


def test_a_block_draws_the_same_in_any_chunk(monkeypatch):
    """The map is made in chunks of blocks; the chunk size must not change what a block drew."""
    req = request(256, tile=8, drop_sync=2, level=1)
    whole = correct(req)[1]
    monkeypatch.setattr(sim_race, "CHUNK_TRIPLES", 4 * 7)  # 7 blocks of 2 x 2 warps a chunk
    assert np.array_equal(correct(req)[1], whole)


# -- a correct kernel --------------------------------------------------------------------------
@pytest.mark.parametrize("tile", TILES)
def test_a_kernel_with_both_barriers_is_right(tile):
    req = request(200, 136, 72, tile=tile, drop_sync=0)
    section, c_wrong, stale = correct(req)
    assert section.wrong == 0 and not c_wrong.any() and section.max_abs_error == 0
    assert section.broken == []
    loads = [config_row for config_row, (s, _) in enumerate(req.config().program) if "ld" in s]
    assert (stale[:, loads] == CURRENT).all()
    assert section.stale_reads["current"] == stale[:, loads].size


@pytest.mark.parametrize("tile", TILES)
def test_the_race_model_with_both_barriers_finds_no_race(tile):
    """Not just the shortcut: the timing model itself, barriers kept, never reads stale."""
    config = request(136, 200, 72, tile=tile, drop_sync=0).config()
    race, lay = sim_race._Race.of(config, H200), sim_race._Layout.of(config)
    assert race.barrier1 and race.barrier2
    c_wrong, per_block = sim_race._wrong_map(config, lay, race, 0)
    assert not c_wrong.any() and not per_block.any()
    before, over = sim_race._block_gaps(config, race, 0, 5, lay, config.n_steps)
    assert np.isneginf(before).all() and np.isposinf(over).all()


# -- what each dropped barrier does -----------------------------------------------------------
@pytest.mark.parametrize("tile", TILES)
def test_without_barrier_1_reads_come_before_the_tile_is_written(tile):
    section, c_wrong, stale = correct(request(256, tile=tile, drop_sync=1))
    counts = section.stale_reads
    assert counts["before_written"] > 0
    assert counts["overwritten"] == 0  # barrier 2 still keeps the next tile out
    assert counts["other"] == 0 and not (stale == OTHER).any()
    assert section.broken == ["drop_sync"]
    assert 0 < section.wrong == int(c_wrong.sum())
    assert section.max_abs_error > section.tolerance


@pytest.mark.parametrize("tile", TILES)
def test_without_barrier_2_the_next_tile_overwrites_reads(tile):
    """At the default size the model overwrites reads for every tile; a warp whose elements
    the map calls wrong shows them in the probe."""
    section, c_wrong, _ = correct(request(DEFAULT, tile=tile, drop_sync=2, level=1))
    assert 0 < section.wrong < section.total
    config = request(DEFAULT, tile=tile, drop_sync=2).config()
    rows, cols = np.nonzero(c_wrong)
    row, col = int(rows[len(rows) // 2]), int(cols[len(cols) // 2])
    block = (col // tile, row // tile)
    warp = ((row % tile) * tile + col % tile) // 32
    section, _, stale = correct(request(DEFAULT, tile=tile, drop_sync=2, block=block, warp=warp))
    assert section.stale_reads["overwritten"] > 0
    assert section.stale_reads["before_written"] == 0  # barrier 1 still holds
    assert section.stale_reads["other"] == 0
    assert config.n_steps <= config.value_tiles


def test_no_issue_spread_keeps_barrier_2_harmless():
    """Barrier 1 releases all warps at once; without the issue delay's spread every warp
    finishes its loop before anyone's next tile (a global load later) lands."""
    dev = copy.deepcopy(H200)
    dev["model"]["race_issue_delay_cycles"] = 0.0
    section, c_wrong, stale = correct(request(512, tile=16, drop_sync=2), dev)
    assert section.wrong == 0 and not c_wrong.any()
    assert section.stale_reads["overwritten"] == 0


def test_bad_race_constants_are_refused():
    dev = copy.deepcopy(H200)
    dev["model"]["race_read_cycles"] = 0
    with pytest.raises(MatvizError, match="race_read_cycles"):
        correct(request(64, tile=16, drop_sync=1), dev)
    dev["model"]["race_read_cycles"] = -3.0
    with pytest.raises(MatvizError, match="race_read_cycles"):
        correct(request(64, tile=16, drop_sync=1), dev)


# -- where the wrong elements are --------------------------------------------------------------
CASES = [
    (256, 256, 256, 16, 1),
    (72, 88, 40, 16, 1),  # edge blocks, and K leaves half of the last tile as zeros
    (100, 60, 50, 8, 1),
    (96, 64, 72, 32, 1),
    (DEFAULT, DEFAULT, DEFAULT, 16, 2),
]


@pytest.mark.parametrize(("M", "N", "K", "tile", "drop"), CASES)
def test_the_probed_warps_stale_reads_are_its_wrong_elements(M, N, K, tile, drop):
    """Every lane with a stale read at a k inside K has a wrong element, every other lane a
    right one (the probe keeps every k-step here), in the edge block and in the probe's block."""
    config = request(M, N, K, tile=tile, drop_sync=drop).config()
    assert config.n_steps <= config.value_tiles
    c_wrong = correct(request(M, N, K, tile=tile, drop_sync=drop, level=1))[1]
    gx, gy = config.grid
    probes = [((0, 0), 0), ((gx - 1, gy - 1), config.warps - 1), ((gx // 2, gy - 1), 0)]
    rows, cols = np.nonzero(c_wrong)  # and the warps of two wrong elements
    for r, c in ((rows[0], cols[0]), (rows[-1], cols[-1])):
        probes.append(((int(c) // tile, int(r) // tile), int((r % tile) * tile + c % tile) // 32))
    seen_stale = False
    for block, warp in probes:
        req = request(M, N, K, tile=tile, drop_sync=drop, block=block, warp=warp)
        _, c_again, stale = correct(req)
        assert np.array_equal(c_again, c_wrong)
        rows, cols = lane_elements(config, block, warp)
        inside = (rows < M) & (cols < N)
        stale_lanes = harmful_stale_lanes(config, stale)
        seen_stale |= bool(stale_lanes[inside].any())
        wrong = c_wrong[np.minimum(rows, M - 1), np.minimum(cols, N - 1)] > 0
        assert np.array_equal(wrong[inside], stale_lanes[inside]), (block, warp)
    assert seen_stale


@pytest.mark.parametrize("drop", [1, 2])
@pytest.mark.parametrize(("M", "N", "K", "tile"), [(64, 80, 40, 16), (40, 24, 20, 8)])
def test_the_map_is_what_a_value_by_value_replay_gets_wrong(M, N, K, tile, drop):
    """The map (gaps reduced over steps, whole grid) and a replay of every block's values
    (the stale value times the other factor) agree element by element; max_abs_error is
    the replay's largest error when the sample takes every block with a wrong element."""
    req = request(M, N, K, tile=tile, drop_sync=drop, seed=7, level=1)
    config = req.config()
    section, c_wrong, _ = correct(req)
    race, lay = sim_race._Race.of(config, H200), sim_race._Layout.of(config)
    fetch = sim_race._inputs(config, req.seed)
    replayed = np.zeros((M, N), bool)
    worst = 0.0
    for by in range(config.grid[1]):
        for bx in range(config.grid[0]):
            err, inside = sim_race._block_errors(config, lay, race, req.seed, (bx, by), fetch)
            rows = by * tile + (np.arange(config.threads) // tile)
            cols = bx * tile + (np.arange(config.threads) % tile)
            hit = (err != 0).ravel() & inside.ravel()
            replayed[rows[hit], cols[hit]] = True
            if hit.any():
                worst = max(worst, float(np.abs(err.ravel()[hit]).max()))
    assert np.array_equal(c_wrong > 0, replayed)
    if section.wrong and config.n_blocks <= sim_race.ERROR_SAMPLE_BLOCKS:
        assert section.max_abs_error == pytest.approx(worst)
    assert section.max_abs_error <= worst
    # a product of two inputs in [-1, 1] is off by at most 2
    assert section.max_abs_error <= 2 * K


def test_the_tiles_are_what_the_stores_put_in_shared_memory():
    """The replay's bulk tiles equal correctness.staged, the definition the probe check uses."""
    for M, N, K, tile, pad in ((50, 70, 45, 8, 1), (96, 40, 100, 16, 0), (64, 64, 64, 32, 4)):
        config = request(M, N, K, tile=tile, pad=pad, drop_sync=1).config()
        fetch = sim_race._inputs(config, 2)
        for block in ((0, 0), (config.grid[0] - 1, config.grid[1] - 1)):
            tiles = sim_race._tiles(config, block, config.n_steps, fetch)
            for t in range(config.n_steps):
                for name, want in correctness.staged(config, block, t, fetch).items():
                    assert np.array_equal(tiles[name][t], want, equal_nan=True)


# -- the manifest section and the trace --------------------------------------------------------
@pytest.mark.parametrize("drop", [1, 2])
def test_the_section_and_map_keep_their_bounds(drop):
    M, N, K = 1501, 1099, 48  # cells of 2 x 2 elements; the last row and column half outside C
    req = request(M, N, K, tile=16, drop_sync=drop)
    section, c_wrong, stale = correct(req)
    cy, cx = correctness.cell_shape(M, N)
    assert (cy, cx) == (2, 2) and section.cell == [cy, cx]
    assert c_wrong.dtype == np.uint32 and c_wrong.shape == (-(-M // cy), -(-N // cx))
    assert c_wrong.max() <= cy * cx
    assert c_wrong[-1].max() <= cx and c_wrong[:, -1].max() <= cy  # one row / column of C
    assert int(c_wrong.sum()) == section.wrong <= section.total == M * N
    assert section.tolerance == correctness.tolerance(K)
    assert 0 <= section.max_abs_error < np.inf
    assert stale.dtype == np.int8 and stale.shape[2] == 32
    config = req.config()
    assert stale.shape[:2] == (config.value_tiles, len(config.program))
    assert stale.min() >= UNCHECKED and stale.max() <= OTHER
    assert sum(section.stale_reads.values()) == int((stale != UNCHECKED).sum())
    CorrectnessSchema.model_validate(dataclasses.asdict(section))


def test_the_trace_keeps_the_race_through_save_and_load(tmp_path):
    trace = simulate(request(160, 96, 64, tile=16, drop_sync=1), registers=32)
    assert trace.correctness["wrong"] > 0 and trace.stale.size
    path = tmp_path / "race.mvz"
    save_trace(trace, path)
    loaded = load_trace(path)
    assert np.array_equal(loaded.c_wrong, trace.c_wrong)
    assert np.array_equal(loaded.stale, trace.stale)
    assert loaded.correctness == trace.correctness
    assert loaded.deliberately_broken
