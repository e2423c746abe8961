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
    from trainlint.sniff import looks_like_config

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


# Variables git reads to find the repository and its index: a hook (pre-commit) runs with GIT_DIR and
# GIT_INDEX_FILE set for the repository being committed; the listing below asks about `root` itself.
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
                 "GIT_CEILING_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX")


def git_files(root: Path, on_disk: bool = False, keep=None) -> list[str] | None:
    """The files git sees in the work tree whose top level is `root`: tracked ones and untracked ones its ignore
    rules (.gitignore, .git/info/exclude, core.excludesFile) do not exclude, as paths relative to root with `/`,
    in no particular order; only those `keep` accepts (a path -> bool), when it is given. A tracked file deleted
    from the disk (not yet with `git rm`) is listed too unless `on_disk` (which costs git an lstat of every
    tracked file): a caller that opens only a few of them checks those instead. A submodule's and an untracked
    nested repository's files are listed from that repository (as the folder walk would find them). None when
    git cannot answer (not installed, not a repository, an ownership it refuses): the caller walks the folder."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}

    def ls(*args: str) -> bytes | None:
        try:
            r = subprocess.run(["git", "ls-files", "-z", *args], cwd=root, env=env, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout if r.returncode == 0 else None

    out = ls("--cached", "--others", "--exclude-standard")
    if out is None:
        return None
    nested: set[str] = set()
    if (root / ".gitmodules").is_file():
        import re

        try:
            text = (root / ".gitmodules").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        nested = {m.strip().strip('"').rstrip("/") for m in re.findall(r"^\s*path\s*=\s*(.+)$", text, re.M)}
    entries = out.decode("utf-8", "surrogateescape").split("\0")
    entries.pop()  # (after the last NUL)
    folders = b"/\0" in out or bool(nested)  # an untracked nested repository is listed as `sub/`
    if keep is not None:
        entries = [e for e in entries if keep(e) or folders and (e.endswith("/") or e in nested)]
    if on_disk:
        removed = ls("--deleted")
        if removed:
            gone = set(removed.decode("utf-8", "surrogateescape").split("\0"))
            entries = [e for e in entries if e not in gone]
    entries = list(dict.fromkeys(entries))  # (an unmerged file is listed once per stage)
    if not folders:
        return entries
    files: list[str] = []
    for rel in entries:
        if rel.endswith("/") or rel in nested:  # an untracked nested repository, or a submodule
            sub = rel.rstrip("/")
            inner = git_files(root / sub, on_disk, keep) if (root / sub / ".git").exists() else None
            if inner is None:
                inner = [os.path.relpath(os.path.join(d, f), root / sub).replace(os.sep, "/")
                         for d, ds, fs in os.walk(root / sub) for f in fs]
                inner = [f for f in inner if keep is None or keep(f)]
            files.extend(f"{sub}/{f}" for f in inner)
        else:
            files.append(rel)
    return files
