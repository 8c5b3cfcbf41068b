"""07_async_pipeline: kernel 06's micro-tiles fed by cp.async, STAGES k-steps in flight.

Its tiles, threads and accesses are kernel 06's; shared memory stacks STAGES slots of each
array, and step t uses slot t % STAGES.
"""

import dataclasses

from matviz.core.kernel import STATIC_SMEM_LIMIT, Constraint, Kernel, KStep, Param, Phase
from matviz.core.registry import sibling

vectorized = sibling("06_vectorized")
one_d = sibling("04_register_tiling_1d")
FLOAT = 4


def smem_bytes(p):
    return p.STAGES * p.BK * (p.BM + p.pad + p.BN) * FLOAT


def in_slot(site, rows=lambda p: p.BK, **changes):
    """``site`` moved to k-step t's slot of the stacked arrays, which starts at row
    (t % STAGES) x ``rows(p)`` (kernel 06's arrays: BK rows). A swizzle keys on the row inside
    a slot, and a slot starts on a multiple of the swizzle's period, so the stacked rows keep
    their masks."""

    def at(th, p):
        row, *rest = site.at(th, p)
        return (th.t % p.STAGES * rows(p) + row, *rest)

    return dataclasses.replace(site, at=at, **changes)


def param(name, **changes):
    return dataclasses.replace(vectorized.param(name), **changes)


KERNEL = Kernel(
    title="Pipelined: cp.async copies STAGES k-steps ahead",
    concept="the tiles of the next k-steps are copied into shared memory by cp.async, which "
    "needs no registers and no waiting, while the block computes on the current one: "
    "STAGES slots, one barrier per k-step, and the copy's latency hidden behind the math",
    sections="lesson 8 §24-25",
    # Default: the fastest configuration at level 0 on the H200 (matviz.bench.kernels, 4096^3:
    # 39.2 TFLOP/s, 80.6% of cuBLAS in the same run; 3 stages 39.2 as well). It is not faster
    # than kernel 06 (41.0): with 2 blocks of 8 warps per SM the copies were already hidden,
    # and the element-wise copies of A cost issue slots that 06's float4 loads do not. With
    # the B loads free of conflicts it is (H100, 4096^3, level 0, one process): 39.3 TFLOP/s
    # here, 43.7 split, 43.6 quads, 44.4 both; S2 P4 X0 with both 44.7, 86.9% of cuBLAS.
    # With a copy of the body for whole tiles (no bounds tests in the k loop), S2 P0 X1 split
    # quads ran 44.8-45.2 against 44.0-44.2 TFLOP/s beside the old build (H100, one process).
    params=(
        param("BM"),
        param("BN"),
        param("BK"),
        param("TM"),
        param("TN", values=(8,), default=8),
        Param("STAGES", (2, 3, 4), 2, "STAGES", "S",
              "k-steps in flight: slots of shared memory the copies fill ahead"),
        param("pad", default=0),
        param("swizzle", default=1),
        param("split"),
        param("quads"),
    ),  # fmt: skip
    constraints=vectorized.constraints
    + (
        Constraint(lambda p: smem_bytes(p) <= STATIC_SMEM_LIMIT,
                   "STAGES={STAGES} slots of BK={BK} x (BM={BM} + pad={pad} + BN={BN}) floats "
                   "exceed the 48 KiB of static shared memory a block may have"),
    ),  # fmt: skip
    launch=vectorized.launch,
    # As[STAGES][BK][BM + pad], Bs[STAGES][BK][BN]: each array's slots one after the other
    shared=lambda p: tuple(
        dataclasses.replace(
            array,
            rows=p.STAGES * array.rows,
            swizzle_text=array.swizzle_text.replace("[k]", "[s][k]"),  # s: the slot
        )
        for array in vectorized.shared(p)
    ),
    sites=(
        # element j of a float4 of A goes to As by its own 4-byte cp.async (a 16-byte copy
        # cannot transpose); B by one 16-byte cp.async (element by element where rows are
        # unaligned); the k loop is kernel 06's
        in_slot(vectorized.site("st_As"), phase="copy", global_width=0, async_copy=True),
        in_slot(vectorized.site("st_Bs"), phase="copy", async_copy=True),
        in_slot(vectorized.site("ld_As")),
        in_slot(vectorized.site("ld_Bs")),
    ),
    global_accesses=vectorized.global_accesses,
    kstep=KStep(
        depth=lambda p: p.BK,
        # the copy of step t goes out during step t - STAGES + 1 and lands at step t's barrier
        channels=(("issue", "landed"), ("begin", "computed")),
        phases=(
            Phase("copy", "issue", "landed", "loading", barrier="__syncthreads"),
            Phase("compute", "begin", "computed", "computing"),
        ),
        chained=False,
        in_flight=lambda p: p.STAGES,
    ),
    work=one_d.work,
    registers=128,  # ptxas, level 0, default parameters (capped at 128: two blocks per SM)
)
