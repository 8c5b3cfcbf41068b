"""k-steps with several channels of marks (issue 9): the test-only double-buffered kernel
(tests/kernels/05_double_buffered), its defines and build, and the decoding of buffers laid
out as trace.cuh's channel macros write them: u32 [rows][steps][MV_CHANNELS][2]."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from matviz.backends import trace_decode
from matviz.core.kernel import LEVELS, KStep
from matviz.core.registry import _load, configure, kernels
from matviz.errors import MatvizError
from matviz.toolchain.nvcc import compile_report, nvcc_path

PROOF = Path(__file__).resolve().parents[1] / "kernels" / "05_double_buffered.py"
NS_PER_CYCLE = 1e3 / 1980  # a 1980 MHz SM clock
SHAPE = (1000, 777, 333)


@pytest.fixture(scope="module")
def proof():
    return _load(PROOF)


def _times(n_blocks: int, clk_starts, durations_ns: int = 400_000):
    """Block times from a raw block buffer: block i starts at 1000 * i ns, clock0 given."""
    raw = np.zeros((n_blocks, 6), np.uint64)
    raw[:, 0] = 7_000_000_000 + 1000 * np.arange(n_blocks, dtype=np.uint64)
    raw[:, 1] = raw[:, 0] + np.uint64(durations_ns)
    raw[:, 2] = clk_starts
    raw[:, 3] = raw[:, 2] + np.uint64(round(durations_ns / NS_PER_CYCLE))
    raw[:, 4] = np.arange(n_blocks)
    raw[:, 5] = raw[:, 1]
    return trace_decode.decode_blocks(raw, (n_blocks, 1), nominal_mhz=1980)


def _expected_ns(times, rows, cycles) -> np.ndarray:
    start = times.blocks["start"][rows][:, None, None]
    return start + np.rint(cycles * times.ns_per_cycle).astype(np.int64)


# -- the description and its defines -------------------------------------------------------------


def test_proof_kernel_is_test_only_and_described_with_two_channels(proof) -> None:
    assert (proof.number, proof.name) == (5, "double_buffered")
    assert proof.entry_point == "mv_double_buffered"
    assert proof.name not in kernels()  # not in the catalog: a test kernel
    config = proof.configure({"tile": 32, "pad": 1}, *SHAPE)
    assert config.marks == ("copy_issue", "copy_stored", "compute_begin", "compute_end")
    assert config.channel_marks == ((0, 1), (2, 3))
    assert [(ph.name, ph.begin, ph.end, ph.channel, ph.barrier) for ph in config.phases] == [
        ("copy", 0, 1, 0, 0),
        ("compute", 2, 3, 1, -1),
    ]
    assert config.describe()["kstep"]["in_flight"] == 2
    assert config.smem_bytes == 2 * 2 * 32 * 33 * 4  # two buffers each of As and Bs


def test_defines_carry_the_channel_count(proof) -> None:
    for level in LEVELS:
        defines = proof.configure({"tile": 16}, *SHAPE).defines(level)
        assert "-DMV_CHANNELS=2" in defines and "-DMV_BARRIERS=1" in defines
    # the seed kernels keep one channel (the layout they always had); naive has no k-steps
    for name in ("tiled", "tiled_transposed", "register_tiling_1d"):
        assert "-DMV_CHANNELS=1" in configure(name, {}, *SHAPE).defines(2)
    assert not any("MV_CHANNELS" in d for d in configure("naive", {}, *SHAPE).defines(2))


def test_defines_carry_each_channels_marks_and_the_form_asked_for(proof) -> None:
    """trace.cuh's held form keeps a step's middle mark in shared memory: it needs to know
    which channels have three marks, and it is offered only where one has."""
    two = proof.configure({"tile": 16}, *SHAPE)
    assert {"-DMV_MARKS_0=2", "-DMV_MARKS_1=2"} <= set(two.defines(2))
    assert two.stamp_forms == ("lanes", "store")  # no channel of three marks
    seed = configure("register_tiling_1d", {}, *SHAPE)
    assert "-DMV_MARKS_0=3" in seed.defines(2) and seed.stamp_forms == ("lanes", "store", "held")
    assert "-DMV_STAMP_HELD=1" in seed.defines(2, "held")
    assert "-DMV_STAMP_STORE=1" in seed.defines(2, "store")
    assert not any("MV_STAMP_" in d for d in seed.defines(2))
    with pytest.raises(MatvizError, match="stamp form must be one of lanes, store, held"):
        seed.defines(2, "bogus")


@pytest.mark.parametrize(
    ("name", "params", "held"),
    [("tiled", {}, True), ("warp_tiling", {}, True),
     ("wmma", {"STAGES": 1}, True),  # the seed channel, tiles in static shared memory
     ("wmma", {"STAGES": 2}, False),  # a copy and a compute channel of two marks each
     ("async_pipeline", {}, False),
     ("wgmma_tma", {}, False)],  # a consumer channel of three marks, tiles sized at launch
)  # fmt: skip
def test_the_held_form_is_offered_where_a_channel_has_three_marks_in_static_shared_memory(
    name, params, held
) -> None:
    """Its static word would move a launch-sized area of 1024-byte aligned tiles by 1 KiB."""
    config = configure(name, params, 1024, 1024, 1024)
    assert ("held" in config.stamp_forms) == held


@pytest.mark.nvcc
@pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("level", LEVELS)
def test_proof_kernel_compiles_at_every_level(proof, level: int) -> None:
    for params in proof.configurations():
        config = proof.configure(params, *SHAPE)
        report = compile_report(config, level)
        assert 0 < report.registers <= 255, params
        assert report.smem_bytes == config.smem_bytes, params  # stamps stay in registers
        assert report.barriers == 1, params
        if level <= 2:
            assert report.spills == 0 and report.stack_bytes == 0, (params, report.ptxas_log)


# -- decoding ----------------------------------------------------------------------------------


def _two_channel_buffer(cycles: np.ndarray) -> np.ndarray:
    """cycles [rows, steps, 4] from each block's clock0 (copy_issue, copy_stored,
    compute_begin, compute_end) -> the words the macros write: per channel its first mark and
    the offset of its second mark in the low 16 bits."""
    rows, steps, _ = cycles.shape
    raw = np.zeros((rows, steps, 2, 2), np.uint32)
    for c, (first, second) in enumerate(((0, 1), (2, 3))):
        raw[:, :, c, 0] = cycles[..., first] % 2**32
        raw[:, :, c, 1] = cycles[..., second] - cycles[..., first]
    return raw


def test_two_channels_decode_every_mark_at_its_index_and_time(proof) -> None:
    every, n_steps = 2, 5
    clk0 = np.array([2**32 - 700, 10, 2**31, 99, 5], np.uint64)  # block 0's clock wraps
    times = _times(len(clk0), clk0)
    config = proof.configure({"tile": 16}, 80, 80, 16 * n_steps)
    rows = np.arange(0, len(clk0), every)
    # step t: copy of t+1 is issued before compute t begins and stored after it ends
    t = np.arange(n_steps)
    base = 1000 + 3000 * t
    cycles = np.stack([base - 400, base + 2500, base, base + 1800], axis=-1)  # [steps, 4]
    cycles = cycles[None] + 37 * np.arange(len(rows))[:, None, None]  # a bit apart per row
    raw = _two_channel_buffer(cycles + clk0[rows].astype(np.int64)[:, None, None])
    blocks, marks = trace_decode.decode_marks(raw.ravel(), every, n_steps, config, times)
    np.testing.assert_array_equal(blocks, rows)
    assert marks.dtype == np.int64 and marks.shape == (len(rows), n_steps, 4)
    np.testing.assert_array_equal(marks, _expected_ns(times, rows, cycles))
    # named access follows config.marks
    i = config.mark_index("compute_end")
    np.testing.assert_array_equal(marks[..., i], _expected_ns(times, rows, cycles)[..., 3])
    assert trace_decode.step_words(config) == 4
    assert trace_decode.saturated_spans(raw, config) == 0


def test_unused_high_half_of_a_two_mark_channel_is_ignored_and_not_counted(proof) -> None:
    # A 3-mark channel beside a 2-mark one: only the 3-mark channel reads its high half.
    kstep = KStep(
        depth=lambda p: p.tile,
        channels=(("a", "b", "c"), ("d", "e")),
        phases=proof.kstep.phases[:0],
        chained=False,
    )
    config = dataclasses.replace(proof, kstep=kstep).configure({"tile": 8}, 8, 8, 8)
    times = _times(1, [100])
    raw = np.zeros((1, 1, 2, 2), np.uint32)
    raw[0, 0, 0] = [100 + 10, 20 | (30 << 16)]
    raw[0, 0, 1] = [100 + 40, 0xFFFF | (0xFFFF << 16)]  # e saturated; the high half is noise
    _, marks = trace_decode.decode_marks(raw, 1, 1, config, times)
    cycles = np.array([[[10, 30, 40, 40, 40 + 0xFFFF]]])
    np.testing.assert_array_equal(marks, _expected_ns(times, [0], cycles))
    assert trace_decode.saturated_spans(raw, config) == 1


def _old_decode_phases(raw, every, n_tiles, times):
    """decode_phases as it was before channels: uint32 [rows, tiles, 2] -> 3 arrays."""
    phase_blocks = np.arange(0, len(times.blocks), every, dtype=np.int64)
    raw = np.asarray(raw, np.uint32).reshape(len(phase_blocks), n_tiles, 2)
    issue = raw[..., 0]
    clocks = np.stack([issue, issue + (raw[..., 1] & 0xFFFF), issue + (raw[..., 1] >> 16)], -1)
    ns = trace_decode.clock_marks_to_ns(clocks, phase_blocks, times)
    return phase_blocks, ns[..., 0], ns[..., 1], ns[..., 2]


@pytest.mark.parametrize("name", ["tiled", "tiled_transposed", "register_tiling_1d"])
def test_seed_kernels_keep_the_one_channel_layout(name: str) -> None:
    config = configure(name, {}, 256, 256, 4096)
    assert config.channel_marks == ((0, 1, 2),)
    assert trace_decode.step_words(config) == 2  # as before: issue, packed offsets
    rng = np.random.default_rng(1)
    clk0 = rng.integers(0, 2**32, 7, dtype=np.uint64)
    times = _times(7, clk0, durations_ns=10_000_000)
    every, n = 3, config.n_steps
    rows = np.arange(0, 7, every)
    raw = np.zeros((len(rows), n, 2), np.uint32)
    raw[..., 0] = (clk0[rows, None] + rng.integers(0, 10_000_000, (len(rows), n))) % 2**32
    raw[..., 1] = rng.integers(0, 2**32, (len(rows), n), dtype=np.uint64)  # any offsets
    blocks, marks = trace_decode.decode_marks(raw.ravel(), every, n, config, times)
    old_blocks, *old = _old_decode_phases(raw.ravel(), every, n, times)
    np.testing.assert_array_equal(blocks, old_blocks)
    np.testing.assert_array_equal(marks, np.stack(old, axis=-1))
    old_saturated = int(np.count_nonzero((raw[..., 1] & 0xFFFF) == 0xFFFF)) + int(
        np.count_nonzero((raw[..., 1] >> 16) == 0xFFFF)
    )
    assert trace_decode.saturated_spans(raw, config) == old_saturated


# -- what the macros store where ---------------------------------------------------------------


class _Warp:
    """trace.cuh's channel macros for one channel, lane by lane (32 lanes of one warp)."""

    def __init__(self, buffer: np.ndarray, channel: int, n_steps: int) -> None:
        self.buf, self.c, self.n = buffer, channel, n_steps
        self.first = np.zeros(32, np.uint32)
        self.spans = np.zeros(32, np.uint32)
        self.lane = np.arange(32)

    def _store(self, steps: np.ndarray, lanes: np.ndarray) -> None:
        self.buf[steps, self.c, 0] = self.first[lanes]
        self.buf[steps, self.c, 1] = self.spans[lanes]

    def put(self, t: int, j: int, span: int) -> None:  # MV_PUT_j into lane t % 32
        span = min(span, 0xFFFF)
        self.spans[t & 31] = span if j == 1 else self.spans[t & 31] | (span << 16)

    def begin(self, t: int, now: int, chained_j: int = 0) -> None:  # MV_STEP_BEGIN[_CHAINED]
        if t > 0 and chained_j:
            self.put(t - 1, chained_j, now - int(self.first[(t - 1) & 31]))
        if t > 0 and t & 31 == 0:
            self._store(t - 32 + self.lane, self.lane)
        self.first[t & 31] = now

    def mark(self, t: int, j: int, now: int) -> None:  # MV_STEP_MARK
        self.put(t, j, now - int(self.first[t & 31]))

    def flush(self, now: int = 0, chained_j: int = 0) -> None:  # MV_CHANNEL_FLUSH[_CHAINED]
        if self.n <= 0:
            return
        last = (self.n - 1) & 31
        if chained_j:
            self.put(self.n - 1, chained_j, now - int(self.first[last]))
        lanes = self.lane[self.lane <= last]
        self._store(((self.n - 1) & ~31) + lanes, lanes)


