"""What ptxas really emitted (SASS via cuobjdump) for claims the app and simulator rely on."""

from __future__ import annotations

import pytest

from matviz.backends.sim_model import ld_as_width
from matviz.core import sass
from matviz.core.catalog import get_kernel
from matviz.core.compile_report import nvcc_path
from matviz.errors import MatvizError

needs_sass = pytest.mark.skipif(
    nvcc_path() is None or sass.cuobjdump_path() is None,
    reason="needs nvcc and cuobjdump (the test extra installs cuobjdump)",
)
WIDTH_OP = {16: "LDS.128", 8: "LDS.64"}


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize("tile", [16, 32])
@pytest.mark.parametrize("level", [1, 2])
def test_naive_instrumented_loop_is_scheduled_as_at_level_0(tile: int, level: int) -> None:
    # The block-end stamp is a call for this kernel because inlined it made ptxas reorder the
    # loads of this loop (7% slower at T=32 on the H200); the call must leave the loop alone.
    spec = get_kernel("naive")
    plain = sass.schedule(sass.main_loop(sass.sass(spec, {"tile": tile}, 0)))
    traced = sass.schedule(sass.main_loop(sass.sass(spec, {"tile": tile}, level)))
    assert len(plain) > 32  # the unrolled k loop, not a remainder loop
    assert traced == plain


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize("kernel", ["tiled", "tiled_transposed"])
@pytest.mark.parametrize("tile", [8, 16, 32])
@pytest.mark.parametrize("pad", [0, 1, 2, 4])
def test_a_tile_load_width_is_what_the_simulator_assumes(kernel: str, tile: int, pad: int):
    widths = sass.shared_load_widths(sass.sass(get_kernel(kernel), {"tile": tile, "pad": pad}, 0))
    expected = ld_as_width(kernel, tile, pad)
    vector_ops = {op for op in widths if op != "LDS"}
    assert vector_ops == ({WIDTH_OP[expected]} if expected in WIDTH_OP else set()), widths


def test_missing_tools_are_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sass, "cuobjdump_path", lambda: None)
    with pytest.raises(MatvizError, match="cuobjdump"):
        sass.sass(get_kernel("tiled"), {"tile": 16}, 0)


def test_main_loop_picks_the_longest_backward_branch() -> None:
    # Hand-made listing: a 2-instruction loop at 0x10 and a 3-instruction loop at 0x40.
    listing = [
        (0x00, "MOV R1, RZ"),
        (0x10, "IADD3 R2, R2, 0x1, RZ"),
        (0x20, "@P0 BRA 0x10"),
        (0x40, "FFMA R3, R4, R5, R3"),
        (0x50, "LDS R4, [R6]"),
        (0x60, "@!P1 BRA 0x40"),
        (0x70, "EXIT"),
    ]
    assert sass.main_loop(listing) == ["FFMA R3, R4, R5, R3", "LDS R4, [R6]", "@!P1 BRA 0x40"]
    assert sass.schedule(["@!P1 BRA 0x40"]) == sass.schedule(["@!P0 BRA 0x990"])
