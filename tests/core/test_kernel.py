"""Kernel descriptions and the registry: look-up, parameters, validation, geometry, traffic."""

from __future__ import annotations

import re

import numpy as np
import pytest

from matviz.core import registry
from matviz.core.kernel import MAX_INDEX, Constraint, Kernel, KStep, Launch, Param, Phase, Work
from matviz.core.registry import get_kernel, kernels
from matviz.errors import MatvizError
from matviz.paths import KERNEL_DIR

CATALOG = kernels()
TILED = ["tiled", "tiled_transposed"]  # the seed's kernels: T x T tiles, parameters tile and pad


# -- look-up -----------------------------------------------------------------------------------


def test_get_kernel_by_name_stem_and_number() -> None:
    tiled = get_kernel("tiled")
    assert tiled.name == "tiled"
    assert tiled.number == 2
    assert get_kernel("02_tiled") is tiled
    assert get_kernel("2") is tiled
    assert get_kernel(" tiled_transposed ").name == "tiled_transposed"
    assert get_kernel("01_naive").name == "naive"


def test_unknown_kernel_lists_the_known_ones() -> None:
    with pytest.raises(MatvizError, match="unknown kernel 'tiledd'") as info:
        get_kernel("tiledd")
    for name in ("naive", "tiled", "tiled_transposed"):
        assert name in str(info.value)


# -- parameters --------------------------------------------------------------------------------


def test_resolve_params_defaults_and_overrides() -> None:
    tiled = get_kernel("tiled")
    assert tiled.resolve_params() == {"tile": 16, "pad": 0, "drop_sync": 0}
    assert tiled.resolve_params(tile=32, pad=None) == {"tile": 32, "pad": 0, "drop_sync": 0}
    assert tiled.resolve_params(tile=8, pad=4) == {"tile": 8, "pad": 4, "drop_sync": 0}
    assert get_kernel("naive").resolve_params() == {"tile": 16, "b_col_major": 0}


@pytest.mark.parametrize(("name", "value"), [("tile", 12), ("tile", 64), ("pad", 3)])
def test_resolve_params_rejects_values_outside_the_set(name: str, value: int) -> None:
    spec = get_kernel("tiled_transposed")
    with pytest.raises(MatvizError) as info:
        spec.resolve_params(**{name: value})
    message = str(info.value)
    assert f"{name}={value}" in message
    allowed = re.search(r"allowed: ([\d, ]+)", message)
    assert allowed, message
    assert [int(v) for v in allowed.group(1).split(",")] == list(spec.param(name).values)


def test_resolve_params_rejects_a_parameter_the_kernel_lacks() -> None:
    with pytest.raises(MatvizError, match="naive has no parameter 'pad'"):
        get_kernel("naive").resolve_params(pad=1)


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("M", "N", "K", "label"),
    [(0, 16, 16, "M"), (16, -1, 16, "N"), (16, 16, 0, "K"), (1.5, 16, 16, "M"), (16, 16, "8", "K")],
)
def test_validate_rejects_bad_sizes(M, N, K, label: str) -> None:
    spec = get_kernel("tiled")
    with pytest.raises(MatvizError, match=f"^{label} must be a whole number"):
        spec.configure({}, M, N, K)


def test_validate_accepts_numpy_integers() -> None:
    spec = get_kernel("tiled")
    config = spec.configure({}, np.int64(64), np.int64(32), np.int64(16))
    assert config.grid == (2, 4)
    assert isinstance(config.M, int)


@pytest.mark.parametrize(
    ("M", "N", "K", "label"),
    # 46341**2 = 2_147_488_281 is just past 2**31 - 1 = 2_147_483_647.
    [(46341, 1, 46341, "M*K"), (1, 46341, 46341, "K*N"), (46341, 46341, 1, "M*N")],
)
def test_validate_rejects_32_bit_overflow(M: int, N: int, K: int, label: str) -> None:
    spec = get_kernel("naive")
    with pytest.raises(MatvizError, match=re.escape(label)):
        spec.configure({}, M, N, K)


