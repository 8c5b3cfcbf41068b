"""CuPy plumbing for the recorder: compiled kernels, the timing spacer, device facts.

Imported only where CuPy is installed and a GPU is wanted (the CLI checks cuda_status first).
"""

from __future__ import annotations

import functools
import platform

import cupy
import numpy as np

import matviz
from matviz.core import catalog
from matviz.core.compile_report import defines

SPACER_CYCLES = 200_000  # ~100 us at 1980 MHz: longer than any launch call takes on the host
SPACER_SOURCE = r"""
extern "C" __global__ void mv_spacer(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""


def cuda_errors() -> tuple[type[BaseException], ...]:
    return (
        cupy.cuda.runtime.CUDARuntimeError,
        cupy.cuda.driver.CUDADriverError,
        cupy.cuda.compiler.CompileException,
        cupy.cuda.memory.OutOfMemoryError,
    )


def kernel_source(spec: catalog.KernelSpec) -> str:
    """The .cu text with trace.cuh inlined, so CuPy's compile cache sees header edits too."""
    header = (catalog.KERNEL_DIR / "trace.cuh").read_text()
    return spec.source.read_text().replace('#include "trace.cuh"', header)


@functools.lru_cache(maxsize=64)
def compiled_kernel(name: str, params_key: tuple, level: int):
    spec = catalog.get_kernel(name)
    options = ("-std=c++17", *defines(spec, dict(params_key), level))
    module = cupy.RawModule(code=kernel_source(spec), options=options)
    return module.get_function(spec.entry_point)


@functools.lru_cache(maxsize=1)
def spacer():
    return cupy.RawKernel(SPACER_SOURCE, "mv_spacer")


def device_info() -> dict:
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    try:
        clock_khz = cupy.cuda.runtime.deviceGetAttribute(
            cupy.cuda.runtime.cudaDevAttrClockRate, dev.id
        )
    except (AttributeError, *cuda_errors()):
        clock_khz = props.get("clockRate", 0)
    return {
        "name": props["name"].decode(),
        "sm_count": int(props["multiProcessorCount"]),
        "clock_mhz": clock_khz / 1000 if clock_khz else None,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "smem_per_block": int(props["sharedMemPerBlock"]),
        "smem_per_sm": int(props["sharedMemPerMultiprocessor"]),
        "regs_per_sm": int(props["regsPerMultiprocessor"]),
        "max_threads_per_sm": int(props["maxThreadsPerMultiProcessor"]),
    }


def software_versions() -> dict:
    runtime = cupy.cuda.runtime
    return {
        "matviz": matviz.__version__,
        "cupy": cupy.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "cuda_runtime": runtime.runtimeGetVersion(),
        "cuda_driver": runtime.driverGetVersion(),
        "nvrtc": ".".join(map(str, cupy.cuda.nvrtc.getVersion())),
    }
