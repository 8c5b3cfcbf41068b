"""What several commands share: the one-line-error parser, argument types, output checks,
the backend choice and the Qt guard. Imports nothing heavy."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from matviz.errors import MatvizError
from matviz.export import stop_signals

EXIT_USER_ERROR = 2
BACKEND_CHOICES = ("auto", "cuda", "sim")
QT_MODULES = ("PySide6", "shiboken6", "pyqtgraph")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse prints usage + message; we want one line
        raise MatvizError(f"{message} (see '{self.prog} --help')")


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters shown as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


# -- argument types --------------------------------------------------------------------------------
def whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{one_line(text)}' is not a whole number") from None


def positive_int(text: str) -> int:
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def int_between(low: int, high: int):
    """An argument type for a whole number in ``low..high``."""

    def parse(text: str) -> int:
        value = whole_number(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} must be between {low} and {high}")
        return value

    return parse


def pair(text: str) -> tuple[int, int]:
    try:
        x, y = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{one_line(text)}' is not of the form BX,BY") from None
    return x, y


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{one_line(text)}' is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{one_line(text)} must be a finite number > 0")
    return value


def time_us(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{one_line(text)}' is not a time in µs") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"'{one_line(text)}' is not a time in µs")
    return value


def add_size_options(parser: argparse.ArgumentParser, default: int = 1024) -> None:
    for axis in "MNK":
        parser.add_argument(f"-{axis}", type=positive_int, default=default)


def level_help(default: int) -> str:
    from matviz.core.kernel import LEVEL_NAMES

    names = ", ".join(f"{level} {name}" for level, name in LEVEL_NAMES.items())
    return f"{names} (default {default})"


# -- outputs ---------------------------------------------------------------------------------------
def check_name(path: Path) -> None:
    """A name the file system takes, with no line break to split a one-line message.

    The hidden temporary written first is fitted to the folder's limit (matviz.export.atomic),
    so any name up to that limit works.
    """
    from matviz.export.atomic import name_max, unfit_name

    shown = one_line(str(path))
    unfit = unfit_name(str(path))
    if unfit:
        raise MatvizError(f"output '{shown}' {unfit}")
    try:
        parent = path.resolve().parent
        limit = name_max(parent) if parent.is_dir() else name_max(Path.cwd())
    except (OSError, RuntimeError):  # an unsearchable folder: check_writable says why
        return
    size = len(os.fsencode(path.name))
    if size > limit:
        raise MatvizError(f"output name '{shown}' is too long ({size} bytes, at most {limit} here)")


def check_output(path: Path, suffix: str, what: str = "output") -> None:
    """Fail before a long run, not after it, when ``path`` could not be written."""
    from matviz.export.atomic import only_suffix

    check_name(path)
    if only_suffix(path, (suffix,)):
        raise MatvizError(
            f"{what} '{one_line(str(path))}' is only a suffix: give it a name, e.g. out{suffix}"
        )
    if path.suffix.lower() != suffix:
        raise MatvizError(f"{what} '{one_line(str(path))}' must end in {suffix}")
    check_file_writable(path)


def check_file_writable(path: Path) -> None:
    """``path``'s folder takes a new file of that name (whatever its suffix)."""
    from matviz.export.atomic import check_writable

    check_writable(path)
    try:  # os.access says yes to root everywhere: a real file says what the folder takes
        with tempfile.NamedTemporaryFile(dir=path.resolve().parent, prefix=".matviz-check-"):
            pass
    except OSError as exc:
        raise MatvizError(f"cannot write '{one_line(str(path))}': {exc.strerror or exc}") from None


# -- backends and Qt -------------------------------------------------------------------------------
def choose_backend(requested: str) -> tuple[str, str | None]:
    """(backend, note for the user)."""
    from matviz.backends.cuda_status import cuda_status

    if requested == "sim":
        return "sim", None
    ok, why = cuda_status()
    if requested == "cuda":
        if not ok:
            raise MatvizError(f"CUDA backend unavailable: {why}")
        return "cuda", None
    if ok:
        return "cuda", None
    return "sim", f"CUDA unavailable ({why}); using the simulator"


def note(text: str | None) -> None:
    if text:
        print(f"note: {text}", file=sys.stderr)


_progress_open = False  # a progress line on stderr waits for its result


def progress(text: str, finished: bool) -> None:
    """A row's progress on stderr: ``text`` then " " while it runs, its result and the end of
    the line when ``finished``."""
    global _progress_open
    print(text, end="\n" if finished else " ", file=sys.stderr, flush=True)
    _progress_open = not finished


def end_progress_line() -> None:
    """End a progress line left waiting (an error or Ctrl-C while a row ran), so the message
    that follows has its own line."""
    global _progress_open
    if _progress_open:
        print(file=sys.stderr, flush=True)
        _progress_open = False


@contextmanager
def needs_qt(what: str, *modules: str) -> Iterator[None]:
    """A machine without PySide6 / pyqtgraph (a bare GPU box) gets one line, not a traceback.
    Qt and ``modules`` (the block's own Qt-side imports) are imported with stop signals held:
    Ctrl-C inside PySide6's import machinery aborted the process or was lost; it now ends the
    command after the imports (:mod:`matviz.export.stop_signals`)."""
    try:
        with stop_signals.held() as caught:
            for name in ("PySide6.QtWidgets", "pyqtgraph", *modules):
                importlib.import_module(name)
        stop_signals.raise_if(caught)
        yield
    except ImportError as exc:
        if (exc.name or "").split(".")[0] not in QT_MODULES:
            raise
        raise MatvizError(
            f"{what} draws with Qt, but {exc.name.split('.')[0]} is not installed: pip install -e ."
        ) from None
