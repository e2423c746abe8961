"""The files of a repository the launch layer looks at, and the index of them kept between runs.

Launch discovery needs, for the script being checked, the launchers and Markdown files of its repository (and
the YAML files that are SkyPilot tasks). Finding them used to walk the whole tree on every run: 0.2 s on a
checkout of 144k files, more than the rest of a one-file check (issue 29, "Keep, and scale"). Now:

* In a git repository the files are what `git ls-files` lists: tracked files still on disk, and untracked ones
  the ignore rules do not exclude (a new launcher counts before it is staged; a .gitignored one does not).
  Elsewhere, or when git cannot answer, the folder is walked as before. Both keep the same folders out (_SKIP and
  hidden folders) and give the files in the same order (the walk's: a folder's files, sorted, then its folders).
* With the cache on, what was found (the launchers, the tasks) is kept in the cache folder with what proves it is
  still right: every folder of the tree with its mtime, the names of the files in it that can be candidates and
  its subfolders; the size and mtime of every file whose contents decide whether it is one (a shebang, a task's
  keys), and of the ignore files. A run stats those instead of listing the tree. A folder whose mtime changed is
  listed again (an editor's save by rename touches it): the same candidate names and subfolders, the index
  holds; another set (a launcher added, deleted, renamed), it is built again. A folder or file changed within
  the clock's resolution of the build is never trusted by its mtime (it is listed or read again next time).

Known limit: a tracked file that an ignore rule matches, untracked with `git rm --cached` (the file kept), stays
a candidate until its folder changes; core.excludesFile other than git's default location, and in a linked
worktree (`.git` a file) the common info/exclude, are not watched.
"""

from __future__ import annotations

import json
import os
import re
import time
from functools import lru_cache
from pathlib import Path

LAUNCHER_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
DOC_SUFFIXES = (".md", ".markdown")
NOTEBOOK_SUFFIX = ".ipynb"  # its `!torchrun train.py ...` lines, `%%bash` cells and `%run` lines launch scripts
TASK_SUFFIXES = (".yaml", ".yml")
TASK_MAX_BYTES = 256 * 1024  # skypilot.MAX_BYTES: a larger file is not read further
SKIP = frozenset((".git", ".hg", ".svn", "__pycache__", "node_modules", "build", "dist", ".venv", "venv", ".tox",
                  ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".trainlint_cache", ".eggs",
                  ".ipynb_checkpoints", "site-packages"))
_FORMAT = 3  # 2: what each launcher mentions; 3: notebooks are launchers
MAX_LAUNCHER_BYTES = 2 * 1024 * 1024  # what is read of a launcher (a larger one is reported, not read)
_RACY_NS = 2_000_000_000  # an mtime this close to the build is not trusted (a change in the same clock tick)


def pruned(name: str) -> bool:
    """A folder the launch layer does not look into."""
    return name in SKIP or name.startswith(".")


def _may_be_candidate(name: str) -> bool:
    """A file whose name lets it be a launcher, a documented command or a task (or changes which are)."""
    return name.endswith(LAUNCHER_SUFFIXES + DOC_SUFFIXES + TASK_SUFFIXES + (NOTEBOOK_SUFFIX,)) or "." not in name or \
        name == ".gitignore"


_CANDIDATE_ENDS = LAUNCHER_SUFFIXES + DOC_SUFFIXES + TASK_SUFFIXES + (NOTEBOOK_SUFFIX, ".gitignore")


def _candidate_path(rel: str) -> bool:
    """_may_be_candidate of the path's name (fast: git lists every file of the repository)."""
    if rel.endswith(_CANDIDATE_ENDS):
        return _may_be_candidate(rel[rel.rfind("/") + 1:])
    return rel.rfind(".") <= rel.rfind("/")  # no dot in its name


def _content_decides(name: str) -> bool:
    return "." not in name or name.endswith(TASK_SUFFIXES) or name == ".gitignore"


