"""01_naive: one thread per element of C, straight from global memory (lesson 8 §2-5)."""

from matviz.core.kernel import GlobalAccess, Kernel, Launch, Param, Work, cdiv

FLOAT = 4

KERNEL = Kernel(
    title="Naive: one thread per C element",
    concept="2-D grid, each thread walks a row of A and a column of B in global memory",
    sections="lesson 8 §2-5; article §2",
    params=(
        Param("tile", (8, 16, 32), 16, "TILE", "T", "block edge T: each block is T x T threads"),
        Param("b_col_major", (0, 1), 0, "B_COL_MAJOR", "Bcol",
              "1: B stored column-major, so a warp's reads of B stride by K (uncoalesced, §28)",
              label_default=False),
    ),
    layouts=lambda p: {"B": "col"} if p.b_col_major else {},
    # sum += A[row][k] * B[k][col] for k = 0 .. K-1 (every iteration alike), then C[row][col]
    global_accesses=(
        GlobalAccess("ld_A", "load", "A", at=lambda th, p: (th.by * p.tile + th.ty, th.k)),
        GlobalAccess("ld_B", "load", "B", at=lambda th, p: (th.k, th.bx * p.tile + th.tx)),
        GlobalAccess("st_C", "store", "C",
                     at=lambda th, p: (th.by * p.tile + th.ty, th.bx * p.tile + th.tx)),
    ),
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.tile), cdiv(M, p.tile)), block=(p.tile, p.tile), c_tile=(p.tile, p.tile)
    ),
    # every thread loads its row of A and its column of B: 2mnk loads in all
    work=Work(
        formula="2mnk × 4 B",
        formula_bytes=lambda p, M, N, K: 2 * M * N * K * FLOAT,
        issued_bytes=lambda p, M, N, K: 2 * M * N * K * FLOAT,
    ),
    registers=32,
)
