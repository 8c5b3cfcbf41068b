"""Who computes what in a block's C tile, from each kernel's description."""

import numpy as np
import pytest

from matviz.core import c_tile
from matviz.core.registry import kernels


@pytest.mark.parametrize("name", list(kernels()))
def test_every_element_of_the_tile_has_one_thread_and_every_thread_its_share(name):
    kernel = kernels()[name]
    for params in kernel.configurations():
        config = kernel.configure(params, 512, 512, 64)
        owner = c_tile.owners(config)
        rows, cols = config.launch.c_tile
        assert owner.shape == (rows, cols)
        assert (owner >= 0).all()  # every element of a full tile is stored by some thread
        counts = np.bincount(owner.ravel(), minlength=config.threads)
        # warps before the MMA's first warp (a producer warpgroup) compute no C
        first = 32 * config.mma.first_warp if config.mma else 0
        assert (counts[:first] == 0).all()
        share = rows * cols // (config.threads - first)
        assert (counts[first:] == share).all()  # the same share for each of the others
        for tid in (first, config.threads - 1):
            parts = c_tile.pieces(owner, tid)  # a micro-tile, or one per sub-tile of a warp
            assert sum(h * w for _, _, h, w in parts) == counts[tid]
            assert len({(h, w) for _, _, h, w in parts}) == 1  # all the same shape


def test_micro_tiles_and_warp_tiles_of_register_tiling():
    config = kernels()["register_tiling_2d"].configure(
        {"BM": 64, "BN": 64, "BK": 16, "TM": 8, "TN": 4}, 256, 256, 64
    )
    owner = c_tile.owners(config)
    assert c_tile.pieces(owner, 0) == [(0, 0, 8, 4)]
    assert c_tile.pieces(owner, 17) == [(8, 4, 8, 4)]  # 16 threads across a row band
    assert c_tile.warp_tiles(owner) == {w: (16 * w, 0, 16, 64) for w in range(4)}
    assert c_tile.pieces(owner, 999) == []


def test_a_warp_tiled_thread_owns_one_micro_tile_per_sub_tile():
    config = kernels()["warp_tiling"].configure(
        {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "WNITER": 4, "pad": 4}, 256, 256, 64
    )
    owner = c_tile.owners(config)
    # WMITER = 64*64 / (32*8*4*4) = 1, WSUBN = 64/4 = 16: 4 micro-tiles of 8x4, 16 columns apart
    assert c_tile.pieces(owner, 0) == [(0, 16 * n, 8, 4) for n in range(4)]
    assert c_tile.pieces(owner, 5) == [(8, 4 + 16 * n, 8, 4) for n in range(4)]
    assert c_tile.warp_tiles(owner) == {0: (0, 0, 64, 64), 1: (0, 64, 64, 64),
                                        2: (64, 0, 64, 64), 3: (64, 64, 64, 64)}  # fmt: skip


def test_a_split_micro_tile_is_two_pieces_half_a_block_tile_apart():
    """Kernel 06 split: thread 0 computes rows 0-7 of columns 0-3 and of columns 64-67."""
    config = kernels()["vectorized"].configure(
        {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "pad": 4, "split": 1}, 512, 512, 64
    )
    owner = c_tile.owners(config)
    assert c_tile.pieces(owner, 0) == [(0, 0, 8, 4), (0, 64, 8, 4)]
    assert c_tile.pieces(owner, 17) == [(8, 4, 8, 4), (8, 68, 8, 4)]
    assert c_tile.warp_tiles(owner)[0] == (0, 0, 16, 128)


def test_quads_put_four_neighbouring_lanes_on_two_rows_and_two_columns():
    config = kernels()["vectorized"].configure(
        {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "pad": 4, "quads": 1}, 512, 512, 64
    )
    owner = c_tile.owners(config)
    assert [c_tile.pieces(owner, tid) for tid in range(4)] == [
        [(0, 0, 8, 8)], [(0, 8, 8, 8)], [(8, 0, 8, 8)], [(8, 8, 8, 8)]
    ]
    assert c_tile.pieces(owner, 4) == [(0, 16, 8, 8)]
    assert c_tile.warp_tiles(owner)[0] == (0, 0, 16, 128)  # still two rows of micro-tiles
