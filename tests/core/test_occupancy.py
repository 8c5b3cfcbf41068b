"""Occupancy against hand-worked H200 cases, and the device files it reads."""

import json
import math
import subprocess
import sys

import pytest

from matviz.backends.devices import DEVICE_DIR, MODEL_DEFAULTS, load_device
from matviz.core import occupancy as occ_mod
from matviz.core.occupancy import LIMITERS, occupancy, occupancy_dict, resource_limits
from matviz.core.registry import configure
from matviz.errors import MatvizError

H200 = load_device("h200")
NAIVE, TILED = "naive", "tiled"


def edited_device(tmp_path, **changes):
    """A copy of h200.json with some fields changed, loaded back from disk."""
    data = json.loads((DEVICE_DIR / "h200.json").read_text())
    data.update(changes)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return load_device(path)


def occ(kernel, device=H200, registers=32, **params):
    return occupancy(configure(kernel, params, 1024, 1024, 1024), device, registers)


def test_the_h200_description_is_the_measured_one():
    assert H200["name"] == "NVIDIA H200"
    assert H200["sm_count"] == 132 and H200["clock_mhz"] == 1980
    assert H200["max_threads_per_sm"] == 2048 and H200["max_warps_per_sm"] == 64
    assert H200["max_blocks_per_sm"] == 32 and H200["regs_per_sm"] == 65536
    assert H200["smem_per_sm"] == 228 * 1024 and H200["smem_per_block"] == 227 * 1024
    assert H200["smem_reserved_per_block"] == 1024
    assert H200["cublas_fp32_gflops"] == pytest.approx(50_300)


@pytest.mark.parametrize(
    ("tile", "blocks", "limiter"),
    [(32, 2, "threads"), (16, 8, "threads"), (8, 32, "blocks")],
)
def test_hand_worked_thread_and_block_limits(tile, blocks, limiter):
    # 1024 threads: 2048 / 1024 = 2; 256 threads: 8; 64 threads: 32 threads-wise, but also
    # the 32-block limit, and ties go to the block slots first.
    result = occ(NAIVE, tile=tile)
    assert (result.blocks_per_sm, result.limiter) == (blocks, limiter)
    assert result.limits["threads"] == 2048 // tile**2
    assert result.warps_per_sm == blocks * tile**2 // 32
    assert result.resident_blocks == 132 * blocks


def test_tiny_shared_memory_makes_shared_memory_the_limiter(tmp_path):
    device = edited_device(tmp_path, smem_per_sm=16 * 1024)
    # T=32: 2*32*32*4 = 8 KiB + 1 KiB reserved = 9 KiB; 16 KiB holds one block.
    result = occ(TILED, device, tile=32, pad=0)
    assert (result.blocks_per_sm, result.limiter) == (1, "shared_memory")
    assert result.limits["shared_memory"] == 1


def test_padding_counts_against_shared_memory(tmp_path):
    device = edited_device(tmp_path, smem_per_sm=24 * 1024)
    # T=16: PAD 0 -> 2048 + 1024 bytes = 8 blocks (a tie with threads, reported as threads);
    # PAD 4 -> 2*16*20*4 = 2560 + 1024 = 3584 bytes -> 6 blocks.
    plain = occ(TILED, device, tile=16, pad=0)
    padded = occ(TILED, device, tile=16, pad=4)
    assert (plain.blocks_per_sm, plain.limiter) == (8, "threads")
    assert plain.limits["shared_memory"] == 8
    assert (padded.blocks_per_sm, padded.limiter) == (6, "shared_memory")


def test_shared_memory_rounds_to_the_allocation_unit():
    # T=16 PAD 1: 2*16*17*4 = 2176 bytes = 17 x 128 exactly; T=8 PAD 1: 576 -> 640.
    assert occ_mod.smem_per_block(2176, H200) == 2176 + 1024
    assert occ_mod.smem_per_block(576, H200) == 640 + 1024


def test_registers_limit_with_a_small_register_file(tmp_path):
    device = edited_device(tmp_path, regs_per_sm=16384)
    # 32 registers x 32 lanes = 1024 per warp; 16384 / 1024 = 16 warps = 2 blocks of 8 warps.
    result = occ(NAIVE, device, tile=16)
    assert (result.blocks_per_sm, result.limiter) == (2, "registers")


