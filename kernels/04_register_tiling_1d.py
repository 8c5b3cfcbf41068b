"""04_register_tiling_1d: TM outputs of one column of C per thread, sums in registers (§18)."""

from matviz.core.kernel import (
    Constraint,
    GlobalAccess,
    Kernel,
    KStep,
    Launch,
    Param,
    Phase,
    SharedArray,
    Site,
    Work,
    cdiv,
)

FLOAT = 4


def threads(p):
    return p.BM * p.BN // p.TM


def issued(p, M, N, K):
    """Each block column re-reads all of A, each block row all of B (guards included)."""
    return (cdiv(N, p.BN) * M * K + cdiv(M, p.BM) * K * N) * FLOAT


def _as_at(th, p):
    e = th.tid + th.k * threads(p)
    return e // p.BK, e % p.BK


def _bs_at(th, p):
    e = th.tid + th.k * threads(p)
    return e // p.BN, e % p.BN


KERNEL = Kernel(
    title="1-D register tiling: TM results per thread",
    concept="each thread keeps TM sums in registers and reuses one Bs value for TM multiply-adds",
    sections="lesson 8 §18; article §4.3",
    params=(
        Param("BM", (64, 128), 64, "BM", "BM", "rows of C per block"),
        Param("BN", (64, 128), 64, "BN", "BN", "columns of C per block"),
        Param("BK", (8, 16), 8, "BK", "BK", "depth of one k-step (columns of the A tile)"),
        Param("TM", (8, 16), 8, "TM", "TM", "rows of C each thread computes"),
    ),
    constraints=(
        Constraint(lambda p: p.BM % p.TM == 0, "BM={BM} must be a multiple of TM={TM}"),
        # TM sums and the addresses of TM rows need more than the 64 registers a thread of a
        # 1024-thread block may have
        Constraint(
            lambda p: 32 <= threads(p) <= 512,
            "BM*BN/TM = {BM}*{BN}/{TM} threads per block must be 32 to 512",
        ),
        Constraint(
            lambda p: (p.BM * p.BK) % threads(p) == 0 and (p.BK * p.BN) % threads(p) == 0,
            "the BM*BN/TM threads must split the BMxBK and BKxBN tiles evenly "
            "(BM={BM} BN={BN} BK={BK} TM={TM})",
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
        Site("st_As", "store", "As", "load", at=_as_at,
             repeat=lambda p: p.BM * p.BK // threads(p),
             source=lambda th, p: (th.by * p.BM + _as_at(th, p)[0],
                                   th.t * p.BK + _as_at(th, p)[1])),
        Site("st_Bs", "store", "Bs", "load", at=_bs_at,
             repeat=lambda p: p.BK * p.BN // threads(p),
             source=lambda th, p: (th.t * p.BK + _bs_at(th, p)[0],
                                   th.bx * p.BN + _bs_at(th, p)[1])),
        # for k: b = Bs[k][tid % BN]; for r < TM: acc[r] += As[(tid / BN)*TM + r][k] * b
        Site("ld_Bs", "load", "Bs", "compute", repeat=lambda p: p.BK,
             at=lambda th, p: (th.k, th.tid % p.BN)),
        Site("ld_As", "load", "As", "compute", repeat=lambda p: p.BK * p.TM,
             at=lambda th, p: (th.tid // p.BN * p.TM + th.k % p.TM, th.k // p.TM)),
    ),  # fmt: skip
    # C[by*BM + (tid / BN)*TM + r][bx*BN + tid % BN] = acc[r] for r < TM
    global_accesses=(
        GlobalAccess("st_C", "store", "C", repeat=lambda p: p.TM,
                     at=lambda th, p: (th.by * p.BM + th.tid // p.BN * p.TM + th.k,
                                       th.bx * p.BN + th.tid % p.BN)),
    ),  # fmt: skip
    kstep=KStep(
        depth=lambda p: p.BK,
        channels=(("issue", "loaded", "computed"),),
        phases=(
            Phase("load", "issue", "loaded", "loading", barrier="__syncthreads"),
            Phase("compute", "loaded", "computed", "computing", barrier="__syncthreads"),
        ),
    ),
    work=Work(
        # a block loads BM*BK + BK*BN floats per k-step for BM*BN*BK FMAs
        formula="mnk(1/BN + 1/BM) × 4 B",
        formula_bytes=lambda p, M, N, K: M * N * K * (1 / p.BN + 1 / p.BM) * FLOAT,
        issued_bytes=issued,
    ),
    registers=40,
)