def test_validate_accepts_the_largest_product_that_fits() -> None:
    # 46340**2 = 2_147_395_600 still fits in a signed 32-bit index.
    assert 46340 * 46340 <= MAX_INDEX
    spec = get_kernel("naive")
    spec.configure({}, 46340, 1, 46340)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_validate_rejects_overflow_given_numpy_int32() -> None:
    spec = get_kernel("tiled")
    with pytest.raises(MatvizError, match="M\\*K"):
        spec.configure({}, np.int32(50000), np.int32(8), np.int32(50000))


def test_validate_rejects_grid_y_beyond_cuda_limit() -> None:
    # Tile 8 and M = 600000 need ceil(600000 / 8) = 75000 block rows; CUDA allows 65535.
    spec = get_kernel("naive")
    with pytest.raises(MatvizError, match="75000 block rows"):
        spec.configure({"tile": 8}, 600000, 1, 1)


def test_validate_rejects_too_much_shared_memory() -> None:
    spec = get_kernel("tiled")
    config = spec.configure({"tile": 16, "pad": 1}, 64, 64, 64, check=False)
    need = 2 * 16 * 17 * 4  # two float[16][17] tiles = 2176 bytes
    assert config.check(smem_limit=need).smem_bytes == need
    with pytest.raises(MatvizError, match=f"{need} bytes of shared memory"):
        config.check(smem_limit=need - 1)


def test_a_kernel_sized_at_launch_may_pass_48_kib_as_far_as_the_device_allows() -> None:
    # kernel 10 at BN 256 and 4 stages: 4 slots of (128 + 256) x 32 halves = 96 KiB
    config = get_kernel("mma_pipeline").configure({"BN": 256, "STAGES": 4}, 512, 512, 512)
    assert config.smem_bytes == 4 * (128 + 256) * 32 * 2 == 98304
    assert config.check(smem_limit=232448) is config  # the H200's opt-in maximum
    assert "-DMV_SMEM_BYTES=98304" in config.defines(0)
    with pytest.raises(MatvizError, match="98304 bytes of shared memory .* limit of 49152"):
        config.check(smem_limit=49152)  # a device without the opt-in
    # a static struct stays within 48 KiB whatever the device allows
    static = get_kernel("tiled").configure({"tile": 16, "pad": 1}, 64, 64, 64)
    assert static.smem_limit == 48 * 1024 and "MV_SMEM_BYTES" not in " ".join(static.defines(0))


def test_every_allowed_configuration_fits_the_default_limits() -> None:
    for spec in CATALOG.values():
        assert spec.configurations()
        for params in spec.configurations():
            spec.configure(params, 100, 100, 104)  # K: a multiple of 8 (kernel 11's TMA rows)


def test_a_shape_the_kernel_cannot_run_is_one_line() -> None:
    with pytest.raises(MatvizError, match=r"^kernel wgmma_tma: K=333 is not a multiple of 8"):
        get_kernel("wgmma_tma").configure({}, 1000, 777, 333)
    get_kernel("wgmma_tma").configure({}, 1000, 777, 336)  # odd M and N are fine


# -- geometry ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["naive", *TILED])
def test_geometry_of_an_odd_shape(name: str) -> None:
    spec = get_kernel(name)
    geometry = spec.configure({"tile": 16}, 1000, 777, 333)
    # grid x covers N: 48 * 16 = 768 < 777 -> 49; grid y covers M: 62 * 16 = 992 < 1000 -> 63.
    assert geometry.grid == (49, 63)
    assert geometry.block == (16, 16)
    assert geometry.threads == 256
    assert geometry.warps == 8
    assert geometry.n_blocks == 49 * 63
    if geometry.uses_shared:
        # 20 * 16 = 320 < 333 -> 21 k-tiles; two float[16][16] tiles = 2048 bytes.
        assert geometry.n_steps == 21
        assert geometry.smem_bytes == 2048
    else:
        assert geometry.n_steps == 0
        assert geometry.smem_bytes == 0


