"""Writing a file atomically: a temporary file in the same directory, then a rename, so a reader (or a
crash) never sees half a file."""

from __future__ import annotations

import os
from pathlib import Path

# tempfile.mkstemp's flags, without importing tempfile (random, shutil, bz2, lzma ...) on every cache write
_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) | \
    getattr(os, "O_NOINHERIT", 0)


def _mkstemp(directory: Path, name: str) -> tuple[int, str]:
    for _ in range(100):
        tmp = str(directory / f".{name}.{os.urandom(6).hex()}.trainlint.tmp")
        try:
            return os.open(tmp, _FLAGS, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name in {directory}")


def write_bytes_atomic(path: str | os.PathLike, data: bytes, keep_mode_of: str | os.PathLike | None = None) -> None:
    target = Path(path)
    directory = target.resolve().parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = _mkstemp(directory, target.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if keep_mode_of is not None:
            import shutil

            shutil.copymode(keep_mode_of, tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