def test_registers_round_up_to_the_warp_allocation_unit():
    # 33 registers x 32 = 1056 -> 1280 per warp; 65536 // 1280 = 51 warps: one 32-warp block.
    assert occ_mod.regs_per_warp(33, H200) == 1280
    result = occ(TILED, registers=33, tile=32, pad=0)
    assert (result.blocks_per_sm, result.limiter) == (1, "registers")
    assert occ(TILED, registers=40, tile=32, pad=0).blocks_per_sm == 1
    assert occ(TILED, registers=32, tile=32, pad=0).blocks_per_sm == 2


def test_too_many_registers_or_shared_bytes_fit_no_block():
    assert resource_limits(256, 0, 256, H200)["registers"] == 0
    assert resource_limits(256, 228 * 1024, 32, H200)["shared_memory"] == 0


def test_the_register_count_and_its_source_are_the_callers():
    config = configure(TILED, {"tile": 32}, 64, 64, 64)
    result = occupancy(config, H200, 64, register_source="nvcc")
    assert (result.registers, result.register_source) == (64, "nvcc")
    # 64 x 32 = 2048 per warp -> 32 warps: one 1024-thread block.
    assert (result.blocks_per_sm, result.limiter) == (1, "registers")
    assert occupancy(config, H200, 32).register_source == "given"


def test_occupancy_is_pure_and_needs_no_toolchain():
    # Core must not reach for nvcc: importing it (and computing) loads no toolchain module.
    code = (
        "import sys; from matviz.core.occupancy import occupancy; "
        "from matviz.core.registry import configure; "
        "from matviz.backends.devices import load_device; "
        "occupancy(configure('tiled', {}, 64, 64, 64), load_device('h200'), 32); "
        "print(sorted(m for m in sys.modules if m.startswith('matviz.toolchain')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_occupancy_dict_is_plain_json():
    config = configure(NAIVE, {"tile": 16}, 4096, 4096, 4096)
    data = occupancy_dict(config, H200, 32)
    assert json.loads(json.dumps(data)) == data
    assert set(data) >= {"blocks_per_sm", "limiter", "limits", "registers", "register_source"}
    assert set(data["limits"]) == set(LIMITERS)
    assert data["waves"] == math.ceil(256 * 256 / (132 * 8))
    assert data["register_source"] == "given"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "is not JSON"),
        ("[]", "expected a JSON object"),
        ('{"name": "x"}', "missing 'sm_count'"),
    ],
)
def test_bad_device_files_fail_in_one_line(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(MatvizError, match=needle) as info:
        load_device(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"sm_count": 0}, "'sm_count' must be positive"),
        ({"sm_count": 1.5}, "'sm_count' must be a whole number"),
        ({"clock_mhz": "fast"}, "'clock_mhz' must be a number"),
        ({"model": {}}, "model 'load_latency_ns'"),
        ({"model": None}, "'model' section"),
    ],
)
def test_bad_device_values_are_named(tmp_path, change, needle):
    with pytest.raises(MatvizError, match=needle):
        edited_device(tmp_path, **change)


@pytest.mark.parametrize(
    ("key", "value", "needle"),
    [
        ("sm_subpartitions", "four", "must be a number >= 0"),
        ("sm_subpartitions", 0, "'sm_subpartitions' must be a whole number from 1 to 16"),
        ("sm_subpartitions", 2.5, "'sm_subpartitions' must be a whole number"),
        ("sm_subpartitions", 1e300, "'sm_subpartitions' must be a whole number"),
        ("thread_fma_issue_cycles", -1, "model 'thread_fma_issue_cycles' must be a number >= 0"),
        ("c_store_bytes_per_ns", None, "model 'c_store_bytes_per_ns' must be a number"),
    ],
)
def test_bad_optional_model_constants_are_named(tmp_path, key, value, needle):
    """A constant newer than some device files is checked where a file gives it, so an edited
    copy fails in one line instead of deep in the simulator."""
    model = json.loads((DEVICE_DIR / "h200.json").read_text())["model"]
    model[key] = value
    with pytest.raises(MatvizError, match=needle) as info:
        edited_device(tmp_path, model=model)
    assert "\n" not in str(info.value)


def test_a_device_file_without_the_newer_constants_loads():
    model = json.loads((DEVICE_DIR / "h200.json").read_text())["model"]
    for key in MODEL_DEFAULTS:
        model.pop(key, None)
    assert load_device({**load_device("h200"), "model": model})["name"] == "NVIDIA H200"


def test_unknown_device_names_and_missing_files():
    with pytest.raises(MatvizError, match="unknown device 'rtx9999'.*h200"):
        load_device("rtx9999")
    with pytest.raises(MatvizError, match="no such file"):
        load_device("/nonexistent/gpu.json")
