"""Every registered kernel compiles for sm_90 at every parameter combination and trace level.

The whole matrix is built once (module fixture, two nvcc processes at a time); each test then
asserts on the shared results. ``pytest -s`` shows the register/spill table.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from matviz.core.kernel import LEVELS, Kernel
from matviz.core.registry import get_kernel, kernels
from matviz.errors import MatvizError
from matviz.paths import KERNEL_DIR
from matviz.toolchain import nvcc as compile_report
from matviz.toolchain.nvcc import (
    CompileReport,
    compile_flags,
    nvcc_path,
    parse_ptxas,
    ptx,
    registers_for,
)

CATALOG = kernels()
SHAPE = (1000, 777, 336)  # shared memory and the code do not depend on the shape (K: TMA rows)

_no_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not on PATH")


def needs_nvcc(test):
    """Mark a test as needing nvcc and skip it cleanly where nvcc is missing."""
    return pytest.mark.nvcc(_no_nvcc(test))


ParamKey = tuple[tuple[str, int], ...]


def _configs(spec: Kernel) -> list[ParamKey]:
    return [tuple(params.items()) for params in spec.configurations(broken=True)]


def _config(name: str, params):
    return get_kernel(name).configure(dict(params), *SHAPE)


MATRIX = [
    (spec.name, params, level)
    for spec in CATALOG.values()
    for params in _configs(spec)
    for level in LEVELS
]
# level 2 with the marks in trace.cuh's other forms (config.STAMP_FORMS), where the recorder
# would build them: "2 store", "2 held"
MATRIX += [
    (spec.name, params, f"2 {form}")
    for spec in CATALOG.values()
    for params in _configs(spec)
    for form in _config(spec.name, params).stamp_forms[1:]
]
OTHER_FORMS = list(dict.fromkeys((name, lv) for name, _, lv in MATRIX if isinstance(lv, str)))
KERNEL_LEVELS = [(name, level) for name in CATALOG for level in LEVELS]
TILED = [name for name in CATALOG if _config(name, {}).uses_shared]
SEED_TILED = ["tiled", "tiled_transposed"]


def _build(item: tuple[str, ParamKey, int | str]) -> CompileReport | MatvizError:
    name, params, level = item
    try:
        if isinstance(level, str):  # "2 <form>"
            form = level.split()[1]
            return compile_report.compile_report(_config(name, params), 2, stamp_form=form)
        return compile_report.compile_report(_config(name, params), int(level))
    except MatvizError as exc:  # kept, so one broken build fails one test, not the module
        return exc


def _print_table(results: dict, seconds: float) -> None:
    header = f"{'kernel':<17}{'params':<10}{'lvl':>4}{'regs':>5}{'spill st/ld':>12}"
    header += f"{'stack':>6}{'smem':>7}{'bar':>4}"
    print(f"\nnvcc matrix: {len(results)} builds in {seconds:.1f} s")
    print(header)
    for (name, params, level), report in results.items():
        label = get_kernel(name).labels(dict(params))
        if isinstance(report, MatvizError):
            print(f"{name:<17}{label:<10}{level:>4}  FAILED: {report}")
            continue
        spills = f"{report.spill_store_bytes}/{report.spill_load_bytes}"
        print(
            f"{name:<17}{label:<10}{level:>4}{report.registers:>5}"
            f"{spills:>12}{report.stack_bytes:>6}{report.smem_bytes:>7}{report.barriers:>4}"
        )


@pytest.fixture(scope="module")
def builds() -> dict[tuple[str, ParamKey, int], CompileReport | MatvizError]:
    start = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(MATRIX, pool.map(_build, MATRIX), strict=True))
    _print_table(results, time.perf_counter() - start)
    return results


def _reports(
    builds: dict, name: str, level: int | str
) -> list[tuple[dict[str, int], CompileReport]]:
    out = []
    for params in _configs(CATALOG[name]):
        if (name, params, level) not in builds:  # a form the recorder would not build
            continue
        report = builds[(name, params, level)]
        if isinstance(report, MatvizError):
            pytest.fail(f"{name} {dict(params)} level {level} did not compile: {report}")
        out.append((dict(params), report))
    return out


def _entry_text(text: str, entry: str) -> str:
    """The PTX of one entry function (a source may define helpers, e.g. a fragment probe)."""
    start = text.index(f".entry {entry}(")
    end = text.find(".entry ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _ptx_params(text: str, entry: str) -> list[str]:
    match = re.search(rf"\.entry {re.escape(entry)}\((.*?)\)", text, re.DOTALL)
    assert match, f"no .entry {entry}( in the PTX"
    return [line for line in match.group(1).splitlines() if ".param" in line]


# -- the compile matrix ------------------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize(("name", "level"), KERNEL_LEVELS)
def test_compiles_within_register_budget(builds, name: str, level: int) -> None:
    for params, report in _reports(builds, name, level):
        assert 0 < report.registers <= 255, (params, report.registers)
        if level <= 1 or (level == 2 and ".minnctapersm" not in ptx(_config(name, params), 2)):
            # Levels 0-2 are the timed ones: a spill would distort exactly what they measure.
            assert report.spills == 0, (params, report.ptxas_log)
            assert report.stack_bytes == 0, (params, report.ptxas_log)
        elif level == 2:
            # A register cap (MV_LAUNCH_BOUNDS_MIN) keeps level 0's blocks per SM at level 2,
            # which matters more to the timeline than a few spilled stamps: kernel 07 at BM128
            # BK8 P0 S3/S4 spills 32-84 bytes to stay at 128 registers.
            assert report.spills <= 128, (params, report.ptxas_log)


@needs_nvcc
@pytest.mark.parametrize(("name", "form"), OTHER_FORMS)
def test_the_other_forms_of_the_marks_compile_as_level_2_does(builds, name: str, form) -> None:
    """Level 2 with its marks stored as they are taken, or with a step's middle mark held in
    shared memory: the same register budget, spill rule and barriers as the lanes form; the
    same shared memory, but for the held mark's word (one per body the kernel instantiates)."""
    for params, report in _reports(builds, name, form):
        lanes = builds[(name, tuple(params.items()), 2)]
        assert 0 < report.registers <= 255, (params, report.registers)
        if ".minnctapersm" not in ptx(_config(name, params), 2):
            assert report.spills == 0 and report.stack_bytes == 0, (params, report.ptxas_log)
        else:
            assert report.spills <= 128, (params, report.ptxas_log)
        assert report.barriers == lanes.barriers, params
        held = report.smem_bytes - lanes.smem_bytes
        assert held == 0 if form == "2 store" else 4 <= held <= 16, (params, held)


