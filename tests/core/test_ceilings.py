"""The shared-memory ceiling: what the lesson's reuse argument (§13, §18) means in FLOP/s."""

from __future__ import annotations

import json

import pytest

from matviz.backends.contract import RunRequest, run
from matviz.core import instructions, registry
from matviz.core.ceilings import issue_ceiling, shared_ceiling
from matviz.core.explain import trace_facts
from matviz.core.metrics import H200_PEAK_FIGURES
from matviz.core.registry import get_kernel
from matviz.core.trace_io import load_trace
from matviz.paths import RESOURCE_DIR, TRACE_DIR

H200 = dict(H200_PEAK_FIGURES, compute_capability="9.0")


def ceiling(kernel: str, size: int = 1024, device=H200, **params):
    spec = get_kernel(kernel)
    return shared_ceiling(spec.configure(spec.default_params() | params, size, size, size), device)


def test_register_tiling_raises_the_ceiling_step_by_step():
    # §18: each value read from shared memory feeds more multiply-adds at every rung
    tiled = ceiling("tiled", tile=32, pad=0)
    one_d = ceiling("register_tiling_1d", BM=64, BN=64, BK=8, TM=8)
    two_d = ceiling("register_tiling_2d", BM=64, BN=64, BK=16, TM=8, TN=4)
    assert tiled.gflops < one_d.gflops < two_d.gflops
    assert tiled.flop_per_wavefront < one_d.flop_per_wavefront < two_d.flop_per_wavefront


def test_a_bank_conflict_lowers_the_ceiling_and_padding_lifts_it():
    conflicted = ceiling("tiled_transposed", tile=32, pad=0)
    padded = ceiling("tiled_transposed", tile=32, pad=1)
    assert conflicted.wavefronts > padded.wavefronts
    assert conflicted.gflops < padded.gflops
    assert conflicted.flop == padded.flop  # the same work, only the banks differ


def test_ceiling_is_the_k_steps_flop_over_its_wavefronts_on_every_sm():
    spec = get_kernel("register_tiling_2d")
    config = spec.configure(spec.default_params(), 512, 512, 512)
    costs = instructions.block_costs(config, t=0)
    wavefronts = costs["ld_wavefronts"] + costs["st_wavefronts"]
    got = shared_ceiling(config, H200)
    assert got.wavefronts == wavefronts
    assert got.flop == 2 * config.fmas_per_step
    per_clock = got.flop / wavefronts  # one wavefront a clock per SM
    assert got.gflops == pytest.approx(per_clock * 132 * 1980 / 1000)
    half = shared_ceiling(config, dict(H200, sm_count=66, clock_mhz=990))
    assert half.gflops == pytest.approx(got.gflops / 4)
    assert half.pct_of_peak == pytest.approx(got.pct_of_peak)  # the peak scales alike


def test_tensor_core_ceiling_is_against_the_tensor_peak():
    mma = ceiling("mma_pipeline")
    fp32 = ceiling("register_tiling_2d")
    assert mma.peak_gflops > 10 * fp32.peak_gflops
    assert mma.pct_of_peak == pytest.approx(100 * mma.gflops / mma.peak_gflops)


@pytest.mark.parametrize("kernel", ["naive", "wgmma_tma"])
def test_no_ceiling_without_shared_traffic_through_the_load_store_unit(kernel):
    assert ceiling(kernel) is None


@pytest.mark.parametrize(
    "name, above",
    [
        ("tiled_t32_p0_1024.mvz", False),
        ("warp_tiling_bm128_bn128_bk16_wm64_wn64_wni4_p4_1024.mvz", True),
    ],
)
def test_info_box_states_the_ceiling_and_which_bound_binds(name, above):
    trace = load_trace(TRACE_DIR / name)
    got = shared_ceiling(trace.config, trace.manifest["device"])
    text = [f for f in trace_facts(trace) if "wavefront a clock" in f]
    assert len(text) == 1
    assert f"{got.gflops:,.0f} GFLOP/s" in text[0]
    assert ("bind first" in text[0]) is above
    assert (got.gflops > got.peak_gflops) is above


MEASURED = ("h200_kernels_4096.json", "h100_kernels_4096.json", "h200_ladder_4096.json",
            "h100_ladder_4096.json")  # fmt: skip


def measured_against(ceiling) -> list[tuple[float, str, dict]]:
    """(measured rate / ``ceiling``'s GFLOP/s, kernel, parameters) of every timing the bundled
    benchmarks hold that has such a ceiling (H200 and H100: 132 SMs at up to 1980 MHz)."""
    ratios = []
    for name in MEASURED:
        for row in json.loads((RESOURCE_DIR / "bench" / name).read_text()):
            size = row["size"]
            got = ceiling(
                get_kernel(row["kernel"]).configure(row["params"], size, size, size), H200
            )
            if got is not None:
                ratios.append((row["gflops"] / got.gflops, row["kernel"], row["params"]))
    return ratios


def test_no_measured_configuration_ran_above_its_ceiling():
    """The ceiling is an upper bound on real hardware: every configuration the bundled
    benchmarks timed ran below it, and the 32-way conflicted store of kernel 03 T32 P0 came
    closest."""
    ratios = measured_against(shared_ceiling)
    assert len(ratios) > 150
    highest = max(ratios, key=lambda r: r[0])
    assert highest[0] < 1.0, highest
    assert highest[1:] == ("tiled_transposed", {"tile": 32, "pad": 0})


def test_the_simulator_never_runs_a_configuration_above_its_ceiling():
    for name in registry.kernels():
        spec = get_kernel(name)
        for params in spec.configurations():
            trace = run(RunRequest(name, 512, 512, 512, params=params, level=0))
            rate = trace.manifest["stats"]["gflops"]
            for got in (shared_ceiling(trace.config, trace.manifest["device"]),
                        issue_ceiling(trace.config, trace.manifest["device"])):  # fmt: skip
                if got is not None:
                    assert rate < got.gflops, (name, params)


