"""Shared-memory bank conflicts: 32 banks, each 4 bytes wide.

A warp access of ``width`` bytes per lane is served in phases of ``128 // width`` lanes. Within a
phase, lanes that touch the same 4-byte word share it (broadcast); distinct words in one bank
serialise, so a phase costs as many wavefronts as its busiest bank has distinct words.

``offsets`` arrays have shape (..., 32): byte offsets per lane, negative (-1) for inactive lanes.

Two exceptions, measured with ``ncu`` on the H200
(``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld`` per ``smsp__inst_executed_op_shared_ld``):

* A 16-byte access with no bank conflict in any phase costs 2 wavefronts when each group of four
  neighbouring lanes (0-3, 4-7, ...) reads at most two distinct 16-byte elements, else 4
  (:func:`quad_wavefronts`). Single lane patterns (``resources/bench/h200_ncu_lds_patterns.md``):
  lane i reading element i % 4 costs 4 though one pass over the banks would serve the warp;
  element 2(i / 4) costs 2 though its words span two passes. It gives kernel 08's loads at
  WNITER=4 ncu's 3.333 per instruction, and leaves every other measured kernel row as it was.
* An 8-byte access whose distinct words all lie in distinct banks (one pass over the banks would
  serve them) costs 1 wavefront, not 2 phases (``FEW_WORDS_WAVEFRONTS``; four rows of two words
  at LDS.64, PAD 2, ``resources/bench/h200_ncu_banks_1024.md``).

A warp-wide broadcast costs 2 at 16 bytes and 1 at 8, however few lanes take part. A 4-byte
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


def quad_wavefronts(offsets: ArrayLike) -> np.ndarray:
    """Wavefronts of a conflict-free 16-byte access, as the H200 serves it: 2 when each group
    of four neighbouring lanes (0-3, 4-7, ...) reads at most two distinct 16-byte elements,
    else 4. Measured with ncu: lane i reading element i % 4 costs 4 (four distinct in each
    group) although one pass over the banks would serve the warp, and lane i reading element
    2(i / 4) costs 2 although its eight elements span two passes."""
    off = np.asarray(offsets, np.int64).reshape(-1, WARP_SIZE)
    elem = np.where(off < 0, -1, off // 16).reshape(len(off), WARP_SIZE // 4, 4)
    elem = np.sort(elem, axis=2)
    new = (elem[:, :, 1:] != elem[:, :, :-1]) & (elem[:, :, 1:] >= 0)
    distinct = new.sum(axis=2) + (elem[:, :, 0] >= 0)
    return np.where((distinct > 2).any(axis=1), 4, 2)


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
    """Shared-memory wavefronts each access needs: per phase the busiest bank, summed, with the
    H200's exceptions for 8- and 16-byte accesses (see the module)."""
    counts, lead = _words_per_bank(offsets, width)
    phases = counts.max(axis=2).sum(axis=1)
    if int(width) == 16:
        # no bank conflict in any phase: 2 wavefronts where every four neighbouring lanes read
        # at most two distinct 16-byte elements, else 4 (resources/bench/h200_ncu_lds_patterns)
        free = counts.max(axis=2).max(axis=1) <= 1
        phases = np.where(free, np.minimum(phases, quad_wavefronts(offsets)), phases)
    elif int(width) > BANK_BYTES:
        few = one_pass(offsets, width)
        phases = np.where(few, np.minimum(phases, FEW_WORDS_WAVEFRONTS[int(width)]), phases)
    if int(width) > BANK_BYTES:
        measured = FEW_WORDS_WAVEFRONTS[int(width)]
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
