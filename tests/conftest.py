"""Fixtures shared by the Qt-using test folders (app, export)."""

import pytest


@pytest.fixture
def closes_its_windows(qapp):
    """The test must close every top-level widget it showed (offscreen ones too)."""
    from PySide6.QtWidgets import QApplication

    before = set(map(id, QApplication.topLevelWidgets()))
    yield
    QApplication.processEvents()
    left = [w for w in QApplication.topLevelWidgets() if id(w) not in before and w.isVisible()]
    assert not left, f"test left top-level widgets open: {left}"
