"""Coalescing (lesson 8 §15, §28): the sectors and lines of each warp's global requests."""

from __future__ import annotations

import numpy as np
import pytest

from matviz.core import coalescing as co
from matviz.core.registry import get_kernel


def requests(kernel: str, warp: int = 0, block=(0, 0), size: int = 1024, **params):
    config = get_kernel(kernel).configure(params, size, size, size)
    return config, {r.name: r for r in co.warp_requests(config, warp, block) if r.k == 0}


@pytest.mark.parametrize(("tile", "a_sectors", "b_sectors"), [(8, 4, 1), (16, 2, 2), (32, 1, 4)])
def test_naive_reads_a_broadcast_per_row_and_consecutive_b(tile, a_sectors, b_sectors):
    """A warp spans 32 / T rows of T threads: each row reads one element of A (a broadcast)
    and the same T consecutive floats of B."""
    config, req = requests("naive", tile=tile)
    a, b = req["ld_A"], req["ld_B"]
    assert np.unique(a.addresses).size == 32 // tile  # one address per row of threads
    assert a.sectors.size == a_sectors and b.sectors.size == b_sectors
    assert b.ideal_sectors == b_sectors  # B is as coalesced as its T floats allow
    assert co.sectors_per_request(config) == pytest.approx((a_sectors + b_sectors) / 2)


def test_column_major_b_needs_a_sector_per_column():
    """§28: with B column-major, lanes consecutive in col read addresses K floats apart."""
    config, req = requests("naive", tile=16, b_col_major=1)
    assert config.matrix_layout("B") == "col" and config.matrix_layout("A") == "row"
    b = req["ld_B"]
    assert b.sectors.size == 16 and b.lines.size == 16 and b.ideal_sectors == 2
    assert np.all(np.diff(np.unique(b.addresses)) == 1024 * 4)  # one column = K floats apart
    row_major = get_kernel("naive").configure({"tile": 16}, 1024, 1024, 1024)
    assert co.sectors_per_request(config) > 4 * co.sectors_per_request(row_major)


@pytest.mark.parametrize(("kernel", "params"), [
    ("tiled", {"tile": 8}), ("tiled", {"tile": 16}), ("tiled", {"tile": 32}),
    ("tiled_transposed", {"tile": 32, "pad": 1}), ("register_tiling_1d", {}),
])  # fmt: skip
def test_tile_copies_are_coalesced(kernel, params):
    """The loads that feed the shared tiles read whole sectors: 4 per request, 128 bytes."""
    config, req = requests(kernel, **params)
    loads = [r for r in req.values() if r.kind == "load"]
    assert {r.matrix for r in loads} == {"A", "B"}
    assert all(r.name.startswith(f"ld_{r.matrix} → st_") for r in loads)  # named by their store
    for r in req.values():
        assert r.sectors.size == r.ideal_sectors == 4, r.name
    assert co.sectors_per_request(config) == 4 and co.sectors_per_request(config, "store") == 4


