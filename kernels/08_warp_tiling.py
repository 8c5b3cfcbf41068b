"""08_warp_tiling: block tile -> warp tile -> thread micro-tile, with kernel 06's float4 loads."""

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
    return (p.BM // p.WM) * (p.BN // p.WN) * 32


def wmiter(p):
    """Sub-tiles a warp walks down its warp tile (WNITER across)."""
    return max(p.WM * p.WN // (32 * p.TM * p.TN * p.WNITER), 1)


def wsubm(p):
    return p.WM // wmiter(p)


def wsubn(p):
    return p.WN // p.WNITER


def warp_row(th, p):
    """First row and column of the lane's warp tile inside the block's tile."""
    return th.tid // 32 // (p.BN // p.WN) * p.WM


def warp_col(th, p):
    return th.tid // 32 % (p.BN // p.WN) * p.WN


def lane_row(th, p):
    """First row and column of the lane's micro-tile inside each sub-tile."""
    return th.tid % 32 // (wsubn(p) // p.TN) * p.TM


def lane_col(th, p):
    return th.tid % 32 % (wsubn(p) // p.TN) * p.TN


def _a_float4(th, p):
    f = th.tid + th.k // 4 * threads(p)
    return f // (p.BK // 4), f % (p.BK // 4) * 4


def _b_float4(th, p):
    f = th.tid + th.k * threads(p)
    return f // (p.BN // 4), f % (p.BN // 4) * 4


def _ld_as(th, p):
    """Instance (k * WMITER + wm) * TM/4 + q reads As[k][warp row + wm*WSUBM + lane row + 4q]."""
    per_k = wmiter(p) * p.TM // 4
    k, rest = divmod(th.k, per_k)
    wm, q = divmod(rest, p.TM // 4)
    return k, warp_row(th, p) + wm * wsubm(p) + lane_row(th, p) + 4 * q


def _ld_bs(th, p):
    per_k = p.WNITER * p.TN // 4
    k, rest = divmod(th.k, per_k)
    wn, q = divmod(rest, p.TN // 4)
    return k, warp_col(th, p) + wn * wsubn(p) + lane_col(th, p) + 4 * q


def _st_c(th, p):
    """Instance ((wm * TM + i) * WNITER + wn) * TN/4 + q stores a float4 of row i, sub-tile
    (wm, wn) of the lane's micro-tiles."""
    row, rest = divmod(th.k, p.WNITER * p.TN // 4)
    wm, i = divmod(row, p.TM)
    wn, q = divmod(rest, p.TN // 4)
    return (
        th.by * p.BM + warp_row(th, p) + wm * wsubm(p) + lane_row(th, p) + i,
        th.bx * p.BN + warp_col(th, p) + wn * wsubn(p) + lane_col(th, p) + 4 * q,
    )


KERNEL = Kernel(
    title="Warp tiling: block tile, warp tile, thread micro-tile",
    concept="each warp owns a WM x WN tile of the block's and walks it in WMITER x WNITER "
    "sub-tiles, a TM x TN micro-tile per lane in each: a warp's reads of As and Bs stay "
    "inside its warp tile, and each value a lane loads feeds WNITER*TN or WMITER*TM FMAs",
    sections="lesson 8 §19; article §4.3",
    # Default: the fastest configuration at level 0 on the H200 (matviz.bench.kernels, 4096^3:
    # 39.6 TFLOP/s, 77.5% of cuBLAS in the same run; kernel 06's best reached 41.0 there)
    params=(
        Param("BM", (64, 128), 128, "BM", "BM", "rows of C per block"),
        Param("BN", (64, 128), 128, "BN", "BN", "columns of C per block"),
        Param("BK", (8, 16), 16, "BK", "BK", "depth of one k-step (rows of the transposed As)"),
        Param("WM", (32, 64), 64, "WM", "WM", "rows of C per warp"),
        Param("WN", (32, 64), 64, "WN", "WN", "columns of C per warp"),
        Param("WNITER", (1, 2, 4), 2, "WNITER", "WNI",
              "sub-tiles across a warp tile (WMITER down follows)"),
        Param("TM", (8,), 8, "TM", "TM", "rows of a lane's micro-tile"),
        Param("TN", (4,), 4, "TN", "TN", "columns of a lane's micro-tile"),
        Param("pad", (0, 4), 4, "PAD", "P", "columns added to each row of As", layout="pad"),
    ),  # fmt: skip
    constraints=(
        Constraint(lambda p: p.BM == p.BN and p.WM == p.WN,
                   "BM={BM} and BN={BN} must be equal, and WM={WM} and WN={WN} too"),
        Constraint(lambda p: p.BM % p.WM == 0 and p.WM * p.WN % (32 * p.TM * p.TN * p.WNITER) == 0,
                   "WM={WM} x WN={WN} must split into 32 lanes x TM x TN x WNITER={WNITER}"),
        Constraint(lambda p: (wsubn(p) // p.TN) * (wsubm(p) // p.TM) == 32
                   and wsubn(p) % p.TN == 0,
                   "a sub-tile WM/WMITER x WN/WNITER must hold 32 micro-tiles of TM x TN "
                   "(WM={WM} WN={WN} WNITER={WNITER})"),
        Constraint(lambda p: 128 <= threads(p) <= 256,
                   "(BM/WM)*(BN/WN) = ({BM}/{WM})*({BN}/{WN}) warps must be 4 to 8"),
        Constraint(
            lambda p: (p.BM * p.BK // 4) % threads(p) == 0 and (p.BK * p.BN // 4) % threads(p) == 0,
            "the threads must split the tiles into whole float4s evenly (BM={BM} BK={BK})",
        ),
    ),  # fmt: skip
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    shared=lambda p: (
        SharedArray("As", p.BK, p.BM, pad=p.pad, source="A", align=16),
        SharedArray("Bs", p.BK, p.BN, source="B", align=16),
    ),
    sites=(
        # as kernel 06: float4 f of the A tile goes to As[c + j][row], instance 4i + j
        Site("st_As", "store", "As", "load", global_width=16,
             repeat=lambda p: p.BM * p.BK // threads(p),
             at=lambda th, p: (_a_float4(th, p)[1] + th.k % 4, _a_float4(th, p)[0]),
             source=lambda th, p: (th.by * p.BM + _a_float4(th, p)[0],
                                   th.t * p.BK + _a_float4(th, p)[1] + th.k % 4)),
        Site("st_Bs", "store", "Bs", "load", width=16,
             repeat=lambda p: p.BK * p.BN // 4 // threads(p), at=_b_float4,
             source=lambda th, p: (th.t * p.BK + _b_float4(th, p)[0],
                                   th.bx * p.BN + _b_float4(th, p)[1])),
        Site("ld_As", "load", "As", "compute", width=16,
             repeat=lambda p: p.BK * wmiter(p) * p.TM // 4, at=_ld_as),
        Site("ld_Bs", "load", "Bs", "compute", width=16,
             repeat=lambda p: p.BK * p.WNITER * p.TN // 4, at=_ld_bs),
    ),  # fmt: skip
    global_accesses=(
        GlobalAccess("st_C", "store", "C", width=16,
                     repeat=lambda p: wmiter(p) * p.TM * p.WNITER * p.TN // 4, at=_st_c),
    ),  # fmt: skip
    # the same tiles as kernels 04-06: their k-step and traffic
    kstep=one_d.kstep,
    work=one_d.work,
    registers=219,  # ptxas, level 0, default parameters
)
