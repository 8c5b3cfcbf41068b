"""The last few values a pure function gave, by key: the model's answers views ask for again
frame after frame (a configuration's instruction plan, a warp's access records at a k-step)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class Recent(Generic[V]):
    """Up to ``size`` values by key; the oldest goes first when a new one comes."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: dict[Hashable, V] = {}

    def get(self, key: Hashable, make: Callable[[], V]) -> V:
        if key not in self._values:
            if len(self._values) >= self.size:
                self._values.pop(next(iter(self._values)))
            self._values[key] = make()
        return self._values[key]