def test_geometry_of_exact_multiples_and_padding() -> None:
    spec = get_kernel("tiled_transposed")
    geometry = spec.configure({"tile": 32, "pad": 1}, 64, 96, 128)
    assert geometry.grid == (3, 2)
    assert geometry.n_steps == 4
    assert geometry.smem_bytes == 2 * 32 * 33 * 4
    assert geometry.array_bases == {"As": 0, "Bs": 32 * 33 * 4}
    assert geometry.warps == 32


# -- sources -----------------------------------------------------------------------------------


_REF = re.compile(r"§(\d+(?:\.\d+)?)(?:-(\d+))?")
_PART = re.compile(r"(lesson \d+|article)([^;()]*)")


def _section_refs(text: str) -> dict[str, set[str]]:
    """{'lesson 8': {'6', '7', ...}, 'article': {'3', '4'}} from text citing sections."""
    refs: dict[str, set[str]] = {}
    for source, body in _PART.findall(text):
        for first, last in _REF.findall(body):
            if last:
                numbers = {str(n) for n in range(int(first), int(last) + 1)}
            else:
                numbers = {first}
            refs.setdefault(source, set()).update(numbers)
    return refs


def test_section_refs_parser() -> None:
    text = "(lesson 8 §6-8, boundaries §26; article §6.2)"
    assert _section_refs(text) == {"lesson 8": {"6", "7", "8", "26"}, "article": {"6.2"}}


@pytest.mark.parametrize("name", list(CATALOG))
def test_source_header_names_the_seed_sections(name: str) -> None:
    spec = get_kernel(name)
    assert spec.source.is_file()
    lines = spec.source.read_text().splitlines()
    assert lines[0].startswith(f"// {spec.source.stem} - ")
    header = []
    for line in lines:
        if not line.startswith("//"):
            break
        header.append(line[2:])
    expected = _section_refs(spec.sections)
    assert expected, spec.sections
    assert _section_refs(" ".join(header)) == expected


@pytest.mark.parametrize("name", list(CATALOG))
def test_source_defines_the_entry_point(name: str) -> None:
    spec = get_kernel(name)
    text = spec.source.read_text()
    bounds = r"((MV_LAUNCH_BOUNDS(_MIN)?|__launch_bounds__)\([^)]*\) )?"
    assert re.search(rf'extern "C" __global__ void {bounds}{spec.entry_point}\(', text)


def test_descriptions_and_kernel_sources_correspond_one_to_one() -> None:
    sources = sorted(KERNEL_DIR.glob("*.cu"))
    descriptions = sorted(KERNEL_DIR.glob("[0-9][0-9]_*.py"))
    assert sources, KERNEL_DIR
    assert [p.stem for p in sources] == [p.stem for p in descriptions]
    assert [k.source for k in CATALOG.values()] == sources
    for path in sources:
        kernel = get_kernel(path.stem)
        assert (kernel.number, kernel.name) == (int(path.stem[:2]), path.stem[3:])
    assert len({k.number for k in CATALOG.values()}) == len(CATALOG)


def test_a_new_description_file_is_found_with_nothing_else_touched(tmp_path, monkeypatch):
    for path in KERNEL_DIR.iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "99_extra.cu").write_text("// 09_extra - a test kernel (lesson 8 §2)\n")
    (tmp_path / "99_extra.py").write_text(
        (KERNEL_DIR / "01_naive.py").read_text().replace("Naive:", "Extra:")
    )
    monkeypatch.setattr(registry, "KERNEL_DIR", tmp_path)
    registry.kernels.cache_clear()
    try:
        extra = get_kernel("extra")
        assert (extra.number, extra.title.split(":")[0]) == (99, "Extra")
        assert list(kernels())[-1] == "extra"
    finally:
        registry.kernels.cache_clear()


def test_a_description_without_its_source_is_refused(tmp_path, monkeypatch):
    (tmp_path / "05_lonely.py").write_text((KERNEL_DIR / "01_naive.py").read_text())
    monkeypatch.setattr(registry, "KERNEL_DIR", tmp_path)
    registry.kernels.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="no kernel source 05_lonely.cu"):
            kernels()
    finally:
        registry.kernels.cache_clear()


