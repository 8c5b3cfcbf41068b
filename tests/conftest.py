"""Fixtures shared by the Qt-using test folders (app, export)."""

import os

import pytest


@pytest.fixture
def closes_its_windows(qapp):
    """The test must close every top-level widget it showed (offscreen ones too). What it
    made is then deleted here, at a point where no event is being handled: the widgets that
    pytest-qt closed (their deleteLater never runs outside an event loop) and the garbage
    cycles that hold live Qt objects (pyqtgraph's menus, a Session). Left alone, hundreds of
    tests' widgets stayed alive, and a garbage collection that happened to run inside some
    later event handler deleted Qt objects there (the suite crashed in processEvents now and
    then, in this fixture)."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtWidgets import QApplication

    before = set(map(id, QApplication.topLevelWidgets()))
    yield
    QApplication.processEvents()
    left = [w for w in QApplication.topLevelWidgets() if id(w) not in before and w.isVisible()]
    message = f"test left top-level widgets open: {left}"
    QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    gc.collect()
    assert not left, message


@pytest.fixture
def unsearchable(tmp_path, monkeypatch):
    """A chmod-000 folder; root passes any permission check, so there its stat() fails."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0)
    if os.geteuid() == 0:
        real = os.stat

        def stat(path, *args, **kwargs):
            if os.fspath(path).startswith(str(locked) + os.sep):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", stat)
    yield locked
    locked.chmod(0o700)


@pytest.fixture(autouse=True)
def no_tuned_defaults(tmp_path_factory, monkeypatch):
    """Tests see the descriptions' defaults, whatever `matviz sweep --tune` kept on this machine."""
    monkeypatch.setenv("MATVIZ_TUNED", str(tmp_path_factory.mktemp("tuned") / "tuned.json"))