@needs_nvcc
@pytest.mark.parametrize(("name", "level"), KERNEL_LEVELS)
def test_compiled_smem_equals_the_description(builds, name: str, level: int) -> None:
    for params, report in _reports(builds, name, level):
        geometry = _config(name, params)
        # the instrumentation keeps its stamps in registers: no extra shared memory; a dynamic
        # struct is sized at launch (its static_assert held it to MV_SMEM_BYTES, see below)
        static = 0 if geometry.dynamic_shared else geometry.smem_bytes
        assert report.smem_bytes == static, params


# each kernel's first configuration whose shared struct is sized at launch
DYNAMIC = {
    name: next(p for p in spec.configurations() if _config(name, p.items()).dynamic_shared)
    for name, spec in CATALOG.items()
    if any(_config(name, p.items()).dynamic_shared for p in spec.configurations())
}


@needs_nvcc
@pytest.mark.parametrize("name", list(DYNAMIC))
def test_dynamic_shared_struct_is_held_to_the_description(name: str) -> None:
    """The launch gives a dynamic-shared kernel the bytes its description computes; a source
    whose struct differs from them by one slot's row must not build."""
    kernel = CATALOG[name]
    wrong = dataclasses.replace(
        kernel,
        shared=lambda p: [dataclasses.replace(a, rows=a.rows + 1) for a in kernel.shared(p)],
    )
    config = wrong.configure(DYNAMIC[name], *SHAPE)
    with pytest.raises(MatvizError, match="differs from the description"):
        compile_report.compile_report(config, 0)


