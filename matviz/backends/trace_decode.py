"""Turn the raw device buffers that ``kernels/trace.cuh`` writes into trace arrays.

Pure numpy, so it is tested without a GPU. Buffer layouts are documented in trace.cuh.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from matviz.core.config import KernelConfig
from matviz.core.trace import PROBE_DTYPE, make_blocks

MIN_ANCHOR_SPAN_NS = 2_000  # shorter blocks give a too-coarse clock-rate estimate (32 ns ticks)
UNWRITTEN = 0xFFFFFFFF


@dataclass(frozen=True)
class BlockTimes:
    blocks: np.ndarray  # BLOCK_DTYPE, ns from kernel start
    t0_globaltimer: int  # raw %globaltimer of the earliest block start
    clk_start: np.ndarray  # uint64 clock64 at each block's start
    ns_per_cycle: float


def decode_blocks(raw: np.ndarray, grid: tuple[int, int], nominal_mhz: float) -> BlockTimes:
    """raw: uint64 [blocks, 6] = gt_start, gt_end, clk_start, clk_end (warp 0), smid,
    gt_end of warp 0 (the end of the clock anchor)."""
    raw = np.asarray(raw, np.uint64)
    gx, gy = grid
    if raw.shape != (gx * gy, 6):
        raise ValueError(f"block buffer has shape {raw.shape}, expected {(gx * gy, 6)}")
    gt_start, gt_end = raw[:, 0].astype(np.int64), raw[:, 1].astype(np.int64)
    if np.any(gt_start == 0):
        missing = int(np.count_nonzero(gt_start == 0))
        raise ValueError(f"{missing} blocks left no record: the kernel did not run every block")
    t0 = int(gt_start.min())
    blocks = make_blocks(gx, gy)
    blocks["start"] = gt_start - t0
    blocks["end"] = gt_end - t0
    blocks["smid"] = raw[:, 4].astype(np.uint16)
    return BlockTimes(blocks, t0, raw[:, 2].copy(), clock_rate(raw, nominal_mhz))


def clock_rate(raw: np.ndarray, nominal_mhz: float) -> float:
    """ns per SM clock cycle, from blocks long enough to anchor clock64 against %globaltimer."""
    span_ns = raw[:, 5].astype(np.float64) - raw[:, 0].astype(np.float64)
    span_cycles = raw[:, 3].astype(np.float64) - raw[:, 2].astype(np.float64)
    usable = (span_ns >= MIN_ANCHOR_SPAN_NS) & (span_cycles > 0)
    if not np.any(usable):
        return 1e3 / nominal_mhz
    return float(np.median(span_ns[usable] / span_cycles[usable]))


def clock_marks_to_ns(marks: np.ndarray, rows: np.ndarray, times: BlockTimes) -> np.ndarray:
    """Raw 32-bit clock64 low words -> ns from kernel start, clamped inside each block.

    ``marks`` has any shape whose first axis indexes ``rows`` (block ids).
    """
    marks = np.asarray(marks, np.uint32)
    clk0 = (times.clk_start[rows] & np.uint64(UNWRITTEN)).astype(np.uint32)
    extra = (1,) * (marks.ndim - 1)
    cycles = marks - clk0.reshape(-1, *extra)  # modulo 2**32 by uint32
    start = times.blocks["start"][rows].reshape(-1, *extra)
    end = times.blocks["end"][rows].reshape(-1, *extra)
    # in place: a 4096^3 recording holds 25 million marks, and each temporary costs 200 MB
    ns = np.multiply(cycles, times.ns_per_cycle, dtype=np.float64)
    np.rint(ns, out=ns)
    out = ns.astype(np.int64)
    del ns
    out += start
    return np.clip(out, start, end, out=out)


CHANNEL_WORDS = 2  # per channel and step: first mark's clock, (mark 1 | mark 2 << 16) - first
SPAN_SATURATED = 0xFFFF  # the kernel clamps a mark's offset of 65535 cycles or more to this
MAX_CHANNEL_MARKS = 3  # the first mark and two 16-bit offsets


def step_words(config: KernelConfig) -> int:
    """uint32 words one block's row holds per k-step: two per channel."""
    return max(len(config.channel_marks), 1) * CHANNEL_WORDS


def _channels(config: KernelConfig) -> tuple[tuple[int, ...], ...]:
    channels = config.channel_marks
    if not channels:
        raise ValueError(f"{config.kernel.name} has no k-step marks to decode")
    for marks in channels:
        if not 1 <= len(marks) <= MAX_CHANNEL_MARKS:
            raise ValueError(f"a channel holds 1 to {MAX_CHANNEL_MARKS} marks, not {len(marks)}")
    return channels


