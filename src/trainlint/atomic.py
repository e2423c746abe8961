"""Writing a file atomically: a temporary file in the same directory, then a rename, so a reader (or a
crash) never sees half a file."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike, data: bytes, keep_mode_of: str | os.PathLike | None = None) -> None:
    target = Path(path)
    directory = target.resolve().parent
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".trainlint.tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if keep_mode_of is not None:
            shutil.copymode(keep_mode_of, tmp)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