@needs_nvcc
@pytest.mark.parametrize("name", SEED_TILED)
def test_tiled_smem_is_two_padded_tiles(builds, name: str) -> None:
    # Worked by hand: two float[T][T+P] arrays, e.g. T=32, P=1 -> 2 * 32 * 33 * 4 = 8448 bytes.
    def key(**params):
        return (name, tuple(get_kernel(name).resolve_params(params).items()), 0)

    report = builds[key(tile=32, pad=1)]
    assert report.smem_bytes == 8448
    report = builds[key(tile=8, pad=0)]
    assert report.smem_bytes == 2 * 8 * 8 * 4


@needs_nvcc
@pytest.mark.parametrize(("name", "level"), KERNEL_LEVELS)
def test_barriers(builds, name: str, level: int) -> None:
    for params, report in _reports(builds, name, level):
        # Tiled kernels sync twice per k-tile; instrumentation adds no barrier (block ends
        # are posted per warp with atomicMax), so the naive kernel never has one. A kernel
        # whose k-steps wait on mbarriers syncs its block once, to publish their initialisation.
        config = _config(name, params)
        has_barriers = config.n_barriers > 0 or config.describe()["mbarriers"] > 0
        assert (report.barriers > 0) == has_barriers, (params, report.ptxas_log)


# -- instrumentation in the PTX ----------------------------------------------------------------


@needs_nvcc
@pytest.mark.parametrize(("name", "level"), KERNEL_LEVELS)
def test_ptx_instrumentation_matches_level(builds, name: str, level: int) -> None:
    spec = CATALOG[name]
    for params in _configs(spec):
        text = ptx(_config(name, params), level)
        n_params = len(_ptx_params(text, spec.entry_point))
        if level == 0:
            # A, B, C, M, N, K and nothing else; no timer or SM reads, only the store of C.
            assert n_params == 6, params
            for register in ("%globaltimer", "%smid", "%clock"):
                assert register not in text, (params, register)
            # only C is stored: no 64-bit block records, no vector phase stamps
            stores = re.findall(r"\bst\.global(\.\w+)+", _entry_text(text, spec.entry_point))
            assert stores and set(stores) == {".f32"}, (params, stores)
        else:
            # MV_TRACE_PARAMS adds 4 buffers + 5 ints; the signature is the same at 1, 2, 3.
            assert n_params == 6 + 9, params
            assert "%globaltimer" in text, params
            assert "%smid" in text, params


@needs_nvcc
@pytest.mark.parametrize("name", TILED)
def test_level2_reads_clock64_per_tile(builds, name: str) -> None:
    spec = CATALOG[name]
    for params in _configs(spec):
        level1 = ptx(_config(name, params), 1)
        level2 = ptx(_config(name, params), 2)
        reads1 = len(re.findall(r"mov\.u64\s+%rd\d+, %clock64;", level1))
        reads2 = len(re.findall(r"mov\.u64\s+%rd\d+, %clock64;", level2))
        # Level 1: block start and end. Level 2 adds, in the stamped copy of the body, two marks
        # in the (not unrolled) k loop and one after it; a kernel with a copy of its body per
        # case (06: rows aligned for float4 or not) has one stamped copy per case. Unchained
        # channels (07's copy and compute) read the clock at each of their marks in the loop.
        assert reads1 == 2, params
        layout = _config(name, params).layout
        if layout.chained:
            assert reads2 > reads1 and (reads2 - reads1) % 3 == 0, (params, reads2)
        else:
            assert reads2 - reads1 >= len(layout.marks), (params, reads2)


@needs_nvcc
def test_naive_levels_above_one_add_nothing(builds) -> None:
    # The naive kernel has no k-tiles, so phase marks and probes have nowhere to go; level 3
    # only adds the launch bound every level-3 kernel carries.
    spec = CATALOG["naive"]
    for params in _configs(spec):
        texts = {level: ptx(_config("naive", params), level) for level in (1, 2, 3)}
        assert texts[1] == texts[2], params
        assert ".maxntid" in texts[3] and ".maxntid" not in texts[2]
        for level in (1, 3):
            assert "st.global.u32" not in texts[level]  # no phase marks, no probe


