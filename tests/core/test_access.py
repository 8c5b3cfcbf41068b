"""Access models evaluated from the kernel descriptions, checked against hand-worked lanes."""

from __future__ import annotations

import numpy as np
import pytest

from matviz.core import access, banks
from matviz.core.registry import configure, kernels

SEED_TILED = ("tiled", "tiled_transposed")
TILES = (8, 16, 32)
PADS = (0, 1, 2, 4)


def _config(kernel: str, tile: int, pad: int):
    params = {"tile": tile, "pad": pad} if kernel != "naive" else {"tile": tile}
    return configure(kernel, params, 64, 64, 64)


def lane_offsets(kernel: str, tile: int, pad: int, warp: int, site: str, k: int = 0):
    return access.lane_offsets(_config(kernel, tile, pad), site, warp, k)


def access_records(kernel: str, tile: int, pad: int, warp: int):
    return access.access_records(_config(kernel, tile, pad), warp)


def site_order(tile: int) -> list[tuple[str, int]]:
    """The seed kernels' program: both stores, then the inner loop, As then Bs for each k."""
    return [("st_As", 0), ("st_Bs", 0)] + [(s, k) for k in range(tile) for s in ("ld_As", "ld_Bs")]


def _warps(tile: int) -> range:
    return range(tile * tile // 32)


def _degree(offsets: np.ndarray) -> int:
    return int(banks.conflict_degree(offsets, 4))


# -- the transposed store: the lesson's 32-way conflict -----------------------------------------


@pytest.mark.parametrize("warp", [0, 3, 31])
def test_transposed_store_without_padding_is_32_way(warp: int) -> None:
    # Tile 32: lane = tx, warp = ty. As[tx][ty] is word tx*32 + ty -> bank ty for every lane,
    # 32 distinct words in one bank.
    offsets = lane_offsets("tiled_transposed", 32, 0, warp, "st_As")
    assert np.array_equal(offsets, (np.arange(32) * 32 + warp) * 4)
    assert np.array_equal(banks.banks_of(offsets), np.full(32, warp))
    assert _degree(offsets) == 32
    assert int(banks.wavefronts(offsets, 4)) == 32


@pytest.mark.parametrize("warp", [0, 3, 31])
def test_transposed_store_with_padding_is_conflict_free(warp: int) -> None:
    # Word tx*33 + ty -> bank (tx + ty) % 32: a different bank for each of the 32 lanes.
    offsets = lane_offsets("tiled_transposed", 32, 1, warp, "st_As")
    assert sorted(banks.banks_of(offsets)) == list(range(32))
    assert _degree(offsets) == 1
    assert int(banks.wavefronts(offsets, 4)) == 1


def test_transposed_inner_load_is_a_broadcast() -> None:
    # As[k][ty]: at tile 32 every lane of a warp shares ty, so all read one word.
    for k in (0, 17, 31):
        offsets = lane_offsets("tiled_transposed", 32, 0, 5, "ld_As", k)
        assert len(set(offsets.tolist())) == 1
        assert offsets[0] == (k * 32 + 5) * 4
        assert _degree(offsets) == 1


# -- the seed tiled kernel is conflict-free without padding -------------------------------------


@pytest.mark.parametrize("tile", [16, 32])
def test_seed_tiled_kernel_is_conflict_free_without_padding(tile: int) -> None:
    for warp in _warps(tile):
        records = access_records("tiled", tile, 0, warp)
        for record in records:
            assert _degree(record["offsets"]) == 1, (tile, warp, record["site"], record["k"])


@pytest.mark.parametrize("tile", [16, 32])
def test_seed_tiled_ld_as_is_a_broadcast(tile: int) -> None:
    # As[ty][k]: a warp spans 32 / tile rows of threads, so it touches only that many words.
    rows_per_warp = 32 // tile
    for warp in _warps(tile):
        for k in range(tile):
            offsets = lane_offsets("tiled", tile, 0, warp, "ld_As", k)
            words = sorted(set((offsets // 4).tolist()))
            first_ty = warp * rows_per_warp
            assert words == [(first_ty + r) * tile + k for r in range(rows_per_warp)]


def test_tile_8_pad_1_store_is_2_way() -> None:
    # Warp 0 of an 8x8 block holds ty 0..3, tx 0..7: words ty*9 + tx are 0-7, 9-16, 18-25 and
    # 27-34. Words 32, 33, 34 fall in banks 0, 1, 2 beside words 0, 1, 2: a 2-way conflict.
    offsets = lane_offsets("tiled", 8, 1, 0, "st_As")
    words = [ty * 9 + tx for ty in range(4) for tx in range(8)]
    assert np.array_equal(offsets, np.array(words) * 4)
    assert _degree(offsets) == 2
    assert int(banks.wavefronts(offsets, 4)) == 2
    # Bs sits 8*9 = 72 words later; the same shape shifted keeps the same 2-way conflict.
    assert _degree(lane_offsets("tiled", 8, 1, 0, "st_Bs")) == 2


# -- hand-computed lanes -------------------------------------------------------------------------


def test_transposed_tile_32_pad_1_warp_3_lane_5() -> None:
    # tid = 3*32 + 5 = 101 -> tx = 101 % 32 = 5, ty = 101 // 32 = 3; stride 33; Bs base 32*33*4.
    lane, bs_base = 5, 4224
    cases = {
        ("st_As", 0): (5 * 33 + 3) * 4,  # As[tx][ty] -> 168 -> byte 672
        ("st_Bs", 0): bs_base + (3 * 33 + 5) * 4,  # Bs[ty][tx] -> 4640
        ("ld_As", 7): (7 * 33 + 3) * 4,  # As[k][ty] -> 936
        ("ld_Bs", 7): bs_base + (7 * 33 + 5) * 4,  # Bs[k][tx] -> 5168
    }
    assert cases[("st_As", 0)] == 672
    for (site, k), expected in cases.items():
        assert lane_offsets("tiled_transposed", 32, 1, 3, site, k)[lane] == expected, site


def test_tiled_tile_16_pad_2_warp_5_lane_19() -> None:
    # tid = 5*32 + 19 = 179 -> tx = 179 % 16 = 3, ty = 179 // 16 = 11; stride 18; Bs at 16*18*4.
    lane, bs_base = 19, 1152
    cases = {
        ("st_As", 0): (11 * 18 + 3) * 4,  # As[ty][tx] -> 804
        ("st_Bs", 0): bs_base + (11 * 18 + 3) * 4,  # Bs[ty][tx] -> 1956
        ("ld_As", 4): (11 * 18 + 4) * 4,  # As[ty][k] -> 808
        ("ld_Bs", 4): bs_base + (4 * 18 + 3) * 4,  # Bs[k][tx] -> 1452
    }
    for (site, k), expected in cases.items():
        assert lane_offsets("tiled", 16, 2, 5, site, k)[lane] == expected, site


# -- layout ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", SEED_TILED)
@pytest.mark.parametrize("tile", TILES)
@pytest.mark.parametrize("pad", PADS)
def test_stores_cover_each_tile_once_and_bs_follows_as(kernel: str, tile: int, pad: int) -> None:
    stride = tile + pad
    bs_base = tile * stride * 4
    st_as = np.concatenate([lane_offsets(kernel, tile, pad, w, "st_As") for w in _warps(tile)])
    st_bs = np.concatenate([lane_offsets(kernel, tile, pad, w, "st_Bs") for w in _warps(tile)])
    # The block's threads store every cell of the unpadded T x T tile exactly once.
    cells = {(r * stride + c) * 4 for r in range(tile) for c in range(tile)}
    assert sorted(st_as.tolist()) == sorted(cells)
    assert sorted((st_bs - bs_base).tolist()) == sorted(cells)
    assert st_bs.min() == bs_base
    # Nothing reaches past the shared memory the description reserves.
    smem = _config(kernel, tile, pad).smem_bytes
    assert st_bs.max() + 4 <= smem


@pytest.mark.parametrize("kernel", SEED_TILED)
@pytest.mark.parametrize("tile", TILES)
def test_site_order_and_records(kernel: str, tile: int) -> None:
    records = access_records(kernel, tile, 1, 0)
    assert len(records) == 2 + 2 * tile
    assert list(records["site"][:2]) == ["st_As", "st_Bs"]
    assert list(records["kind"][:2]) == ["store", "store"]
    assert list(records["site"][2::2]) == ["ld_As"] * tile
    assert list(records["site"][3::2]) == ["ld_Bs"] * tile
    assert list(records["k"][2::2]) == list(range(tile))
    assert list(records["k"][3::2]) == list(range(tile))
    assert set(records["kind"][2:]) == {"load"}
    assert set(records["width"].tolist()) == {4}
    assert [(str(s), int(k)) for s, k in zip(records["site"], records["k"], strict=True)] == (
        site_order(tile)
    )
    for row, (site, k) in enumerate(site_order(tile)):
        assert np.array_equal(records["offsets"][row], lane_offsets(kernel, tile, 1, 0, site, k))


def test_warps_past_the_block_are_inactive() -> None:
    # An 8x8 block has 64 threads: warps 0 and 1 only.
    offsets = lane_offsets("tiled", 8, 0, 2, "st_As")
    assert np.array_equal(offsets, np.full(32, -1))
    assert _degree(offsets) == 0


def test_naive_kernel_has_no_records() -> None:
    assert len(access_records("naive", 16, 0, 0)) == 0
    modelled = {name for name, k in kernels().items() if k.sites_at(k.default_params())}
    assert "naive" not in modelled
    assert set(SEED_TILED) <= modelled


def test_records_use_the_kernel_parameters() -> None:
    records = access_records("tiled_transposed", 32, 0, 3)
    assert _degree(records["offsets"][0]) == 32  # st_As, the transposed store


@pytest.mark.parametrize("kernel", SEED_TILED)
@pytest.mark.parametrize(("tile", "pad"), [(8, 1), (32, 0)])
def test_stores_copy_the_block_s_tile_of_a_and_b(kernel: str, tile: int, pad: int) -> None:
    # Block (1, 2) at k-step 3 of a 100 x 90 x 130 GEMM: As holds A[2T + i][3T + j] and Bs
    # holds B[3T + i][T + j]; for the transposed kernel As[j][i] holds A[2T + i][3T + j].
    config = configure(kernel, {"tile": tile, "pad": pad}, 100, 90, 130)
    block, t = (1, 2), 3
    for site, array, rows0, cols0 in (("st_As", "A", 2 * tile, t * tile),
                                      ("st_Bs", "B", t * tile, tile)):  # fmt: skip
        seen = set()
        for warp in range(config.warps):
            lanes = config.lanes(warp, block, t)
            row, col, inside = access.global_elements(config, site, warp, block, t)
            offsets = access.lane_offsets(config, site, warp, 0, block, t)
            stride = config.array(site[3:]).stride
            local = (offsets[lanes.active] - config.array_bases[site[3:]]) // 4
            r, c = local // stride, local % stride
            if kernel == "tiled_transposed" and site == "st_As":
                r, c = c, r
            assert np.array_equal(row[lanes.active], rows0 + r)
            assert np.array_equal(col[lanes.active], cols0 + c)
            limit = {"A": (100, 130), "B": (130, 90)}[array]
            expected_inside = (row < limit[0]) & (col < limit[1]) & lanes.active
            assert np.array_equal(inside, expected_inside)
            seen |= set(zip(row[lanes.active].tolist(), col[lanes.active].tolist(), strict=True))
        assert len(seen) == tile * tile


def test_register_tiling_reads_one_bs_word_per_k_and_broadcasts_as() -> None:
    # Kernel 04, BM=BN=64, BK=8, TM=8: 512 threads, warp 3 = threads 96..127, all in row band
    # tid // 64 = 1 (rows 8..15 of the tile), columns 32..63. Bs[k][col]: 32 words in a row,
    # conflict-free; As[8 + r][k]: one word for the whole warp, a broadcast.
    config = configure("register_tiling_1d", {}, 256, 256, 256)
    bs = access.lane_offsets(config, "ld_Bs", 3, k=5)
    assert np.array_equal(bs, config.array_bases["Bs"] + (5 * 64 + 32 + np.arange(32)) * 4)
    assert _degree(bs) == 1
    a = access.lane_offsets(config, "ld_As", 3, k=5 * 8 + 2)  # k-step depth 5, row r = 2
    assert set(a.tolist()) == {((8 + 2) * 8 + 5) * 4}
    assert config.program[2:4] == (("ld_Bs", 0), ("ld_As", 0))  # b first, then TM As reads


def test_a_swizzled_array_stores_each_element_at_its_xor_column():
    """Kernel 06's As: element (k, m) lies at column m ^ mask(k); the XOR undoes itself, keeps
    a float4's four columns together, and spreads a transposed store over all 32 banks."""
    kernel = kernels()["vectorized"]
    masks = {8: [0] * 4 + [16] * 4, 16: [0] * 4 + [8] * 4 + [16] * 4 + [24] * 4}
    for bk, mask in masks.items():
        config = kernel.configure({"BM": 64, "BN": 64, "BK": bk, "TN": 4, "pad": 0, "swizzle": 1},
                                  256, 256, 64)  # fmt: skip
        arr = config.array("As")
        k = np.arange(bk)
        assert (arr.stored_col(k, np.zeros(bk, int)) == mask).all()
        m = np.arange(arr.cols)
        for row in range(bk):
            stored = arr.stored_col(row, m)
            assert sorted(stored) == list(m) and (arr.stored_col(row, stored) == m).all()
            assert (stored[::4] % 4 == 0).all() and (np.diff(stored.reshape(-1, 4)) == 1).all()
        degrees = {}
        for swizzle in (0, 1):
            plain = kernel.configure({**config.params, "swizzle": swizzle}, 256, 256, 64)
            offsets = access.lane_offsets(plain, "st_As", 0, 0)
            degrees[swizzle] = int(banks.conflict_degree(offsets, 4))
        assert degrees == {0: bk // 4, 1: 1}


def test_step_free_evaluates_once_what_does_not_read_the_k_step():
    """Shared loads address the same cells every k-step: one evaluation serves all of them;
    a function that reads the step (a double buffer's t % 2, a store's source) gets None."""
    from matviz.core.kernel import Site

    config = configure("vectorized", {}, 256, 256, 256)
    for name in ("ld_As", "ld_Bs", "st_As", "st_Bs"):
        rs = config.site(name)
        fixed = access.step_free(config, rs.site.at, 1, (1, 0), 1)
        assert fixed is not None, name
        for t in (0, 3):
            now = access.evaluate(config, rs.site.at, 1, (1, 0), t, 1)
            assert all(np.array_equal(a, b) for a, b in zip(fixed, now, strict=True))
        if rs.site.source is not None:
            assert access.step_free(config, rs.site.source, 1, (1, 0), 1) is None
    buffered = Site("ld", "load", "As", "compute", at=lambda th, p: (th.t % 2 * 8 + th.k, th.tid))
    assert access.step_free(config, buffered.at, 0, (0, 0), 0) is None
    assert access.step_free(config, lambda th, p: (0, th.t), 0, (0, 0), 0) is None
    assert access.step_free(config, lambda th, p: (th.t > 3, 0), 0, (0, 0), 0) is None


def _one_by_one(config, warp, block, t) -> np.ndarray:
    """Every program row's offsets, one instance at a time (what access_records must equal)."""
    rows = [access.lane_offsets(config, site, warp, k, block, t) for site, k in config.program]
    return np.stack(rows) if rows else np.zeros((0, 32), np.int32)


@pytest.mark.parametrize("name", sorted(kernels()))
def test_records_evaluate_all_instances_of_a_site_at_once_exactly(name: str) -> None:
    """access_records evaluates a site's instances in one call (k a column); for every
    configuration of every kernel, at edge blocks and warps, it equals one call per instance."""
    kernel = kernels()[name]
    for params in kernel.configurations():
        config = kernel.configure(params, 1000, 777, 333, check=False)
        for warp in sorted({0, config.warps - 1}):
            for block in ((0, 0), (config.grid[0] - 1, config.grid[1] - 1)):
                for t in sorted({0, max(config.n_steps - 1, 0)}):
                    records = access.access_records(config, warp, block, t)
                    assert np.array_equal(
                        records["offsets"], _one_by_one(config, warp, block, t)
                    ), (params, warp, block, t)


def test_a_site_that_needs_k_as_a_number_is_evaluated_per_instance() -> None:
    """A description may use k where an array will not do (a Python condition, an index into a
    tuple): its site falls back to one call per instance, with the same offsets."""
    import dataclasses

    from matviz.core.kernel import Site

    config = configure("tiled", {"tile": 16, "pad": 0}, 64, 64, 64)
    rows = (3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3)
    picky = Site("ld_As", "load", "As", "compute", repeat=lambda p: p.tile,
                 at=lambda th, p: (rows[th.k] if th.k < 16 else 0, th.tid % 16))  # fmt: skip
    sites = tuple(
        dataclasses.replace(site, at=picky.at) if site.name == "ld_As" else site
        for site in config.kernel.sites_at(config.params)
    )
    kernel = dataclasses.replace(config.kernel, sites=sites)
    picky_config = kernel.configure(config.params, 64, 64, 64)
    records = access.access_records(picky_config, 1, (1, 1), 2)
    assert np.array_equal(records["offsets"], _one_by_one(picky_config, 1, (1, 1), 2))
    ld = records[records["site"] == "ld_As"]
    assert [int(o[0]) // 4 // 16 for o in ld["offsets"]] == list(rows)


def test_records_are_a_copy_of_what_the_cache_keeps() -> None:
    config = configure("tiled", {"tile": 16, "pad": 0}, 64, 64, 64)
    first = access.access_records(config, 0, (0, 0), 0)
    first["offsets"][:] = -7
    again = access.access_records(config, 0, (0, 0), 0)
    assert not (again["offsets"] == -7).any()


@pytest.mark.parametrize("name", sorted(kernels()))
def test_site_elements_equal_each_instance_s_global_elements(name: str) -> None:
    """The elements a store copies, every instance at once (the tiles view's cells), equal one
    global_elements call per instance, for every configuration at the last block and k-step."""
    kernel = kernels()[name]
    for params in kernel.configurations():
        config = kernel.configure(params, 1000, 777, 333, check=False)
        block, t = (config.grid[0] - 1, config.grid[1] - 1), max(config.n_steps - 1, 0)
        for rs in config.sites:
            if rs.site.source is None:
                continue
            for warp in sorted({0, config.warps - 1}):
                together = access.site_elements(config, rs.name, warp, block, t)
                for k in range(rs.repeat):
                    alone = access.global_elements(config, rs.name, warp, block, t, k)
                    for a, b in zip(together, alone, strict=True):
                        assert np.array_equal(a[k], b), (params, rs.name, warp, k)


@pytest.mark.parametrize("name", list(kernels()))
def test_the_whole_block_at_once_equals_warp_by_warp(name: str) -> None:
    """block_site_offsets / block_site_elements (the tiles view's one call per site) give what
    site_offsets / site_elements give for each warp, on an edge block of a ragged shape."""
    config = configure(name, None, 257, 129, 136)
    block = (config.launch.grid[0] - 1, config.launch.grid[1] - 1)
    for rs in config.sites:
        together = access.block_site_offsets(config, rs.name, block, 1)
        each = [access.site_offsets(config, rs.name, w, block, 1) for w in range(config.warps)]
        np.testing.assert_array_equal(together, np.stack(each), err_msg=rs.name)
        if rs.site.source is None:
            continue
        together = access.block_site_elements(config, rs.name, block, 1)
        each = [access.site_elements(config, rs.name, w, block, 1) for w in range(config.warps)]
        for a, b in zip(together, zip(*each, strict=True), strict=True):
            np.testing.assert_array_equal(a, np.stack(b), err_msg=rs.name)


def test_a_function_that_needs_numbers_is_evaluated_warp_by_warp() -> None:
    """A description's function with a Python condition on k cannot take every instance at
    once: the whole block still comes out, warp by warp, equal to each warp's."""
    config = configure("tiled", {"tile": 16, "pad": 1}, 64, 64, 64)

    def needs_k(th, _p):
        return (th.tid // 16 if int(th.k) % 2 else th.tid % 16), th.tid + int(th.k)

    together = access.block_instances(config, needs_k, (1, 2), 3, 4)
    each = [access.evaluate_instances(config, needs_k, w, (1, 2), 3, 4) for w in range(8)]
    for a, b in zip(together, zip(*each, strict=True), strict=True):
        np.testing.assert_array_equal(a, np.stack(b))
    assert together[0].shape == (8, 4, 32)


@pytest.mark.parametrize("kernel", ["vectorized", "async_pipeline"])
def test_split_columns_take_the_bank_conflict_out_of_the_b_loads(kernel):
    """A thread's 8 columns side by side put a warp's LDS.128 of B 32 bytes apart, a 2-way
    conflict: 8 wavefronts. Split into two float4 groups BN/2 apart, the 16 threads of a row
    read 256 consecutive bytes: conflict-free, 4 wavefronts, and the A loads are unchanged."""
    base = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "pad": 0, "swizzle": 1}
    seen = {}
    for split in (0, 1):
        config = configure(kernel, {**base, "split": split}, 512, 512, 64)
        b = access.site_offsets(config, "ld_Bs", 3)
        a = access.site_offsets(config, "ld_As", 3)
        seen[split] = (
            set(banks.wavefronts(b, 16).tolist()),
            set(banks.conflict_degree(b, 16).tolist()),
            banks.wavefronts(a, 16).tolist(),
        )
        row = b[0][:16] - b[0][0]  # group 0 of the 16 threads of one row of the warp
        assert row.tolist() == [(32 if not split else 16) * lane for lane in range(16)]
        second = b[1][:16] - b[0][:16]  # where each thread's second float4 lies
        assert set(second.tolist()) == {16 if not split else 64 * 4}
    assert seen[0][:2] == ({8}, {2}) and seen[1][:2] == ({4}, {1})
    assert seen[0][2] == seen[1][2]


@pytest.mark.parametrize("kernel", ["vectorized", "async_pipeline"])
def test_quads_read_two_float4s_per_four_lanes_of_a_and_of_b(kernel):
    """Lanes 4j .. 4j+3 on 2 x 2 neighbouring micro-tiles read two distinct float4s of As and
    two of Bs: 2 wavefronts an LDS.128 for both (the H200's rule), against 2 and 4 split, so a
    warp's k needs 8 wavefronts, not 12 (split) or 20 (neither)."""
    base = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "pad": 4, "swizzle": 0}
    per_k = {}
    for split in (0, 1):
        for quads in (0, 1):
            config = configure(kernel, {**base, "split": split, "quads": quads}, 512, 512, 64)
            total = 0
            for site in ("ld_As", "ld_Bs"):
                offsets = np.concatenate([access.site_offsets(config, site, w)
                                          for w in range(config.warps)])  # fmt: skip
                total += int(banks.wavefronts(offsets, 16).sum())
            per_k[split, quads] = total / config.warps / 16
    assert per_k == {(0, 0): 20, (1, 0): 12, (0, 1): 8, (1, 1): 8}
    quads = configure(kernel, {**base, "quads": 1}, 512, 512, 64)
    a = access.lane_offsets(quads, "ld_As", 0, 0)
    rows = (a - a.min()) // (8 * 4)  # As[k][thread_row]: a thread row is TM = 8 floats
    assert rows[:8].tolist() == [0, 0, 1, 1, 0, 0, 1, 1]  # lanes 0-3: two rows, two columns
