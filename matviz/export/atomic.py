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

DEFAULT_NAME_MAX = 255  # bytes: ext4, xfs, btrfs, tmpfs, APFS, NTFS (in UTF-16 units)
TOKEN_BYTES = 4


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` for a one-line message: line breaks and other control characters escaped."""
    text = os.fspath(path)
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def unfit_name(text: str) -> str | None:
    """Why ``text`` cannot stand in a one-line message as it is, or None: bytes that are not
    UTF-8 (os.fsdecode's surrogate escapes) or a line break or other control character."""
    if any("\udc80" <= c <= "\udcff" for c in text):
        return "is not UTF-8 text"
    if any(not c.isprintable() for c in text):
        return "has a line break or other control character"
    return None


def name_max(folder: Path) -> int:
    """The longest file name (bytes) ``folder`` takes; the common 255 when it cannot say."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError, TypeError):
        return DEFAULT_NAME_MAX


def only_suffix(path: Path, suffixes: tuple[str, ...]) -> bool:
    """True for '.mp4' or '.json.gz': a suffix with no name before it."""
    return path.name.lower() in suffixes


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Fail before a long export, not after it: the name fits, the folder exists and accepts
    files. Every problem is one MatvizError, never an OSError."""
    path = Path(path)
    what = f"cannot write '{shown(path)}'"
    unfit = unfit_name(str(path))
    if unfit:
        raise MatvizError(f"{what}: the name {unfit}")
    if not path.name or path.name in (".", ".."):
        raise MatvizError(f"{what}: it names a folder, not a file")
    try:
        parent = path.resolve().parent
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop on Python < 3.13
        raise MatvizError(f"{what}: {_reason(exc)}") from None
    try:
        parent_is_dir = parent.is_dir()
    except OSError as exc:
        raise MatvizError(f"{what}: folder '{shown(parent)}': {_reason(exc)}") from None
    if not parent_is_dir:
        raise MatvizError(f"{what}: folder '{shown(parent)}' does not exist")
    limit = name_max(parent)
    size = len(os.fsencode(path.name))
    if size > limit:
        raise MatvizError(f"{what}: the name is {size} bytes long, at most {limit} fit here")
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # e.g. a folder that may not be searched (chmod 000)
        raise MatvizError(f"{what}: {_reason(exc)}") from None
    if is_dir:
        raise MatvizError(f"{what}: it is a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise MatvizError(f"{what}: folder '{shown(parent)}' is not writable")
    return path


def temp_name(path: Path, token: str, limit: int) -> str:
    """'.{stem}.{token}.part{suffix}', the stem cut short so the name fits in ``limit`` bytes.

    The suffix stays: ffmpeg picks the container from it.
    """
    stem, suffix = path.stem, path.suffix
    fixed = len(os.fsencode(f"..{token}.part{suffix}"))
    if fixed > limit:  # a suffix that long says nothing to any writer: drop it
        stem, suffix = "", ""
        fixed = len(os.fsencode(f"..{token}.part"))
    room = limit - fixed
    while len(os.fsencode(stem)) > room:  # by characters: never half a UTF-8 sequence
        stem = stem[:-1]
    return f".{stem}.{token}.part{suffix}"


class AtomicOutput:
    """``with AtomicOutput(path) as tmp:`` write ``tmp``; it becomes ``path`` on success, and an
    OSError while writing it becomes one MatvizError, with ``path`` as it was.

    The GUI uses :meth:`commit` and :meth:`discard` directly, because its export runs in steps.
    The temporary name keeps the target's suffix, so writers that pick a format from the file
    name (ffmpeg) still do.
    """

    def __init__(self, path: str | os.PathLike[str], reserve: int = 0) -> None:
        """``reserve``: bytes of name to leave free, for a writer that itself writes a
        temporary next to ``tmp`` whose name is that much longer."""
        self.path = check_writable(Path(path))
        token = secrets.token_hex(TOKEN_BYTES)
        limit = name_max(self.path.resolve().parent) - reserve
        self.tmp = self.path.parent / temp_name(self.path, token, limit)
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
            return
        self.discard()  # KeyboardInterrupt too: never leave a half-written file behind
        if isinstance(exc, OSError):  # a full disk, say: one line, and the old file is kept
            raise MatvizError(f"cannot write '{shown(self.path)}': {_reason(exc)}") from None

    def commit(self) -> Path:
        """Rename the finished temporary file onto the target."""
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise MatvizError(f"cannot write '{shown(self.path)}': {_reason(exc)}") from None
        self.done = True
        return self.path

    def discard(self) -> None:
        """Remove the temporary file if it exists (safe to call twice)."""
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def _reason(exc: BaseException) -> str:
    return shown(getattr(exc, "strerror", None) or str(exc) or type(exc).__name__)
