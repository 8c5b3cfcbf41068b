"""Which blocks keep their per-tile phases and warp arrivals, under a trace budget.

Both backends use these rules, and the CUDA kernels apply the same one on the device:
a block keeps phases when ``linear_block_id % phase_every == 0``. The budget bounds the run:
a backend takes what it holds for every block (its record) off the budget before asking for a
stride, and passes what it holds per sampled block besides the marks as ``extra``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from matviz.errors import MatvizError

DEFAULT_BUDGET_BYTES = 256 * 2**20
# The budget bounds the whole run (peak ~ budget + 500 MB), and playing the trace back in the
# app takes about as much again: 4 GiB keeps both within a 16 GB machine.
MAX_BUDGET_BYTES = 4096 * 2**20
BYTES_PER_MARK = 8  # int64 ns in memory
WARP_SAMPLE_TARGET = 64  # blocks whose per-warp barrier arrivals are kept (level 3)
# How far each level's build may run from the plain kernel's time (%, either way) for its
# timeline to stand for it; the recorder keeps level 2 within this by stamping fewer blocks.
OVERHEAD_TARGET_PCT = {1: 1.0, 2: 3.0}
MAX_KEPT_STRIDE = 64  # the sparsest stamping the recorder falls back to on its own
# The fewest blocks the recorder thins level 2's stamping to (or one per SM, where a GPU has
# fewer SMs): half as many k-step timelines as warp samples. A block that stamps runs slower,
# so in a launch of several waves fewer of them bring it closer to level 0 (H100, 4096^3,
# kernel 10 BM128: +5.5% with 256 of 1,024 blocks stamping, +3.4% with 128, +1.0% with 64;
# kernel 10 BM256 S3, 512 blocks: +7.0% with 64, +4.7% with 32; kernel 09 BM256 BK64 S3:
# +4.7% with 64, +2.8% with 32, one run each).
LEAST_STAMPED_BLOCKS = WARP_SAMPLE_TARGET // 2


def least_stamped_blocks(sm_count: int) -> int:
    """The fewest blocks level 2's stamping is thinned to on a GPU of ``sm_count`` SMs."""
    return min(sm_count, LEAST_STAMPED_BLOCKS)


def phase_every(
    n_blocks: int,
    n_tiles: int,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    at_least: int = 1,
    marks: int = 3,
    extra: int = 0,
) -> int:
    """Smallest stride n >= at_least such that every n-th block's ``marks`` marks per k-step
    (and ``extra`` bytes besides, what a backend holds per sampled block) fit in the budget.

    ``at_least`` > 1 is the user trading detail for overhead: only sampled blocks stamp tiles.
    """
    if n_tiles == 0 or n_blocks == 0:
        return max(1, at_least)
    per_block = n_tiles * max(marks, 1) * BYTES_PER_MARK + extra
    fitting = max(1, budget_bytes // per_block)
    return max(1, at_least, math.ceil(n_blocks / fitting))


def warp_every(n_blocks: int, phase_stride: int = 1, target: int = WARP_SAMPLE_TARGET) -> int:
    """Stride that keeps about ``target`` blocks' warp arrivals, spread over the launch.

    A multiple of the phase stride, so every block with warp arrivals also has phases.
    """
    stride = max(1, n_blocks // target)
    return -(-stride // phase_stride) * phase_stride


def sampled_blocks(n_blocks: int, every: int) -> int:
    """How many blocks a stride of ``every`` keeps (block 0 always)."""
    return math.ceil(n_blocks / every)


def after_block_records(n_blocks: int, block_bytes: int, budget_bytes: int) -> int:
    """What the budget leaves for per-step marks once every block's record (``block_bytes``
    each) is held; a launch whose records alone exceed it is one MatvizError line, raised
    before anything is allocated."""
    held = n_blocks * block_bytes
    if held <= budget_bytes:
        return budget_bytes - held
    most = MAX_BUDGET_BYTES // 2**20
    fix = (
        f"raise the budget (--budget-mib, at most {most}) or launch fewer blocks"
        if held <= MAX_BUDGET_BYTES
        else f"even the largest budget ({most} MiB) is too small: launch fewer blocks"
    )
    raise MatvizError(
        f"{n_blocks} blocks need {-(-held // 2**20)} MiB of block records, more than the "
        f"trace budget of {-(-budget_bytes // 2**20)} MiB; {fix} (a larger tile or a smaller shape)"
    )


def stride_within(
    overheads_at: Callable[[int], Mapping[str, float]],
    first: int,
    n_blocks: int,
    least_blocks: int,
    target_pct: float,
) -> tuple[int, str, dict[int, dict[str, float]]]:
    """(stride, form, {stride: {form: overhead %}} of each tried): the first of ``first``,
    2·first, 4·first ... at which some form of the marks runs within ``target_pct`` of level 0
    (``overheads_at(stride)``: each form's, measured), and the form closest to level 0 there.
    A block that stamps its k-steps runs slower than one that does not, so stamping fewer of
    them brings the whole launch closer to level 0. Doubling stops before fewer than
    ``least_blocks`` blocks would keep phases or the stride would pass MAX_KEPT_STRIDE; if no
    stride tried is within the target, the closest stride and form are kept (the smallest
    stride of equals), and the trace says how far they are."""
    tried: dict[int, dict[str, float]] = {}
    stride = first
    while True:
        tried[stride] = dict(overheads_at(stride))
        best = closest(tried[stride])
        if abs(tried[stride][best]) <= target_pct:
            return stride, best, tried
        wider = stride * 2
        if wider > max(MAX_KEPT_STRIDE, first) or sampled_blocks(n_blocks, wider) < least_blocks:
            break
        stride = wider
    stride = min(tried, key=lambda s: (abs(tried[s][closest(tried[s])]), s))
    return stride, closest(tried[stride]), tried


def closest(overheads: Mapping[str, float]) -> str:
    """The form whose overhead is nearest zero: closer, not faster (the first of equals)."""
    return min(overheads, key=lambda form: abs(overheads[form]))
