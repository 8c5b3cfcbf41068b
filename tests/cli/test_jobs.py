"""The worker protocol's pure parts: answers and exits become a trace path or one line, and a
worker's PYTHONPATH finds this matviz only where it needs help to."""

import json
import os
from pathlib import Path

import pytest

import matviz
from matviz import jobs, paths
from matviz.errors import MatvizError

OUT = "/tmp/run.mvz"
ROOT = Path(matviz.__file__).resolve().parents[1]


def failure(answer, **kw) -> str:
    with pytest.raises(MatvizError) as info:
        jobs.result(answer, OUT, **kw)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_an_ok_answer_with_exit_0_is_the_trace_path():
    assert jobs.result({"ok": True, "out": OUT}, OUT, returncode=0) == Path(OUT)
    assert jobs.result({"ok": True}, "/tmp/other.mvz", returncode=0) == Path("/tmp/other.mvz")


@pytest.mark.parametrize(
    ("answer", "kw", "expected"),
    [
        ({"ok": False, "error": "tile=7 is not allowed\nmore"}, {"returncode": 2},
         "tile=7 is not allowed"),
        (None, {"returncode": -6, "stderr_tail": "Fatal Python error: Aborted"},
         "the worker crashed (signal 6): Fatal Python error: Aborted"),
        (None, {"returncode": 0, "crashed": True}, "the worker crashed"),
        (None, {"returncode": 3, "stderr_tail": "bad things"},
         "the worker stopped with exit code 3: bad things"),
        ({"ok": True, "out": OUT}, {"returncode": 1}, "the worker stopped with exit code 1"),
        ({"ok": True, "out": OUT}, {"returncode": -9}, "the worker crashed (signal 9)"),
    ],
)  # fmt: skip
def test_everything_else_is_one_line(answer, kw, expected):
    assert failure(answer, **kw) == expected


def test_messages_go_through_the_translation():
    table = {"the worker crashed": "CRASHED", "the worker stopped with exit code {code}": "E{code}"}

    def translate(text):
        return table.get(text, text)

    assert failure(None, returncode=4, translate=translate) == "E4"
    assert failure(None, returncode=-11, translate=translate) == "CRASHED (signal 11)"
    assert jobs.start_failure("py", "No such file", translate) == (
        "could not start the worker (py): No such file"
    )


def test_answers_and_stderr_lines():
    stdout = 'noise\n{"ok": true, "out": "a"}\n[1, 2]\nnot json\n'
    assert jobs.parse_answer(stdout) == {"ok": True, "out": "a"}
    assert jobs.parse_answer("Segmentation fault\n") is None
    stderr = f"boom\n{jobs.PROGRESS_PREFIX}saving the trace\n\n"
    assert jobs.last_line(stderr) == "boom"


def test_pythonpath_only_for_a_checkout_that_is_not_installed(monkeypatch):
    here = str(ROOT)
    monkeypatch.setattr(jobs, "_installed_editable", lambda root: False)
    assert jobs.worker_pythonpath("") == here
    assert jobs.worker_pythonpath("/x") == os.pathsep.join([here, "/x"])
    assert jobs.worker_pythonpath(os.pathsep.join(["/x", here])) == os.pathsep.join(["/x", here])
    env = jobs.worker_env({"HOME": "/h"})
    assert env == {"HOME": "/h", "PYTHONPATH": here}
    # installed (editable) from this checkout: any interpreter finds it already
    monkeypatch.setattr(jobs, "_installed_editable", lambda root: root == ROOT)
    assert jobs.worker_pythonpath("/x") == "/x" and "PYTHONPATH" not in jobs.worker_env({})
    # a wheel keeps its kernels inside the package: nothing to add, whatever else is installed
    monkeypatch.setattr(jobs, "_installed_editable", lambda root: False)
    monkeypatch.setattr(paths, "KERNEL_DIR", Path(matviz.__file__).resolve().parent / "_kernels")
    assert jobs.worker_pythonpath("/x") == "/x" and jobs.worker_pythonpath("") == ""


def test_an_editable_install_is_recognised_by_its_direct_url(monkeypatch, tmp_path):
    class Dist:
        def __init__(self, info):
            self.info = info

        def read_text(self, name):
            return json.dumps(self.info) if name == "direct_url.json" else None

    editable = {"dir_info": {"editable": True}, "url": ROOT.as_uri()}
    cases = [
        ([], False),
        ([Dist({"dir_info": {}, "url": ROOT.as_uri()})], False),
        ([Dist({**editable, "url": tmp_path.as_uri()})], False),
        ([Dist({"archive_info": {}}), Dist(editable)], True),
    ]
    for dists, expected in cases:
        monkeypatch.setattr(jobs.importlib.metadata, "distributions", lambda name, d=dists: d)
        assert jobs._installed_editable(ROOT) is expected