@pytest.mark.parametrize("n_steps", [1, 2, 31, 32, 33, 64, 65, 100])
def test_the_macros_store_every_step_once_in_its_channel_slot(proof, n_steps: int) -> None:
    # The double-buffered kernel's order: copy 0 in the prologue; in step t the copy of t + 1
    # begins, compute t runs, then the copy of t + 1 is stored.
    sentinel = 0xDEADBEEF
    buf = np.full((n_steps, 2, 2), sentinel, np.uint32)
    copy, compute = _Warp(buf, 0, n_steps), _Warp(buf, 1, n_steps)
    clock = iter(range(1000, 10**9, 7))
    truth = np.zeros((n_steps, 4), np.int64)

    def stamp(index: int, t: int) -> int:
        truth[t, index] = now = next(clock)
        return now

    copy.begin(0, stamp(0, 0))
    copy.mark(0, 1, stamp(1, 0))
    for t in range(n_steps):
        if t + 1 < n_steps:
            copy.begin(t + 1, stamp(0, t + 1))
        compute.begin(t, stamp(2, t))
        compute.mark(t, 1, stamp(3, t))
        if t + 1 < n_steps:
            copy.mark(t + 1, 1, stamp(1, t + 1))
    copy.flush()
    compute.flush()
    assert not np.any(buf == sentinel)
    times = _times(1, [0], durations_ns=10**9)
    config = proof.configure({"tile": 8}, 8, 8, 8 * n_steps)
    _, marks = trace_decode.decode_marks(buf, 1, n_steps, config, times)
    np.testing.assert_array_equal(marks[0], _expected_ns(times, [0], truth[None])[0])


@pytest.mark.parametrize("n_steps", [1, 32, 33, 70])
def test_the_chained_aliases_store_what_decode_phases_read(n_steps: int) -> None:
    # MV_MARK_ISSUED / MV_MARK_LOADED / MV_MARK_LAST_COMPUTED: channel 0, chained at mark 2.
    buf = np.zeros((n_steps, 1, 2), np.uint32)
    warp = _Warp(buf, 0, n_steps)
    truth = np.zeros((n_steps, 3), np.int64)
    now = 500
    for t in range(n_steps):
        warp.begin(t, now, chained_j=2)
        truth[t, 0] = now
        if t:
            truth[t - 1, 2] = now
        now += 40 + t
        warp.mark(t, 1, now)
        truth[t, 1] = now
        now += 90
    warp.flush(now, chained_j=2)
    truth[-1, 2] = now
    config = configure("tiled", {"tile": 8}, 8, 8, 8 * n_steps)
    times = _times(1, [0], durations_ns=10**8)
    _, marks = trace_decode.decode_marks(buf, 1, n_steps, config, times)
    np.testing.assert_array_equal(marks[0], _expected_ns(times, [0], truth[None])[0])
