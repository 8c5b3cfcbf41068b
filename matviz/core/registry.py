"""The kernel registry: every ``kernels/NN_name.py`` description, found by its file name.

Adding a kernel means adding its ``.cu`` and its ``.py`` to ``kernels/``; nothing here or
anywhere else names it. Each description module defines ``KERNEL = Kernel(...)``; its number
and name come from the file name, its source is the ``.cu`` of the same stem.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from matviz.core.config import KernelConfig
from matviz.core.kernel import Kernel
from matviz.errors import MatvizError
from matviz.paths import KERNEL_DIR

_STEM = re.compile(r"^(\d{2})_([a-z][a-z0-9_]*)$")


def _module(path: Path) -> ModuleType:
    match = _STEM.match(path.stem)
    if match is None:
        raise RuntimeError(f"{path.name}: a kernel description is named NN_name.py")
    spec = importlib.util.spec_from_file_location(f"matviz_kernels.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load kernel description {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(path: Path) -> Kernel:
    module = _module(path)
    match = _STEM.match(path.stem)
    assert match is not None  # _module checked the name
    kernel = getattr(module, "KERNEL", None)
    if not isinstance(kernel, Kernel):
        raise RuntimeError(f"{path.name} defines no KERNEL = Kernel(...)")
    source = path.with_suffix(".cu")
    if not source.is_file():
        raise RuntimeError(f"{path.name} has no kernel source {source.name}")
    return dataclasses.replace(kernel, number=int(match[1]), name=match[2], source=source)


def sibling(stem: str) -> Kernel:
    """The description in ``kernels/<stem>.py``, for a description that varies another one."""
    return _load(KERNEL_DIR / f"{stem}.py")


def sibling_module(stem: str) -> ModuleType:
    """The module ``kernels/<stem>.py``, for a description that builds on another one's
    helpers (its tile copies, its corners), not only on its description."""
    return _module(KERNEL_DIR / f"{stem}.py")


@cache
def kernels() -> dict[str, Kernel]:
    """Every registered kernel by name, in number order."""
    found = sorted((_load(p) for p in KERNEL_DIR.glob("[0-9][0-9]_*.py")), key=lambda k: k.number)
    return {k.name: k for k in found}


def get_kernel(name: str) -> Kernel:
    """Look a kernel up by name ('tiled'), file stem ('02_tiled') or number ('2')."""
    key = str(name).strip()
    for kernel in kernels().values():
        if key in (kernel.name, kernel.stem, str(kernel.number), f"{kernel.number:02d}"):
            return kernel
    known = ", ".join(kernels())
    raise MatvizError(f"unknown kernel '{name}' (known: {known})")


def configure(
    name: str,
    params: Mapping[str, Any] | None,
    M: int,
    N: int,
    K: int,
    *,
    check: bool = True,
) -> KernelConfig:
    """Shorthand: ``get_kernel(name).configure(params, M, N, K)``."""
    return get_kernel(name).configure(params, M, N, K, check=check)
