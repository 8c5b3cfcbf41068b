"""What ptxas really emitted (SASS via cuobjdump) for claims the app and simulator rely on."""

from __future__ import annotations

import re

import pytest

from matviz.bench import ladder
from matviz.core import sass_table
from matviz.core.instructions import vector_width
from matviz.core.registry import get_kernel, kernels
from matviz.errors import MatvizError
from matviz.paths import RESOURCE_DIR
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


def test_shared_ops_count_copies_by_width_and_skip_fillers() -> None:
    """A cp.async is named by its width as the bank model names it; the ``@!PT LDS RZ, [RZ]``
    ptxas puts after a cp.async wait never runs; the k loop counted is the one whole tiles run
    (fast_loop), not the longest (the fallback with its bounds tests)."""
    assert sass.shared_op("LDGSTS.E.BYPASS.LTC128B.128 [R3+0x100], desc[UR6][R4.64]") == (
        "LDGSTS.128"
    )
    assert sass.shared_op("@!P0 LDGSTS.E.LTC128B [R3], desc[UR6][R4.64]") == "LDGSTS"
    assert sass.shared_op("LDGSTS.E.LTC128B.64 [R3], desc[UR6][R4.64]") == "LDGSTS.64"
    assert sass.shared_op("@!PT LDS RZ, [RZ]") is None
    assert sass.shared_op("LDSM.16.MT88.4 R8, [R2+0x800]") == "LDSM.16.MT88.4"
    assert sass.shared_op("LDG.E.128 R4, desc[UR4][R2.64]") is None
    fast = [
        (0x00, "LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR6][R4.64]"),
        (0x10, "@!PT LDS RZ, [RZ]"),
        (0x20, "LDSM.16.M88.4 R8, [R2]"),
        (0x30, "HMMA.16816.F32 R12, R8, R10, R12"),
        (0x40, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        (0x50, "@P0 BRA 0x0"),
    ]
    fallback = [(0x100 + 0x10 * i, text) for i, text in enumerate([
        "ISETP.GE.AND P1, PT, R5, R6, PT", "@!P1 LDG.E.U16 R7, desc[UR4][R2.64]",
        "STS.U16 [R3], R7", "LDSM.16.M88.4 R8, [R2]", "HMMA.16816.F32 R12, R8, R10, R12",
        "BAR.SYNC.DEFER_BLOCKING 0x0",
    ])] + [(0x160, "@P0 BRA 0x100")]  # fmt: skip
    ops = sass.shared_ops_per_step(fast + fallback, 1)
    assert ops == {"LDGSTS.128": 1, "LDSM.16.M88.4": 1}


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


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize(
    "params",
    [p for p in get_kernel("wmma").configurations() if p["STAGES"] > 1],
    ids=lambda p: get_kernel("wmma").labels(p),
)
def test_wmma_aligned_k_loop_only_copies_with_cp_async(params: dict) -> None:
    """Kernel 09's k loop for 16-byte aligned rows carries no element-by-element copy: with
    one loop for both cases it ran 232-260 TFLOP/s at W64 S3 (H200, 4096^3), 321-325 without."""
    k = get_kernel("wmma")
    config = k.configure(params, 4096, 4096, 4096)
    body = sass.fast_loop(sass.sass(config, 0))
    steps = sum(1 for text in body if "BAR.SYNC" in text)  # one barrier per pipelined k-step
    copies = (config.params["BM"] + config.params["BN"]) * config.params["BK"] // 8
    assert not [text for text in body if sass.opcode(text).startswith("LDG.E")]
    cp_async = sum(sass.shared_op(text) == "LDGSTS.128" for text in body)
    assert cp_async == steps * copies // config.threads


def test_fast_loop_is_the_leanest_loop_doing_the_whole_math() -> None:
    listing = [
        (0x00, "LDG.E.U16 R2, [R4]"),  # a loop with an element-wise copy
        (0x08, "LDG.E.U16 R9, [R4+0x2]"),
        (0x10, "FFMA R3, R4, R5, R3"),
        (0x20, "FFMA R6, R4, R5, R6"),
        (0x30, "@P0 BRA 0x0"),
        (0x40, "LDGSTS.E.BYPASS.128 [R7], [R8]"),  # the same math with a 16-byte copy
        (0x50, "FFMA R3, R4, R5, R3"),
        (0x60, "@!P1 FFMA R6, R4, R5, R6"),
        (0x70, "@P0 BRA 0x40"),
        (0x80, "IADD3 R1, R1, 0x1, RZ"),  # an epilogue loop: no math, longest of all
        (0x90, "IADD3 R1, R1, 0x1, RZ"),
        (0xA0, "IADD3 R1, R1, 0x1, RZ"),
        (0xB0, "IADD3 R1, R1, 0x1, RZ"),
        (0xB8, "IADD3 R1, R1, 0x1, RZ"),
        (0xC0, "@P0 BRA 0x80"),
        (0xD0, "FFMA R3, R4, R5, R3"),  # a pipeline's last steps: the math, no copy, shortest
        (0xE0, "FFMA R6, R4, R5, R6"),
        (0xF0, "@P0 BRA 0xd0"),
    ]
    assert sass.math_ops(sass.main_loop(listing)) == 0
    assert sass.fast_loop(listing) == [text for a, text in listing if 0x40 <= a <= 0x70]
    assert sass.fast_loop(listing[-9:-3]) == []
    assert sass.fast_loop(listing[-3:]) == ["FFMA R3, R4, R5, R3", "FFMA R6, R4, R5, R6",
                                            "@P0 BRA 0xd0"]  # fmt: skip


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize(
    ("kernel", "params"),
    [
        ("tiled", {"tile": 32, "pad": 0}),
        ("async_pipeline", {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "STAGES": 2,
                            "pad": 4, "swizzle": 0, "split": 1, "quads": 1}),
        ("wmma", {"BM": 128, "BN": 128, "BK": 32, "WT": 64, "PAD": 8, "STAGES": 3}),
    ],
    ids=str,
)  # fmt: skip
def test_bundled_k_loop_table_is_what_ptxas_emits_now(kernel: str, params: dict) -> None:
    """resources/bench/sass_sm90_k_loops.json is current (python -m matviz.bench.sass_loops
    --table), for a seed kernel, the fastest SIMT rung and a Tensor Core rung."""
    from matviz.bench import sass_loops

    k = get_kernel(kernel)
    counted = sass_loops.count(k.configure(params, 64, 64, 64))
    assert counted is not None and counted == sass_table.k_loop(k.stem, k.labels(params))


_PREDICATE = re.compile(r", !?U?P\d$")  # a trailing predicate operand


def _ladder_params(kernel: str) -> list[dict]:
    """``kernel``'s default and the configurations the bundled ladders stand it on."""
    rows = [
        row
        for name in ("h200_ladder_4096.json", "h100_ladder_4096.json")
        for row in ladder.load_rows(RESOURCE_DIR / "bench" / name)
        if row["kernel"] == kernel
    ]
    found = [get_kernel(kernel).default_params(), *(row["params"] for row in rows)]
    return [p for i, p in enumerate(found) if p not in found[:i]]


@pytest.mark.nvcc
@needs_sass
@pytest.mark.parametrize(
    "kernel,params",
    [
        pytest.param(k, p, id=f"{k} {get_kernel(k).labels(p)}")
        for k in ("vectorized", "async_pipeline", "warp_tiling", "wmma", "mma_pipeline")
        for p in _ladder_params(k)
        if p.get("STAGES", 2) > 1  # 09 at STAGES 1 loads as the lesson draws it, bounds and all
    ],
)
def test_whole_tile_k_loop_tests_no_bounds(kernel: str, params: dict) -> None:
    """Kernels 06-10 run a copy of their body where M, N and K are whole tiles: its k loop
    loads or copies every element with no bounds predicate (``@!P1 LDG.E.128``, or cp.async's
    zero-fill ``LDGSTS.E [...], [...], P5``). Beside the loop with bounds tests (H100, 4096^3,
    one process): 06 +1.8%, 07 S2 P0 X1 +2.5%, 08 +2.9%. A guard on a whole step's copies
    (``@!P0 LDGSTS``: the last STAGES - 1 steps issue none) is no bounds test."""
    config = get_kernel(kernel).configure(params, 4096, 4096, 4096)
    body = sass.fast_loop(sass.sass(config, 0))
    global_ops = sass.global_reads(body)
    predicated = [
        text
        for text in global_ops
        if _PREDICATE.search(text) or (text.startswith("@") and "LDGSTS." not in text)
    ]
    assert global_ops and not predicated