def decode_marks(
    raw: np.ndarray, every: int, n_steps: int, config: KernelConfig, times: BlockTimes
) -> tuple[np.ndarray, np.ndarray]:
    """raw: uint32 [rows, n_steps, channels, 2] -> (phase_blocks, marks int64 ns).

    ``marks[i, t, m]`` is mark ``m`` (the order of ``config.marks``: channels concatenated) of
    k-step ``t`` of block ``phase_blocks[i]``, in ns from kernel start.
    """
    channels = _channels(config)
    n_blocks = len(times.blocks)
    phase_blocks = np.arange(0, n_blocks, every, dtype=np.int64)
    shape = (len(phase_blocks), n_steps, len(channels), CHANNEL_WORDS)
    raw = np.asarray(raw, np.uint32).reshape(shape)
    clocks = np.zeros((*shape[:2], len(config.marks)), np.uint32)
    for c, marks in enumerate(channels):
        first, spans = raw[:, :, c, 0], raw[:, :, c, 1]
        offsets = (np.zeros_like(spans), spans & SPAN_SATURATED, spans >> 16)
        for index, offset in zip(marks, offsets, strict=False):
            clocks[..., index] = first + offset  # modulo 2**32, as the clock low word wraps
    return phase_blocks, clock_marks_to_ns(clocks, phase_blocks, times)


def saturated_spans(raw: np.ndarray, config: KernelConfig) -> int:
    """How many mark offsets hit the 16-bit ceiling (each is then a lower bound)."""
    channels = _channels(config)
    words = np.asarray(raw, np.uint32).reshape(-1, len(channels), CHANNEL_WORDS)
    count = 0
    for c, marks in enumerate(channels):
        spans = words[:, c, 1]
        if len(marks) > 1:
            count += int(np.count_nonzero((spans & SPAN_SATURATED) == SPAN_SATURATED))
        if len(marks) > 2:
            count += int(np.count_nonzero((spans >> 16) == SPAN_SATURATED))
    return count


def decode_waits(
    raw: np.ndarray,
    every: int,
    n_tiles: int,
    n_warps: int,
    n_barriers: int,
    ns_per_cycle: float,
    n_blocks: int,
) -> tuple[np.ndarray, np.ndarray]:
    """raw: uint32 cycles [rows, n_tiles, warps, barriers] -> (warp_blocks, waits in ns)."""
    warp_blocks = np.arange(0, n_blocks, every, dtype=np.int64)
    raw = np.asarray(raw, np.uint32).reshape(len(warp_blocks), n_tiles, n_warps, n_barriers)
    return warp_blocks, np.rint(raw.astype(np.float64) * ns_per_cycle).astype(np.int64)


def decode_probe(raw: np.ndarray, config: KernelConfig) -> tuple[np.ndarray, int]:
    """raw: uint32 [1 + slots, 32] -> (probe records in program order, shared base address).

    Row 1 + slot holds the offsets of probe slot ``slot`` (MV_SITE_<site> + k in the .cu, the
    numbering of ``config.sites``). Unwritten lanes (the buffer is filled with 0xFFFFFFFF)
    become -1, as in the access model.
    """
    raw = np.asarray(raw, np.uint32)
    if raw.shape != (1 + config.probe_slots, 32):
        expected = (1 + config.probe_slots, 32)
        raise ValueError(f"probe buffer has shape {raw.shape}, expected {expected}")
    program = config.program
    records = np.zeros(len(program), PROBE_DTYPE)
    rows = [1 + config.site(site).slot + k for site, k in program]
    records["site"] = [site for site, _ in program]
    records["k"] = [k for _, k in program]
    records["kind"] = [config.site(site).site.kind for site, _ in program]
    records["width"] = [config.site(site).site.width for site, _ in program]
    records["offsets"] = raw[rows].view(np.int32)
    return records, int(raw[0, 0])


def probe_values(raw: np.ndarray, config: KernelConfig) -> np.ndarray:
    """raw probe buffer -> uint32 [k-steps, slots, 32]: the float bits each lane of the probed
    warp read at each slot in each of the first ``config.value_tiles`` k-steps (0xFFFFFFFF:
    not read, or the kernel does not probe values). Empty when the buffer has no such rows."""
    slots, steps = config.probe_slots, config.value_tiles
    rows = np.asarray(raw, np.uint32)[1 + slots :]
    if not slots or len(rows) < slots * steps or not steps:
        return np.zeros((0, slots, 32), np.uint32)
    values = rows[: slots * steps].reshape(steps, slots, 32)
    return values if (values != 0xFFFFFFFF).any() else np.zeros((0, slots, 32), np.uint32)
