"""03_tiled_transposed: A's tile stored transposed, As[k][m]: bank conflicts, padding (§27-28).

The kernel 02 with one change: A's tile is stored transposed. Its store As[tx][ty] strides by
T + PAD words across a warp (32-way at T=32, PAD 0); the inner loop reads As[k][ty], a
broadcast within each row of threads.
"""

import dataclasses

from matviz.core.kernel import Site
from matviz.core.registry import sibling

tiled = sibling("02_tiled")
_, st_Bs, _, ld_Bs = tiled.sites

KERNEL = dataclasses.replace(
    tiled,
    title="Tiled, A stored transposed: bank conflicts and padding",
    concept="a transposed shared store hits one bank 32 times; [T][T+1] padding fixes it",
    sections="lesson 8 §27-28; article §6.2",
    # the broken-barrier variants are kernel 02's lesson; this .cu keeps both barriers
    params=tuple(p for p in tiled.params if not p.broken),
    sites=(
        # As[tx][ty] = A[by*T + ty][t*T + tx]: the global read stays coalesced
        Site("st_As", "store", "As", "load", at=lambda th, p: (th.tx, th.ty),
             source=lambda th, p: (th.by * p.tile + th.ty, th.t * p.tile + th.tx)),
        st_Bs,
        # sum += As[k][ty] * Bs[k][tx]
        Site("ld_As", "load", "As", "compute", repeat=lambda p: p.tile,
             at=lambda th, p: (th.k, th.ty)),
        ld_Bs,
    ),  # fmt: skip
)
