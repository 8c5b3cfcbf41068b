"""Output files that appear complete or not at all.

Everything is written to a hidden temporary file next to the target and renamed over it at the
end (an atomic rename on one file system); on any error, Ctrl-C included, the partial file is
removed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from types import TracebackType

from matviz.errors import MatvizError


def check_writable(path: Path) -> Path:
    """Fail before a long export, not after it: the folder exists and accepts files."""
    path = Path(path)
    if path.is_dir():
        raise MatvizError(f"cannot write '{path}': it is a folder")
    parent = path.resolve().parent
    if not parent.is_dir():
        raise MatvizError(f"cannot write '{path}': folder '{parent}' does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MatvizError(f"cannot write '{path}': folder '{parent}' is not writable")
    return path


class AtomicOutput:
    """``with AtomicOutput(path) as tmp:`` write ``tmp``; it becomes ``path`` on success.

    The GUI uses :meth:`commit` and :meth:`discard` directly, because its export runs in steps.
    The temporary name keeps the target's suffix, so writers that pick a format from the file
    name (ffmpeg) still do.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = check_writable(Path(path))
        token = secrets.token_hex(4)
        self.tmp = self.path.parent / f".{self.path.stem}.{token}.part{self.path.suffix}"
        self.done = False

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.commit()
        else:  # KeyboardInterrupt too: never leave a half-written file behind
            self.discard()

    def commit(self) -> Path:
        """Rename the finished temporary file onto the target."""
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise MatvizError(f"cannot write '{self.path}': {exc.strerror or exc}") from None
        self.done = True
        return self.path

    def discard(self) -> None:
        """Remove the temporary file if it exists (safe to call twice)."""
        try:
            os.unlink(self.tmp)
        except OSError:
            pass
