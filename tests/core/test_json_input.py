"""Every JSON file a user can hand matviz (a benchmark, tuned defaults, a device, a lesson):
bytes that are not UTF-8, text that is not JSON, nesting deep enough to exhaust the parser, a
FIFO and a huge file each end in one MatvizError line, and the file is left as it was."""

from __future__ import annotations

import os

import pytest

from matviz.backends import sim_fit
from matviz.backends.devices import load_device
from matviz.bench import ladder
from matviz.core import lessons, tuned
from matviz.core.json_input import parse_json
from matviz.errors import MatvizError

READERS = {
    "benchmark": sim_fit.configuration_cases,
    "ladder rows": lambda p: ladder.read_rows(p, 1 << 20, lambda r: True, "matviz bench"),
    "tuned defaults": tuned.load,
    "device": load_device,
    "lesson": lessons.load_lesson.__wrapped__,  # uncached: each test's file is read afresh
}
CONTENT = {
    "deep": ("[" * 100_000 + "]" * 100_000).encode(),  # RecursionError inside json
    "latin-1": '{"name": "Gerät"}'.encode("latin-1"),
    "truncated": b'{"rows": [1, 2',
    "empty": b"",
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("content", CONTENT)
def test_hostile_content_is_one_line_and_the_file_is_kept(tmp_path, reader, content):
    path = tmp_path / "in.json"
    path.write_bytes(CONTENT[content])
    with pytest.raises(MatvizError) as caught:
        READERS[reader](path)
    message = str(caught.value)
    assert "\n" not in message and len(message) < 400
    assert path.read_bytes() == CONTENT[content]


@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_or_a_huge_file_is_refused_unread(tmp_path, reader):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)  # reading it would block
    with pytest.raises(MatvizError, match="not a regular file"):
        READERS[reader](fifo)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:  # sparse: 65 MiB that cost no disk
        fh.truncate(65 << 20)
    with pytest.raises(MatvizError, match="larger than"):
        READERS[reader](huge)


def test_deep_nesting_says_so():
    with pytest.raises(MatvizError, match="rows.json is not JSON: it is nested too deeply"):
        parse_json("[" * 100_000, "rows.json")
    assert parse_json(b'{"a": [1, 2]}', "x") == {"a": [1, 2]}