def test_edge_block_lanes_outside_the_matrix_do_not_access():
    config, req = requests("naive", block=(1, 1), size=20, tile=16)
    c = req["st_C"]  # block (1, 1) covers rows and columns 16..31 of a 20 x 20 C
    inside = c.addresses >= 0
    assert inside.sum() == 8  # warp 0: rows 16-17, of which columns 16-19 exist
    rows, cols = np.divmod(c.addresses[inside] // 4, 20)
    assert set(rows) == {16, 17} and set(cols) == {16, 17, 18, 19}


def test_register_tiling_stores_tm_rows_of_c():
    config, _ = requests("register_tiling_1d")
    stores = [r for r in co.warp_requests(config, 0) if r.kind == "store"]
    assert len(stores) == config.p.TM
    first_rows = {int(r.addresses[0] // 4 // 1024) for r in stores}
    assert first_rows == set(range(config.p.TM))  # warp 0: rows 0..TM-1 of C, column 0..31


def test_model_matches_ncu_on_the_h200():
    """resources/bench/h200_ncu_coalescing_1024.md: ncu's sectors per request for every
    kernel x configuration at 1024³ (matviz/bench/ncu_coalescing.sh); the model within 5%."""
    from matviz.bench.ncu_coalescing import configurations
    from matviz.paths import RESOURCE_DIR

    table = (RESOURCE_DIR / "bench" / "h200_ncu_coalescing_1024.md").read_text()
    measured = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[0][:2].isdigit():
            # "–": ncu counted no load requests (TMA copies issue none)
            load = float("nan") if cells[2] == "–" else float(cells[2])
            measured[cells[0]] = (load, float(cells[5]))
    tags = {tag: (k, p) for tag, k, p in configurations()}
    later = {tag for tag, (_, p) in tags.items() if any(p.get(n) for n in ADDED_AFTER_THE_TABLE)}
    # every other configuration measured, none stale
    assert set(measured) == set(tags) - later
    for tag, (load, store) in measured.items():
        kernel, params = tags[tag]
        config = kernel.configure(params, 1024, 1024, 1024)
        assert co.sectors_per_request(config) == pytest.approx(load, rel=0.05, nan_ok=True), tag
        assert co.sectors_per_request(config, "store") == pytest.approx(store, rel=0.05), tag
    # their loads are the same requests as those of the measured row without the switches
    tag_of = {(k.name, tuple(sorted(p.items()))): tag for tag, (k, p) in tags.items()}
    for tag in later:
        kernel, params = tags[tag]
        plain = {**params, **{n: 0 for n in ADDED_AFTER_THE_TABLE if n in params}}
        load, _ = measured[tag_of[kernel.name, tuple(sorted(plain.items()))]]
        config = kernel.configure(params, 1024, 1024, 1024)
        assert co.sectors_per_request(config) == pytest.approx(load, rel=0.05, nan_ok=True), tag


# Switches added after the ncu table was measured (kernels 06 and 07, 2026-12-05). They move
# only the C stores (split: 16 sectors a request where side by side takes 32, in the model),
# which ncu has not measured yet: ONLY='split|quads' bash matviz/bench/ncu_coalescing.sh on the
# H200 adds their rows.
ADDED_AFTER_THE_TABLE = ("split", "quads")


def test_a_16_byte_cp_async_into_rows_that_start_mid_sector_counts_its_shared_sectors():
    """Kernel 09's pipelined copies land in rows padded by 16 bytes: every other row starts in
    the middle of a 32-byte shared sector, and 8 lanes write at a time. A request counts those
    shared sectors where they are more than its 16 global ones (ncu: 21 at BK 16, 19 at BK 32);
    the same tiles copied through registers (STAGES 1) count 16, padded or not."""
    wmma = get_kernel("wmma")

    def configured(**params):
        tile = {"BM": 64, "BN": 64, "WT": 32, **params}
        return wmma.configure(wmma.resolve_params(tile), 1024, 1024, 1024)

    def per_request(**params):
        return co.sectors_per_request(configured(**params))

    assert per_request(BK=16, PAD=8, STAGES=2) == 21  # A 24, B 18
    assert per_request(BK=32, PAD=8, STAGES=3) == 19  # A 20, B 18
    assert per_request(BK=16, PAD=8, STAGES=1) == per_request(BK=16, PAD=0, STAGES=1) == 16
    a = next(r for r in co.warp_requests(configured(BK=16, PAD=8, STAGES=2), 0) if r.matrix == "A")
    assert a.sectors.size == 16 and a.counted_sectors == 24  # the global side alone is coalesced


def test_only_16_byte_copies_count_shared_sectors():
    """4-byte cp.async copies (kernel 07's transposed A) and plain loads count global sectors."""
    lane = np.arange(32)
    landing = lane // 2 * 48 + lane % 2 * 16  # 32-byte rows 48 bytes apart, two lanes a row
    global_16 = co.Request("x", "load", "A", 0, lane * 16, 16, 2, landing)
    assert global_16.sectors.size == 16 and global_16.counted_sectors == 24  # 1 + 2 + 1 + 2 per 8
    global_4 = co.Request("x", "load", "A", 0, lane * 4, 4, 4, landing)
    assert global_4.counted_sectors == global_4.sectors.size == 4
    plain = co.Request("x", "load", "A", 0, lane * 16, 16, 2)
    assert plain.counted_sectors == 16


def test_split_columns_store_c_in_whole_sectors():
    """Kernel 06 at TN 8: side by side, a warp's float4 stores of C lie 32 bytes apart (32
    sectors a request); split, each row of 16 lanes stores 256 consecutive bytes (16)."""
    vectorized = get_kernel("vectorized")
    base = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "pad": 4}
    per_request = {
        split: co.sectors_per_request(
            vectorized.configure({**base, "split": split}, 1024, 1024, 1024), "store"
        )
        for split in (0, 1)
    }
    assert per_request == {0: 32, 1: 16}
