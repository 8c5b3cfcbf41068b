"""09_wmma: Tensor Cores through the WMMA API, 16x16x16 fragments per warp (§20-23)."""

from matviz.core.kernel import (
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
from matviz.core.registry import sibling

CHUNK = 8  # elements of one 16-byte copy
LDC = 20  # floats per row of a warp's C staging tile
HALF = 2  # bytes of an fp16 element


def warps(p):
    return (p.BM // p.WT) * (p.BN // p.WT)


def threads(p):
    return warps(p) * 32


def frags(p):
    return p.WT // 16


def issued(p, M, N, K):
    """Each block column re-reads all of A, each block row all of B."""
    return (cdiv(N, p.BN) * M * K + cdiv(M, p.BM) * K * N) * HALF


def _chunk(th, p, cols):
    e = th.tid + th.k * threads(p)
    return e // (cols // CHUNK), e % (cols // CHUNK) * CHUNK


def _a_corner(th, p):
    """The k-step's BM x BK tile of A starts at row by*BM, column t*BK."""
    return th.by * p.BM, th.t * p.BK


def _b_corner(th, p):
    """The k-step's BK x BN tile of B starts at row t*BK, column bx*BN."""
    return th.t * p.BK, th.bx * p.BN


def _tile_copy(name, array, shape, origin):
    """A block's copy of a rows x cols tile (``shape(p)``) into ``array``, 16 bytes a lane:
    chunk e = tid + i*THREADS is row e / (cols/8), columns 8(e % (cols/8)) + 0..7, copied from
    the global element ``origin(th, p)`` (the tile's corner) plus that."""

    def at(th, p):
        return _chunk(th, p, shape(p)[1])

    def source(th, p):
        (r, c), (r0, c0) = at(th, p), origin(th, p)
        return r0 + r, c0 + c

    rows_cols = lambda p: shape(p)[0] * shape(p)[1]  # noqa: E731
    return Site(name, "store", array, "load", width=16, at=at, source=source,
                repeat=lambda p: rows_cols(p) // CHUNK // threads(p))  # fmt: skip


def _warp_tile(th, p):
    """First row and column of the lane's warp tile in the block's tile."""
    warp = th.tid // 32
    return warp // (p.BN // p.WT) * p.WT, warp % (p.BN // p.WT) * p.WT


def _ldmatrix_row(th):
    """The row of a 16x16 fragment each lane addresses in ldmatrix .x4, and its first column:
    lanes 8i..8i+7 give the 8 rows of matrix i, matrices in the fragment's register order
    (rows 0-7, rows 8-15) x (columns 0-7, 8-15), as the fragment probe measured."""
    lane = th.tid % 32
    return (lane & 7) + ((lane >> 3) & 1) * 8, (lane >> 4) * 8


def _ld_as(th, p):
    r, c = _ldmatrix_row(th)
    kk, i = divmod(th.k, frags(p))
    return _warp_tile(th, p)[0] + i * 16 + r, kk * 16 + c


def _ld_bs(th, p):
    r, c = _ldmatrix_row(th)
    kk, j = divmod(th.k, frags(p))
    return kk * 16 + r, _warp_tile(th, p)[1] + j * 16 + c


def _st_c(th, p):
    """Fragment (i, j) of the warp, element e = lane + 32q of its 16x16 tile: instance
    k = (i*FRAGS + j)*8 + q."""
    frag, q = divmod(th.k, 8)
    i, j = divmod(frag, frags(p))
    e = th.tid % 32 + q * 32
    wr, wc = _warp_tile(th, p)
    return th.by * p.BM + wr + i * 16 + e // 16, th.bx * p.BN + wc + j * 16 + e % 16


# m16n8k16 fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16"), as the fragment probe
# measured them for WMMA on the H200: lane = 4 * group + thread, two consecutive elements a slot
# pair. A 16x16 WMMA operand is two m16n8k16 operands side by side. fp16 WMMA keeps the
# Volta-era 16 slots per lane for A and B, slots 8-15 repeating 0-7.
def _a_or_c(lane, slot):
    g, t, s = lane >> 2, lane & 3, slot % 8
    return g + 8 * ((s >> 1) & 1), 2 * t + (s & 1) + 8 * (s >> 2)


def _b(lane, slot):
    g, t, s = lane >> 2, lane & 3, slot % 8
    return 2 * t + (s & 1) + 8 * ((s >> 1) & 1), g + 8 * (s >> 2)


def _mma(p):
    return Mma(
        instruction="wmma::mma_sync m16n16k16",
        sass="2 × HMMA.16816.F32",
        shape=(16, 16, 16),
        sass_shape=(16, 8, 16),
        fragments=(
            Fragment("A", 16, 16, 16, "float16", _a_or_c),
            Fragment("B", 16, 16, 16, "float16", _b),
            Fragment("C", 16, 16, 8, "float32", _a_or_c),
        ),
        warps=(p.BM // p.WT, p.BN // p.WT),
        warp_tile=(p.WT, p.WT),
    )


KERNEL = Kernel(
    title="Tensor Cores with WMMA: 16x16x16 fragments per warp",
    concept="each warp loads 16x16 fragments of As and Bs with ldmatrix and multiplies them on "
    "the Tensor Cores: one mma_sync does 4096 multiply-adds, summed in fp32",
    sections="lesson 8 §20-23",
    # Default: the fastest at level 0 of a prototype's configurations on the H200 (4096^3 fp16:
    # 92.9 TFLOP/s; 64x64 warp tiles 67.9, 64x64 blocks 76.1, PAD 0 43.4); as built it reached
    # 89.2 and 90.9 in two ladder runs, cuBLAS 613-695 in the same runs.
    params=(
        Param("BM", (64, 128), 128, "BM", "BM", "rows of C per block"),
        Param("BN", (64, 128), 128, "BN", "BN", "columns of C per block"),
        Param("BK", (16, 32), 32, "BK", "BK", "depth of one k-step (columns of the A tile)"),
        Param("WT", (32, 64), 32, "WT", "W", "rows and columns of C per warp (its warp tile)"),
        Param("PAD", (0, 8), 8, "PAD", "P", "elements added to each shared row", layout="pad"),
    ),
    constraints=(
        # square block tiles keep the parameter space (every one compiled at 4 levels) small
        Constraint(lambda p: p.BM == p.BN, "BM={BM} and BN={BN} must be equal"),
        Constraint(lambda p: p.BM % p.WT == 0, "BM={BM} must be a multiple of the warp tile"),
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
    ),
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    # bf16 is left out: nvcc builds its fragment loads without ldmatrix (see the .cu)
    inputs=lambda p: "float16",
    mma=_mma,
    shared=lambda p: (
        SharedArray("As", p.BM, p.BK, p.PAD, HALF, "float16", source="A", align=128),
        SharedArray("Bs", p.BK, p.BN, p.PAD, HALF, "float16", source="B", align=16),
        SharedArray("Cs", warps(p) * 16, 16, LDC - 16, align=16),
    ),
    sites=(
        _tile_copy("st_As", "As", lambda p: (p.BM, p.BK), _a_corner),
        _tile_copy("st_Bs", "Bs", lambda p: (p.BK, p.BN), _b_corner),
        # per 16-deep slice kk: fragment i of A, then fragment j of B (instance kk*FRAGS + i);
        # B is row-major (k x n), so its fragments load transposed (MT88)
        Site(
            "ld_As",
            "load",
            "As",
            "compute",
            width=16,
            matrix_load="LDSM.16.M88.4",
            at=_ld_as,
            repeat=lambda p: p.BK // 16 * frags(p),
        ),
        Site(
            "ld_Bs",
            "load",
            "Bs",
            "compute",
            width=16,
            matrix_load="LDSM.16.MT88.4",
            at=_ld_bs,
            repeat=lambda p: p.BK // 16 * frags(p),
        ),
    ),  # fmt: skip
    global_accesses=(
        GlobalAccess("st_C", "store", "C", at=_st_c, repeat=lambda p: frags(p) ** 2 * 8),
    ),
    # load, barrier, compute, barrier: the k-step of kernels 02-04
    kstep=sibling("04_register_tiling_1d").kstep,
    work=Work(
        # a block loads BM*BK + BK*BN halves per k-step for BM*BN*BK multiply-adds
        formula="mnk(1/BN + 1/BM) × 2 B",
        formula_bytes=lambda p, M, N, K: M * N * K * (1 / p.BN + 1 / p.BM) * HALF,
        issued_bytes=issued,
    ),
    registers=96,  # ptxas, level 0, default parameters
)
