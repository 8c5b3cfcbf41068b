"""The kernel catalog: look-up, parameter checks, validation, geometry and traffic formulas."""

from __future__ import annotations

import re

import numpy as np
import pytest

from matviz.core import catalog
from matviz.core.catalog import CATALOG, MAX_INDEX, get_kernel
from matviz.errors import MatvizError

TILED = [name for name, spec in CATALOG.items() if spec.uses_shared]


# -- look-up -----------------------------------------------------------------------------------


def test_get_kernel_by_name_stem_and_number() -> None:
    tiled = get_kernel("tiled")
    assert tiled.name == "tiled"
    assert tiled.number == 2
    assert get_kernel("02_tiled") is tiled
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
    assert tiled.resolve_params() == {"tile": 16, "pad": 0}
    assert tiled.resolve_params(tile=32, pad=None) == {"tile": 32, "pad": 0}
    assert tiled.resolve_params(tile=8, pad=4) == {"tile": 8, "pad": 4}
    assert get_kernel("naive").resolve_params() == {"tile": 16}


@pytest.mark.parametrize(("name", "value"), [("tile", 12), ("tile", 64), ("pad", 3)])
def test_resolve_params_rejects_values_outside_the_set(name: str, value: int) -> None:
    spec = get_kernel("tiled_transposed")
    with pytest.raises(MatvizError) as info:
        spec.resolve_params(**{name: value})
    message = str(info.value)
    assert f"{name}={value}" in message
    allowed = re.search(r"allowed: ([\d, ]+)", message)
    assert allowed, message
    assert [int(v) for v in allowed.group(1).split(",")] == list(spec.params[name])


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
        spec.validate(spec.resolve_params(), M, N, K)


def test_validate_accepts_numpy_integers() -> None:
    spec = get_kernel("tiled")
    geometry = spec.validate(spec.resolve_params(), np.int64(64), np.int64(32), np.int64(16))
    assert geometry.grid == (2, 4)


@pytest.mark.parametrize(
    ("M", "N", "K", "label"),
    # 46341**2 = 2_147_488_281 is just past 2**31 - 1 = 2_147_483_647.
    [(46341, 1, 46341, "M*K"), (1, 46341, 46341, "K*N"), (46341, 46341, 1, "M*N")],
)
def test_validate_rejects_32_bit_overflow(M: int, N: int, K: int, label: str) -> None:
    spec = get_kernel("naive")
    with pytest.raises(MatvizError, match=re.escape(label)):
        spec.validate(spec.resolve_params(), M, N, K)


def test_validate_accepts_the_largest_product_that_fits() -> None:
    # 46340**2 = 2_147_395_600 still fits in a signed 32-bit index.
    assert 46340 * 46340 <= MAX_INDEX
    spec = get_kernel("naive")
    spec.validate(spec.resolve_params(), 46340, 1, 46340)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_validate_rejects_overflow_given_numpy_int32() -> None:
    spec = get_kernel("tiled")
    with pytest.raises(MatvizError, match="M\\*K"):
        spec.validate(spec.resolve_params(), np.int32(50000), np.int32(8), np.int32(50000))


def test_validate_rejects_grid_y_beyond_cuda_limit() -> None:
    # Tile 8 and M = 600000 need ceil(600000 / 8) = 75000 block rows; CUDA allows 65535.
    spec = get_kernel("naive")
    with pytest.raises(MatvizError):
        spec.validate(spec.resolve_params(tile=8), 600000, 1, 1)


def test_validate_rejects_too_much_shared_memory() -> None:
    spec = get_kernel("tiled")
    params = spec.resolve_params(tile=16, pad=1)
    need = 2 * 16 * 17 * 4  # two float[16][17] tiles = 2176 bytes
    assert spec.validate(params, 64, 64, 64, smem_limit=need).smem_bytes == need
    with pytest.raises(MatvizError, match=f"{need} bytes of shared memory"):
        spec.validate(params, 64, 64, 64, smem_limit=need - 1)


def test_every_allowed_configuration_fits_the_default_limits() -> None:
    for spec in CATALOG.values():
        for tile in spec.params["tile"]:
            for pad in spec.params.get("pad", (0,)):
                params = spec.resolve_params(tile=tile, pad=pad if "pad" in spec.params else None)
                spec.validate(params, 100, 100, 100)


