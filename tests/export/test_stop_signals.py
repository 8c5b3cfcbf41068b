"""Ctrl-C where raising at once does harm: inside PySide6's imports, inside Qt's paint calls,
while the command line loads. Each ends in one line, the old file kept."""

from __future__ import annotations

import importlib
import os
import signal
import sys

import pytest

from matviz.export import stop_signals


def test_a_signal_while_held_is_noted_and_raised_after():
    before = signal.getsignal(signal.SIGINT)  # Python's handler, or SIG_IGN in a background job
    with stop_signals.held() as caught:
        os.kill(os.getpid(), signal.SIGINT)  # would be a KeyboardInterrupt here
        assert caught == [signal.SIGINT]
    with pytest.raises(stop_signals.Interrupted) as exc:
        stop_signals.raise_if(caught)
    assert exc.value.signum == signal.SIGINT
    stop_signals.raise_if([])  # none came: nothing
    assert signal.getsignal(signal.SIGINT) is before  # put back


def test_ctrl_c_during_the_qt_imports_ends_the_command_after_them(monkeypatch):
    from matviz.cli import common

    imported = []
    real = importlib.import_module

    def importing(name, package=None):  # pydantic, imported lazily, passes package too
        imported.append(name)
        if name == "pyqtgraph":  # Ctrl-C lands inside the imports
            os.kill(os.getpid(), signal.SIGINT)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", importing)
    ran = []
    with pytest.raises(stop_signals.Interrupted):
        with common.needs_qt("--plot", "matviz.app.sweep_plot"):
            ran.append(True)
    asked = ["PySide6.QtWidgets", "pyqtgraph", "matviz.app.sweep_plot"]
    assert [name for name in imported if name in asked] == asked  # every import done
    assert not ran  # the block itself never started


def test_ctrl_c_while_a_chart_renders_keeps_the_old_file(qapp, tmp_path, monkeypatch):
    from matviz import sweep
    from matviz.app import sweep_plot

    rows = sweep.run_sweep(sweep.plan("tiled", {"tile": [16, 32]}, 256, 256, 256, "sim", 1))
    out = tmp_path / "chart.png"
    out.write_bytes(b"old chart")
    real = sweep_plot.to_rgb

    def rendering(image):  # the signal comes mid-render, inside Qt's grab
        os.kill(os.getpid(), signal.SIGINT)
        return real(image)

    monkeypatch.setattr(sweep_plot, "to_rgb", rendering)
    with pytest.raises(stop_signals.Interrupted):
        sweep_plot.render_plot(rows, out)
    assert out.read_bytes() == b"old chart"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png"]  # no partial file


def test_ctrl_c_while_the_command_line_loads_is_one_line(monkeypatch, capsys):
    from matviz import entry

    class Interrupting:  # the import of matviz.cli is where the Ctrl-C lands
        def find_spec(self, name, path=None, target=None):
            if name == "matviz.cli":
                raise KeyboardInterrupt
            return None

    monkeypatch.delitem(sys.modules, "matviz.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Interrupting(), *sys.meta_path])
    assert entry.main() == 130
    assert capsys.readouterr().err == "matviz: interrupted\n"


def test_an_error_a_ctrl_c_caused_is_reported_as_the_interrupt(monkeypatch, capsys):
    """Ctrl-C inside __set_name__ (a module with a cached_property being imported) surfaces as
    the RuntimeError it caused: it was a traceback and exit 1."""
    from matviz import cli

    def interrupted_import(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__") from exc

    monkeypatch.setattr(cli.COMMANDS["kernels"], "run", interrupted_import)
    assert cli.main(["kernels"]) == 130
    assert capsys.readouterr().err == "matviz: interrupted\n"

    def plain_bug(args):
        raise RuntimeError("a bug, not an interrupt")

    monkeypatch.setattr(cli.COMMANDS["kernels"], "run", plain_bug)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["kernels"])
