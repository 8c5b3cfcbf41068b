"""JSON that a user hands matviz (a benchmark, tuned defaults, a device or a lesson): parsed
whole, or one MatvizError line. Bytes that are not UTF-8, text that is not JSON and nesting deep
enough to exhaust the parser's recursion (``[[[[...`` a few thousand deep) all end the same way."""

from __future__ import annotations

import json
import os
from typing import Any

from matviz.core.trace_io import read_small_file
from matviz.errors import MatvizError


def parse_json(data: bytes | str, what: str) -> Any:
    """``data`` parsed; MatvizError "{what} is not JSON: ..." otherwise."""
    try:
        return json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
    except RecursionError:
        raise MatvizError(f"{what} is not JSON: it is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise MatvizError(f"{what} is not JSON: {str(exc).splitlines()[0]}") from None


def read_json_file(path: str | os.PathLike[str], cap: int, what: str) -> Any:
    """The JSON in ``path``, a regular file of at most ``cap`` bytes (a FIFO, a device or a huge
    file is refused unread); one MatvizError line otherwise."""
    return parse_json(read_small_file(path, cap), what)
