"""The stride of blocks that stamp their k-steps, kept within an overhead target."""

from __future__ import annotations

import pytest

from matviz.core import sampling
from matviz.core.sampling import MAX_KEPT_STRIDE, stride_within


def timed(table: dict[int, float]):
    """An overhead_at that answers from ``table`` and records what it was asked."""
    asked: list[int] = []

    def overhead_at(stride: int) -> float:
        asked.append(stride)
        return table[stride]

    return overhead_at, asked


def test_the_first_stride_within_the_target_is_kept_and_nothing_past_it_is_timed():
    overhead_at, asked = timed({1: 12.0, 2: 6.1, 4: 2.9, 8: 1.2})
    assert stride_within(overhead_at, 1, 4096, 132, 3.0) == (4, {1: 12.0, 2: 6.1, 4: 2.9})
    assert asked == [1, 2, 4]


def test_a_build_that_runs_faster_than_level_0_is_as_far_from_it():
    """Closer, not faster: -3.9% is outside a 3% target, as +3.9% would be."""
    overhead_at, _ = timed({1: -3.9, 2: 0.6})
    assert stride_within(overhead_at, 1, 4096, 132, 3.0) == (2, {1: -3.9, 2: 0.6})


def test_the_budgets_stride_is_where_doubling_starts():
    overhead_at, asked = timed({3: 5.0, 6: 2.0})
    assert stride_within(overhead_at, 3, 4096, 132, 3.0)[0] == 6
    assert asked == [3, 6]


def test_doubling_stops_before_fewer_blocks_than_sms_would_stamp():
    """4096 blocks, 132 SMs: 1 in 16 leaves 256 stamping, 1 in 32 only 128. Nothing within:
    the closest is kept, the smallest stride of equals."""
    overhead_at, asked = timed({1: 9.0, 2: 5.0, 4: 4.0, 8: 4.0, 16: -4.0})
    assert stride_within(overhead_at, 1, 4096, 132, 3.0)[0] == 4
    assert asked == [1, 2, 4, 8, 16]
    assert sampling.sampled_blocks(4096, 32) < 132 <= sampling.sampled_blocks(4096, 16)


def test_a_launch_of_fewer_blocks_than_sms_times_only_its_first_stride():
    """One wave: stamping fewer blocks cannot shorten the slowest one."""
    overhead_at, asked = timed({1: 8.0})
    assert stride_within(overhead_at, 1, 100, 132, 3.0) == (1, {1: 8.0})
    assert asked == [1]


def test_doubling_stops_at_the_sparsest_stride():
    overhead_at, asked = timed({2**i: 10.0 - i for i in range(10)})
    stride, tried = stride_within(overhead_at, 1, 10**7, 1, 0.5)
    assert asked[-1] == MAX_KEPT_STRIDE and stride == MAX_KEPT_STRIDE
    assert tried == {s: 10.0 - i for i, s in enumerate(asked)}


@pytest.mark.parametrize("first", [1, 5, 64, 100])
def test_a_first_stride_within_the_target_is_all_that_is_timed(first):
    overhead_at, asked = timed({first: 0.0})
    assert stride_within(overhead_at, first, 10**6, 132, 3.0) == (first, {first: 0.0})
    assert asked == [first]
