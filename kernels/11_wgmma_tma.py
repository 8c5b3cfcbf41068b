"""11_wgmma_tma: Hopper's warpgroup MMA on tiles the copy engine (TMA) brings in, a STAGES-deep
mbarrier ring and warp specialisation: a producer warpgroup copies, two consumers multiply
(§20-25).

No lane touches shared memory in the k loop: TMA writes the tiles (128-byte swizzle) and wgmma
reads them through matrix descriptors, so the kernel has copies but no access sites.
"""

from matviz.core.kernel import (
    DYNAMIC_SMEM_LIMIT,
    BulkCopy,
    Constraint,
    Fragment,
    GlobalAccess,
    Kernel,
    KStep,
    Launch,
    Mma,
    Param,
    Phase,
    ShapeRule,
    SharedArray,
    cdiv,
)
from matviz.core.mma_layouts import wgmma_accumulator
from matviz.core.registry import sibling_module

wmma = sibling_module("09_wmma")
CHUNK, HALF = wmma.CHUNK, wmma.HALF
CONSUMERS = 2  # warpgroups that multiply, 64 rows of the block's tile each
WARPGROUP = 128
PRODUCER_WARPS = 4  # warpgroup 0 copies; its warps 1-3 leave at once


def threads(p):
    return WARPGROUP * (CONSUMERS + 1)


def smem_bytes(p):
    return p.STAGES * (p.BM + p.BN) * p.BK * HALF + 16 * p.STAGES


def dtype(p):
    return "bfloat16" if p.BF16 else "float16"


def _swizzle(p):
    """TMA's 128-byte swizzle on 128-byte rows: 16-byte chunk c of row r at chunk c ^ r % 8
    (a slot starts on a multiple of 8 rows, so the stacked slots keep the pattern)."""
    return lambda r: r % 8 * CHUNK


def _swizzle_text(name, row):
    return f"{name}[s][{row}][k] → {name}[s][{row}][k ^ 8·({row} mod 8)] (TMA, 128-byte swizzle)"


def _copy_a(bx, by, t, r, c, p):
    """Box cell (r, c) of A's 128 x 64 box: A[by*BM + r][t*BK + c]."""
    return by * p.BM + r, t * p.BK + c


def _copy_b(bx, by, t, r, c, p):
    """B is stored column-major, so the box's row r is column bx*BN + r of B: cell (r, c)
    holds B[t*BK + c][bx*BN + r]."""
    return t * p.BK + c, bx * p.BN + r


def _st_c(th, p):
    """Accumulator slot 4j + q (instance 2j + q // 2): rows g and g + 8 of the warp's 16,
    columns 8j + 2u and + 1, one 8-byte store; warps 4 .. 11 hold rows 16 (warp - 4) on."""
    j, h = divmod(th.k, 2)
    lane = th.tid % 32
    warp = th.tid // 32 - PRODUCER_WARPS
    return (th.by * p.BM + 16 * warp + lane // 4 + 8 * h,
            th.bx * p.BN + 8 * j + lane % 4 * 2, warp >= 0)  # fmt: skip


