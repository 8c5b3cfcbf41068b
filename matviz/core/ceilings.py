"""What the shared-memory pipe alone lets a kernel reach (lesson 8 §13, §18).

An SM's shared memory serves one wavefront a clock: 32 banks of 4 bytes, 128 bytes. A k-step of
one block costs the wavefronts of its shared loads and stores (bank conflicts and broadcasts
included: :func:`matviz.core.instructions.block_costs`, checked against ncu) and does
2 x its multiply-adds of FLOP, so no schedule runs it faster than FLOP per wavefront x SMs x
clock. Register tiling raises FLOP per wavefront; a conflict lowers it. Kernels whose shared
traffic bypasses the load-store unit (TMA copies read by wgmma) have no such ceiling here.

Issue is the other bound of an SIMT kernel: :func:`issue_ceiling`, from the k loop ptxas emits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from matviz.core import instructions, sass_table
from matviz.core.config import KernelConfig
from matviz.core.metrics import peak_gflops
from matviz.core.registry import get_kernel
from matviz.errors import MatvizError

WAVEFRONTS_PER_CLK = 1  # per SM: 32 banks x 4 bytes a clock


@dataclass(frozen=True)
class SharedCeiling:
    wavefronts: int  # shared loads and stores of one block's k-step
    flop: int  # of the same k-step
    gflops: float  # the ceiling on the whole GPU
    peak_gflops: float  # the math peak for the kernel's inputs (FP32 FMA or Tensor Core)
    sm_count: int
    clock_mhz: float

    @property
    def flop_per_wavefront(self) -> float:
        return self.flop / self.wavefronts

    @property
    def pct_of_peak(self) -> float:
        return 100.0 * self.gflops / self.peak_gflops


def shared_ceiling(config: KernelConfig, device: dict[str, Any] | None) -> SharedCeiling | None:
    """The ceiling of ``config`` on ``device`` (the H200's figures where it lacks some), from its
    first k-step, which every shape has whole along M and N; None without shared traffic."""
    if not config.n_steps:
        return None
    wavefronts = _step_wavefronts(config)
    if not wavefronts:
        return None
    peak, figures = peak_gflops(device, config.input_dtype)
    flop = 2 * config.fmas_per_step
    sms, clock = int(figures["sm_count"]), float(figures["clock_mhz"])
    gflops = flop / wavefronts * WAVEFRONTS_PER_CLK * sms * clock / 1000.0
    return SharedCeiling(wavefronts, flop, gflops, peak, sms, clock)


def configuration_ceiling(
    kernel: str, params: Mapping[str, Any], M: int, N: int, K: int, device: dict[str, Any] | None
) -> SharedCeiling | None:
    """:func:`shared_ceiling` of ``kernel`` at ``params`` for an M x N x K problem (a saved
    benchmark row, a sweep row, a run on the plot); None also where this matviz has no such
    kernel or configuration."""
    config = _configured(kernel, params, M, N, K)
    return None if config is None else shared_ceiling(config, device)


def configuration_issue_ceiling(
    kernel: str, params: Mapping[str, Any], M: int, N: int, K: int, device: dict[str, Any] | None
) -> IssueCeiling | None:
    """:func:`issue_ceiling` of ``kernel`` at ``params`` for an M x N x K problem, as
    :func:`configuration_ceiling` gives the shared-memory one."""
    config = _configured(kernel, params, M, N, K)
    return None if config is None else issue_ceiling(config, device)


def _configured(
    kernel: str, params: Mapping[str, Any], M: int, N: int, K: int
) -> KernelConfig | None:
    try:
        return get_kernel(kernel).configure(params, M, N, K)
    except MatvizError:
        return None


@dataclass(frozen=True)
class IssueCeiling:
    loop: sass_table.KLoop  # ptxas's k loop, one k-step
    gflops: float
    peak_gflops: float  # FP32


def issue_ceiling(config: KernelConfig, device: dict[str, Any] | None) -> IssueCeiling | None:
    """What issuing its k loop allows an SIMT kernel. An SM sub-partition issues one warp
    instruction a clock, and the FP32 peak needs an FFMA in every one, so a loop whose
    multiply-adds are x% of its instructions runs at most at x% of the peak (the k loop ptxas
    emitted, from the bundled table). None for Tensor Core loops, which issue does not bind,
    for configurations the table lacks, and on a GPU that is not sm_90: the table is ptxas's
    for it, and another architecture gets another loop."""
    capability = str((device or {}).get("compute_capability", "9.0"))
    if not capability.startswith("9."):
        return None
    loop = sass_table.k_loop(config.kernel.stem, config.kernel.labels(config.params))
    if loop is None or loop.math_op != "FFMA":
        return None
    peak, _ = peak_gflops(device, config.input_dtype)
    return IssueCeiling(loop, peak * loop.math_share / 100.0, peak)


# k-step wavefronts by configuration and shape: the info box, the views' hover, the lessons,
# sweeps and tables ask for the same ones, each with a configuration of its own
_WAVEFRONTS: dict[tuple[Any, ...], int] = {}
_KEPT = 256


def _step_wavefronts(config: KernelConfig) -> int:
    key = (config.kernel.name, tuple(sorted(config.params.items())), config.M, config.N, config.K)
    if key not in _WAVEFRONTS:
        if len(_WAVEFRONTS) >= _KEPT:
            _WAVEFRONTS.clear()
        costs = instructions.block_costs(config, t=0)
        _WAVEFRONTS[key] = int(costs["ld_wavefronts"] + costs["st_wavefronts"])
    return _WAVEFRONTS[key]
