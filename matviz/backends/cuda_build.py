"""CuPy plumbing for the recorder: compiled kernels, the timing spacer, device facts.

Imported only where CuPy is installed and a GPU is wanted (the CLI checks cuda_status first).
"""

from __future__ import annotations

import functools
import platform

import cupy
import numpy as np

import matviz
from matviz.core.config import KernelConfig
from matviz.toolchain.nvcc import inlined_source

SPACER_CYCLES = 200_000  # ~100 us at 1980 MHz: longer than any launch call takes on the host
SPACER_SOURCE = r"""
extern "C" __global__ void mv_spacer(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""


def cuda_errors() -> tuple[type[Exception], ...]:
    return (
        cupy.cuda.runtime.CUDARuntimeError,
        cupy.cuda.driver.CUDADriverError,
        cupy.cuda.compiler.CompileException,
        cupy.cuda.memory.OutOfMemoryError,
    )


def kernel_source(config: KernelConfig) -> str:
    """The .cu text with the headers it includes from kernels/ inlined, so CuPy's compile
    cache sees header edits too."""
    return inlined_source(config.kernel.source)


def compiled_kernel(config: KernelConfig, level: int, min_blocks: int | None = None):
    """The kernel built for ``config`` at ``level`` (NVRTC, memoised per source and defines);
    ``min_blocks`` (levels 1-2) bounds its registers so that many blocks fit on an SM."""
    defines = config.defines(level) + ([f"-DMV_MIN_BLOCKS={min_blocks}"] if min_blocks else [])
    return _compiled(kernel_source(config), tuple(defines), config.kernel.entry_point)


@functools.lru_cache(maxsize=64)
def _compiled(source: str, defines: tuple[str, ...], entry: str):
    module = cupy.RawModule(code=source, options=("-std=c++17", *defines))
    return module.get_function(entry)


@functools.lru_cache(maxsize=1)
def spacer():
    return cupy.RawKernel(SPACER_SOURCE, "mv_spacer")


# Allocation granularities the CUDA runtime does not report, by compute capability major
# (CUDA occupancy calculator): shared memory in bytes, registers per warp.
SMEM_ALLOC_UNIT = {7: 256, 8: 128, 9: 128, 10: 128, 12: 128}
REG_ALLOC_UNIT_PER_WARP = 256


def device_info() -> dict:
    """This GPU's name, clock and occupancy limits, as the runtime reports them."""
    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    runtime = cupy.cuda.runtime

    def attr(name: str, fallback: int) -> int:
        try:
            return int(runtime.deviceGetAttribute(getattr(runtime, name), dev.id))
        except (AttributeError, *cuda_errors()):  # type: ignore[misc]
            return fallback

    clock_khz = attr("cudaDevAttrClockRate", int(props.get("clockRate", 0)))
    major = int(props["major"])
    return {
        "name": props["name"].decode(),
        "sm_count": int(props["multiProcessorCount"]),
        "clock_mhz": clock_khz / 1000 if clock_khz else None,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "warp_size": int(props["warpSize"]),
        "max_threads_per_sm": int(props["maxThreadsPerMultiProcessor"]),
        "max_warps_per_sm": int(props["maxThreadsPerMultiProcessor"]) // int(props["warpSize"]),
        "max_blocks_per_sm": attr("cudaDevAttrMaxBlocksPerMultiprocessor", 32),
        "smem_per_sm": int(props["sharedMemPerMultiprocessor"]),
        "smem_per_block": int(props["sharedMemPerBlock"]),
        "smem_reserved_per_block": attr("cudaDevAttrReservedSharedMemoryPerBlock", 0),
        "smem_alloc_unit": SMEM_ALLOC_UNIT.get(major, 128),
        "regs_per_sm": int(props["regsPerMultiprocessor"]),
        "reg_alloc_unit_per_warp": REG_ALLOC_UNIT_PER_WARP,
        "max_regs_per_thread": 255,
    }


def driver_blocks_per_sm(kernel, threads: int) -> int | None:
    """Resident blocks per SM by the driver's own occupancy calculator (None if unavailable)."""
    function = getattr(kernel, "kernel", kernel)  # a RawKernel wraps the driver function
    try:
        return int(
            cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, threads, 0)
        )
    except (AttributeError, *cuda_errors()):  # type: ignore[misc]
        return None


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