def test_an_equal_configuration_is_counted_once(monkeypatch):
    """The hover asks at every mouse move, each time with a configuration of its own: the bank
    model counts a configuration and shape once."""
    from matviz.core import ceilings

    calls = []
    counted = instructions.block_costs

    def counting(config, *args, **kwargs):
        calls.append(config)
        return counted(config, *args, **kwargs)

    monkeypatch.setattr(ceilings, "_WAVEFRONTS", {})
    monkeypatch.setattr(instructions, "block_costs", counting)
    params = {"tile": 32, "pad": 1}
    first = ceilings.configuration_ceiling("tiled_transposed", params, 256, 256, 256, H200)
    again = ceilings.configuration_ceiling("tiled_transposed", params, 256, 256, 256, H200)
    assert first == again and len(calls) == 1
    ceilings.configuration_ceiling("tiled_transposed", params, 256, 256, 512, H200)
    assert len(calls) == 2  # another shape is counted anew
    refused = ceilings.configuration_ceiling("tiled_transposed", {"tile": 33}, 64, 64, 64, H200)
    assert refused is None  # a configuration this matviz does not have


def test_no_measured_simt_configuration_ran_above_what_issue_allows():
    """An FFMA k loop cannot run the FP32 pipe faster than its share of FFMA (one instruction
    issued a clock per sub-partition): every SIMT timing the bundled benchmarks hold ran below
    it, and kernel 07 with split and quads, the fastest SIMT rung, came closest (79%)."""
    ratios = measured_against(issue_ceiling)
    assert len(ratios) > 150
    highest = max(ratios, key=lambda r: r[0])
    assert highest[0] < 1.0, highest
    assert highest[1] == "async_pipeline" and highest[2]["split"] == highest[2]["quads"] == 1


@pytest.mark.parametrize(
    ("name", "stated"),
    [
        ("register_tiling_1d_bm64_bn64_bk8_tm8_1024.mvz", True),
        ("naive_t16_1024.mvz", True),
        ("wmma_bm128_bn128_bk32_w32_p8_1024.mvz", False),
    ],  # fmt: skip
)
def test_info_box_states_what_issue_allows_an_fp32_loop(name, stated):
    trace = load_trace(TRACE_DIR / name)
    got = issue_ceiling(trace.config, trace.manifest["device"])
    text = [f for f in trace_facts(trace) if "instruction a clock" in f]
    assert len(text) == int(stated) and (got is not None) is stated
    if stated:
        share = f"{got.loop.math_share:.1f}%"
        assert f"{got.gflops:,.0f} GFLOP/s" in text[0] and share in text[0]
        assert got.gflops == pytest.approx(got.peak_gflops * got.loop.math / got.loop.instructions)


PARAMS_07 = {"BM": 128, "BN": 128, "BK": 16, "TM": 8, "TN": 8, "STAGES": 2, "pad": 4,
             "swizzle": 0, "split": 1, "quads": 1}  # fmt: skip
KEY = "07_async_pipeline BM128 BN128 BK16 TM8 TN8 S2 P4 X0 split1 quads1"
GOOD = {"instructions": 1215.0, "math_op": "FFMA", "math": 1024.0, "shared_loads": 67.0,
        "copies": 10.0}  # fmt: skip


GOOD_TABLE = json.dumps({"per_k_step": {KEY: GOOD}})


@pytest.mark.parametrize(
    "table",
    [
        {"per_k_step": {KEY: {**GOOD, "instructions": "1215"}}},
        {"per_k_step": {KEY: {**GOOD, "math": 2000.0}}},  # more multiply-adds than instructions
        {"per_k_step": {KEY: {**GOOD, "instructions": 0.0}}},
        {"per_k_step": {KEY: {**GOOD, "math_op": "HGMMA"}}},
        {"per_k_step": {KEY: {**GOOD, "copies": float("nan")}}},
        {"per_k_step": {KEY: [1215, 1024]}},
        {"per_k_step": [KEY]},
        [],
        GOOD_TABLE[: len(GOOD_TABLE) // 2],  # truncated
        GOOD_TABLE.replace('"math": 1024.0', '"math": 1024.0\x00'),  # a flipped byte
    ],
)
def test_a_damaged_k_loop_table_gives_no_issue_ceiling_and_no_error(tmp_path, monkeypatch, table):
    """The info box and the throughput view read the bundled table: a damaged row is no
    ceiling, not a traceback."""
    from matviz.core import sass_table

    damaged, good = tmp_path / "damaged.json", tmp_path / "good.json"
    damaged.write_text(table if isinstance(table, str) else json.dumps(table))
    good.write_text(GOOD_TABLE)
    monkeypatch.setattr(sass_table, "K_LOOPS", damaged)
    config = get_kernel("async_pipeline").configure(PARAMS_07, 1024, 1024, 1024)
    assert issue_ceiling(config, H200) is None
    monkeypatch.setattr(sass_table, "K_LOOPS", good)
    assert issue_ceiling(config, H200).loop.math_share == pytest.approx(100 * 1024 / 1215)


def test_the_sm90_k_loops_stand_for_no_other_architecture():
    config = get_kernel("async_pipeline").configure(PARAMS_07, 1024, 1024, 1024)
    assert issue_ceiling(config, H200) is not None
    assert issue_ceiling(config, dict(H200, compute_capability="9.0")) is not None
    assert issue_ceiling(config, dict(H200, compute_capability="8.0")) is None  # an A100's SASS
    assert issue_ceiling(config, None) is not None  # the H200's figures, as for the peak
