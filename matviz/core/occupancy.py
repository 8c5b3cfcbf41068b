"""Occupancy: how many thread blocks of a configuration fit on one SM at once, and why.

Resident blocks per SM is the minimum over five limits, each computed from the device
description (a mapping shaped like ``matviz/backends/devices/h200.json``):

``blocks``         the hardware's block slots per SM;
``threads``        max threads per SM / threads per block;
``warps``          max warps per SM / warps per block;
``shared_memory``  shared memory per SM / (the block's shared bytes, padding included, rounded up
                   to the allocation unit, + the 1 KiB the driver reserves per block);
``registers``      registers are allocated per warp: registers per thread x 32 rounded up to the
                   allocation unit (256 on sm_90, i.e. a multiple of 8 per thread); the register
                   file holds floor(regs_per_sm / regs_per_warp) warps, split into whole blocks.

The limiter is the resource with the fewest blocks; ties go to the first in the order above
(the hard block-slot limit first, registers last). Pure: no backend, no GPU, no compiler: the
caller passes the register count of the build whose blocks it describes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from matviz.core.config import KernelConfig

LIMITERS = ("blocks", "threads", "warps", "shared_memory", "registers")


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    limiter: str
    limits: dict[str, int]
    registers: int
    register_source: str
    warps_per_sm: int  # resident warps when blocks_per_sm blocks run
    resident_blocks: int  # blocks the whole chip holds at once
    waves: int  # ceil(grid blocks / resident blocks) for uniform blocks

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able copy for a trace manifest's ``occupancy`` entry."""
        return asdict(self)


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def smem_per_block(smem_bytes: int, device: Mapping[str, Any]) -> int:
    """Shared memory one block takes from its SM: allocation-unit rounding + reserved bytes."""
    return _round_up(smem_bytes, int(device["smem_alloc_unit"])) + int(
        device["smem_reserved_per_block"]
    )


def regs_per_warp(registers: int, device: Mapping[str, Any]) -> int:
    """Registers one warp is allocated: registers per thread x warp size, rounded up."""
    return _round_up(registers * int(device["warp_size"]), int(device["reg_alloc_unit_per_warp"]))


def resource_limits(
    threads: int, smem_bytes: int, registers: int, device: Mapping[str, Any]
) -> dict[str, int]:
    """Blocks per SM each resource alone would allow, in LIMITERS order."""
    warps = math.ceil(threads / int(device["warp_size"]))
    if smem_bytes > int(device["smem_per_block"]):
        by_smem = 0  # the block can never launch
    else:
        by_smem = int(device["smem_per_sm"]) // smem_per_block(smem_bytes, device)
    if registers > int(device["max_regs_per_thread"]):
        by_regs = 0
    else:
        warps_by_regs = int(device["regs_per_sm"]) // max(regs_per_warp(registers, device), 1)
        by_regs = warps_by_regs // warps
    return {
        "blocks": int(device["max_blocks_per_sm"]),
        "threads": int(device["max_threads_per_sm"]) // threads,
        "warps": int(device["max_warps_per_sm"]) // warps,
        "shared_memory": by_smem,
        "registers": by_regs,
    }


def occupancy(
    config: KernelConfig,
    device: Mapping[str, Any],
    registers: int,
    *,
    register_source: str = "given",
) -> Occupancy:
    """Resident blocks per SM for ``config`` with ``registers`` per thread, the limiter and
    every limit. ``register_source`` says where the count came from ("nvcc", "estimate", ...).
    """
    limits = resource_limits(config.threads, config.smem_bytes, int(registers), device)
    blocks = min(limits.values())
    limiter = next(name for name in LIMITERS if limits[name] == blocks)
    resident = blocks * int(device["sm_count"])
    return Occupancy(
        blocks_per_sm=blocks,
        limiter=limiter,
        limits=limits,
        registers=int(registers),
        register_source=register_source,
        warps_per_sm=blocks * config.warps,
        resident_blocks=resident,
        waves=math.ceil(config.n_blocks / resident) if resident else 0,
    )


def occupancy_dict(
    config: KernelConfig,
    device: Mapping[str, Any],
    registers: int,
    *,
    register_source: str = "given",
) -> dict[str, Any]:
    """:func:`occupancy` as a plain dict, ready for a manifest (both backends write it)."""
    return occupancy(config, device, registers, register_source=register_source).to_dict()
