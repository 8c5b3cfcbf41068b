"""The run controls: choices from the kernel descriptions, refusals with a reason, debounced
re-runs."""

from __future__ import annotations

import dataclasses
import re

import pytest
from PySide6.QtCore import Qt

from matviz.app.controls import Controls, param_title
from matviz.app.i18n import set_language, tr
from matviz.backends.contract import RunRequest
from matviz.backends.cuda_status import cuda_status
from matviz.core import registry
from matviz.core.kernel import Param
from matviz.errors import RefusedConfiguration


@pytest.fixture
def controls(qtbot):
    widget = Controls()
    qtbot.addWidget(widget)
    widget.show()
    return widget


def _select(combo, value) -> None:
    index = combo.findData(value)
    assert index >= 0, value
    combo.setCurrentIndex(index)


def _choices(combo) -> tuple:
    return tuple(combo.itemData(i) for i in range(combo.count()))


def test_choices_come_from_the_descriptions(controls):
    kernels = registry.kernels()
    assert list(_choices(controls.kernel)) == list(kernels)
    for i, kernel in enumerate(kernels.values()):
        assert controls.kernel.itemData(i, Qt.ToolTipRole) == kernel.title
    for kernel in kernels.values():
        _select(controls.kernel, kernel.name)
        assert tuple(controls.params_boxes) == kernel.param_names
        for param in kernel.params:
            box = controls.params_boxes[param.name]
            assert _choices(box) == param.values and box.toolTip() == param.help
            assert controls.form.labelForField(box).text() == param_title(param)
        assert set(controls.job()["params"]) == set(kernel.param_names)
    _select(controls.kernel, "naive")
    assert "pad" not in controls.params_boxes and "pad" not in controls.job()["params"]
    assert controls.level.currentData() == 3  # every view has data


def test_a_fresh_kernel_starts_at_its_defaults_and_keeps_shared_values(controls):
    first = next(iter(registry.kernels().values()))
    assert controls.spec is first and controls.params() == first.default_params()
    _select(controls.kernel, "tiled")
    _select(controls.params_boxes["tile"], 32)
    _select(controls.params_boxes["pad"], 4)
    _select(controls.kernel, "naive")  # tile carries over, pad does not exist
    assert controls.params() == {"tile": 32, "b_col_major": 0}  # its own switch at its default
    _select(controls.kernel, "tiled")  # pad was gone: back to its default
    default_pad = registry.get_kernel("tiled").param("pad").default
    assert controls.params() == {"tile": 32, "pad": default_pad, "drop_sync": 0}


def test_a_parameter_added_to_a_description_appears_in_the_controls(qtbot, monkeypatch):
    tiled = registry.get_kernel("tiled")
    split = Param("split", (1, 2, 4), 2, "SPLIT", "S", "ways the k loop is split")
    fake = dataclasses.replace(tiled, name="fake", number=9, params=(*tiled.params, split))
    monkeypatch.setattr(registry, "kernels", lambda: {"tiled": tiled, "fake": fake})
    widget = Controls()
    qtbot.addWidget(widget)
    _select(widget.kernel, "fake")
    box = widget.params_boxes["split"]
    assert _choices(box) == (1, 2, 4) and box.currentData() == 2  # the description's default
    assert widget.form.labelForField(box).text() == "Split S" and box.toolTip() == split.help
    _select(box, 4)
    job = widget.job()
    assert job["kernel"] == "fake" and job["params"]["split"] == 4 and widget.validate()
    assert RunRequest(**job).params == {"tile": 16, "pad": 0, "drop_sync": 0, "split": 4}
    _select(widget.kernel, "tiled")
    assert "split" not in widget.params_boxes and "split" not in widget.job()["params"]