# -- compile_report's own behaviour ------------------------------------------------------------


def test_defines_and_flags() -> None:
    tiled = get_kernel("tiled").configure({"tile": 32, "pad": 1}, *SHAPE)
    assert tiled.defines(2)[:4] == ["-DTILE=32", "-DPAD=1", "-DDROP_SYNC=0", "-DMV_LEVEL=2"]
    # Only the parameters a kernel has: the naive kernel has no PAD.
    naive = get_kernel("naive").configure({}, *SHAPE)
    assert naive.defines(0) == ["-DTILE=16", "-DB_COL_MAJOR=0", "-DMV_LEVEL=0"]
    flags = compile_flags(get_kernel("tiled").configure({"tile": 8}, *SHAPE), 3)
    assert flags[:4] == ["-DTILE=8", "-DPAD=0", "-DDROP_SYNC=0", "-DMV_LEVEL=3"]
    assert flags[-1] == f"-I{KERNEL_DIR}"


def test_defines_reject_bad_level_and_params() -> None:
    tiled = get_kernel("tiled")
    with pytest.raises(MatvizError, match="level 4"):
        tiled.configure({}, *SHAPE).defines(4)
    with pytest.raises(MatvizError, match="tile=12"):
        tiled.configure({"tile": 12}, *SHAPE)
    with pytest.raises(MatvizError, match="pad"):
        get_kernel("naive").configure({"pad": 1}, *SHAPE)


def test_registers_for_without_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compile_report, "nvcc_path", lambda: None)
    config = get_kernel("tiled").configure({"tile": 16}, *SHAPE)
    assert registers_for(config) == (config.kernel.registers, "estimate")


def test_parse_ptxas_picks_the_entry() -> None:
    # Hand-written log in ptxas's format: a callee's properties come first and must be ignored.
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'other' for 'sm_90'
ptxas info    : Function properties for other
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 99 registers, used 0 barriers
ptxas info    : Compiling entry function 'mv_x' for 'sm_90'
ptxas info    : Function properties for mv_x
    16 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
ptxas info    : Compile time = 3.0 ms
"""
    report = parse_ptxas(log, "mv_x")
    assert (report.registers, report.barriers, report.smem_bytes) == (40, 1, 2048)
    assert (report.stack_bytes, report.spill_store_bytes, report.spill_load_bytes) == (16, 4, 12)
    assert report.spills == 16
    assert "other" not in report.ptxas_log
    with pytest.raises(MatvizError, match="mv_missing"):
        parse_ptxas(log, "mv_missing")


@pytest.fixture
def scratch_kernels(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A private kernel directory and cache, with a 09_scratch entry, so edits stay local."""
    kdir = tmp_path / "kernels"
    kdir.mkdir()
    shutil.copy(KERNEL_DIR / "trace.cuh", kdir / "trace.cuh")
    shutil.copy(KERNEL_DIR / "02_tiled.cu", kdir / "09_scratch.cu")
    text = (kdir / "09_scratch.cu").read_text().replace("mv_tiled(", "mv_scratch(")
    (kdir / "09_scratch.cu").write_text(text)
    monkeypatch.setattr(compile_report, "KERNEL_DIR", kdir)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    kernel = dataclasses.replace(
        get_kernel("tiled"), name="scratch", number=9, source=kdir / "09_scratch.cu"
    )
    config = kernel.configure({"tile": 8, "pad": 0}, *SHAPE)
    return config, kdir, tmp_path / "cache" / "matviz" / "nvcc"


@needs_nvcc
def test_disk_cache_hits_and_invalidates(scratch_kernels, monkeypatch) -> None:
    spec, kdir, cache = scratch_kernels
    first = compile_report.compile_report(spec, 0)
    assert first.smem_bytes == 2 * 8 * 8 * 4
    assert len(list(cache.glob("*.json"))) == 1

    # A fresh process (no in-process memo) must be served from disk without running nvcc.
    compile_report._build_keyed.cache_clear()
    real_run = compile_report._run_nvcc

    def no_nvcc(*args, **kwargs):
        raise AssertionError("nvcc ran although the result was cached")

    monkeypatch.setattr(compile_report, "_run_nvcc", no_nvcc)
    assert compile_report.compile_report(spec, 0) == first

    # Editing the shared header changes the key, so nvcc must run again.
    header = kdir / "trace.cuh"
    header.write_text(header.read_text() + "\n// edited\n")
    with pytest.raises(AssertionError, match="nvcc ran"):
        compile_report.compile_report(spec, 0)
    monkeypatch.setattr(compile_report, "_run_nvcc", real_run)
    assert compile_report.compile_report(spec, 0) == first
    assert len(list(cache.glob("*.json"))) == 2