# -- descriptions ------------------------------------------------------------------------------


def _tiny(**changes) -> Kernel:
    base = dict(
        title="t",
        concept="c",
        sections="lesson 8 §2",
        params=(
            Param("BM", (32, 64), 64, "BM", "BM", "rows of C per block"),
            Param("TM", (4, 8), 8, "TM", "TM", "rows of C per thread"),
        ),
        launch=lambda p, M, N, K: Launch((-(-N // 64), -(-M // p.BM)), (p.BM // p.TM * 64, 1),
                                         (p.BM, 64)),
        work=Work("2mnk", lambda p, M, N, K: 0.0, lambda p, M, N, K: 0.0),
        constraints=(Constraint(lambda p: p.BM % p.TM == 0, "BM={BM} must be a multiple of TM"),),
        name="tiny",
        number=99,
    )  # fmt: skip
    return Kernel(**{**base, **changes})


def test_parameters_may_have_any_name_and_the_block_need_not_be_the_tile() -> None:
    config = _tiny().configure({"BM": 32, "TM": 4}, 100, 100, 100)
    assert config.block == (8 * 64, 1) and config.launch.c_tile == (32, 64)
    assert config.defines(1) == ["-DBM=32", "-DTM=4", "-DMV_LEVEL=1"]
    assert _tiny().labels({"BM": 32, "TM": 4}) == "BM32 TM4"
    assert _tiny().param("BM").option == "--bm"


def test_constraints_between_parameters_are_one_line_errors() -> None:
    rule = Constraint(lambda p: p.TM * 2 != p.BM, "BM={BM} must not be twice TM={TM}")
    with pytest.raises(MatvizError, match="^kernel tiny: BM=32 must not be twice TM=16$"):
        _tiny(
            params=(
                Param("BM", (32,), 32, "BM", "BM", ""),
                Param("TM", (16,), 16, "TM", "TM", ""),
            ),
            constraints=(rule,),
        ).resolve_params()


def test_a_default_outside_the_allowed_values_is_a_description_bug() -> None:
    with pytest.raises(ValueError, match="default 3 is not allowed"):
        Param("x", (1, 2), 3, "X", "X", "")


def test_a_phase_must_name_marks_of_one_channel() -> None:
    with pytest.raises(ValueError, match="names a mark"):
        KStep(8, (("a", "b"),), (Phase("p", "a", "zz", "loading"),))
    with pytest.raises(ValueError, match="spans two channels"):
        KStep(8, (("a", "b"), ("c", "d")), (Phase("p", "a", "d", "computing"),))


@pytest.mark.parametrize("name", TILED)
def test_program_order_and_probe_slots(name: str) -> None:
    config = get_kernel(name).configure({"tile": 8, "pad": 1}, 64, 64, 64)
    # one k-step: the two stores, then the inner loop reading As and Bs alternately
    assert config.program[:4] == (("st_As", 0), ("st_Bs", 0), ("ld_As", 0), ("ld_Bs", 0))
    assert config.program[-1] == ("ld_Bs", 7) and len(config.program) == 2 + 2 * 8
    # slots are site-major, so the .cu writes MV_SITE_ld_As + k
    assert [(s.name, s.slot, s.repeat) for s in config.sites] == [
        ("st_As", 0, 1), ("st_Bs", 1, 1), ("ld_As", 2, 8), ("ld_Bs", 10, 8)
    ]  # fmt: skip
    assert "-DMV_SITE_ld_Bs=10" in config.defines(3) and "-DMV_PROBE_SLOTS=18" in config.defines(3)
    assert "-DMV_BARRIERS=2" in config.defines(3)


def test_every_site_of_a_source_is_probed_through_its_generated_slot_name() -> None:
    for kernel in CATALOG.values():
        text = kernel.source.read_text()
        names = {site.name for p in kernel.configurations() for site in kernel.sites_at(p)}
        for name in names:
            assert f"MV_PROBE(MV_SITE_{name}" in text, (kernel.name, name)
        assert not re.search(r"MV_PROBE\(\s*\d", text), kernel.name  # no literal slot numbers


def test_staged_elements_and_fmas_per_step_come_from_the_description() -> None:
    config = get_kernel("tiled").configure({"tile": 16}, 64, 64, 64)
    assert config.staged_per_step == {"A": 256, "B": 256}
    assert config.fmas_per_step == 16**3
    assert get_kernel("naive").configure({}, 64, 64, 64).staged_per_step == {}


# -- traffic -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TILED)
@pytest.mark.parametrize("tile", [8, 16, 32])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (2, 3, 4), (5, 1, 2)])
def test_issued_bytes_equal_the_formula_on_exact_multiples(name, tile, m, n, k) -> None:
    M, N, K = m * tile, n * tile, k * tile
    config = get_kernel(name).configure({"tile": tile}, M, N, K)
    formula = 2 * M * N * K / tile * 4
    assert config.issued_bytes == formula
    assert config.formula_bytes == formula


