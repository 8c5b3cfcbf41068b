"""Ctrl-C, SIGTERM and SIGHUP noted, not raised where they land, around work that a
KeyboardInterrupt raised in the middle would leave worse off than finishing it:

- an exception raised inside one of Qt's paint calls is printed and swallowed, so a render went
  on and replaced the user's file;
- PySide6's import machinery (shiboken's import hook, which every later import statement passes
  through) turned a KeyboardInterrupt into a fatal error, a SystemError, or nothing at all.

The caller acts on the list where it is safe: between frames, before a file is moved into place,
after the imports. The exit code is then 128 + the signal (:class:`Interrupted`).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class Interrupted(KeyboardInterrupt):
    """A stop signal ended the work; the exit code is 128 + ``signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def held() -> Iterator[list[int]]:
    """The stop signals that come while the block runs, in order (signal handlers can only be
    set in the main thread; elsewhere the list stays empty and signals act as before)."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    old = {s: signal.signal(s, lambda signum, _frame: caught.append(signum)) for s in STOP_SIGNALS}
    try:
        yield caught
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def raise_if(caught: list[int]) -> None:
    """:class:`Interrupted` for the first signal in ``caught``, if one came."""
    if caught:
        raise Interrupted(caught[0])