# -- geometry ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CATALOG))
def test_geometry_of_an_odd_shape(name: str) -> None:
    spec = get_kernel(name)
    geometry = spec.validate(spec.resolve_params(tile=16), 1000, 777, 333)
    # grid x covers N: 48 * 16 = 768 < 777 -> 49; grid y covers M: 62 * 16 = 992 < 1000 -> 63.
    assert geometry.grid == (49, 63)
    assert geometry.block == (16, 16)
    assert geometry.threads == 256
    assert geometry.warps_per_block == 8
    assert geometry.n_blocks == 49 * 63
    if spec.uses_shared:
        # 20 * 16 = 320 < 333 -> 21 k-tiles; two float[16][16] tiles = 2048 bytes.
        assert geometry.n_tiles == 21
        assert geometry.smem_bytes == 2048
    else:
        assert geometry.n_tiles == 0
        assert geometry.smem_bytes == 0


def test_geometry_of_exact_multiples_and_padding() -> None:
    spec = get_kernel("tiled_transposed")
    geometry = spec.validate(spec.resolve_params(tile=32, pad=1), 64, 96, 128)
    assert geometry.grid == (3, 2)
    assert geometry.n_tiles == 4
    assert geometry.smem_bytes == 2 * 32 * 33 * 4
    assert geometry.warps_per_block == 32


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
    expected = _section_refs(spec.seed_sections)
    assert expected, spec.seed_sections
    assert _section_refs(" ".join(header)) == expected


@pytest.mark.parametrize("name", list(CATALOG))
def test_source_defines_the_entry_point(name: str) -> None:
    spec = get_kernel(name)
    text = spec.source.read_text()
    assert re.search(
        rf'extern "C" __global__ void (MV_LAUNCH_BOUNDS\([^)]*\) )?{spec.entry_point}\(', text
    )


def test_catalog_and_kernel_files_correspond_one_to_one() -> None:
    files = sorted(catalog.KERNEL_DIR.glob("*.cu"))
    assert files, catalog.KERNEL_DIR
    by_file = {path: [s for s in CATALOG.values() if s.source == path] for path in files}
    for path, specs in by_file.items():
        assert len(specs) == 1, (path.name, [s.name for s in specs])
        assert get_kernel(path.stem) is specs[0]
    sources = [spec.source for spec in CATALOG.values()]
    assert sorted(sources) == files
    assert len({spec.number for spec in CATALOG.values()}) == len(CATALOG)
    assert all(key == spec.name for key, spec in CATALOG.items())


# -- traffic -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TILED)
@pytest.mark.parametrize("tile", [8, 16, 32])
@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 1), (2, 3, 4), (5, 1, 2)])
def test_issued_bytes_equal_the_formula_on_exact_multiples(name, tile, m, n, k) -> None:
    spec = get_kernel(name)
    params = spec.resolve_params(tile=tile)
    M, N, K = m * tile, n * tile, k * tile
    formula = 2 * M * N * K / tile * 4
    assert spec.issued_global_bytes(params, M, N, K) == formula
    assert spec.predicted_global_bytes(params, M, N, K) == formula


@pytest.mark.parametrize("name", TILED)
def test_issued_bytes_exceed_the_formula_on_ragged_m_or_n(name: str) -> None:
    spec = get_kernel(name)
    params = spec.resolve_params(tile=16)
    M, N, K = 1000, 777, 333
    formula = 2 * M * N * K / 16 * 4
    issued = spec.issued_global_bytes(params, M, N, K)
    # 49 block columns each read all of A (M x K), 63 block rows each read all of B (K x N).
    assert issued == (49 * 1000 * 333 + 63 * 333 * 777) * 4
    assert issued > formula
    # Ragged M alone or N alone already costs extra: the last block row/column is partial.
    assert spec.issued_global_bytes(params, 1000, 768, 320) > 2 * 1000 * 768 * 320 / 16 * 4
    assert spec.issued_global_bytes(params, 992, 777, 320) > 2 * 992 * 777 * 320 / 16 * 4


@pytest.mark.parametrize("name", TILED)
def test_ragged_k_alone_costs_nothing_extra(name: str) -> None:
    # The a_col < K and b_row < K guards skip the loads past K, so a partial last k-tile
    # issues exactly the elements that exist.
    spec = get_kernel(name)
    params = spec.resolve_params(tile=16)
    assert spec.issued_global_bytes(params, 64, 48, 333) == 2 * 64 * 48 * 333 / 16 * 4


def test_naive_issues_two_loads_per_multiply_add() -> None:
    spec = get_kernel("naive")
    params = spec.resolve_params(tile=16)
    for M, N, K in [(16, 16, 16), (1000, 777, 333)]:
        assert spec.issued_global_bytes(params, M, N, K) == 2 * M * N * K * 4
        assert spec.predicted_global_bytes(params, M, N, K) == 2 * M * N * K * 4