# What a launcher mentions, kept so that a run need not read every launcher to find those that name the script
# (`train.py`, `pkg.train`): the distinct runs of these characters that hold a dot. A name made of them occurs in
# the file's bytes exactly when it occurs in one of its runs (it cannot span two); others are looked up in the file.
_RUN = re.compile(rb"[\w.+/-]+")
_NAME = re.compile(rb"[\w.+/-]*\.[\w.+/-]*")


def mentions_of(raw: bytes) -> str:
    return "\0".join(sorted({t.decode("ascii") for t in _RUN.findall(raw) if b"." in t}))


def mentioned(name: bytes, mentions: str) -> bool | None:
    """Whether `name` occurs in the launcher whose mentions these are; None when they cannot tell."""
    if not _NAME.fullmatch(name):
        return None
    return name.decode("ascii") in mentions


# a notebook's source lines that run a command: `"!torchrun ..."` / `"%run ..."` JSON strings (nbformat keeps a
# cell's source as a list of line strings)
_NOTEBOOK_COMMAND_LINE = re.compile(rb'"[ \t]*(?:!|%run\b)(?:[^"\\\n]|\\.)*"')


def launch_bytes(name: str, raw: bytes) -> bytes:
    """The part of a launcher that can name a script: all of it; of a notebook, only its command lines (the whole
    file when a `%%bash` cell makes every line a command; nothing past 2 MiB, which is not read as a launcher)."""
    if not name.endswith(NOTEBOOK_SUFFIX):
        return raw
    if len(raw) > MAX_LAUNCHER_BYTES:
        return b""
    if b'"%%bash' in raw or b'"%%sh' in raw or b'"%%script' in raw:
        return raw
    return b"\n".join(_NOTEBOOK_COMMAND_LINE.findall(raw))


