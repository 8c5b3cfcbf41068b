"""The run controls: catalog-driven choices, refusals with a reason, debounced re-runs."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from matviz.app.controls import Controls
from matviz.app.i18n import set_language, tr
from matviz.backends.cuda_status import cuda_status
from matviz.core.catalog import CATALOG


@pytest.fixture
def controls(qtbot):
    widget = Controls()
    qtbot.addWidget(widget)
    widget.show()
    return widget


def _select(combo, value) -> None:
    combo.setCurrentIndex(combo.findData(value))


def test_choices_come_from_the_catalog(controls):
    assert [controls.kernel.itemData(i) for i in range(controls.kernel.count())] == list(CATALOG)
    for i, spec in enumerate(CATALOG.values()):
        assert controls.kernel.itemData(i, Qt.ToolTipRole) == spec.title
    _select(controls.kernel, "tiled")
    tiles = [controls.tile.itemData(i) for i in range(controls.tile.count())]
    pads = [controls.pad.itemData(i) for i in range(controls.pad.count())]
    assert tuple(tiles) == CATALOG["tiled"].params["tile"]
    assert tuple(pads) == CATALOG["tiled"].params["pad"] and controls.pad.isEnabled()
    _select(controls.kernel, "naive")
    assert not controls.pad.isEnabled() and "pad" not in controls.job()["params"]
    assert controls.level.currentData() == 3  # every view has data


def test_cuda_entry_explains_itself_when_unavailable(controls):
    ok, reason = cuda_status()
    row = controls.backend.findData("cuda")
    item = controls.backend.model().item(row)
    if ok:
        assert item.isEnabled()
    else:
        assert not item.isEnabled()
        assert controls.backend.itemData(row, Qt.ToolTipRole) == reason
        assert controls.backend.currentData() == "sim"


@pytest.mark.parametrize(
    "size, needle",
    [(0, "M must be a whole number >= 1"), (70000, "M = 70000 is outside 1..16384")],
)
def test_an_invalid_size_is_refused_with_a_reason(qtbot, controls, size, needle):
    requested = []
    controls.runRequested.connect(requested.append)
    _select(controls.tile, 8)
    controls.sizes["M"].setValue(size)
    assert not controls.message.isHidden() and needle in controls.message.text()
    assert not controls.run_button.isEnabled() and not controls._timer.isActive()
    controls.request_run()  # even an explicit request does not run
    assert requested == []
    controls.sizes["M"].setValue(256)  # fixing it clears the reason and runs again
    assert controls.message.isHidden()
    with qtbot.waitSignal(controls.runRequested, timeout=3000) as blocker:
        pass
    assert blocker.args[0]["M"] == 256


def test_catalog_rejections_show_the_catalog_reason(controls, monkeypatch):
    import matviz.app.controls as module

    monkeypatch.setattr(module, "SIZE_MAX", 999_999)  # let the catalog's own grid limit speak
    _select(controls.tile, 8)
    controls.sizes["M"].setValue(600_000)
    assert "block rows; CUDA allows 65535" in controls.message.text()


def test_parameter_changes_are_debounced_into_one_run(qtbot, controls):
    requested = []
    controls.runRequested.connect(requested.append)
    _select(controls.kernel, "tiled")
    _select(controls.tile, 16)
    for pad in (1, 2, 4):
        _select(controls.pad, pad)
    assert requested == [] and controls._timer.isActive()
    with qtbot.waitSignal(controls.runRequested, timeout=3000):
        pass
    assert not controls._timer.isActive()
    assert requested == [controls.job()]
    assert requested[0]["params"] == {"tile": 16, "pad": 4}
    assert set(requested[0]) == {"backend", "kernel", "M", "N", "K", "params", "level"}


def test_showing_a_trace_configuration_does_not_run(controls):
    from matviz.backends.simulator import simulate

    trace = simulate("tiled_transposed", 96, 64, 32, tile=16, pad=2, level=1)
    requested = []
    controls.runRequested.connect(requested.append)
    controls.show_config(trace)
    job = controls.job()
    assert (job["kernel"], job["M"], job["N"], job["K"]) == ("tiled_transposed", 96, 64, 32)
    assert job["params"] == {"tile": 16, "pad": 2} and job["level"] == 1
    assert job["backend"] == "sim" and not controls._timer.isActive() and requested == []


def test_labels_follow_the_language(qtbot, controls):
    assert controls._labels[0].text() == "Kernel"
    set_language("zh_CN")  # widgets get a posted LanguageChange event
    try:
        qtbot.waitUntil(lambda: controls._labels[0].text() != "Kernel")
        assert controls._labels[0].text() == tr("Kernel")
        assert controls.run_button.text() == tr("Run") != "Run"
    finally:
        set_language("en")
    qtbot.waitUntil(lambda: controls._labels[0].text() == "Kernel")
