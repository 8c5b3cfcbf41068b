"""05_double_buffered (test only): the tiled kernel with register-staged double buffering.

Two k-steps are in flight: while a block computes on shared buffer t % 2, the elements of tile
t + 1 travel from global memory into registers, and after the compute into buffer (t + 1) % 2.
Its marks come in two channels, copy and compute, both stamped by warp 0; the copy of step
t + 1 overlaps the compute of step t.
"""

from matviz.core.kernel import Kernel, KStep, Launch, Param, Phase, SharedArray, Work, cdiv

FLOAT = 4


def issued(p, M, N, K):
    """Each block column re-reads all of A, each block row all of B (guards included)."""
    return (cdiv(N, p.tile) * M * K + cdiv(M, p.tile) * K * N) * FLOAT


KERNEL = Kernel(
    title="Double-buffered tiles (test kernel)",
    concept="the next tile is loaded into registers while the current one is computed",
    sections="test only: issue 9, several k-steps in flight",
    params=(
        Param("tile", (8, 16, 32), 16, "TILE", "T", "tile edge T: each block is T x T threads"),
        Param("pad", (0, 1), 0, "PAD", "P", "extra shared-memory columns per tile row"),
    ),
    launch=lambda p, M, N, K: Launch(
        grid=(cdiv(N, p.tile), cdiv(M, p.tile)), block=(p.tile, p.tile), c_tile=(p.tile, p.tile)
    ),
    # As[2][T][T + P] then Bs[2][T][T + P]: each array's two buffers, one after the other
    shared=lambda p: (
        SharedArray("As", 2 * p.tile, p.tile, pad=p.pad, source="A"),
        SharedArray("Bs", 2 * p.tile, p.tile, pad=p.pad, source="B"),
    ),
    kstep=KStep(
        depth=lambda p: p.tile,
        channels=(("copy_issue", "copy_stored"), ("compute_begin", "compute_end")),
        phases=(
            Phase("copy", "copy_issue", "copy_stored", "loading", barrier="__syncthreads"),
            Phase("compute", "compute_begin", "compute_end", "computing"),
        ),
        chained=False,
        in_flight=2,
    ),
    work=Work(
        formula="2mnk/T × 4 B",
        formula_bytes=lambda p, M, N, K: 2 * M * N * K / p.tile * FLOAT,
        issued_bytes=issued,
    ),
    registers=32,
)