def test_typing_a_size_is_one_change(qtbot, controls):
    requested = []
    controls.runRequested.connect(requested.append)
    box = controls.sizes["M"]
    changes = []
    box.valueChanged.connect(changes.append)
    box.setFocus()
    box.selectAll()
    qtbot.keyClicks(box, "4096")
    assert changes == [] and not controls._timer.isActive()  # nothing while typing
    qtbot.keyClick(box, Qt.Key_Return)
    assert changes == [4096] and controls._timer.isActive()
    with qtbot.waitSignal(controls.runRequested, timeout=3000):
        pass
    assert len(requested) == 1 and requested[0]["M"] == 4096


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
    _select(controls.kernel, "tiled")
    _select(controls.params_boxes["tile"], 8)
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


def test_description_rejections_show_their_reason(controls, monkeypatch):
    import matviz.app.controls as module

    monkeypatch.setattr(module, "SIZE_MAX", 999_999)  # let the kernel's own grid limit speak
    _select(controls.kernel, "tiled")
    _select(controls.params_boxes["tile"], 8)
    controls.sizes["M"].setValue(600_000)
    assert "block rows; CUDA allows 65535" in controls.message.text()
    controls.sizes["M"].setValue(1024)
    _select(controls.kernel, "register_tiling_1d")  # a constraint between parameters
    _select(controls.params_boxes["BM"], 128)
    _select(controls.params_boxes["BN"], 128)  # 128 * 128 / TM 8 = 2048 threads: refused
    with pytest.raises(RefusedConfiguration) as refused:
        registry.configure("register_tiling_1d", controls.params(), 1024, 1024, 1024)
    # the CLI's line names the kernel; the panel, under the kernel's menu, gives the rule alone
    assert str(refused.value) == f"kernel register_tiling_1d: {controls.message.text()}"
    assert "threads" in controls.message.text()
    assert not controls.run_button.isEnabled()


def test_parameter_changes_are_debounced_into_one_run(qtbot, controls):
    requested = []
    controls.runRequested.connect(requested.append)
    _select(controls.kernel, "tiled")
    _select(controls.params_boxes["tile"], 16)
    for pad in (1, 2, 4):
        _select(controls.params_boxes["pad"], pad)
    assert requested == [] and controls._timer.isActive()
    with qtbot.waitSignal(controls.runRequested, timeout=3000):
        pass
    assert not controls._timer.isActive()
    assert requested == [controls.job()]
    assert requested[0]["params"] == {"tile": 16, "pad": 4, "drop_sync": 0}
    assert set(requested[0]) == {"backend", "kernel", "M", "N", "K", "params", "level"}


def test_showing_a_trace_configuration_does_not_run(controls):
    from matviz.backends.contract import run

    trace = run(RunRequest("tiled_transposed", 96, 64, 32, params={"tile": 16, "pad": 2}, level=1))
    requested = []
    controls.runRequested.connect(requested.append)
    controls.show_config(trace)
    job = controls.job()
    assert (job["kernel"], job["M"], job["N"], job["K"]) == ("tiled_transposed", 96, 64, 32)
    assert job["params"] == {"tile": 16, "pad": 2} and job["level"] == 1
    assert job["backend"] == "sim" and not controls._timer.isActive() and requested == []


def test_labels_follow_the_language(qtbot, controls):
    assert controls._labels[0].text() == "Kernel"
    _select(controls.kernel, "tiled")
    tile = controls.form.labelForField(controls.params_boxes["tile"])
    assert tile.text() == "Tile T"
    set_language("zh_CN")  # widgets get a posted LanguageChange event
    try:
        qtbot.waitUntil(lambda: controls._labels[0].text() != "Kernel")
        assert controls._labels[0].text() == tr("Kernel")
        assert controls.run_button.text() == tr("Run") != "Run"
        assert tile.text() == tr("Tile T") != "Tile T"
    finally:
        set_language("en")
    qtbot.waitUntil(lambda: controls._labels[0].text() == "Kernel")


