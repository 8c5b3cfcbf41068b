"""Qt tests run offscreen unless a developer asks otherwise, and must leave no widgets."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def no_leaked_widgets(closes_its_windows):
    yield


@pytest.fixture(autouse=True)
def dialogs(monkeypatch):
    """Message boxes never block a test: each one is recorded as (title, text) instead."""
    from PySide6.QtWidgets import QMessageBox

    shown: list[tuple[str, str]] = []

    def record(parent, title, text, *args, **kwargs):
        shown.append((title, text))
        return QMessageBox.Ok

    for kind in ("warning", "critical", "information", "question"):
        monkeypatch.setattr(QMessageBox, kind, staticmethod(record))
    return shown
