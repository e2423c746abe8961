"""Which files a run lints: the paths given, recursing into directories, skipping the usual clutter."""

from __future__ import annotations

import os
from fnmatch import fnmatch
from functools import lru_cache
from pathlib import Path

from trainlint.config import Settings

SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", "build", "dist", ".venv", "venv", ".tox", ".nox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", ".trainlint_cache", ".eggs", ".ipynb_checkpoints"}
EXTENSIONS = (".py", ".ipynb")
LAUNCHERS = (".sh", ".bash", ".slurm", ".sbatch")  # linted for what they launch (TL005, TL006)


class MissingPath(Exception):
    pass


def display(path: Path) -> str:
    """How a path is shown in output: relative to the working directory when it is absolute."""
    try:
        return os.path.relpath(path, Path.cwd()).replace(os.sep, "/") if path.is_absolute() else path.as_posix()
    except ValueError:
        return path.as_posix()


def relative(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def is_excluded(path: Path, settings: Settings) -> bool:
    if not settings.exclude:
        return False
    rel = relative(path, settings.root)
    return any(fnmatch(rel, pattern) or fnmatch(path.name, pattern) for pattern in settings.exclude)


def discover(paths: list[Path], settings: Settings, force_exclude: bool = False) -> list[Path]:
    """Files to lint, in a stable order. A missing path raises MissingPath."""
    out: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        if not given.exists() and not given.is_symlink():
            raise MissingPath(str(given))
        if given.is_dir():
            for file in _walk(given, settings):
                key = file.resolve() if file.exists() else file
                if key not in seen:
                    seen.add(key)
                    out.append(file)
        else:
            if force_exclude and is_excluded(given, settings):
                continue
            key = given.resolve() if given.exists() else given
            if key not in seen:
                seen.add(key)
                out.append(given)
    return out


def _walk(top: Path, settings: Settings):
    # os.walk does not follow directory symlinks, so a symlink loop cannot trap it.
    for dirpath, dirnames, filenames in os.walk(top):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS and not (here / d / "pyvenv.cfg").exists() and not is_excluded(here / d, settings)
        )
        for name in sorted(filenames):
            if name.endswith(EXTENSIONS + LAUNCHERS) or (name.endswith(FRAMEWORK_CONFIGS) and _framework_config(here / name)):
                file = here / name
                if not is_excluded(file, settings):
                    yield file


FRAMEWORK_CONFIGS = (".yml", ".yaml")  # linted when they are an axolotl or LLaMA-Factory config (frameworks/)


def _framework_config(path: Path) -> bool:
    from trainlint.frameworks.sniff import looks_like_config

    return looks_like_config(path)


def repo_root(path: Path, settings: Settings) -> Path:
    """The git top-level the file belongs to; else the settings' root when the file is under it; else its folder
    (then only that folder is searched, not below it: a file of an installed library is not a repository)."""
    return _root(path.resolve().parent, settings.root.resolve())[0]


@lru_cache(maxsize=256)
def _root(here: Path, settings_root: Path) -> tuple[Path, bool]:
    """(root, whether to search below it)."""
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder, True
    if settings_root in (here, *here.parents):
        return settings_root, True
    return here, False


def file_stamp(path: str) -> str:
    """A file's size and modification time ("missing" when it is gone): what the caches compare."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return f"{st.st_size}:{st.st_mtime_ns}"
