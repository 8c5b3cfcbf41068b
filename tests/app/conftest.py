"""Qt tests run offscreen unless a developer asks otherwise, and must leave no widgets."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def no_leaked_widgets(closes_its_windows):
    yield
