"""Qt tests run offscreen unless a developer asks otherwise, and must leave no widgets."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def no_leaked_widgets(qapp):
    from PySide6.QtWidgets import QApplication

    before = set(map(id, QApplication.topLevelWidgets()))
    yield
    QApplication.processEvents()
    leaked = [w for w in QApplication.topLevelWidgets() if id(w) not in before and w.isVisible()]
    assert not leaked, f"test left top-level widgets open: {leaked}"
