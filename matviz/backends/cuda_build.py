"""CuPy plumbing for the recorder: compiled kernels, the timing spacer, device facts.

Imported only where CuPy is installed and a GPU is wanted (the CLI checks cuda_status first).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class BuiltKernel:
    """A compiled kernel (a CuPy RawKernel) and the dynamic shared memory each launch gets."""

    function: Any
    shared_bytes: int = 0

    def __call__(self, grid: tuple, block: tuple, args: tuple) -> None:
        self.function(grid, block, args, shared_mem=self.shared_bytes)

    @property
    def num_regs(self) -> int:
        return int(self.function.num_regs)


def compiled_kernel(
    config: KernelConfig,
    level: int,
    min_blocks: int | None = None,
    entry: str = "",
    stamp_form: str = "lanes",
) -> BuiltKernel:
    """The kernel built for ``config`` at ``level`` (NVRTC, memoised per source and defines);
    ``min_blocks`` (levels 1-2) bounds its registers so that many blocks fit on an SM.
    ``entry``: another function of the same source (default: the kernel's entry point).
    ``stamp_form``: how level 2 keeps its marks (:meth:`KernelConfig.defines`)."""
    defines = config.defines(level, stamp_form)
    defines += [f"-DMV_MIN_BLOCKS={min_blocks}"] if min_blocks else []
    if config.kernel.arch != "sm_90":  # CuPy targets the device's plain architecture
        defines.append(f"-arch={config.kernel.arch}")
    source = kernel_source(config)
    if "<mma.h>" in source:
        defines += toolkit_includes()
    function = _compiled(source, tuple(defines), entry or config.kernel.entry_point)
    if entry or not config.dynamic_shared:
        return BuiltKernel(function)
    # above 48 KiB a kernel must opt in before its launch asks for more
    function.max_dynamic_shared_size_bytes = config.smem_bytes
    return BuiltKernel(function, config.smem_bytes)


@functools.lru_cache(maxsize=64)
def _compiled(source: str, defines: tuple[str, ...], entry: str):
    module = cupy.RawModule(code=source, options=("-std=c++17", *defines))
    return module.get_function(entry)


@functools.lru_cache(maxsize=1)
def toolkit_includes() -> list[str]:
    """``-I`` for a CUDA toolkit with whole headers. CuPy points NVRTC at the headers of the
    pip ``nvidia`` packages, where ``<mma.h>`` includes a ``crt/mma.h`` they lack (seen with
    CuPy 14.2 and CUDA 13 on the H200)."""
    nvcc = shutil.which("nvcc")
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    roots.append(str(Path(nvcc).resolve().parents[1]) if nvcc else None)
    for root in roots:
        if root and (Path(root) / "include" / "crt" / "mma.h").is_file():
            return [f"-I{Path(root) / 'include'}"]
    return []


# cuBLAS's bf16 data type (cudaDataType_t) and its fp32 compute type (cublasComputeType_t)
CUDA_R_16BF = 14
CUBLAS_COMPUTE_32F = 68
CUBLAS_GEMM_DEFAULT = -1


def blas_matmul(A, B, dtype: str):
    """cuBLAS on the kernel's own inputs, output in their type: ``cupy.matmul`` for float32 and
    float16; bfloat16 (held as uint16 bits, which CuPy 14 has no type for) through
    ``cublasGemmEx`` with fp32 accumulation, as ``cupy.matmul`` does for float16."""
    if dtype != "bfloat16":
        return lambda: cupy.matmul(A, B)
    from cupy.cuda import cublas  # type: ignore[import-not-found]

    M, K = A.shape
    N = B.shape[1]
    C = cupy.empty((M, N), cupy.uint16)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)

    def run() -> None:
        handle = cupy.cuda.device.get_cublas_handle()
        cublas.setPointerMode(handle, cublas.CUBLAS_POINTER_MODE_HOST)
        # row-major C = A B is column-major C^T = B^T A^T
        cublas.gemmEx(handle, 0, 0, N, M, K, one.ctypes.data, B.data.ptr, CUDA_R_16BF, N,
                      A.data.ptr, CUDA_R_16BF, K, zero.ctypes.data, C.data.ptr, CUDA_R_16BF, N,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)  # fmt: skip

    return run


# CUtensorMapDataType and CUtensorMapSwizzle (cuda.h), for cuTensorMapEncodeTiled
TENSOR_MAP_TYPES = {"float16": 6, "float32": 7, "bfloat16": 9}
TENSOR_MAP_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
TENSOR_MAP_L2_PROMOTION_128B = 2
TENSOR_MAP_DTYPE = np.dtype([("opaque", np.uint64, (16,))])  # a CUtensorMap: 128 bytes


@functools.lru_cache(maxsize=1)
def _encode_tiled():
    library = ctypes.CDLL("libcuda.so.1")  # CuPy's driver module does not wrap the TMA calls
    encode = library.cuTensorMapEncodeTiled
    encode.restype = ctypes.c_int
    return encode


def tensor_map(matrix, dtype: str, box: tuple[int, int], swizzle_bytes: int) -> np.void:
    """A CUtensorMap of the row-major 2-D CuPy array ``matrix`` (elements of ``dtype``) for
    boxes of ``box`` = (rows, cols), as a 128-byte value a kernel takes by value. Elements
    outside the matrix read as zeros. The row pitch must be a multiple of 16 bytes."""
    rows, cols = matrix.shape
    item = matrix.dtype.itemsize
    out = (ctypes.c_uint64 * 16)()
    status = _encode_tiled()(
        ctypes.byref(out),
        TENSOR_MAP_TYPES[dtype],
        2,
        ctypes.c_void_p(matrix.data.ptr),
        (ctypes.c_uint64 * 2)(cols, rows),
        (ctypes.c_uint64 * 1)(cols * item),
        (ctypes.c_uint32 * 2)(box[1], box[0]),
        (ctypes.c_uint32 * 2)(1, 1),
        0,  # no interleave
        TENSOR_MAP_SWIZZLE[swizzle_bytes],
        TENSOR_MAP_L2_PROMOTION_128B,
        0,  # out of bounds: zeros
    )
    if status != 0:
        raise cupy.cuda.driver.CUDADriverError(status)
    return np.frombuffer(bytes(out), TENSOR_MAP_DTYPE)[0]


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
        # what a block may opt in to (dynamic shared memory); static arrays stop at 48 KiB
        "smem_per_block": attr(
            "cudaDevAttrMaxSharedMemoryPerBlockOptin", int(props["sharedMemPerBlock"])
        ),
        "smem_reserved_per_block": attr("cudaDevAttrReservedSharedMemoryPerBlock", 0),
        "smem_alloc_unit": SMEM_ALLOC_UNIT.get(major, 128),
        "regs_per_sm": int(props["regsPerMultiprocessor"]),
        "reg_alloc_unit_per_warp": REG_ALLOC_UNIT_PER_WARP,
        "max_regs_per_thread": 255,
    }


def driver_blocks_per_sm(kernel: BuiltKernel, threads: int) -> int | None:
    """Resident blocks per SM by the driver's own occupancy calculator (None if unavailable)."""
    function = kernel.function.kernel  # a RawKernel wraps the driver function
    try:
        return int(
            cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                function.ptr, threads, kernel.shared_bytes
            )
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
