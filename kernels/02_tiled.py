"""02_tiled: the lesson's tiled kernel, T x T tiles of A and B in shared memory (§6-17, §26-27)."""

from matviz.core.kernel import (
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


def issued(p, M, N, K):
    """Each block column re-reads all of A, each block row all of B (guards included)."""
    return (cdiv(N, p.tile) * M * K + cdiv(M, p.tile) * K * N) * FLOAT


KERNEL = Kernel(
    title="Tiled: A and B tiles in shared memory",
    concept="tiles staged in shared memory between two __syncthreads, sum in a register",
    sections="lesson 8 §6-17, §26-27; article §3-4",
    params=(
        Param("tile", (8, 16, 32), 16, "TILE", "T", "tile edge T: each block is T x T threads"),
        Param("pad", (0, 1, 2, 4), 0, "PAD", "P", "extra shared-memory columns per tile row",
              layout="pad"),
        Param("drop_sync", (0, 1, 2), 0, "DROP_SYNC", "no-sync",
              "deliberately broken: 1 leaves out barrier 1 (reads before the tile is "
              "loaded), 2 leaves out barrier 2 (the next tile overwrites one still read)",
              label_default=False, broken=(1, 2)),
    ),  # fmt: skip
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.tile), cdiv(M, p.tile)), block=(p.tile, p.tile), c_tile=(p.tile, p.tile)
    ),
    shared=lambda p: (
        SharedArray("As", p.tile, p.tile, pad=p.pad, source="A"),
        SharedArray("Bs", p.tile, p.tile, pad=p.pad, source="B"),
    ),
    sites=(
        # As[ty][tx] = A[by*T + ty][t*T + tx];  Bs[ty][tx] = B[t*T + ty][bx*T + tx]
        Site("st_As", "store", "As", "load", at=lambda th, p: (th.ty, th.tx),
             source=lambda th, p: (th.by * p.tile + th.ty, th.t * p.tile + th.tx)),
        Site("st_Bs", "store", "Bs", "load", at=lambda th, p: (th.ty, th.tx),
             source=lambda th, p: (th.t * p.tile + th.ty, th.bx * p.tile + th.tx)),
        # sum += As[ty][k] * Bs[k][tx] for k = 0 .. T-1
        Site("ld_As", "load", "As", "compute", repeat=lambda p: p.tile,
             at=lambda th, p: (th.ty, th.k)),
        Site("ld_Bs", "load", "Bs", "compute", repeat=lambda p: p.tile,
             at=lambda th, p: (th.k, th.tx)),
    ),  # fmt: skip
    # C[by*T + ty][bx*T + tx] = sum, once per thread
    global_accesses=(
        GlobalAccess("st_C", "store", "C",
                     at=lambda th, p: (th.by * p.tile + th.ty, th.bx * p.tile + th.tx)),
    ),  # fmt: skip
    kstep=KStep(  # fmt: skip
        depth=lambda p: p.tile,
        channels=(("issue", "loaded", "computed"),),
        phases=(
            Phase("load", "issue", "loaded", "loading", barrier="__syncthreads",
                  left_out_when=("drop_sync", 1)),
            Phase("compute", "loaded", "computed", "computing", barrier="__syncthreads",
                  left_out_when=("drop_sync", 2)),
        ),
    ),
    work=Work(
        formula="2mnk/T × 4 B",
        formula_bytes=lambda p, M, N, K: 2 * M * N * K / p.tile * FLOAT,
        issued_bytes=issued,
    ),
    registers=32,
)