@pytest.mark.parametrize("name", TILED)
def test_issued_bytes_exceed_the_formula_on_ragged_m_or_n(name: str) -> None:
    def issued_bytes(M, N, K):
        return get_kernel(name).configure({"tile": 16}, M, N, K).issued_bytes

    M, N, K = 1000, 777, 333
    formula = 2 * M * N * K / 16 * 4
    issued = issued_bytes(M, N, K)
    # 49 block columns each read all of A (M x K), 63 block rows each read all of B (K x N).
    assert issued == (49 * 1000 * 333 + 63 * 333 * 777) * 4
    assert issued > formula
    # Ragged M alone or N alone already costs extra: the last block row/column is partial.
    assert issued_bytes(1000, 768, 320) > 2 * 1000 * 768 * 320 / 16 * 4
    assert issued_bytes(992, 777, 320) > 2 * 992 * 777 * 320 / 16 * 4


@pytest.mark.parametrize("name", TILED)
def test_ragged_k_alone_costs_nothing_extra(name: str) -> None:
    # The a_col < K and b_row < K guards skip the loads past K, so a partial last k-tile
    # issues exactly the elements that exist.
    config = get_kernel(name).configure({"tile": 16}, 64, 48, 333)
    assert config.issued_bytes == 2 * 64 * 48 * 333 / 16 * 4


def test_naive_issues_two_loads_per_multiply_add() -> None:
    for M, N, K in [(16, 16, 16), (1000, 777, 333)]:
        config = get_kernel("naive").configure({"tile": 16}, M, N, K)
        assert config.issued_bytes == 2 * M * N * K * 4
        assert config.formula_bytes == 2 * M * N * K * 4


def test_register_tiling_block_is_not_its_tile() -> None:
    # BM x BN = 64 x 64 outputs per block, TM = 8 per thread: 512 threads in a 1-D block
    config = get_kernel("register_tiling_1d").configure({}, 1000, 777, 333)
    assert config.block == (512, 1) and config.launch.c_tile == (64, 64)
    assert config.grid == (13, 16)  # ceil(777 / 64), ceil(1000 / 64)
    assert config.n_steps == 42  # ceil(333 / 8)
    assert config.smem_bytes == (64 * 8 + 8 * 64) * 4
    assert config.staged_per_step == {"A": 512, "B": 512}
    assert config.fmas_per_step == 64 * 64 * 8
    # a block re-reads its row band of A and column band of B: mnk(1/BN + 1/BM) on multiples
    exact = get_kernel("register_tiling_1d").configure({}, 128, 192, 64)
    assert exact.issued_bytes == exact.formula_bytes == 128 * 192 * 64 * (1 / 64 + 1 / 64) * 4


def test_register_tiling_constraints_are_checked() -> None:
    with pytest.raises(MatvizError, match="threads per block must be 32 to 512"):
        get_kernel("register_tiling_1d").resolve_params({"BM": 128, "BN": 128, "TM": 8})
    # every other combination of the allowed values launches
    assert len(get_kernel("register_tiling_1d").configurations()) == 8
