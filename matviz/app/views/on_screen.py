"""Playhead updates for a view only while it can be seen.

Four views share the memory tabs (banks, coalescing, source, errors) and follow the playhead;
at every frame of playback each of them had rebuilt its picture, open or not (kernel 08's
recording: 14 ms a frame for the two closed tabs alone). A view whose window is on screen but
whose tab is closed now waits, and catches up when its tab opens.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QWidget


class WhenOnScreen(QObject):
    """Its slot :meth:`request` calls ``update`` at once while ``view`` is visible, or while its
    window is not (tests and exports drive views in windows never shown on a screen), else once
    ``view`` is shown again. A child of ``view``: the connection ends with the view."""

    def __init__(self, view: QWidget, update: Callable[[], None]):
        super().__init__(view)
        self._view, self._update, self._stale = view, update, False
        view.installEventFilter(self)

    def request(self, *_args) -> None:
        if not self._view.isVisible() and self._view.window().isVisible():
            self._stale = True
            return
        self._update()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if watched is self._view and event.type() == QEvent.Type.Show and self._stale:
            self._stale = False
            self._update()
        return False
