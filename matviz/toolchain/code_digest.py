"""Which code a timing ran: a digest of what level 0 compiles for one configuration.

A benchmark row keeps it, so a check of the simulator against timed rows can tell a row that
timed today's kernel from one that timed an earlier version of it. The digest covers the
kernel's own lines after nvcc's preprocessor at level 0 (its ``.cu`` and the headers it includes
from the kernel folder; CUDA's headers, comments and whitespace left out), so a change to the
instrumentation alone leaves it as it was, and the launch geometry from the description.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from matviz.core.config import KernelConfig
from matviz.errors import MatvizError
from matviz.paths import KERNEL_DIR
from matviz.toolchain.nvcc import nvcc_path, run_tool, target_flag

_LINE_MARKER = re.compile(r'^#\s*\d+\s+"([^"]*)"')


def level0_digest(config: KernelConfig, kernel_dir: Path = KERNEL_DIR) -> str:
    """16 hex digits naming the code level 0 runs for ``config`` (the kernel's file and headers
    read from ``kernel_dir``). Raises MatvizError without nvcc or when it cannot preprocess."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise MatvizError("nvcc is needed to tell which code a timing ran, and it is not on PATH")
    kernel_dir = Path(kernel_dir).resolve()
    source = kernel_dir / Path(config.kernel.source).name
    cmd = [nvcc, "-E", "-x", "cu", target_flag(config.kernel.arch), *config.defines(0),
           f"-I{kernel_dir}", str(source)]  # fmt: skip
    try:
        preprocessed = run_tool(cmd)
    except MatvizError as exc:
        raise MatvizError(f"nvcc could not preprocess {source.name}: {exc}") from None
    digest = hashlib.sha256()
    launch = {"grid": config.grid, "block": config.block, "smem": config.smem_bytes}
    digest.update(json.dumps(launch, sort_keys=True).encode())
    own, folders = False, {}  # a line marker's file -> whether it lies in kernel_dir
    for line in preprocessed.splitlines():
        marker = _LINE_MARKER.match(line)
        if marker:
            name = marker.group(1)
            if name not in folders:
                folders[name] = Path(name).resolve().parent == kernel_dir
            own = folders[name]
        elif own and line.strip():
            digest.update(" ".join(line.split()).encode() + b"\n")
    return digest.hexdigest()[:16]
