"""Two traces side by side (lesson 8 §2-9, §29): what each asks of memory and what it gets.

Per trace, from its description and its own run: the bytes its load instructions request, the
loads per block and per output element (the lesson's 2bk per block and 2k/b per element for the
tiled kernel, 2k per element for the naive one), the arithmetic intensity (FLOP per requested
byte), the measured GFLOP/s, and the ceiling DRAM bandwidth alone would allow at that intensity
(intensity x bandwidth): where the measured rate passes it, caches served the re-reads; and
the ceiling shared memory alone allows (:mod:`matviz.core.ceilings`), which padding or a
swizzle lifts where DRAM's stays put.
"""

from __future__ import annotations

from dataclasses import dataclass

from matviz.core.ceilings import shared_ceiling
from matviz.core.trace import Trace

FLOAT_BYTES = 4


@dataclass(frozen=True)
class TraceFigures:
    label: str
    requested_bytes: float
    loads_per_block: float  # floats one block's load instructions request
    loads_per_element: float  # ... per element of C
    intensity: float  # FLOP per requested byte
    gflops: float  # measured (or simulated) rate of the run
    dram_ceiling_gflops: float  # intensity x DRAM bandwidth
    duration_us: float
    shared_ceiling_gflops: float | None = None  # None: no shared traffic through the LSU


def figures(trace: Trace, dram_gbs: float) -> TraceFigures:
    config = trace.config
    requested = config.issued_bytes
    floats = requested / FLOAT_BYTES
    M, N, K = trace.shape
    flops = 2.0 * M * N * K
    intensity = flops / requested if requested else float("inf")
    gflops = float(trace.manifest.get("stats", {}).get("gflops", 0.0) or 0.0)
    label = f"{trace.kernel} {config.kernel.labels(config.params)}"
    shared = shared_ceiling(config, trace.manifest.get("device"))
    return TraceFigures(
        label=label,
        requested_bytes=requested,
        loads_per_block=floats / max(config.n_blocks, 1),
        loads_per_element=floats / (M * N),
        intensity=intensity,
        gflops=gflops,
        dram_ceiling_gflops=intensity * dram_gbs,
        duration_us=trace.duration_ns / 1e3,
        shared_ceiling_gflops=None if shared is None else shared.gflops,
    )


def dram_bandwidth_gbs(trace: Trace, default: float) -> float:
    """The trace's device's DRAM bandwidth (GB/s) where the manifest has it, else ``default``."""
    device = trace.manifest.get("device", {})
    value = device.get("dram_bandwidth_gbs") or device.get("copy_bandwidth_gbs")
    return float(value) if isinstance(value, (int, float)) and value > 0 else default
