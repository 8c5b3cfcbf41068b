"""Where the kernel sources and the bundled resources are, in a checkout and in a wheel.

In a source checkout (and an editable install) they are the repository's top-level ``kernels/``
and ``resources/``; a wheel ships them inside the package as ``matviz/_kernels`` and
``matviz/_resources`` (see ``[tool.setuptools.package-dir]`` in pyproject.toml).
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _data_dir(installed: str, checkout: str) -> Path:
    inside = _PACKAGE / installed
    return inside if inside.is_dir() else _PACKAGE.parent / checkout


KERNEL_DIR = _data_dir("_kernels", "kernels")
TRACE_HEADER = KERNEL_DIR / "trace.cuh"  # the instrumentation every kernel includes
RESOURCE_DIR = _data_dir("_resources", "resources")
TRACE_DIR = RESOURCE_DIR / "traces"
I18N_DIR = RESOURCE_DIR / "i18n"
