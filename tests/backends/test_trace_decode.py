"""The device-buffer decoder, fed buffers laid out as kernels/trace.cuh writes them."""

import numpy as np
import pytest

from matviz.backends import trace_decode
from matviz.core import access
from matviz.core.registry import configure

NS_PER_CYCLE = 1e3 / 1980  # a 1980 MHz SM clock


def _raw_blocks(starts_ns, durations_ns, clk_starts, smids, gt0=5_000_000_000):
    raw = np.zeros((len(starts_ns), 6), np.uint64)
    raw[:, 0] = gt0 + np.asarray(starts_ns)
    raw[:, 1] = raw[:, 0] + np.asarray(durations_ns)
    raw[:, 2] = clk_starts
    raw[:, 3] = raw[:, 2] + np.rint(np.asarray(durations_ns) / NS_PER_CYCLE).astype(np.uint64)
    raw[:, 4] = smids
    raw[:, 5] = raw[:, 1]  # warp 0 ended last
    return raw


def test_blocks_are_placed_from_the_earliest_start():
    raw = _raw_blocks([300, 0, 96, 4000], [50_000] * 4, [10, 2**40, 7, 3], [5, 0, 131, 2])
    times = trace_decode.decode_blocks(raw, (2, 2), nominal_mhz=1980)
    np.testing.assert_array_equal(times.blocks["start"], [300, 0, 96, 4000])
    np.testing.assert_array_equal(times.blocks["end"] - times.blocks["start"], [50_000] * 4)
    np.testing.assert_array_equal(times.blocks["smid"], [5, 0, 131, 2])
    np.testing.assert_array_equal(times.blocks["bx"], [0, 1, 0, 1])
    assert times.ns_per_cycle == pytest.approx(NS_PER_CYCLE, rel=1e-4)


def test_a_block_that_never_ran_is_an_error():
    raw = _raw_blocks([0, 10], [5000, 5000], [1, 1], [0, 1])
    raw[1, 0] = 0
    with pytest.raises(ValueError, match="1 blocks left no record"):
        trace_decode.decode_blocks(raw, (2, 1), nominal_mhz=1980)


def test_short_blocks_fall_back_to_the_nominal_clock():
    raw = _raw_blocks([0, 10], [500, 600], [1, 1], [0, 1])
    times = trace_decode.decode_blocks(raw, (2, 1), nominal_mhz=1000)
    assert times.ns_per_cycle == 1.0


def test_phase_marks_convert_across_a_32_bit_clock_wrap():
    clk0 = np.uint64(2**32 - 1000)  # the low word wraps during the block
    raw = _raw_blocks([0, 0, 0], [20_000] * 3, [clk0, 5, 5], [0, 1, 2])
    times = trace_decode.decode_blocks(raw, (3, 1), nominal_mhz=1980)
    config = configure("tiled", {"tile": 8}, 24, 8, 16)  # one channel: issue, loaded, computed
    cycles = np.array([[[0, 990, 3000], [3000, 5000, 9000]]], np.int64)  # 1 row, 2 tiles
    raw = np.zeros((1, 2, 1, 2), np.uint32)  # [rows][steps][channels][2]
    raw[..., 0, 0] = (int(clk0) + cycles[..., 0]) % 2**32
    raw[..., 0, 1] = (cycles[..., 1] - cycles[..., 0]) | ((cycles[..., 2] - cycles[..., 0]) << 16)
    rows, marks = trace_decode.decode_marks(raw.ravel(), 3, 2, config, times)
    np.testing.assert_array_equal(rows, [0])
    assert marks.dtype == np.int64 and marks.shape == (1, 2, 3)
    np.testing.assert_array_equal(marks, np.rint(cycles * times.ns_per_cycle).astype(np.int64))
    assert config.marks == ("issue", "loaded", "computed")


def test_marks_are_clamped_inside_their_block():
    raw = _raw_blocks([100], [5_000], [0], [0])
    times = trace_decode.decode_blocks(raw, (1, 1), nominal_mhz=1980)
    config = configure("tiled", {"tile": 8}, 8, 8, 8)
    raw = np.array([[[0, 1 | (0xFFFF << 16)]]], np.uint32)  # computed offset saturated
    _, marks = trace_decode.decode_marks(raw, 1, 1, config, times)
    assert marks[0, 0, 0] == 0 and marks[0, 0, 2] == 5_000
    assert trace_decode.saturated_spans(raw, config) == 1
    assert trace_decode.step_words(config) == 2


def test_probe_slots_are_site_major_and_decode_into_program_order():
    # The .cu writes slot MV_SITE_<site> + k; the trace lists accesses in program order.
    config = configure("tiled_transposed", {"tile": 8, "pad": 1}, 40, 40, 40)
    model = access.access_records(config, 1)
    raw = np.full((1 + config.probe_slots, 32), 0xFFFFFFFF, np.uint32)
    raw[0, 0] = 1024
    for site, k, offsets in zip(model["site"], model["k"], model["offsets"], strict=True):
        raw[1 + config.site(site).slot + k] = offsets.astype(np.int64) % 2**32
    records, base = trace_decode.decode_probe(raw, config)
    assert base == 1024
    np.testing.assert_array_equal(records, model)
    # st_As, st_Bs, then ld_As k, ld_Bs k interleaved, while ld_Bs's slots follow all of ld_As's
    assert list(records["site"][:4]) == ["st_As", "st_Bs", "ld_As", "ld_Bs"]
    assert config.site("ld_Bs").slot == 2 + 8


def test_a_probe_buffer_of_the_wrong_size_is_refused():
    config = configure("tiled", {"tile": 8}, 40, 40, 40)
    with pytest.raises(ValueError, match="probe buffer has shape"):
        trace_decode.decode_probe(np.zeros((3, 32), np.uint32), config)


def test_barrier_waits_are_cycles_times_the_clock_period():
    raw = np.array([[[[100, 0], [0, 1980]]]], np.uint32)  # 1 row, 1 tile, 2 warps
    blocks, wait = trace_decode.decode_waits(raw, 4, 1, 2, 2, NS_PER_CYCLE, n_blocks=3)
    np.testing.assert_array_equal(blocks, [0])
    np.testing.assert_array_equal(wait, [[[[51, 0], [0, 1000]]]])
