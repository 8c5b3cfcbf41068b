from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from matviz.core import access, instructions
from matviz.core.banks import bank_matrix, banks_of, conflict_degree, wavefronts
from matviz.core.registry import get_kernel

LANES = np.arange(32)


def cost(offsets, width=4) -> tuple[int, int]:
    off = np.asarray(offsets)
    return int(wavefronts(off, width)), int(conflict_degree(off, width))


def reference(offsets: list[int], width: int) -> tuple[int, int, list[int]]:
    """Slow, literal model: (wavefronts, degree, words per bank summed over phases)."""
    lanes_per_phase = 128 // width
    total, degree, per_bank = 0, 0, [0] * 32
    active = [off for off in offsets if off >= 0]
    for first in range(0, 32, lanes_per_phase):
        banks: dict[int, set[int]] = {}
        for off in offsets[first : first + lanes_per_phase]:
            if off < 0:
                continue
            for j in range(width // 4):
                word = off // 4 + j
                banks.setdefault(word % 32, set()).add(word)
        worst = max((len(words) for words in banks.values()), default=0)
        total += worst
        degree = max(degree, worst)
        for bank, words in banks.items():
            per_bank[bank] += len(words)
    if active and len(set(active)) == 1:  # a warp-wide broadcast: measured on the H200
        total = {4: 1, 8: 1, 16: 2}[width]
    return total, degree, per_bank


def test_banks_of():
    assert banks_of([0, 4, 127, 128, 132, -1]).tolist() == [0, 1, 31, 0, 1, -1]


def test_consecutive_words_are_conflict_free():
    assert cost(LANES * 4) == (1, 1)


def test_same_word_is_a_broadcast():
    assert cost(np.full(32, 40)) == (1, 1)
    assert cost(LANES % 2 * 4 + 256) == (1, 1)  # two words, two banks


@pytest.mark.parametrize(("width", "waves"), [(4, 1), (8, 1), (16, 2)])
def test_warp_wide_broadcast_costs_what_ncu_measured(width, waves):
    # ncu on the H200: a warp-wide broadcast LDS.128 costs 2 wavefronts, an LDS.64 one
    # (the phase rule alone would say 4 and 2)
    assert cost(np.full(32, 256), width) == (waves, 1)
    off = np.full(32, 64)
    off[::3] = -1  # inactive lanes do not break a broadcast
    assert cost(off, width) == (waves, 1)


def test_a_few_rows_in_distinct_banks_cost_what_ncu_measured():
    # ncu on the H200 (resources/bench/h200_ncu_banks_1024.md): kernel 02's A-tile LDS.128 of
    # two rows (T=16) and four rows (T=8) costs 2 wavefronts, its LDS.64 of four rows (T=8,
    # PAD 2) 1; the phase rule alone would say 4 and 2
    two_rows = np.where(LANES < 16, 0, 16 * 4)  # As[ty][k..k+3], As[ty+1][k..k+3]: banks 0-3, 16-19
    assert cost(two_rows, 16) == (2, 1)
    four_rows = LANES // 8 * 10 * 4  # rows 10 words apart (T=8, PAD 2): 8 words, 8 banks
    assert cost(four_rows, 8) == (1, 1)


def test_rows_that_share_a_bank_across_phases_cost_what_their_lane_groups_read():
    # words 0-3 and 32-35 lie in the same four banks, but in different phases: no conflict.
    # ncu on the H200 counts 2 wavefronts for lane i reading element 2(i / 4), whose words span
    # two passes over the banks (resources/bench/h200_ncu_lds_patterns.md): four neighbouring
    # lanes reading one element cost 2, as here
    off = np.where(LANES < 16, 0, 32 * 4)
    assert cost(off, 16) == (2, 1)
    assert cost(LANES // 4 * 2 * 16, 16) == (2, 1)
    # four distinct elements in every group of four lanes cost 4, in one pass or not
    assert cost(LANES % 4 * 16, 16) == (4, 1)
    # a conflict inside a phase keeps the phase rule
    assert cost(LANES % 8 * 32 * 4, 16)[1] > 1


def test_stride_32_words_is_32_way():
    assert cost(LANES * 128) == (32, 32)


def test_stride_33_words_is_conflict_free():
    assert cost(LANES * 132) == (1, 1)


def test_stride_2_words_is_2_way():
    assert cost(LANES * 8) == (2, 2)


def test_8_byte_consecutive_takes_two_phases():
    assert cost(LANES * 8, 8) == (2, 1)


def test_16_byte_consecutive_takes_four_phases():
    assert cost(LANES * 16, 16) == (4, 1)


def test_16_byte_same_column_conflicts_within_a_phase():
    # Lanes 0..7 each read 4 words at a 128-byte stride: every lane hits banks 0..3.
    assert cost(LANES * 128, 16) == (32, 8)


def test_inactive_lanes_are_ignored():
    off = LANES * 128
    off[1:] = -1
    assert cost(off) == (1, 1)
    off = LANES * 8
    off[16:] = -1  # the half that would collide is off
    assert cost(off) == (1, 1)


def test_all_inactive_costs_nothing():
    assert cost(np.full(32, -1)) == (0, 0)
    assert bank_matrix(np.full(32, -1), 4).tolist() == [0] * 32


def test_padded_tile_row_pattern_is_2_way():
    # A T=8 tile padded to 9 columns: lanes read word ty*9 + tx for ty 0..3, tx 0..7.
    ty, tx = np.divmod(LANES, 8)
    off = (ty * 9 + tx) * 4
    assert cost(off) == (2, 2)
    expected = np.ones(32, int)
    expected[[0, 1, 2]] = 2
    expected[[8, 17, 26]] = 0
    assert bank_matrix(off, 4).tolist() == expected.tolist()


def test_bank_matrix_of_strided_access():
    assert bank_matrix(LANES * 128, 4).tolist() == [32] + [0] * 31
    assert bank_matrix(LANES * 16, 16).tolist() == [4] * 32


def test_leading_axes_are_kept():
    off = np.stack([LANES * 4, LANES * 128, LANES * 8, np.full(32, -1)]).reshape(2, 2, 32)
    assert wavefronts(off, 4).tolist() == [[1, 32], [2, 0]]
    assert conflict_degree(off, 4).tolist() == [[1, 32], [2, 0]]
    assert bank_matrix(off, 4).shape == (2, 2, 32)
    assert wavefronts(off[:0].reshape(0, 32), 4).shape == (0,)


def test_numpy_width_from_a_probe_row():
    assert cost(LANES * 8, np.uint8(8)) == (2, 1)


@pytest.mark.parametrize("width", [0, 2, 12, 32])
def test_bad_width(width):
    with pytest.raises(ValueError, match="width"):
        wavefronts(LANES * 4, width)


def test_bad_shape():
    with pytest.raises(ValueError, match="shape"):
        conflict_degree(np.zeros(16, int), 4)


offsets_strategy = st.lists(
    st.one_of(st.just(-1), st.integers(0, 64).map(lambda w: 4 * w), st.integers(0, 4095)),
    min_size=32,
    max_size=32,
)


broadcast_strategy = st.tuples(st.integers(0, 4095), st.lists(st.booleans(), min_size=32,
    max_size=32)).map(lambda t: [t[0] if on else -1 for on in t[1]])  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.one_of(offsets_strategy, broadcast_strategy), min_size=1, max_size=6),
    width=st.sampled_from([4, 8, 16]),
)
def test_matches_reference(rows, width):
    expected = [reference(r, width) for r in rows]
    off = np.array(rows)
    assert wavefronts(off, width).tolist() == [e[0] for e in expected]
    assert conflict_degree(off, width).tolist() == [e[1] for e in expected]
    assert bank_matrix(off, width).tolist() == [e[2] for e in expected]