@needs_nvcc
@pytest.mark.parametrize("damage", ["deep", "list", "latin-1", "fifo", "folder", "huge"])
def test_a_damaged_cache_entry_is_built_again(scratch_kernels, damage) -> None:
    """A cache entry nothing but matviz should write, damaged any way, costs a rebuild: never
    an error, a hang on a FIFO or a read of a huge file."""
    import os

    spec, _, cache = scratch_kernels
    first = compile_report.compile_report(spec, 0)
    (entry,) = cache.glob("*.json")
    entry.unlink()
    if damage == "fifo":
        os.mkfifo(entry)
    elif damage == "folder":
        entry.mkdir()
    elif damage == "huge":
        with open(entry, "wb") as fh:
            fh.truncate(1 << 30)  # sparse
    else:
        entry.write_bytes({"deep": b"[" * 100_000 + b"]" * 100_000, "list": b"[1, 2]",
                           "latin-1": "{\"x\": \"Ger\u00e4t\"}".encode("latin-1")}[damage])
    compile_report._build_keyed.cache_clear()
    assert compile_report.compile_report(spec, 0) == first
    if damage not in ("fifo", "folder"):  # a regular file is replaced by a good entry
        assert compile_report._read_cache(entry.stem) is not None


@needs_nvcc
def test_compile_error_is_a_matviz_error(scratch_kernels) -> None:
    spec, kdir, _ = scratch_kernels
    source = kdir / "09_scratch.cu"
    source.write_text(source.read_text().replace("float sum = 0.0f;", "float sum = undeclared;"))
    with pytest.raises(MatvizError, match=r"09_scratch\.cu.*error.*undeclared"):
        compile_report.compile_report(spec, 0)


@needs_nvcc
def test_a_residency_bound_caps_only_the_instrumented_builds(tmp_path) -> None:
    """The recorder passes MV_MIN_BLOCKS where an instrumented build would hold fewer blocks
    per SM than level 0 (kernel 05's default: 128 registers at level 0, 130 at level 2, so 3
    blocks of 128 threads instead of 4): the bound brings it back to 128; level 0 ignores it."""
    from matviz.toolchain.nvcc import _run_nvcc

    config = _config("register_tiling_2d", {})
    assert config.threads == 128
    nvcc, source, entry = nvcc_path(), str(config.kernel.source), config.kernel.entry_point

    def regs(level: int, bound: list[str]) -> int:
        flags = [*compile_flags(config, level), *bound]
        return _run_nvcc(source, entry, flags, "sm_90", nvcc)[0].registers

    free = {level: regs(level, []) for level in (0, 2)}
    assert free[2] > 128 >= free[0]  # what makes the bound needed
    assert regs(2, ["-DMV_MIN_BLOCKS=4"]) <= 128
    assert regs(0, ["-DMV_MIN_BLOCKS=4"]) == free[0]


def test_the_source_nvrtc_compiles_inlines_each_header_once() -> None:
    """CuPy's NVRTC has no include path: the recorder compiles the .cu with kernels/'s headers
    pasted in, each once (float4.cuh and trace.cuh for kernel 06)."""
    from matviz.toolchain.nvcc import inlined_source

    for kernel in CATALOG.values():
        text = inlined_source(kernel.source)
        assert '#include "' not in text, kernel.name
        assert text.count("#define MV_TRACE_PARAMS") >= 1 and "MV_BLOCK_BEGIN" in text
    vectorized = inlined_source(CATALOG["vectorized"].source)
    assert vectorized.count("__device__ __forceinline__ float4 load4(") == 1
