"""Shared-memory bank conflicts: 32 banks, each 4 bytes wide.

A warp access of ``width`` bytes per lane is served in phases of ``128 // width`` lanes. Within a
phase, lanes that touch the same 4-byte word share it (broadcast); distinct words in one bank
serialise, so a phase costs as many wavefronts as its busiest bank has distinct words.

``offsets`` arrays have shape (..., 32): byte offsets per lane, negative (-1) for inactive lanes.

One exception, measured with ``ncu`` on the H200
(``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld`` per ``smsp__inst_executed_op_shared_ld``,
kernel 02's A-tile loads, ``resources/bench/h200_ncu_banks_1024.md``): when all the distinct words
a warp's 8- or 16-byte access touches lie in distinct banks (one pass over the banks would serve
them), the access costs 2 wavefronts at 16 bytes and 1 at 8 bytes, not 4 and 2 phases
(``FEW_WORDS_WAVEFRONTS``). Measured cases: a warp-wide broadcast (T=32), two rows of four words
(T=16) and four rows (T=8) at LDS.128, four rows of two words at LDS.64 (PAD 2). A 4-byte
access costs 1 either way. Every other access follows the phase rule.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

N_BANKS = 32
BANK_BYTES = 4
WARP_SIZE = 32
WIDTHS = (4, 8, 16)
# Wavefronts, by width in bytes, of an access whose distinct words all lie in distinct banks
# (a warp-wide broadcast, or a few rows of a tile), measured with ncu on the H200.
FEW_WORDS_WAVEFRONTS = {4: 1, 8: 1, 16: 2}


def banks_of(offsets: ArrayLike) -> np.ndarray:
    """Bank of each lane's byte offset; inactive lanes (negative offsets) stay -1."""
    off = np.asarray(offsets, np.int64)
    return np.where(off < 0, -1, (off // BANK_BYTES) % N_BANKS)


def _words_per_bank(offsets: ArrayLike, width: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Distinct words per (access, phase, bank): shape (n, phases, 32), plus the leading shape."""
    if width not in WIDTHS:
        raise ValueError(f"access width must be one of {WIDTHS} bytes, not {width}")
    width = int(width)  # a numpy scalar from a probe row would otherwise leak into shapes
    off = np.asarray(offsets, np.int64)
    if off.ndim < 1 or off.shape[-1] != WARP_SIZE:
        raise ValueError(f"offsets must have shape (..., {WARP_SIZE}), not {off.shape}")
    lead = off.shape[:-1]
    off = off.reshape(-1, WARP_SIZE)
    n = off.shape[0]
    n_words = width // BANK_BYTES
    n_phases = n_words  # 32 lanes / (128 // width lanes per phase)

    # Each phase touches lanes_per_phase * n_words == 32 words: one row of 32 per (access,
    # phase), lanes in order. Inactive lanes become -1 so they sort first and are dropped.
    words = (off // BANK_BYTES)[:, :, None] + np.arange(n_words)
    words = np.where((off >= 0)[:, :, None], words, -1).reshape(n * n_phases, WARP_SIZE)

    # Lanes on one word are one broadcast: count each distinct word of a row once.
    words.sort(axis=1)
    distinct = np.ones(words.shape, bool)
    distinct[:, 1:] = words[:, 1:] != words[:, :-1]
    distinct &= words >= 0
    row = np.broadcast_to(np.arange(n * n_phases)[:, None], words.shape)
    cell = row[distinct] * N_BANKS + words[distinct] % N_BANKS
    counts = np.bincount(cell, minlength=n * n_phases * N_BANKS)
    return counts.reshape(n, n_phases, N_BANKS), lead


def warp_broadcast(offsets: ArrayLike) -> np.ndarray:
    """Whether every active lane of each access reads one address (and one lane is active)."""
    off = np.asarray(offsets, np.int64)
    active = off >= 0
    first = np.max(off, axis=-1, keepdims=True)  # any active lane's offset: all equal if any
    same = np.all(~active | (off == first), axis=-1)
    return same & active.any(axis=-1)


def one_pass(offsets: ArrayLike, width: int) -> np.ndarray:
    """Whether all the distinct words each access touches lie in distinct banks."""
    off = np.asarray(offsets, np.int64).reshape(-1, WARP_SIZE)
    n_words = int(width) // BANK_BYTES
    words = (off // BANK_BYTES)[:, :, None] + np.arange(n_words)
    words = np.where((off >= 0)[:, :, None], words, -1).reshape(len(off), -1)
    out = np.empty(len(off), bool)
    for i, row in enumerate(words):  # a few hundred accesses per view: cheap
        distinct = np.unique(row[row >= 0])
        out[i] = len(distinct) > 0 and len(np.unique(distinct % N_BANKS)) == len(distinct)
    return out


def wavefronts(offsets: ArrayLike, width: int) -> np.ndarray:
    """Shared-memory wavefronts each access needs: per phase the busiest bank, summed; an 8- or
    16-byte access whose distinct words all lie in distinct banks costs
    ``FEW_WORDS_WAVEFRONTS[width]`` (measured on the H200)."""
    counts, lead = _words_per_bank(offsets, width)
    phases = counts.max(axis=2).sum(axis=1)
    if int(width) > BANK_BYTES:
        measured = FEW_WORDS_WAVEFRONTS[int(width)]
        few = one_pass(offsets, width)
        phases = np.where(few, np.minimum(phases, measured), phases)
        # a broadcast costs what ncu measured however few lanes take part (edge blocks)
        broadcast = warp_broadcast(np.asarray(offsets, np.int64).reshape(-1, WARP_SIZE))
        phases = np.where(broadcast, measured, phases)
    return phases.reshape(lead)


def conflict_degree(offsets: ArrayLike, width: int) -> np.ndarray:
    """The n in "n-way bank conflict" (1 = conflict-free, 0 = no active lane)."""
    counts, lead = _words_per_bank(offsets, width)
    return counts.max(axis=(1, 2)).reshape(lead)


def bank_matrix(offsets: ArrayLike, width: int) -> np.ndarray:
    """Distinct words hit in each bank, summed over phases: shape (..., 32)."""
    counts, lead = _words_per_bank(offsets, width)
    return counts.sum(axis=1).reshape(lead + (N_BANKS,))
