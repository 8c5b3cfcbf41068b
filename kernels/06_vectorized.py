"""06_vectorized: kernel 05's micro-tiles with float4 loads and A transposed in shared memory."""

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


def _place(th, p):
    """(row, column) of the thread's micro-tile in the (BM/TM) x (BN/TN) grid of them: row by
    row, or with quads lanes 4j .. 4j+3 on 2 x 2 neighbours (place_row, place_col in the .cu)."""
    across = p.BN // p.TN
    if not p.quads:
        return th.tid // across, th.tid % across
    pair, lane = th.tid // (2 * across), th.tid % (2 * across)  # two rows of micro-tiles
    return pair * 2 + (lane >> 1 & 1), lane // 4 * 2 + (lane & 1)


def thread_row(th, p):
    """First row of the thread's micro-tile inside the block's tile."""
    return _place(th, p)[0] * p.TM


def thread_col(th, p):
    """First column of the thread's micro-tile; split, of its first float4 group."""
    return _place(th, p)[1] * (4 if p.split else p.TN)


def group_col(th, p, q):
    """Column of the thread's float4 group q: side by side, or split BN/(TN/4) apart (GROUP in
    the .cu), where a warp's loads of one group then lie in consecutive 16-byte words."""
    return thread_col(th, p) + q * (p.BN // (p.TN // 4) if p.split else 4)


def _a_float4(th, p):
    """(row, first column) in the A tile of the float4 that store instance k copies."""
    f = th.tid + th.k // 4 * threads(p)
    return f // (p.BK // 4), f % (p.BK // 4) * 4


def _b_float4(th, p):
    f = th.tid + th.k * threads(p)
    return f // (p.BN // 4), f % (p.BN // 4) * 4


def _as_swizzle(p):
    """The XOR mask of row k of As: (k/4) x 128/BK, spreading one transposed store's BK/4
    row groups over the 32 banks (see AS_COL in the .cu)."""
    if not p.swizzle:
        return None
    return lambda k: (k // 4) % (p.BK // 4) * (128 // p.BK)


KERNEL = Kernel(
    title="Vectorised: float4 loads, A transposed in shared memory",
    concept="one 16-byte instruction moves four floats: A and B arrive as float4, and A is "
    "stored transposed so the k loop reads a thread's TM values of A as one float4 too; "
    "padding or an XOR swizzle keeps the transposed stores free of bank conflicts",
    sections="lesson 8 §19; article §4.3",
    # Default: the fastest configuration at level 0 on the H200 (matviz.bench.kernels, 4096^3:
    # 41.0 TFLOP/s, 80% of cuBLAS in the same run). Padding beats the swizzle here although it
    # leaves BK=16's transposed stores 2-way conflicted: the swizzle's addresses take registers
    # (149 against 128), and 128 leave room for 2 blocks of 256 threads per SM.
    # split and quads stay off by default, so the banks view opens on the B loads' 2-way
    # conflict they remove (recordings made before them ran without). On an H100 at 4096^3,
    # level 0 in one process: this default 41.1 TFLOP/s, split 42.3, quads 42.4, both 42.7.
    params=(
        Param("BM", (64, 128), 128, "BM", "BM", "rows of C per block"),
        Param("BN", (64, 128), 128, "BN", "BN", "columns of C per block"),
        Param("BK", (8, 16), 16, "BK", "BK", "depth of one k-step (rows of the transposed As)"),
        Param("TM", (8,), 8, "TM", "TM", "rows of C each thread computes"),
        Param("TN", (4, 8), 8, "TN", "TN", "columns of C each thread computes"),
        Param("pad", (0, 4), 4, "PAD", "P", "columns added to each row of As", layout="pad"),
        Param("swizzle", (0, 1), 0, "SWIZZLE", "X", "XOR-swizzle the columns of As",
              layout="swizzle"),
        Param("split", (0, 1), 0, "SPLIT", "split",
              "a thread's TN columns as float4 groups BN/(TN/4) apart, not side by side",
              label_default=False),
        Param("quads", (0, 1), 0, "QUADS", "quads",
              "a warp's lanes on 2 x 2 quads of micro-tiles, not row by row",
              label_default=False),
    ),
    constraints=(
        Constraint(lambda p: p.BM == p.BN, "BM={BM} and BN={BN} must be equal"),
        Constraint(lambda p: 64 <= threads(p) <= 256,
                   "BM*BN/(TM*TN) = {BM}*{BN}/({TM}*{TN}) threads per block must be 64 to 256"),
        Constraint(
            lambda p: (p.BM * p.BK // 4) % threads(p) == 0 and (p.BK * p.BN // 4) % threads(p) == 0,
            "the BM*BN/(TM*TN) threads must split the tiles into whole float4s evenly "
            "(BM={BM} BN={BN} BK={BK} TM={TM} TN={TN})",
        ),
        Constraint(lambda p: not (p.pad and p.swizzle),
                   "padding (pad={pad}) or a swizzle (swizzle={swizzle}), not both: set one to 0"),
        Constraint(lambda p: not p.split or p.TN > 4,
                   "split={split} needs two float4 groups of columns, TN=8 (TN={TN})"),
        Constraint(lambda p: not p.quads or (p.BN // p.TN % 2 == 0 and p.BM // p.TM % 2 == 0),
                   "quads={quads} need an even number of micro-tiles across and down "
                   "(BM/TM = {BM}/{TM}, BN/TN = {BN}/{TN})"),
    ),  # fmt: skip
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.BN), cdiv(M, p.BM)), block=(threads(p), 1), c_tile=(p.BM, p.BN)
    ),
    shared=lambda p: (
        SharedArray(
            "As", p.BK, p.BM, pad=p.pad, source="A", align=16, swizzle=_as_swizzle(p),
            swizzle_text=f"As[k][m] → As[k][m ^ ((k/4) mod {p.BK // 4})·{128 // p.BK}]"
            if p.swizzle else "",
        ),
        SharedArray("Bs", p.BK, p.BN, source="B", align=16),
    ),  # fmt: skip
    sites=(
        # float4 f = tid + i*THREADS of the A tile (row f/(BK/4), column c = 4(f % (BK/4)))
        # goes to As[c + j][row] for j < 4: instance 4i + j, one LDG.128 for four STS.32
        Site("st_As", "store", "As", "load", global_width=16,
             repeat=lambda p: p.BM * p.BK // threads(p),
             at=lambda th, p: (_a_float4(th, p)[1] + th.k % 4, _a_float4(th, p)[0]),
             source=lambda th, p: (th.by * p.BM + _a_float4(th, p)[0],
                                   th.t * p.BK + _a_float4(th, p)[1] + th.k % 4)),
        Site("st_Bs", "store", "Bs", "load", width=16,
             repeat=lambda p: p.BK * p.BN // 4 // threads(p), at=_b_float4,
             source=lambda th, p: (th.t * p.BK + _b_float4(th, p)[0],
                                   th.bx * p.BN + _b_float4(th, p)[1])),
        # for k: a = As[k][row + 4q .. + 3] (q < TM/4), b = Bs[k][group q's col .. + 3] (q < TN/4)
        Site("ld_As", "load", "As", "compute", width=16, repeat=lambda p: p.BK * p.TM // 4,
             at=lambda th, p: (th.k // (p.TM // 4),
                               thread_row(th, p) + 4 * (th.k % (p.TM // 4)))),
        Site("ld_Bs", "load", "Bs", "compute", width=16, repeat=lambda p: p.BK * p.TN // 4,
             at=lambda th, p: (th.k // (p.TN // 4), group_col(th, p, th.k % (p.TN // 4)))),
    ),  # fmt: skip
    # C[by*BM + row + i][bx*BN + group q's col .. + 3] = acc[i][4q .. 4q + 3], instance i*(TN/4) + q
    global_accesses=(
        GlobalAccess("st_C", "store", "C", width=16, repeat=lambda p: p.TM * p.TN // 4,
                     at=lambda th, p: (th.by * p.BM + thread_row(th, p) + th.k // (p.TN // 4),
                                       th.bx * p.BN + group_col(th, p, th.k % (p.TN // 4)))),
    ),  # fmt: skip
    # the same tiles as kernels 04 and 05: their k-step and traffic
    kstep=one_d.kstep,
    work=one_d.work,
    registers=128,  # ptxas, level 0, default parameters
)
