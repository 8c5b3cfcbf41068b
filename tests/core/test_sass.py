"""What ptxas really emitted (SASS via cuobjdump) for claims the app and simulator rely on."""

from __future__ import annotations

import pytest

from matviz.core import sass_table
from matviz.core.instructions import vector_width
from matviz.core.registry import get_kernel, kernels
from matviz.errors import MatvizError
from matviz.toolchain import sass
from matviz.toolchain.nvcc import nvcc_path

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
    config = get_kernel("naive").configure({"tile": tile}, 64, 64, 64)
    plain = sass.schedule(sass.main_loop(sass.sass(config, 0)))
    traced = sass.schedule(sass.main_loop(sass.sass(config, level)))
    assert len(plain) > 32  # the unrolled k loop, not a remainder loop
    assert traced == plain


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize(
    ("kernel", "params"),
    [(k.name, p) for k in kernels().values() for p in k.configurations() if k.sites_at(p)],
    ids=str,
)
def test_shared_load_widths_are_what_the_model_assumes(kernel: str, params: dict) -> None:
    """The vector widths ptxas gives the shared loads are the model's; and where the bundled
    table (resources/bench/sass_sm90_shared_ops.json, which the banks view quotes) has this
    configuration, its counts are what ptxas emits now: a kernel changed without running
    python -m matviz.bench.sass_table fails here."""
    spec = get_kernel(kernel)
    config = spec.configure(params, 64, 64, 64)
    listing = sass.sass(config, 0)
    bundled = sass_table.emitted(spec.stem, spec.labels(params))
    if bundled is not None:
        assert sass.shared_ops_per_step(listing, config.n_barriers) == bundled
    widths = sass.shared_load_widths(listing)
    loads = [rs for rs in config.sites if rs.site.kind == "load"]
    expected = {rs.site.matrix_load for rs in loads if rs.site.matrix_load}
    widths_of = (vector_width(config, rs.name) for rs in loads if not rs.site.matrix_load)
    expected |= {WIDTH_OP[w] for w in widths_of if w in WIDTH_OP}
    vector_ops = {op for op in widths if op != "LDS"}
    assert vector_ops == expected, widths


def test_missing_tools_are_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sass, "cuobjdump_path", lambda: None)
    with pytest.raises(MatvizError, match="cuobjdump"):
        sass.sass(get_kernel("tiled").configure({"tile": 16}, 64, 64, 64), 0)


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


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("tiled", {"tile": 32, "pad": 0}),
        ("register_tiling_1d", {"BM": 64, "BN": 64, "BK": 8, "TM": 8}),
    ],
    ids=str,
)
def test_bundled_sass_table_is_what_ptxas_emits_now(kernel: str, params: dict) -> None:
    """resources/bench/sass_sm90_shared_ops.json is current (python -m matviz.bench.sass_table)."""
    k = get_kernel(kernel)
    config = k.configure(params, 64, 64, 64)
    ops = sass.shared_ops_per_step(sass.sass(config, 0), config.n_barriers)
    assert ops == sass_table.emitted(k.stem, k.labels(params))


def test_shared_ops_per_step_divides_an_unrolled_loop() -> None:
    listing = [
        (0x00, "LDS.128 R4, [R2]"),
        (0x10, "STS [R3], R5"),
        (0x20, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        (0x30, "LDS R6, [R2+0x4]"),
        (0x40, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        (0x50, "LDS.128 R4, [R2+0x10]"),
        (0x60, "STS [R3+0x4], R5"),
        (0x70, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        (0x80, "LDS R6, [R2+0x14]"),
        (0x90, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        (0xA0, "@P0 BRA 0x0"),
    ]
    assert sass.shared_ops_per_step(listing, 2) == {"LDS": 1, "LDS.128": 1, "STS": 1}
    with pytest.raises(MatvizError, match="barriers"):
        sass.shared_ops_per_step(listing, 3)
