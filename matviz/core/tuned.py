"""Tuned defaults: the best configuration ``matviz sweep --tune`` found per GPU, size and kernel.

One JSON file (``$MATVIZ_TUNED``, else ``$XDG_CONFIG_HOME/matviz/tuned.json``, else
``~/.config/matviz/tuned.json``) maps a device to a size to a kernel to its best parameters.
A simulated tuning is kept under the device's name with " (simulated)", so it never stands in
for a real GPU. ``matviz record`` starts from the tuned configuration for its GPU and size,
where there is one, before the options the user gives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from matviz.core.registry import get_kernel
from matviz.errors import MatvizError

MAX_FILE_BYTES = 4 << 20
SIMULATED = " (simulated)"


class Tuned(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    params: dict[str, int | str]
    gflops: Annotated[float, Field(gt=0)]
    backend: Literal["cuda", "sim"]
    evaluated: Annotated[int, Field(ge=1)]  # configurations the search ran
    space: Annotated[int, Field(ge=1)]  # configurations the kernel allows


class TunedFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    version: Literal[1] = 1
    # device -> "MxNxK" -> kernel -> its best configuration
    devices: dict[str, dict[str, dict[str, Tuned]]] = {}


def tuned_path() -> Path:
    given = os.environ.get("MATVIZ_TUNED")
    if given:
        return Path(given)
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "matviz" / "tuned.json"


def device_key(device: str, backend: str) -> str:
    return device + (SIMULATED if backend == "sim" else "")


def size_key(M: int, N: int, K: int) -> str:
    return f"{M}x{N}x{K}"


def load(path: Path | None = None) -> TunedFile:
    """The tuned file (empty when there is none); MatvizError when it is unreadable."""
    from matviz.core.json_input import parse_json
    from matviz.core.trace_io import read_small_file  # bounded, regular files only

    path = path or tuned_path()
    if not path.exists():
        return TunedFile()
    data = read_small_file(path, MAX_FILE_BYTES)  # a FIFO or a huge file: its own line
    try:
        return TunedFile.model_validate(parse_json(data, "the file"))
    except (ValueError, MatvizError) as exc:  # JSON, UTF-8 and pydantic errors
        first = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        reason = first.splitlines()[0] if first else type(exc).__name__
        raise MatvizError(f"tuned defaults {path} are unreadable: {reason}") from None


def best(
    kernel: str, M: int, N: int, K: int, device: str, path: Path | None = None
) -> dict[str, Any] | None:
    """The tuned parameters of ``kernel`` for this device key and size, resolved against its
    description (None: none tuned, or no longer allowed)."""
    entry = load(path).devices.get(device, {}).get(size_key(M, N, K), {}).get(kernel)
    if entry is None:
        return None
    spec = get_kernel(kernel)
    try:
        params = spec.resolve_params(entry.params)
    except MatvizError:
        return None
    return None if spec.configure(params, M, N, K, check=False).broken else params


def save(
    kernel: str, M: int, N: int, K: int, device: str, entry: Tuned, path: Path | None = None
) -> Path:
    """Add (or replace) one entry, atomically; an unreadable file is refused, not overwritten."""
    path = path or tuned_path()
    data = load(path)
    data.devices.setdefault(device, {}).setdefault(size_key(M, N, K), {})[kernel] = entry
    text = json.dumps(data.model_dump(), indent=1, sort_keys=True) + "\n"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise MatvizError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:  # a full disk or Ctrl-C halfway leaves the old file and no temporary
        if tmp.exists():
            tmp.unlink()
    return path