def _mma(p):
    kind = "bf16" if p.BF16 else "f16"
    return Mma(
        instruction=f"wgmma.mma_async.sync.aligned.m64n{p.BN}k16.f32.{kind}.{kind}",
        sass=f"HGMMA.64x{p.BN}x16.F32" + (".BF16" if p.BF16 else ""),
        shape=(64, p.BN, 16),
        sass_shape=(64, p.BN, 16),
        # per warp: 16 of the warpgroup's 64 rows, all BN columns
        fragments=(Fragment("C", 16, p.BN, p.BN // 2, "float32", wgmma_accumulator),),
        warps=(CONSUMERS * 4, 1),
        warp_tile=(16, p.BN),
        from_shared=("A", "B"),
        group_threads=WARPGROUP,
        first_warp=PRODUCER_WARPS,
    )


KERNEL = Kernel(
    title="Hopper: wgmma on TMA tiles, a producer warpgroup and two consumers",
    concept="one warpgroup only asks the copy engine (TMA) for the next tiles, two only "
    "multiply them with wgmma straight from shared memory; mbarriers tell the consumers a "
    "slot has landed and the producer that it is free again, so copies and math never wait "
    "on a whole-block barrier",
    sections="lesson 8 §20-25",
    # Default: the fastest of a prototype's configurations on the H200 (4096^3 bf16: BN 256 S4
    # 708 TFLOP/s, 90.6% of cuBLAS bf16 in the same run; S3 707, BN 128 S5 643; 8192^3 BN 256 S4
    # 675-699, 97.9% of cuBLAS 689). As built (matviz.bench.kernels, 4096^3): S4 697.9, S3
    # 700.0 TFLOP/s, 90.6% and 91.1% of cuBLAS bf16 in the same run. Keeping one wgmma group in
    # flight (wait_group 1, each slot freed a step later) measured 576-676 against 694-695.
    params=(
        Param("BM", (128,), 128, "BM", "BM", "rows of C per block (64 per consumer warpgroup)"),
        Param("BN", (128, 256), 256, "BN", "BN", "columns of C per block: one wgmma m64nBNk16"),
        Param("BK", (64,), 64, "BK", "BK", "depth of one k-step: one 128-byte swizzled row"),
        Param("STAGES", (3, 4, 5), 4, "STAGES", "S",
              "slots of shared memory in the ring: k-steps the producer runs ahead"),
        Param("BF16", (0, 1), 1, "BF16", "BF", "bf16 inputs (0: fp16)"),
    ),  # fmt: skip
    constraints=(
        Constraint(lambda p: smem_bytes(p) <= DYNAMIC_SMEM_LIMIT,
                   "STAGES={STAGES} slots of BK={BK} x (BM={BM} + BN={BN}) halves exceed the "
                   "227 KiB of shared memory a block may have"),
    ),  # fmt: skip
    shape_rules=(
        ShapeRule(lambda p, M, N, K: K % 8 == 0,
                  "K={K} is not a multiple of 8: TMA reads rows whose pitch is a multiple of "
                  "16 bytes (8 fp16/bf16 elements)"),
    ),  # fmt: skip
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    inputs=dtype,
    layouts=lambda p: {"B": "col"},  # both operands K-major, as wgmma reads them
    mma=_mma,
    arch="sm_90a",
    dynamic_shared=True,
    shared=lambda p: (
        SharedArray("As", p.STAGES * p.BM, p.BK, 0, HALF, dtype(p), source="A", align=1024,
                    swizzle=_swizzle(p), swizzle_text=_swizzle_text("As", "m")),
        SharedArray("Bs", p.STAGES * p.BN, p.BK, 0, HALF, dtype(p), source="B", align=1024,
                    swizzle=_swizzle(p), swizzle_text=_swizzle_text("Bs", "n")),
    ),  # fmt: skip
    mbarriers=lambda p: 2 * p.STAGES,  # full[s] and empty[s]
    copies=(
        BulkCopy("tma_A", "As", "issue", lambda p: p.BM, lambda p: p.BK,
                 lambda t, p: t % p.STAGES * p.BM, _copy_a, swizzle_bytes=128),
        BulkCopy("tma_B", "Bs", "issue", lambda p: p.BN, lambda p: p.BK,
                 lambda t, p: t % p.STAGES * p.BN, _copy_b, swizzle_bytes=128),
    ),  # fmt: skip
    global_accesses=(
        GlobalAccess("st_C", "store", "C", width=8, at=_st_c, repeat=lambda p: p.BN // 4),
    ),
    kstep=KStep(
        depth=lambda p: p.BK,
        # producer (warp 0): from asking for slot t % STAGES until both boxes are asked for;
        # consumer (warp 4): waiting for the slot's bytes, then its 4 wgmma until it frees it
        channels=(("request", "issued"), ("wait", "landed", "computed")),
        phases=(
            Phase("issue", "request", "issued", "loading"),
            Phase("wait", "wait", "landed", "loading"),
            Phase("compute", "landed", "computed", "computing"),
        ),
        chained=False,
        in_flight=lambda p: p.STAGES,
    ),
    work=wmma.KERNEL.work,
    registers=168,  # ptxas, level 0, at entry; setmaxnreg gives the consumers 232, producer 40
)