def test_a_broadcast_of_a_few_lanes_costs_what_a_warp_wide_one_does():
    """Edge blocks leave lanes out; a broadcast LDS.128 still costs ncu's 2 wavefronts."""
    one_lane = np.full((1, 32), -1)
    one_lane[0, 31] = 0
    assert wavefronts(one_lane, 16).tolist() == [2] and wavefronts(one_lane, 8).tolist() == [1]


def test_lds128_lane_patterns_measured_on_the_h200_explain_kernel_08_at_wniter_4():
    """resources/bench/h200_ncu_lds_patterns.md is the command's output on the bundled ncu run,
    and its two kernel-08 patterns give the ncu figure of kernel 08's loads at WNITER=4."""
    from matviz.bench import ncu_lds_patterns as lp

    bench = Path(lp.__file__).resolve().parents[2] / "resources" / "bench"
    measured = lp.read_csv(bench / "h200_ncu_lds_patterns.csv")
    assert len(measured) == len(lp.PATTERNS) and set(measured) <= {2.0, 4.0}
    assert lp.table(measured) in (bench / "h200_ncu_lds_patterns.md").read_text()
    # per warp and k-step, 08 at WNITER=4 issues its As loads and its Bs loads in these counts
    config = get_kernel("warp_tiling").configure(
        {"BM": 128, "BN": 128, "BK": 16, "WM": 64, "WN": 64, "WNITER": 4, "TM": 8, "TN": 4,
         "pad": 4}, 1024, 1024, 1024)  # fmt: skip
    rec = access.access_records(config, 0, (0, 0), 0)
    summary = instructions.summarise(config, instructions.instructions(config, rec))
    count = {s.site: s.count for s in summary}
    bs, as_ = measured[0], measured[1]  # the first two patterns are 08's Bs and As loads
    per_inst = (count["ld_As"] * as_ + count["ld_Bs"] * bs) / (count["ld_As"] + count["ld_Bs"])
    tag = "| 08_warp_tiling_BM128_BN128_BK16_WM64_WN64_WNI4_TM8_TN4_P4 "
    lines = (bench / "h200_ncu_banks_1024.md").read_text().splitlines()
    row = next(line for line in lines if line.startswith(tag))
    assert per_inst == pytest.approx(float(row.split("|")[3]), abs=1e-3)  # ncu's LDS column
