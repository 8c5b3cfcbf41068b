"""An MMA's fragments as a trace holds them (lesson 8 §20-23): for each operand, which lane
holds which element, as the description gives it and, where a level-3 recording measured it,
as the GPU did (``trace.fragments``). Pure numpy, for the fragment view and its tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from matviz.core.kernel import WARP

# the axes of each operand of D = A B + C (rows, columns)
AXES = {"A": ("m", "k"), "B": ("k", "n"), "C": ("m", "n"), "D": ("m", "n")}


@dataclass
class Operand:
    """One MMA operand: its described map (32 lanes x slots, element = row * cols + col) and,
    where the GPU measured it, the measured one (32 lanes x 32 slots, -1 past the last)."""

    name: str
    rows: int
    cols: int
    dtype: str
    described: np.ndarray
    measured: np.ndarray | None = None
    owner: np.ndarray = field(init=False)  # (rows, cols): the lowest lane holding it, or -1
    holders: np.ndarray = field(init=False)  # (rows, cols): how many lanes hold it
    _mismatches: list[tuple[int, int, int, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        shown = self.shown
        self.owner = np.full((self.rows, self.cols), -1, np.int32)
        held = np.zeros((WARP, self.rows * self.cols), bool)
        for lane in range(WARP - 1, -1, -1):  # the lowest lane wins
            mine = shown[lane][(shown[lane] >= 0) & (shown[lane] < self.rows * self.cols)]
            self.owner.flat[mine] = lane
            held[lane, mine] = True
        self.holders = held.sum(axis=0).reshape(self.rows, self.cols).astype(np.int32)
        self._mismatches = self._find_mismatches()

    @property
    def slots(self) -> int:
        return int(self.described.shape[1])

    @property
    def axes(self) -> tuple[str, str]:
        return AXES.get(self.name, ("row", "col"))

    @property
    def shown(self) -> np.ndarray:
        """The map drawn: the measured one where there is one, else the described one."""
        if self.measured is None:
            return self.described
        used = np.flatnonzero((self.measured >= 0).any(axis=0))
        last = int(used[-1]) + 1 if used.size else 0
        return self.measured[:, : max(last, self.slots)]

    def held_by(self, lane: int) -> list[tuple[int, int, list[int]]]:
        """(row, col, slots) of each element ``lane`` holds, in the order of its first slot."""
        out: dict[int, list[int]] = {}
        for slot, element in enumerate(self.shown[lane]):
            if 0 <= element < self.rows * self.cols:
                out.setdefault(int(element), []).append(slot)
        return [(e // self.cols, e % self.cols, slots) for e, slots in out.items()]

    def mismatches(self) -> list[tuple[int, int, int, int]]:
        """(lane, slot, measured, described) where the measurement differs (-1: no element)."""
        return self._mismatches

    def _find_mismatches(self) -> list[tuple[int, int, int, int]]:
        if self.measured is None:
            return []
        width = max(self.measured.shape[1], self.slots)
        described = np.full((WARP, width), -1, np.int64)
        described[:, : self.slots] = self.described
        measured = np.full((WARP, width), -1, np.int64)
        measured[:, : self.measured.shape[1]] = self.measured
        lanes, slots = np.nonzero(measured != described)
        return [
            (int(lane), int(slot), int(measured[lane, slot]), int(described[lane, slot]))
            for lane, slot in zip(lanes, slots, strict=True)
        ]

    def repeat_half(self) -> int:
        """h when slots h..2h-1 of every lane repeat slots 0..h-1 (fp16 WMMA's A and B), else 0."""
        shown = self.described
        half = shown.shape[1] // 2
        if half and shown.shape[1] % 2 == 0 and np.array_equal(shown[:, half:], shown[:, :half]):
            return half
        return 0

    def cell(self, element: int) -> tuple[int, int] | None:
        if 0 <= element < self.rows * self.cols:
            return divmod(int(element), self.cols)
        return None


def mma_of(trace: Any) -> dict | None:
    """The description's mma section, or None (no trace, a CUDA-core kernel, unreadable)."""
    if trace is None:
        return None
    description = trace.manifest.get("description")
    mma = description.get("mma") if isinstance(description, dict) else None
    if not isinstance(mma, dict) or not mma.get("fragments"):
        return None
    return mma


def operands_of(trace: Any) -> list[Operand]:
    """The operands of the trace's MMA, each with its measured map where the trace has one."""
    mma = mma_of(trace)
    if mma is None:
        return []
    measured = trace.fragments
    out = []
    for i, f in enumerate(mma["fragments"]):
        described = np.asarray(f["elements"], np.int64).reshape(WARP, -1)
        has = measured.shape[0] > i
        out.append(
            Operand(
                str(f["operand"]), int(f["rows"]), int(f["cols"]), str(f.get("dtype", "")),
                described, measured[i].astype(np.int64) if has else None,
            )
        )  # fmt: skip
    return out
