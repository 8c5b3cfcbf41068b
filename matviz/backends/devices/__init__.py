"""GPU descriptions for the simulator: small JSON files a user can copy and edit.

A device file holds the hardware limits occupancy needs, the rates the timing model scales
(clock, FP32 FMA/clk, copy bandwidth), cuBLAS's FP32 rate and a ``model`` section with the
simulator's fitted constants. :func:`load_device` reads one by bundled name (``"h200"``) or by
path and checks it, so a bad file fails with one line instead of a KeyError deep in the
simulator.

cuBLAS: ``cublas_fp32_gflops_by_size`` maps a square edge n (as a string) to the GFLOP/s cuBLAS
SGEMM reached at n×n×n on that GPU. "% of cuBLAS" compares a trace with cuBLAS at the trace's
own shape, so :func:`cublas_gflops` interpolates the table linearly in log(2·M·N·K) (the FLOP
count, which is what differs between shapes) between the two nearest measured sizes and holds
the end values outside the measured range. A file without the table (older files) gives the one
constant ``cublas_fp32_gflops`` for every shape; a file with both uses the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matviz.core.json_input import read_json_file
from matviz.errors import MatvizError

DEVICE_DIR = Path(__file__).resolve().parent
DEFAULT_DEVICE = "h200"

# Hardware fields: name -> (type, must be positive).
INT_KEYS = (
    "sm_count",
    "warp_size",
    "max_threads_per_sm",
    "max_warps_per_sm",
    "max_blocks_per_sm",
    "smem_per_sm",
    "smem_per_block",
    "smem_alloc_unit",
    "regs_per_sm",
    "reg_alloc_unit_per_warp",
    "max_regs_per_thread",
    "fp32_fma_per_clk_per_sm",
)
NONNEGATIVE_INT_KEYS = ("smem_reserved_per_block",)
FLOAT_KEYS = ("clock_mhz", "copy_bandwidth_gbs", "cublas_fp32_gflops")
# cuBLAS FP32 GFLOP/s by square edge n; when present, "cublas_fp32_gflops" may be left out.
CUBLAS_TABLE_KEY = "cublas_fp32_gflops_by_size"
# cuBLAS by square edge for each element type of A and B (optional but for float32)
CUBLAS_TABLE_KEYS = {
    "float32": CUBLAS_TABLE_KEY,
    "float16": "cublas_fp16_gflops_by_size",
    "bfloat16": "cublas_bf16_gflops_by_size",
}

# The simulator's timing constants (matviz.backends.simulator documents each one).
MODEL_KEYS = (
    "load_latency_ns",
    "bandwidth_scale",
    "load_skew_ns",
    "compute_skew_frac",
    "barrier_ns",
    "inner_loop_efficiency",
    "lds128_site_cost",
    "tile_overhead_cycles",
    "overlap_sharpness",
    "store_cycles_per_wavefront",
    "block_prologue_ns",
    "block_epilogue_ns",
    "block_launch_ns",
    "dispatch_interval_ns",
    "naive_reuse",
    "naive_latency_ns",
    "naive_skew_frac",
)
# Model constants newer than some device files: their values when a file lacks them (a file
# that gives one is checked).
MODEL_DEFAULTS = {
    "k_step_latency_cycles": 0.0,
    "priority_halving_warps": 12.0,
    "sm_speed_spread": 0.0,
    "shared_tile_jitter": 0.0,
    "naive_alone_speedup": 1.0,
    "thread_fma_issue_cycles": 0.0,
    "copy_engine_bandwidth_scale": 0.0,  # 0: TMA copies share bandwidth_scale
    "copy_engine_latency_ns": 0.0,  # 0: TMA copies share load_latency_ns
    "c_store_bytes_per_ns": 0.0,  # 0: the C tile's store is inside block_epilogue_ns
    "sm_subpartitions": 4.0,  # every NVIDIA SM since Maxwell; 1: no sub-partition share
}
MAX_SUBPARTITIONS = 16  # the most warp schedulers a device file may give an SM
# Constants that divide or scale a rate must be strictly positive; the rest may be zero.
POSITIVE_MODEL_KEYS = (
    "bandwidth_scale",
    "inner_loop_efficiency",
    "lds128_site_cost",
    "naive_reuse",
    "overlap_sharpness",
)


def bundled_devices() -> list[str]:
    """Names of the device files that ship with matviz."""
    return sorted(p.stem for p in DEVICE_DIR.glob("*.json"))


def device_path(path_or_name: str | Path) -> Path:
    """A bundled device's file, or ``path_or_name`` itself when it names a file."""
    text = str(path_or_name)
    if text in bundled_devices():
        return DEVICE_DIR / f"{text}.json"
    path = Path(text).expanduser()
    if path.suffix != ".json" and not path.exists():
        known = ", ".join(bundled_devices())
        raise MatvizError(f"unknown device '{text}' (bundled: {known}; or give a .json path)")
    return path


MAX_DEVICE_FILE_BYTES = 1 << 20  # a description with its model, fit and check is 20 KB


