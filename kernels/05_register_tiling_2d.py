"""05_register_tiling_2d: a TM x TN micro-tile of C per thread, an outer product per k (§19)."""

from matviz.core.kernel import (
    Constraint,
    GlobalAccess,
    Kernel,
    Launch,
    Param,
    SharedArray,
    Site,
    cdiv,
)
from matviz.core.registry import sibling

one_d = sibling("04_register_tiling_1d")


def threads(p):
    return p.BM * p.BN // (p.TM * p.TN)


def _as_at(th, p):
    e = th.tid + th.k * threads(p)
    return e // p.BK, e % p.BK


def _bs_at(th, p):
    e = th.tid + th.k * threads(p)
    return e // p.BN, e % p.BN


def _thread_row(th, p):
    """First row of the thread's micro-tile inside the block's tile."""
    return th.tid // (p.BN // p.TN) * p.TM


def _thread_col(th, p):
    return th.tid % (p.BN // p.TN) * p.TN


KERNEL = Kernel(
    title="2-D register tiling: a TM x TN tile of C per thread",
    concept="each thread reads TM values of As and TN of Bs per k and multiplies them as an "
    "outer product: TM + TN shared loads feed TM*TN multiply-adds",
    sections="lesson 8 §18-19; article §4.3",
    # Default: the fastest configuration at level 0 on the H200 (4096^3 and 8192^3: 33 TFLOP/s,
    # cuBLAS 51; BM=BN=128 BK=8 TM=TN=8 reaches 21: 168 registers leave one block per SM, and
    # with TN=8 a warp's Bs loads (LDS.128, lanes 32 B apart) conflict two ways). Levels 1 and
    # 2 add 1-2 registers to its 128, so 3 blocks fit per SM instead of 4: 30 and 27 TFLOP/s.
    params=(
        Param("BM", (64, 128), 64, "BM", "BM", "rows of C per block"),
        Param("BN", (64, 128), 64, "BN", "BN", "columns of C per block"),
        Param("BK", (8, 16), 16, "BK", "BK", "depth of one k-step (columns of the A tile)"),
        Param("TM", (4, 8), 8, "TM", "TM", "rows of C each thread computes"),
        Param("TN", (4, 8), 4, "TN", "TN", "columns of C each thread computes"),
    ),
    constraints=(
        # square block tiles keep the parameter space (every one compiled at 4 levels) small
        Constraint(lambda p: p.BM == p.BN, "BM={BM} and BN={BN} must be equal"),
        Constraint(
            lambda p: p.BM % p.TM == 0 and p.BN % p.TN == 0,
            "BM={BM}, BN={BN} must be multiples of TM={TM}, TN={TN}",
        ),
        # TM*TN sums and two fragments take 64-250 registers a thread; a block of at most 256
        # threads launches at any register count (256 x 255 fit in an SM's 64 K). With 512
        # (BM=BN=128 TM*TN=32) NVRTC's build of level 1 or 2 did not launch on the H200
        # ("too many resources requested"), though nvcc's stayed at 128 registers.
        Constraint(
            lambda p: 64 <= threads(p) <= 256,
            "BM*BN/(TM*TN) = {BM}*{BN}/({TM}*{TN}) threads per block must be 64 to 256",
        ),
        Constraint(
            lambda p: (p.BM * p.BK) % threads(p) == 0 and (p.BK * p.BN) % threads(p) == 0,
            "the BM*BN/(TM*TN) threads must split the BMxBK and BKxBN tiles evenly "
            "(BM={BM} BN={BN} BK={BK} TM={TM} TN={TN})",
        ),
    ),
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    shared=lambda p: (
        SharedArray("As", p.BM, p.BK, source="A"),
        SharedArray("Bs", p.BK, p.BN, source="B"),
    ),
    sites=(
        # element e = tid + i*THREADS: As[e / BK][e % BK] = A[by*BM + e/BK][t*BK + e%BK]
        Site(
            "st_As",
            "store",
            "As",
            "load",
            at=_as_at,
            repeat=lambda p: p.BM * p.BK // threads(p),
            source=lambda th, p: (th.by * p.BM + _as_at(th, p)[0], th.t * p.BK + _as_at(th, p)[1]),
        ),
        Site(
            "st_Bs",
            "store",
            "Bs",
            "load",
            at=_bs_at,
            repeat=lambda p: p.BK * p.BN // threads(p),
            source=lambda th, p: (th.t * p.BK + _bs_at(th, p)[0], th.bx * p.BN + _bs_at(th, p)[1]),
        ),
        # for k: a[i] = As[row + i][k] (i < TM), b[j] = Bs[k][col + j] (j < TN), with
        # row = (tid / (BN/TN))*TM, col = (tid % (BN/TN))*TN; instance k*TM + i, k*TN + j
        Site(
            "ld_As",
            "load",
            "As",
            "compute",
            repeat=lambda p: p.BK * p.TM,
            at=lambda th, p: (_thread_row(th, p) + th.k % p.TM, th.k // p.TM),
        ),
        Site(
            "ld_Bs",
            "load",
            "Bs",
            "compute",
            repeat=lambda p: p.BK * p.TN,
            at=lambda th, p: (th.k // p.TN, _thread_col(th, p) + th.k % p.TN),
        ),
    ),
    # C[by*BM + row + i][bx*BN + col + j] = acc[i][j], instance i*TN + j
    global_accesses=(
        GlobalAccess(
            "st_C",
            "store",
            "C",
            repeat=lambda p: p.TM * p.TN,
            at=lambda th, p: (
                th.by * p.BM + _thread_row(th, p) + th.k // p.TN,
                th.bx * p.BN + _thread_col(th, p) + th.k % p.TN,
            ),
        ),
    ),
    # the same tiles as kernel 04 (BM x BK of A, BK x BN of B per k-step): its k-step and traffic
    kstep=one_d.kstep,
    work=one_d.work,
    registers=128,  # ptxas, level 0, default parameters
)
