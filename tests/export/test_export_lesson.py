"""Issue 12, item 6: a lesson step exports as a still or an animation with its explanation over
the caption, in either language (`matviz export --lesson N [--lang zh_CN]`)."""

from __future__ import annotations

import imageio.v3 as iio
import pytest

from matviz import cli
from matviz.app.export_render import FrameRenderer
from matviz.cli.export import lesson_step, step_note, step_trace
from matviz.core import lessons


@pytest.fixture(autouse=True)
def english():
    yield
    from matviz.app import i18n

    if i18n.current_language() != "en":
        i18n.set_language("en")


def run(capsys, *argv):
    code = cli.main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_step_as_a_still_in_chinese(capsys, tmp_path):
    out = tmp_path / "step.png"
    code, printed, err = run(capsys, "export", "--lesson", 12, "--lang", "zh_CN", "-o", out)
    assert code == 0, err
    assert "1 frame of banks" in printed
    assert iio.imread(out).shape == (720, 1280, 3)


def test_the_missing_barrier_step_exports_its_errors(capsys, tmp_path):
    out = tmp_path / "race.png"
    code, printed, err = run(capsys, "export", "--lesson", 7, "-o", out)
    assert code == 0, err
    assert "1 frame of errors" in printed
    frame = iio.imread(out)
    # the map of wrong elements: nearly all of C is wrong without barrier 1 (dark red)
    red = (frame[..., 0] > 120) & (frame[..., 1] < 40) & (frame[..., 2] < 40)
    assert red.mean() > 0.05


def test_a_simulated_step_as_an_animation(capsys, tmp_path):
    out = tmp_path / "step.gif"
    code, printed, err = run(
        capsys, "export", "--lesson", 3, "-o", out, "--fps", 2, "--duration", 1
    )
    assert code == 0, err
    assert "2 frames of coalescing" in printed


def test_the_frame_carries_the_step_its_view_and_access():
    step = lesson_step(12)  # §27: the transposed store, 32-way
    trace = step_trace(step)
    note = step_note(step, trace, "zh_CN")
    assert note.startswith("<b>§27 · ") and step.title.zh_CN in note and "{" not in note
    renderer = FrameRenderer(trace, ("banks",), (1280, 720), 0, note=note, access=step.access)
    try:
        assert renderer.note.text() == note and renderer.note.isVisible()
        assert renderer.views["banks"].instruction().site == "st_As"
        assert renderer.views["banks"].conflict_degree == 32
    finally:
        renderer.close()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--lesson", 99], "the lesson has"),
        (["--lesson", 1, "FILE"], "one of them"),
        ([], "one of them"),
        (["--lesson", 2, "--format", "perfetto"], "not a perfetto trace"),  # no --view given
    ],
)
def test_bad_lesson_requests_are_one_line(capsys, tmp_path, argv, fragment):
    argv = [str(tmp_path / "t.mvz") if a == "FILE" else a for a in argv]
    out = tmp_path / ("x.json" if "perfetto" in argv else "x.png")
    out.write_bytes(b"keep me")
    code, _, err = run(capsys, "export", *argv, "-o", out)
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err
    assert out.read_bytes() == b"keep me"


def test_every_step_names_a_view_the_export_knows():
    from matviz.cli.export import EXPORT_VIEW
    from matviz.export.options import VIEWS

    lesson = lessons.load_lesson(lessons.lesson_files()[0])
    for step in lesson.steps:
        assert EXPORT_VIEW.get(step.view, step.view) in VIEWS