def load_device(path_or_name: str | Path | Mapping[str, Any] = DEFAULT_DEVICE) -> dict[str, Any]:
    """Read and check a device description; a mapping is checked and copied."""
    if isinstance(path_or_name, Mapping):
        return check_device(json.loads(json.dumps(path_or_name)), "device description")
    path = device_path(path_or_name)
    data = read_json_file(path, MAX_DEVICE_FILE_BYTES, f"device file {path}")
    return check_device(data, f"device file {path}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_device(data: Any, where: str) -> dict[str, Any]:
    """Raise a one-line MatvizError unless ``data`` is a complete device description."""
    if not isinstance(data, dict):
        raise MatvizError(f"{where}: expected a JSON object")
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        raise MatvizError(f"{where}: 'name' must be a non-empty string")
    _check_cublas_table(data, where)
    for key in (*INT_KEYS, *NONNEGATIVE_INT_KEYS, *FLOAT_KEYS):
        if key == "cublas_fp32_gflops" and key not in data and CUBLAS_TABLE_KEY in data:
            continue
        if key not in data:
            raise MatvizError(f"{where}: missing '{key}'")
        value = data[key]
        if not _number(value) or (key not in FLOAT_KEYS and value != int(value)):
            kind = "a number" if key in FLOAT_KEYS else "a whole number"
            raise MatvizError(f"{where}: '{key}' must be {kind} (got {value!r})")
        if value < 0 or (value == 0 and key not in NONNEGATIVE_INT_KEYS):
            raise MatvizError(f"{where}: '{key}' must be positive (got {value!r})")
        if key not in FLOAT_KEYS:
            data[key] = int(value)
    model = data.get("model")
    if not isinstance(model, dict):
        raise MatvizError(f"{where}: missing the 'model' section of timing constants")
    for key in MODEL_KEYS:
        value = model.get(key)
        if not isinstance(value, (int, float)) or not _number(value) or value < 0:
            raise MatvizError(f"{where}: model '{key}' must be a number >= 0 (got {value!r})")
        if key in POSITIVE_MODEL_KEYS and value == 0:
            raise MatvizError(f"{where}: model '{key}' must be positive")
        model[key] = float(value)
    for key in MODEL_DEFAULTS:
        value = model.get(key, 0.0)
        if not _number(value) or value < 0:
            raise MatvizError(f"{where}: model '{key}' must be a number >= 0 (got {value!r})")
    subs = model.get("sm_subpartitions", MODEL_DEFAULTS["sm_subpartitions"])
    if not _number(subs) or subs != int(subs) or not 1 <= subs <= MAX_SUBPARTITIONS:
        raise MatvizError(
            f"{where}: model 'sm_subpartitions' must be a whole number from 1 to "
            f"{MAX_SUBPARTITIONS} (got {subs!r})"
        )
    return data


def _check_cublas_table(data: dict[str, Any], where: str) -> None:
    """Check the cuBLAS tables (``cublas_fp32_gflops_by_size``, ...) present and store them
    with sorted int-like keys."""
    for key in CUBLAS_TABLE_KEYS.values():
        if key in data:
            _check_table(data, where, key)


def _check_table(data: dict[str, Any], where: str, key: str) -> None:
    table = data[key]
    if not isinstance(table, dict) or not table:
        raise MatvizError(
            f"{where}: '{key}' must map square sizes to GFLOP/s, e.g. {{\"1024\": 37077}}"
        )
    points: dict[int, float] = {}
    for size, value in table.items():
        try:
            n = int(str(size))
        except ValueError:
            n = 0
        if n <= 0:
            raise MatvizError(f"{where}: '{key}' size {size!r} is not a positive whole number")
        if not _number(value) or value <= 0:
            raise MatvizError(
                f"{where}: '{key}' at {n} must be a positive number (got {value!r})"
            )
        points[n] = float(value)
    data[key] = {str(n): points[n] for n in sorted(points)}


def cublas_gflops(
    device: Mapping[str, Any], M: int, N: int, K: int, dtype: str = "float32"
) -> float | None:
    """cuBLAS GFLOP/s at M×N×K on ``device`` (a checked device description) for inputs of
    ``dtype``; None where the file has no table for that type.

    With a ``cublas_fp32_gflops_by_size`` table (or the type's): linear in log(2·M·N·K) between
    the measured square sizes around the shape, clamped to the smallest/largest measured size
    outside them. Without one, for float32: the single ``cublas_fp32_gflops`` constant.
    """
    table = device.get(CUBLAS_TABLE_KEYS.get(dtype, ""))
    if not table:
        return float(device["cublas_fp32_gflops"]) if dtype == "float32" else None
    points = sorted((math.log(2.0 * int(n) ** 3), float(g)) for n, g in table.items())
    x = math.log(2.0 * M * N * K)
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]  # not reached


def hardware(device: Mapping[str, Any]) -> dict[str, Any]:
    """The device's description without the model section (what a manifest records)."""
    return {key: value for key, value in device.items() if key not in ("model", "about")}


def tuned_key(backend: str) -> str:
    """The device key tuned defaults (``matviz sweep --tune``) are kept under for ``backend``:
    this GPU's name, or the simulated model's name marked as simulated."""
    from matviz.core import tuned

    if backend == "cuda":
        from matviz.backends.cuda_status import cuda_status

        return tuned.device_key(cuda_status()[1], backend)
    return tuned.device_key(str(load_device(DEFAULT_DEVICE)["name"]), backend)
