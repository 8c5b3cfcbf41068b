"""09_wmma: Tensor Cores through the WMMA API, 16x16x16 fragments per warp (§20-23); at
STAGES > 1 fed by kernel 07's cp.async pipeline (§24-25): shared memory stacks STAGES slots of
each tile, and step t uses slot t % STAGES. Pipelined, the fragments come in two sets, as in
kernel 10: a slice's ldmatrix go out before the mma_sync of the slice before, across the
barrier that lands the next step too."""

from matviz.core.kernel import (
    DYNAMIC_SMEM_LIMIT,
    STATIC_SMEM_LIMIT,
    Constraint,
    Fragment,
    GlobalAccess,
    Kernel,
    Launch,
    Mma,
    Param,
    SharedArray,
    Site,
    Work,
    cdiv,
)
from matviz.core.mma_layouts import ldmatrix_x4_row, m16n8k16_a, m16n8k16_b
from matviz.core.registry import sibling, sibling_module

pipeline = sibling_module("07_async_pipeline")
one_d = sibling("04_register_tiling_1d")

CHUNK = 8  # elements of one 16-byte copy
LDC = 20  # floats per row of a warp's C staging tile
HALF = 2  # bytes of an fp16 element


def warps(p):
    return (p.BM // p.WT) * (p.BN // p.WT)


def threads(p):
    return warps(p) * 32


def frags(p):
    return p.WT // 16


def smem_bytes(p):
    """STAGES slots of the padded A and B tiles, and each warp's C staging tile."""
    tiles = p.STAGES * (p.BM * (p.BK + p.PAD) + p.BK * (p.BN + p.PAD)) * HALF
    return tiles + warps(p) * 16 * LDC * 4


def issued(p, M, N, K):
    """Each block column re-reads all of A, each block row all of B."""
    return (cdiv(N, p.BN) * M * K + cdiv(M, p.BM) * K * N) * HALF


def a_corner(th, p):
    """The k-step's BM x BK tile of A starts at row by*BM, column t*BK."""
    return th.by * p.BM, th.t * p.BK


def b_corner(th, p):
    """The k-step's BK x BN tile of B starts at row t*BK, column bx*BN."""
    return th.t * p.BK, th.bx * p.BN


def tile_copy(name, array, shape, origin, threads=threads):
    """A block's copy of a rows x cols tile (``shape(p)``) into ``array``, 16 bytes a lane:
    chunk e = tid + i*THREADS (``threads(p)``) is row e / (cols/8), columns 8(e % (cols/8)) +
    0..7, copied from the global element ``origin(th, p)`` (the tile's corner) plus that."""

    def at(th, p):
        e, cols = th.tid + th.k * threads(p), shape(p)[1]
        return e // (cols // CHUNK), e % (cols // CHUNK) * CHUNK

    def source(th, p):
        (r, c), (r0, c0) = at(th, p), origin(th, p)
        return r0 + r, c0 + c

    rows_cols = lambda p: shape(p)[0] * shape(p)[1]  # noqa: E731
    return Site(name, "store", array, "load", width=16, at=at, source=source,
                repeat=lambda p: rows_cols(p) // CHUNK // threads(p))  # fmt: skip


def warp_corner(th, wm, wn, warps_n):
    """First row and column of the lane's wm x wn warp tile in the block's tile (warps_n warps
    to a row of warp tiles)."""
    warp = th.tid // 32
    return warp // warps_n * wm, warp % warps_n * wn


def ldmatrix_a(th, frags, corner):
    """Instance kk*frags + i: the lane's ldmatrix row of 16x16 fragment i of A below the warp
    tile's ``corner``, k slice kk."""
    r, c = ldmatrix_x4_row(th.tid % 32)
    kk, i = divmod(th.k, frags)
    return corner[0] + i * 16 + r, kk * 16 + c


def ldmatrix_b(th, frags, corner):
    """Instance kk*frags + j: the lane's ldmatrix row of 16x16 fragment j of B right of the
    warp tile's ``corner``, k slice kk."""
    r, c = ldmatrix_x4_row(th.tid % 32)
    kk, j = divmod(th.k, frags)
    return kk * 16 + r, corner[1] + j * 16 + c


def _warp_tile(th, p):
    return warp_corner(th, p.WT, p.WT, p.BN // p.WT)


def _ld_as(th, p):
    return ldmatrix_a(th, frags(p), _warp_tile(th, p))


def _ld_bs(th, p):
    return ldmatrix_b(th, frags(p), _warp_tile(th, p))


def _st_c(th, p):
    """Fragment (i, j) of the warp, element e = lane + 32q of its 16x16 tile: instance
    k = (i*FRAGS + j)*8 + q."""
    frag, q = divmod(th.k, 8)
    i, j = divmod(frag, frags(p))
    e = th.tid % 32 + q * 32
    wr, wc = _warp_tile(th, p)
    return th.by * p.BM + wr + i * 16 + e // 16, th.bx * p.BN + wc + j * 16 + e % 16


def _mma(p):
    return Mma(
        instruction="wmma::mma_sync m16n16k16",
        sass="2 × HMMA.16816.F32",
        shape=(16, 16, 16),
        sass_shape=(16, 8, 16),
        # the m16n8k16 fragments, two side by side, as the fragment probe measured them for
        # WMMA on the H200; fp16 WMMA keeps the Volta-era 16 slots per lane for A and B, slots
        # 8-15 repeating 0-7
        fragments=(
            Fragment("A", 16, 16, 16, "float16", m16n8k16_a),
            Fragment("B", 16, 16, 16, "float16", m16n8k16_b),
            Fragment("C", 16, 16, 8, "float32", m16n8k16_a),
        ),
        warps=(p.BM // p.WT, p.BN // p.WT),
        warp_tile=(p.WT, p.WT),
    )


def _sites(p):
    """The copies, then per 16-deep slice kk fragment i of A and fragment j of B (instance
    kk*FRAGS + i); B is row-major (k x n), so its fragments load transposed (MT88). Pipelined,
    the copies go out by cp.async into step t's slot, and the loads read it."""
    copies = (
        tile_copy("st_As", "As", lambda p: (p.BM, p.BK), a_corner),
        tile_copy("st_Bs", "Bs", lambda p: (p.BK, p.BN), b_corner),
    )
    loads = (
        Site("ld_As", "load", "As", "compute", width=16, matrix_load="LDSM.16.M88.4",
             at=_ld_as, repeat=lambda p: p.BK // 16 * frags(p)),
        Site("ld_Bs", "load", "Bs", "compute", width=16, matrix_load="LDSM.16.MT88.4",
             at=_ld_bs, repeat=lambda p: p.BK // 16 * frags(p)),
    )  # fmt: skip
    if p.STAGES == 1:
        return copies + loads
    rows = (lambda p: p.BM, lambda p: p.BK)  # each array's rows in one slot
    return tuple(
        pipeline.in_slot(site, slot_rows, phase="copy", async_copy=True)
        for site, slot_rows in zip(copies, rows, strict=True)
    ) + tuple(
        pipeline.in_slot(site, slot_rows) for site, slot_rows in zip(loads, rows, strict=True)
    )


def _kstep(p):
    """Load, barrier, compute, barrier (kernels 02-04); pipelined, kernel 07's k-step."""
    return one_d.kstep if p.STAGES == 1 else pipeline.KERNEL.kstep


KERNEL = Kernel(
    title="Tensor Cores with WMMA: 16x16x16 fragments per warp",
    concept="each warp loads 16x16 fragments of As and Bs with ldmatrix and multiplies them on "
    "the Tensor Cores: one mma_sync does 4096 multiply-adds, summed in fp32; at STAGES > 1, "
    "cp.async copies the next k-steps' tiles while the Tensor Cores work",
    sections="lesson 8 §20-25",
    # Default: the fastest at level 0 of a prototype's configurations on the H200 (4096^3 fp16:
    # 92.9 TFLOP/s; 64x64 warp tiles 67.9, 64x64 blocks 76.1, PAD 0 43.4); as built it reached
    # 89.2 and 90.9 in two ladder runs, cuBLAS 613-695 in the same runs.
    params=(
        Param("BM", (64, 128, 256), 128, "BM", "BM", "rows of C per block"),
        Param("BN", (64, 128), 128, "BN", "BN", "columns of C per block"),
        Param("BK", (16, 32, 64), 32, "BK", "BK", "depth of one k-step (columns of the A tile)"),
        Param("WT", (32, 64), 32, "WT", "W", "rows and columns of C per warp (its warp tile)"),
        Param("PAD", (0, 8), 8, "PAD", "P", "elements added to each shared row", layout="pad"),
        Param("STAGES", (1, 2, 3), 1, "STAGES", "S",
              "k-steps in flight: 1 copies each step's tiles and waits for them; more copy "
              "ahead with cp.async into as many slots of shared memory",
              label_default=False),
    ),  # fmt: skip
    constraints=(
        Constraint(lambda p: smem_bytes(p) <= (STATIC_SMEM_LIMIT if p.STAGES == 1
                                               else DYNAMIC_SMEM_LIMIT),
                   "STAGES={STAGES} slots of the BM={BM} x BK={BK} and BK x BN={BN} tiles "
                   "exceed the shared memory a block may have"),
        # a pipeline is worth building on conflict-free tiles only (and each configuration is
        # compiled at 4 levels and measured with ncu)
        Constraint(lambda p: p.STAGES == 1 or p.PAD == 8,
                   "STAGES={STAGES} needs PAD=8: the pipelined kernel reads padded tiles"),
        # square block tiles keep the parameter space (every one compiled at 4 levels) small;
        # 256x128 copies a quarter less per multiply-add (H100, 4096^3, level 0: BK32 W64 S3
        # 48.3% of cuBLAS fp16 against 41.3% for 128x128 BK64 S3 in the same process)
        Constraint(lambda p: p.BM == p.BN or (p.BM, p.BN) == (256, 128),
                   "BM={BM} and BN={BN} must be equal, or 256 and 128"),
        Constraint(lambda p: p.BM % p.WT == 0, "BM={BM} must be a multiple of the warp tile"),
        # 32 warps of over 64 registers a thread do not fit an SM (a launch fails)
        Constraint(lambda p: warps(p) <= 16,
                   "BM={BM} x BN={BN} in WT={WT} warp tiles is more than 16 warps"),
        Constraint(
            lambda p: (
                (p.BM * p.BK // CHUNK) % threads(p) == 0
                and (p.BK * p.BN // CHUNK) % threads(p) == 0
            ),
            "the block's threads must split the BMxBK and BKxBN tiles into 16-byte chunks "
            "evenly (BM={BM} BN={BN} BK={BK} WT={WT})",
        ),
        # ptxas (sm_90) spills a one-warp block's 64x64 warp tile at BK=32: it keeps the next
        # slice's fragments beside the 16 accumulators
        Constraint(
            lambda p: not (p.WT == 64 and p.BK == 32 and warps(p) == 1),
            "a one-warp block (BM={BM}, WT={WT}) needs BK=16: at BK={BK} its registers spill",
        ),
        Constraint(
            lambda p: not (p.BK == 64 and p.WT == 64 and p.STAGES == 1),
            "BK={BK} with WT={WT} needs STAGES 2-3: at STAGES 1 its registers spill",
        ),
    ),
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    # bf16 is left out: nvcc builds its fragment loads without ldmatrix (see the .cu)
    inputs=lambda p: "float16",
    mma=_mma,
    shared=lambda p: (
        # each array's STAGES slots one after the other
        SharedArray("As", p.STAGES * p.BM, p.BK, p.PAD, HALF, "float16", source="A", align=128),
        SharedArray("Bs", p.STAGES * p.BK, p.BN, p.PAD, HALF, "float16", source="B", align=16),
        SharedArray("Cs", warps(p) * 16, 16, LDC - 16, align=16),
    ),
    sites=_sites,
    global_accesses=(
        GlobalAccess("st_C", "store", "C", at=_st_c, repeat=lambda p: frags(p) ** 2 * 8),
    ),
    kstep=_kstep,
    dynamic_shared=lambda p: p.STAGES > 1,
    work=Work(
        # a block loads BM*BK + BK*BN halves per k-step for BM*BN*BK multiply-adds
        formula="mnk(1/BN + 1/BM) × 2 B",
        formula_bytes=lambda p, M, N, K: M * N * K * (1 / p.BN + 1 / p.BM) * HALF,
        issued_bytes=issued,
    ),
    registers=96,  # ptxas, level 0, default parameters
)
