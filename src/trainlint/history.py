"""The version of a file at a git base (HEAD by default, or --diff-base REF), through the git CLI.

Used by TL401 to compare a script with what it was. Every failure (no git, not a work tree, a new
file, an unknown ref) is a reason, never an exception.
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class BaseVersion:
    text: str | None
    note: str  # what was compared, or why nothing was


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None


# Variables that change how git finds a repository from a folder: with any of them set, git is asked per folder.
_DISCOVERY_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES", "GIT_DISCOVERY_ACROSS_FILESYSTEM")


@lru_cache(maxsize=4096)
def _repo_root(directory: Path) -> Path | None:
    # git finds the repository by walking up from the folder; a folder with no .git of its own, that is not
    # itself a git directory, on the parent's file system, has its parent's answer. One `git rev-parse` per
    # repository instead of one per folder (a library tree has a thousand folders).
    # And where the walk ends with no .git at all (the file system's root, or a mount point, where git
    # stops too), git would answer "not a git repository": no need to start it.
    parent = directory.parent
    if not any(v in os.environ for v in _DISCOVERY_ENV) and \
            not (directory / ".git").exists() and not (directory / "HEAD").exists():
        try:
            if parent == directory or os.stat(directory).st_dev != os.stat(parent).st_dev:
                return None
            return _repo_root(parent)
        except OSError:
            pass
    r = _git(["rev-parse", "--show-toplevel"], directory)
    if r is None or r.returncode != 0:
        return None
    return Path(r.stdout.decode("utf-8", "replace").strip()).resolve()


@lru_cache(maxsize=64)
def _renames(root: Path, ref: str) -> dict[str, str]:
    """new path -> old path for renames between `ref` and the index / work tree."""
    out: dict[str, str] = {}
    for extra in (["--cached"], []):
        r = _git(["diff", *extra, "--name-status", "-M", "-z", ref, "--"], root)
        if r is None or r.returncode != 0:
            continue
        fields = r.stdout.decode("utf-8", "replace").split("\0")
        i = 0
        while i < len(fields) and fields[i]:
            status = fields[i]
            if status.startswith(("R", "C")) and i + 2 < len(fields):
                out.setdefault(fields[i + 2], fields[i + 1])
                i += 3
            else:
                i += 2
    return out


def base_version(path: Path, ref: str = "HEAD") -> BaseVersion:
    path = path.resolve()
    root = _repo_root(path.parent)
    if root is None:
        return BaseVersion(None, "not in a git work tree (or git is not installed)")
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return BaseVersion(None, "outside the git work tree")
    old = rel
    blob = _blob(root, ref, rel)
    if blob is not None:  # unchanged since the base (same blob): its text is the base, no `git show` needed
        try:
            data = path.read_bytes()
        except OSError:
            data = None
        if data is not None and _blob_id(data, len(blob)) == blob:
            try:
                return BaseVersion(data.decode("utf-8-sig"), f"compared with {ref}:{rel}")
            except UnicodeDecodeError:
                return BaseVersion(None, f"base version at {ref} is not UTF-8")
    r = _git(["show", f"{ref}:{old}"], root)
    if r is not None and r.returncode != 0 and rel in _renames(root, ref):
        old = _renames(root, ref)[rel]  # renames are looked up only for a path the base does not have
        r = _git(["show", f"{ref}:{old}"], root)
    if r is None:
        return BaseVersion(None, "git could not be run")
    if r.returncode != 0:
        err = r.stderr.decode("utf-8", "replace")
        if "does not exist" in err or "exists on disk, but not in" in err:
            return BaseVersion(None, f"new file (not in {ref})")
        return BaseVersion(None, f"no base version at {ref}: {err.strip().splitlines()[-1] if err.strip() else 'unknown'}")
    try:
        text = r.stdout.decode("utf-8-sig")
    except UnicodeDecodeError:
        return BaseVersion(None, f"base version at {ref} is not UTF-8")
    where = f"{ref}:{old}" + (" (renamed)" if old != rel else "")
    return BaseVersion(text, f"compared with {where}")


def _blob_id(data: bytes, width: int) -> str:
    """git's object id of these bytes as a blob (SHA-1, or SHA-256 in a repository that uses it)."""
    from trainlint._hash import sha1, sha256

    h = sha256() if width == 64 else sha1()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=16)
def _tree(root: Path, ref: str) -> dict[str, str]:
    """path -> blob id of every file at `ref` (one `git ls-tree` per repository and ref)."""
    r = _git(["ls-tree", "-r", "-z", ref], root)
    if r is None or r.returncode != 0:
        return {}
    out = {}
    for entry in r.stdout.decode("utf-8", "replace").split("\0"):
        meta, _, name = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3:
            out[name] = parts[2]
    return out


def base_blob(path: Path, ref: str = "HEAD", resolved: bool = False) -> str | None:
    """The blob id of the file's base version (what TL401 compares with), for cache keys."""
    path = path if resolved else path.resolve()
    root = _repo_root(path.parent)
    if root is None:
        return None
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return None
    blob = _blob(root, ref, rel)
    if blob is None and rel in _renames(root, ref):
        blob = _blob(root, ref, _renames(root, ref)[rel])
    return blob


# A one-file check asks about one path: `git ls-tree` of its folder answers it without reading the whole tree at
# the base (0.3 s of a one-file check on a checkout of 144k files, bench/discovery_scale.py). A run that asks
# about more folders than this in one repository reads the whole tree once instead (`check .`).
_FOLDERS_BEFORE_WHOLE = 8
_asked: dict[tuple[Path, str], set[str]] = {}


def _blob(root: Path, ref: str, rel: str) -> str | None:
    """The blob id of `rel` at `ref`, or None when the base has no such file."""
    folder = posixpath.dirname(rel)
    asked = _asked.setdefault((root, ref), set())
    if folder not in asked and len(asked) >= _FOLDERS_BEFORE_WHOLE:
        return _tree(root, ref).get(rel)
    asked.add(folder)
    return _folder_tree(root, ref, folder).get(rel)


@lru_cache(maxsize=256)
def _folder_tree(root: Path, ref: str, folder: str) -> dict[str, str]:
    """path -> blob id of the files directly in `folder` at `ref` (paths relative to root, like _tree's)."""
    r = _git(["--literal-pathspecs", "ls-tree", "-z", ref, "--", f"{folder}/" if folder else "."], root)
    if r is None or r.returncode != 0:
        return {}
    out = {}
    for entry in r.stdout.decode("utf-8", "replace").split("\0"):
        meta, _, name = entry.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            out[name] = parts[2]
    return out


def clear_caches() -> None:
    """Forget the repositories, renames and trees read (a long-lived process, such as `trainlint server`, sees
    commits and checkouts happen under it)."""
    for cached in (_repo_root, _renames, _tree, _folder_tree):
        cached.cache_clear()
    _asked.clear()
