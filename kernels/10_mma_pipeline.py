"""10_mma_pipeline: mma.sync m16n8k16 on ldmatrix fragments, from XOR-swizzled tiles that a
STAGES-deep cp.async pipeline fills (§20-25).

Its tile copies and k-step are kernel 07's pipeline with kernel 09's 16-byte chunks; shared
memory stacks STAGES slots of each array, and step t uses slot t % STAGES.
"""


from matviz.core.kernel import (
    DYNAMIC_SMEM_LIMIT,
    Constraint,
    Fragment,
    GlobalAccess,
    Kernel,
    Launch,
    Mma,
    Param,
    SharedArray,
    Site,
    cdiv,
)
from matviz.core.mma_layouts import m16n8k16_a, m16n8k16_b
from matviz.core.registry import sibling_module

wmma = sibling_module("09_wmma")
pipeline = sibling_module("07_async_pipeline")
CHUNK, HALF = wmma.CHUNK, wmma.HALF  # elements of a 16-byte row; bytes of an fp16/bf16 element


def warps(p):
    return (p.BM // p.WM) * (p.BN // p.WN)


def threads(p):
    return warps(p) * 32


def m_frags(p):
    """m16 fragments per warp along M (one ldmatrix.x4 each)."""
    return p.WM // 16


def n_frags(p):
    """n8 fragments per warp along N (two per ldmatrix.x4.trans)."""
    return p.WN // 8


def smem_bytes(p):
    return p.STAGES * (p.BM + p.BN) * p.BK * HALF


def dtype(p):
    return "bfloat16" if p.BF16 else "float16"


def _swizzle(p, chunks):
    """The XOR mask of a row of ``chunks`` 16-byte chunks, in elements: chunk c of row r is
    stored at c ^ r % 8, or for 64-byte rows (two share the 128 bytes of the banks) at
    c ^ (r/2) % 4, so the eight rows of one ldmatrix phase meet eight bank groups. A slot
    starts on a multiple of 8 rows, so the stacked slots keep their masks."""
    if not p.SWIZZLE:
        return None
    if chunks >= 8:
        return lambda r: r % 8 * CHUNK
    return lambda r: r // 2 % 4 * CHUNK


def _swizzle_text(p, name, row, col, chunks):
    if not p.SWIZZLE:
        return ""
    mask = f"{row} mod 8" if chunks >= 8 else f"({row}/2) mod 4"
    return f"{name}[s][{row}][{col}] → {name}[s][{row}][{col} ^ 8·({mask})]"


def _warp_corner(th, p):
    return wmma.warp_corner(th, p.WM, p.WN, p.BN // p.WN)


def _ld_as(th, p):
    """Instance kk*MI + i: 16x16 fragment i of the warp's rows, k slice kk."""
    return wmma.ldmatrix_a(th, m_frags(p), _warp_corner(th, p))


def _ld_bs(th, p):
    """Instance kk*(NI/2) + j: n8 fragments 2j and 2j+1 of the warp's columns, k slice kk."""
    return wmma.ldmatrix_b(th, n_frags(p) // 2, _warp_corner(th, p))


def _st_c(th, p):
    """Accumulator (i, j), half h (rows g and g + 8): instance (i*NI + j)*2 + h; lane 4g + u
    writes columns 2u and 2u + 1 as one 8-byte store."""
    frag, h = divmod(th.k, 2)
    i, j = divmod(frag, n_frags(p))
    lane = th.tid % 32
    wr, wc = _warp_corner(th, p)
    return (th.by * p.BM + wr + i * 16 + lane // 4 + 8 * h,
            th.bx * p.BN + wc + j * 8 + lane % 4 * 2)  # fmt: skip


def _mma(p):
    kind = "bf16" if p.BF16 else "f16"
    return Mma(
        instruction=f"mma.sync.aligned.m16n8k16.row.col.f32.{kind}.{kind}.f32",
        sass="HMMA.16816.F32" + (".BF16" if p.BF16 else ""),
        shape=(16, 8, 16),
        sass_shape=(16, 8, 16),
        fragments=(
            Fragment("A", 16, 16, 8, dtype(p), m16n8k16_a),
            Fragment("B", 16, 8, 4, dtype(p), m16n8k16_b),
            Fragment("C", 16, 8, 4, "float32", m16n8k16_a),
        ),
        warps=(p.BM // p.WM, p.BN // p.WN),
        warp_tile=(p.WM, p.WN),
    )


def _copy(name, array, shape, origin, rows):
    site = wmma.tile_copy(name, array, shape, origin, threads=threads)
    return pipeline.in_slot(site, rows, phase="copy", async_copy=True)


KERNEL = Kernel(
    title="Tensor Cores with mma.sync: ldmatrix, a swizzle and a cp.async pipeline",
    concept="each warp loads its fragments with ldmatrix from tiles whose 16-byte chunks are "
    "XOR-swizzled so that no two rows of a load meet in the same banks, and multiplies them "
    "with mma.sync m16n8k16; cp.async copies STAGES k-steps ahead while the Tensor Cores work",
    sections="lesson 8 §20-25",
    # Default: S3, the fastest fp16 configuration of the H200 tune of 2026-12-06 (4096^3:
    # 414,113 GFLOP/s, S4 412,264, BN 256 365,903, S2 355,750; 415,314 in the ladder, 54.8% of
    # cuBLAS fp16 in the same process; no swizzle: 140 TFLOP/s before). At 240 registers two
    # blocks of 4 warps share an SM.
    params=(
        # BM 256 (8 warps): 57.5% of cuBLAS fp16 against 55.6% at 128 (H100, 4096^3, level 0)
        Param("BM", (128, 256), 128, "BM", "BM", "rows of C per block"),
        Param("BN", (128, 256), 128, "BN", "BN", "columns of C per block"),
        Param("BK", (32,), 32, "BK", "BK", "depth of one k-step (columns of the A tile)"),
        Param("WM", (64,), 64, "WM", "WM", "rows of C per warp"),
        Param("WN", (64,), 64, "WN", "WN", "columns of C per warp"),
        Param("STAGES", (2, 3, 4), 3, "STAGES", "S",
              "k-steps in flight: slots of shared memory the copies fill ahead"),
        Param("SWIZZLE", (0, 1), 1, "SWIZZLE", "X",
              "XOR-swizzle the 16-byte chunks of each shared row", layout="swizzle"),
        Param("BF16", (0, 1), 0, "BF16", "BF", "bf16 inputs instead of fp16",
              label_default=False),
    ),  # fmt: skip
    constraints=(
        # 240 registers a thread: an SM's 65,536 hold 8 warps
        Constraint(lambda p: warps(p) <= 8,
                   "BM={BM} x BN={BN} in WM={WM} x WN={WN} warp tiles is more than the 8 warps "
                   "an SM's registers hold at 240 a thread"),
        Constraint(lambda p: smem_bytes(p) <= DYNAMIC_SMEM_LIMIT,
                   "STAGES={STAGES} slots of BK={BK} x (BM={BM} + BN={BN}) halves exceed the "
                   "227 KiB of shared memory a block may have"),
    ),  # fmt: skip
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    inputs=dtype,
    mma=_mma,
    dynamic_shared=True,
    # As[STAGES][BM][BK], Bs[STAGES][BK][BN]: each array's slots one after the other
    shared=lambda p: (
        SharedArray("As", p.STAGES * p.BM, p.BK, 0, HALF, dtype(p), source="A", align=128,
                    swizzle=_swizzle(p, p.BK // CHUNK),
                    swizzle_text=_swizzle_text(p, "As", "m", "k", p.BK // CHUNK)),
        SharedArray("Bs", p.STAGES * p.BK, p.BN, 0, HALF, dtype(p), source="B", align=128,
                    swizzle=_swizzle(p, p.BN // CHUNK),
                    swizzle_text=_swizzle_text(p, "Bs", "k", "n", p.BN // CHUNK)),
    ),  # fmt: skip
    sites=(
        _copy("st_As", "As", lambda p: (p.BM, p.BK), wmma.a_corner, lambda p: p.BM),
        _copy("st_Bs", "Bs", lambda p: (p.BK, p.BN), wmma.b_corner, lambda p: p.BK),
        # per 16-deep slice kk: each A fragment of the warp, then each pair of B fragments
        pipeline.in_slot(Site("ld_As", "load", "As", "compute", width=16, at=_ld_as,
                      matrix_load="LDSM.16.M88.4",
                      repeat=lambda p: p.BK // 16 * m_frags(p)), lambda p: p.BM),
        pipeline.in_slot(Site("ld_Bs", "load", "Bs", "compute", width=16, at=_ld_bs,
                      matrix_load="LDSM.16.MT88.4",
                      repeat=lambda p: p.BK // 16 * n_frags(p) // 2), lambda p: p.BK),
    ),  # fmt: skip
    global_accesses=(
        GlobalAccess("st_C", "store", "C", width=8, at=_st_c,
                     repeat=lambda p: m_frags(p) * n_frags(p) * 2),
    ),  # fmt: skip
    # kernel 07's pipeline: copy and compute as two channels, STAGES steps in flight
    kstep=pipeline.KERNEL.kstep,
    work=wmma.KERNEL.work,
    registers=240,  # ptxas, level 0, default parameters
)
