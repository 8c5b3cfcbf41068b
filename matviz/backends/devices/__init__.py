"""GPU descriptions for the simulator: small JSON files a user can copy and edit.

A device file holds the hardware limits occupancy needs, the rates the timing model scales
(clock, FP32 FMA/clk, copy bandwidth, cuBLAS rate) and a ``model`` section with the simulator's
fitted constants. :func:`load_device` reads one by bundled name (``"h200"``) or by path and
checks it, so a bad file fails with one line instead of a KeyError deep in the simulator.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def load_device(path_or_name: str | Path | Mapping[str, Any] = DEFAULT_DEVICE) -> dict[str, Any]:
    """Read and check a device description; a mapping is checked and copied."""
    if isinstance(path_or_name, Mapping):
        return check_device(json.loads(json.dumps(path_or_name)), "device description")
    path = device_path(path_or_name)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise MatvizError(f"device file {path}: no such file") from None
    except OSError as exc:
        raise MatvizError(f"device file {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MatvizError(f"device file {path}: not valid JSON ({exc})") from None
    return check_device(data, f"device file {path}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_device(data: Any, where: str) -> dict[str, Any]:
    """Raise a one-line MatvizError unless ``data`` is a complete device description."""
    if not isinstance(data, dict):
        raise MatvizError(f"{where}: expected a JSON object")
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        raise MatvizError(f"{where}: 'name' must be a non-empty string")
    for key in (*INT_KEYS, *NONNEGATIVE_INT_KEYS, *FLOAT_KEYS):
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
    return data


def hardware(device: Mapping[str, Any]) -> dict[str, Any]:
    """The device's description without the model section (what a manifest records)."""
    return {key: value for key, value in device.items() if key not in ("model", "about")}
