"""A label whose text follows the playhead, without laying the window out again each frame.

A QLabel in a layout invalidates every layout up to the window on each new text, and the window
then measures each wrapped label in it again (Qt re-shapes their rich text): during kernel 10's
playback that was a fifth of every frame (27.6 frames/s drawn one by one; 34.4 with every label's
size fixed), for a time, a phase or a k-tile that fitted the label's box as well as the text
before. :func:`live` puts the label in a box of its own that hears of the new text first: a text
that fits the box only repaints it; one that needs more room passes the request on to the
layout. A shorter text keeps the box until the layout next runs.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize
from PySide6.QtWidgets import QLabel, QWidget


class LiveBox(QWidget):
    """The box of one live label: sized by the label, laid out in its place."""

    def __init__(self, label: QLabel) -> None:
        super().__init__()
        self.label = label
        label.setParent(self)
        self._take_constraints()
        self.setVisible(not label.isHidden())

    def _take_constraints(self) -> bool:
        """Give the box the label's size policy and limits (a fixed width, the word wrap's
        height-for-width); True when one of them changed."""
        label, changed = self.label, False
        if self.sizePolicy() != label.sizePolicy():
            self.setSizePolicy(label.sizePolicy())
            changed = True
        if (self.minimumSize(), self.maximumSize()) != (label.minimumSize(), label.maximumSize()):
            self.setMinimumSize(label.minimumSize())
            self.setMaximumSize(label.maximumSize())
            changed = True
        return changed

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt's names)
        return self.label.sizeHint()

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return self.label.minimumSizeHint()

    def hasHeightForWidth(self) -> bool:  # noqa: N802
        return self.label.hasHeightForWidth()

    def heightForWidth(self, width: int) -> int:  # noqa: N802
        return self.label.heightForWidth(width)

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self.label.setGeometry(self.rect())

    def fits(self) -> bool:
        """Whether the label's text fits the box as it is."""
        label, width = self.label, self.width()
        if label.hasHeightForWidth():
            return label.heightForWidth(width) <= self.height()
        hint = label.sizeHint()
        return hint.width() <= width and hint.height() <= self.height()

    def event(self, event: QEvent) -> bool:
        if event.type() != QEvent.Type.LayoutRequest:
            return super().event(event)
        hidden = self.label.isHidden()
        if hidden != self.isHidden():
            self.setVisible(not hidden)  # the layout hears of these itself
        elif not self._take_constraints() and not hidden and not self.fits():
            self.updateGeometry()
        return True


def live(label: QLabel) -> LiveBox:
    """``label`` in its live box: add the box to the layout where the label would go."""
    return LiveBox(label)