def _read_mentions(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return mentions_of(launch_bytes(path, fh.read(MAX_LAUNCHER_BYTES + 1)))
    except OSError:
        return None


def is_launcher_file(path: Path) -> bool:
    """A launcher by its suffix, a Markdown file, or a file without a suffix with a shell shebang."""
    name = path.name
    if name.endswith(LAUNCHER_SUFFIXES + DOC_SUFFIXES + (NOTEBOOK_SUFFIX,)):
        return True
    if "." in name:
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    from trainlint.launch.shell import looks_like_launcher

    return looks_like_launcher(path, head)


def is_task_file(path: Path) -> bool:
    """A YAML file that looks like a SkyPilot task (an `accelerators` and a `run:` key)."""
    if not path.name.endswith(TASK_SUFFIXES):
        return False
    try:
        with open(path, "rb") as fh:
            raw = fh.read(TASK_MAX_BYTES + 1)
    except OSError:
        return False
    return bool(raw) and b"accelerators" in raw and b"run:" in raw


def _walk_key(rel: str) -> tuple:
    """The walk's order: a folder's files (sorted) before its subfolders (sorted, each in turn)."""
    parts = rel.split("/")
    return (*((1, p) for p in parts[:-1]), (0, parts[-1]))


def _kept(rel: str) -> bool:
    return not any(pruned(p) for p in rel.split("/")[:-1])


def _git_root(root: Path, recursive: bool) -> bool:
    return recursive and (root / ".git").exists()


def listing(root: Path, recursive: bool = True, keep=None) -> tuple[str, list[str]]:
    """("git" or "walk", the files under root relative to it, in the walk's order); only the paths `keep`
    accepts, when it is given (then a tracked file deleted from the disk may be among them: the
    caller checks the few it opens)."""
    if _git_root(root, recursive):
        from trainlint.discovery import git_files

        files = git_files(root, on_disk=keep is None, keep=keep)
        if files is not None:
            return "git", sorted((f for f in files if _kept(f)), key=_walk_key)
    return "walk", [rel for rel, name in _walk(root, recursive) if keep is None or keep(rel)]


def _walk(root: Path, recursive: bool, dirs: dict | None = None):
    """(relative path, name) of every file under root, in walk order; fills `dirs` (when given) with each
    folder's record for the index."""
    top = str(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not pruned(d)) if recursive else []
        rel = "" if dirpath == top else os.path.relpath(dirpath, top).replace(os.sep, "/")
        if dirs is not None:
            try:
                mtime = os.stat(dirpath).st_mtime_ns
            except OSError:
                mtime = -1
            dirs[rel] = [mtime, list(dirnames), sorted(n for n in filenames if _may_be_candidate(n))]
        prefix = f"{rel}/" if rel else ""
        for name in sorted(filenames):
            yield prefix + name, name


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return f"{st.st_size}:{st.st_mtime_ns}"


def _exclude_files(root: Path) -> list[str]:
    """The ignore files outside the tree that git reads: .git/info/exclude and the default core.excludesFile."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return [str(root / ".git" / "info" / "exclude"), os.path.join(config, "git", "ignore")]


def _build(root: Path, recursive: bool) -> dict:
    """The index of root: the launchers and tasks, and what proves them (see the module's docstring)."""
    now = time.time_ns()
    dirs: dict[str, list] = {}
    walked = [rel for rel, name in _walk(root, recursive, dirs) if _may_be_candidate(name)]
    kind, files = "walk", walked
    if _git_root(root, recursive):
        from trainlint.discovery import git_files

        listed = git_files(root, keep=_candidate_path)
        if listed is not None:
            kind, files = "git", sorted((f for f in listed if _kept(f)), key=_walk_key)
    launchers, tasks, checked = [], [], {}
    for rel in files:
        name = rel.rsplit("/", 1)[-1]
        if not _may_be_candidate(name):
            continue
        path = root / rel
        if kind == "git" and (os.path.isdir(path) or not os.path.lexists(path)):
            continue  # a symbolic link to a folder (git lists it, the walk does not), a tracked file deleted
        if _content_decides(name):
            stamp = _stamp(str(path))
            checked[rel] = stamp if not _racy(stamp, now) else "racy"
        if is_launcher_file(path):
            launchers.append(rel)
        elif is_task_file(path):
            tasks.append(rel)
    for record in dirs.values():
        if record[0] >= now - _RACY_NS:
            record[0] = -1  # listed again next time, whatever its mtime
    excludes = {p: _stamp(p) for p in _exclude_files(root)} if kind == "git" else {}
    top = str(root)
    said = {}
    for rel in launchers:
        path = os.path.join(top, rel)
        stamp = _stamp(path)
        said[rel] = [stamp, _read_mentions(path) if stamp != "missing" else None]
    return {"format": _FORMAT, "root": str(root), "recursive": recursive, "kind": kind, "dirs": dirs,
            "checked": checked, "excludes": excludes, "launchers": launchers, "tasks": tasks, "said": said}


def _racy(stamp: str, now: int) -> bool:
    return stamp != "missing" and int(stamp.rsplit(":", 1)[1]) >= now - _RACY_NS


def _still_right(index: dict, root: Path, recursive: bool) -> bool | None:
    """True when the index holds as it is, None when it holds after updating its mtimes (to be saved), False
    when the tree changed in a way that can change the candidates."""
    if index.get("format") != _FORMAT or index.get("root") != str(root) or index.get("recursive") != recursive:
        return False
    if (index["kind"] == "git") != _git_root(root, recursive):
        return False
    if any(_stamp(p) != s for p, s in index["excludes"].items()):
        return False
    now = time.time_ns()
    updated = False
    top = str(root)
    for rel, record in index["dirs"].items():
        folder = os.path.join(top, rel) if rel else top
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:
            return False
        if mtime == record[0]:
            continue
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            return False
        subdirs, names = [], []
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if recursive and not pruned(entry.name):
                    subdirs.append(entry.name)
            elif _may_be_candidate(entry.name):
                names.append(entry.name)
        if sorted(subdirs) != record[1] or sorted(names) != record[2]:
            return False
        record[0] = mtime if mtime < now - _RACY_NS else -1
        updated = True
    launchers, tasks = set(index["launchers"]), set(index["tasks"])
    for rel, stamp in index["checked"].items():
        path = os.path.join(top, rel)
        current = _stamp(path)
        if current == stamp:
            continue
        if current == "missing" or rel.rsplit("/", 1)[-1] == ".gitignore":
            return False
        if is_launcher_file(Path(path)) != (rel in launchers) or is_task_file(Path(path)) != (rel in tasks):
            return False
        index["checked"][rel] = current if not _racy(current, now) else "racy"
        updated = True
    said = index["said"]
    for rel in index["launchers"]:
        path = os.path.join(top, rel)
        current = _stamp(path)
        stamp, _ = said[rel]
        if current != stamp or _racy(stamp, now):  # (one written in the clock tick of its reading: read again)
            said[rel] = [current, _read_mentions(path) if current != "missing" else None]
            updated = True
    return None if updated else True


def _entry(root: Path, recursive: bool) -> Path | None:
    from trainlint._hash import sha256
    from trainlint.launch import store

    folder = store.folder()
    if folder is None:
        return None
    key = sha256(f"{_FORMAT}\0{root}\0{recursive}".encode()).hexdigest()
    return folder / "trees" / f"{key}.json"


def candidates(root: Path, recursive: bool = True) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(launcher and Markdown files, SkyPilot task files) under root, in walk order: from the index kept in the
    cache folder when it still holds, else found again (and kept). Once a run (the tree does not change while it
    is linted; clear() forgets it)."""
    return _state(root, recursive)[:2]


def launcher_stamps(root: Path, recursive: bool = True) -> dict[Path, tuple[str, str | None]]:
    """Each launcher's size and mtime ("size:mtime_ns", or "missing") and what it mentions (None: unknown),
    as checked this run; empty when no index is kept (the caller stats and reads them itself)."""
    return _state(root, recursive)[2]


def clear() -> None:
    _state.cache_clear()


@lru_cache(maxsize=64)
def _state(root: Path, recursive: bool):
    entry = _entry(root, recursive) if recursive else None
    index = None
    if entry is not None:
        try:
            index = json.loads(entry.read_text(encoding="utf-8"))
            state = _still_right(index, root, recursive)
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
            index, state = None, False
        if state is False:
            index = None
        elif state is None:
            _save(entry, index)
    if index is None:
        if entry is not None:
            try:
                entry.parent.mkdir(parents=True, exist_ok=True)  # before the folders' mtimes are taken
            except OSError:
                entry = None
        if entry is None:  # nothing kept: only the candidates are needed
            return (*_found(root, listing(root, recursive, _candidate_path)[1]), {})
        index = _build(root, recursive)
        _save(entry, index)
    launchers = tuple(root / rel for rel in index["launchers"])
    said_rel = index["said"]
    said = {path: tuple(said_rel[rel]) for path, rel in zip(launchers, index["launchers"])}
    return launchers, tuple(root / rel for rel in index["tasks"]), said


def _found(root: Path, files: list[str]) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    launchers, tasks = [], []
    for rel in files:
        name = rel.rsplit("/", 1)[-1]
        if not _may_be_candidate(name):
            continue
        path = root / rel
        if os.path.isdir(path) or not os.path.lexists(path):
            continue  # a symbolic link to a folder (git lists it, the walk does not), a tracked file deleted
        if is_launcher_file(path):
            launchers.append(path)
        elif is_task_file(path):
            tasks.append(path)
    return tuple(launchers), tuple(tasks)


def _save(entry: Path, index: dict) -> None:
    try:
        from trainlint.atomic import write_bytes_atomic

        write_bytes_atomic(entry, json.dumps(index, separators=(",", ":")).encode("utf-8"))
    except (OSError, TypeError, ValueError):
        pass  # a read-only tree: simply not kept