def test_a_kernel_picked_starts_from_its_tuned_configuration(controls, tmp_path, monkeypatch):
    """Issue 13 item 4: what `matviz sweep --tune` kept for this backend and size is where the
    controls start; a parameter changed by hand, another size or a broken file falls back."""
    from matviz.backends.devices import tuned_key
    from matviz.core import tuned

    path = tmp_path / "tuned.json"
    monkeypatch.setenv("MATVIZ_TUNED", str(path))
    _select(controls.backend, "sim")
    best = {"BM": 64, "BN": 64, "BK": 8, "TN": 4, "pad": 4, "swizzle": 0}
    entry = tuned.Tuned(params=best, gflops=1.0, backend="sim", evaluated=3, space=18)
    tuned.save("vectorized", 1024, 1024, 1024, tuned_key("sim"), entry, path)
    _select(controls.kernel, "vectorized")
    assert controls.params() == {**registry.get_kernel("vectorized").default_params(), **best}
    assert controls.tuned_note.isVisibleTo(controls)
    assert tuned_key("sim") in controls.tuned_note.text()
    _select(controls.params_boxes["pad"], 0)  # the user moves away from it: no claim left
    assert not controls.tuned_note.isVisibleTo(controls)
    _select(controls.kernel, "tiled")
    assert not controls.tuned_note.isVisibleTo(controls)  # nothing tuned for it
    controls.sizes["M"].setValue(512)
    _select(controls.kernel, "vectorized")  # tuned at 1024^3 only
    assert controls.params()["pad"] == 0 and not controls.tuned_note.isVisibleTo(controls)
    path.write_text("{not json")
    controls.sizes["M"].setValue(1024)
    _select(controls.kernel, "tiled")
    _select(controls.kernel, "vectorized")  # a broken file: the defaults, no error
    assert not controls.tuned_note.isVisibleTo(controls) and not controls.error


def test_every_parameter_says_what_it_does_in_chinese(controls, qtbot):
    """Each kernel's title and each parameter's help (the tooltips of the kernel menu and the
    parameter boxes) have a Chinese translation."""
    from matviz.app.i18n import load_table

    table = load_table("zh_CN")
    kernels = registry.kernels().values()
    texts = {p.help for kernel in kernels for p in kernel.params} | {k.title for k in kernels}
    assert sorted(t for t in texts if t not in table) == []
    _select(controls.kernel, "mma_pipeline")
    swizzle = registry.get_kernel("mma_pipeline").param("SWIZZLE").help
    set_language("zh_CN")
    try:
        box = controls.params_boxes["SWIZZLE"]
        qtbot.waitUntil(lambda: box.toolTip() == table[swizzle])
    finally:
        set_language("en")


def _rule_templates() -> set[str]:
    kernels = registry.kernels().values()
    return {c.message for k in kernels for c in k.constraints} | {
        r.message for k in kernels for r in k.shape_rules
    }


def test_every_rule_a_kernel_refuses_with_reads_in_chinese():
    """Each description's constraint and shape rule has a Chinese translation that keeps every
    {placeholder}: the Run panel fills them in."""
    from matviz.app.i18n import load_table

    table = load_table("zh_CN")
    assert sorted(t for t in _rule_templates() if t not in table) == []
    fields = lambda text: sorted(re.findall(r"\{(\w+)\}", text))  # noqa: E731
    assert [t for t in _rule_templates() if fields(table[t]) != fields(t)] == []


def test_a_refused_configuration_says_why_in_the_panel_language(controls, qtbot):
    """WMMA at BK 64, W 64, STAGES 1 spills: the panel names that rule with the values picked,
    in English and in Chinese, and keeps Run disabled."""
    from matviz.app.i18n import load_table

    template = "BK={BK} with WT={WT} needs STAGES 2-3: at STAGES 1 its registers spill"
    _select(controls.kernel, "wmma")
    for name, value in (("STAGES", 1), ("WT", 64), ("BK", 64)):
        _select(controls.params_boxes[name], value)
    assert controls.error == template.format(BK=64, WT=64)
    assert controls.message.text() == controls.error and not controls.run_button.isEnabled()
    set_language("zh_CN")
    try:
        expected = load_table("zh_CN")[template].format(BK=64, WT=64)
        qtbot.waitUntil(lambda: controls.validate() is False and controls.error == expected)
        assert "寄存器" in controls.message.text() and not controls.run_button.isEnabled()
    finally:
        set_language("en")
    _select(controls.params_boxes["STAGES"], 3)
    assert not controls.error and controls.run_button.isEnabled()
