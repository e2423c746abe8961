"""Linting many files: in parallel worker processes (output order stays stable), with a content-keyed
cache in .trainlint_cache/ so an unchanged file is not parsed again."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

from trainlint import __version__
from trainlint._hash import sha256
from trainlint.atomic import write_bytes_atomic
from trainlint.config import Settings
from trainlint.diagnostics import Diagnostic, Fix, Span
from trainlint.discovery import file_stamp as _stamp

CACHE_DIR = ".trainlint_cache"
# `-j auto` goes parallel only past both: each worker imports LibCST and warms up anew (~0.2 s of CPU),
# which pays off once the serial run would take ~0.7 s. Measured on the 2-core dev machine (load ~1.5
# from other work), `check --no-cache -j 1` vs `-j 2`, best of 3-4: 64 training scripts (137 KB) 0.70 s
# vs 0.81 s, 128 (274 KB) 1.22 s vs 0.87 s; 12 trl modules (325 KB) 0.53 s vs 0.62 s, 16 (459 KB)
# 0.66 s vs 0.54 s. So the crossover follows bytes (~200-400 KB) more than files (64-128 scripts, but
# 12-16 modules); below 16 files one big file would keep one core busy alone anyway. See bench/README.md.
PARALLEL_MIN_FILES = 16
PARALLEL_MIN_BYTES = 256 * 1024


@dataclass
class Outcome:
    path: Path
    display: str
    diagnostics: list[Diagnostic]
    skipped: str | None
    verbose: list[str]
    cached: bool = False
    reached: tuple[str, ...] = ()  # the repository modules its facts came from (the cache checks them)


def _lint_one(args: tuple[Path, Settings, frozenset[str], bool]) -> Outcome:
    from trainlint.lint import lint_file  # (only when something is not in the cache: LibCST, the rules...)

    path, settings, codes, verbose = args
    result = lint_file(path, settings, set(codes))
    lines = result.verbose_lines() if verbose else []
    return Outcome(path, result.display, result.diagnostics, result.skipped, lines,
                   reached=tuple(str(p) for p in result.reached))


@lru_cache(maxsize=1)
def _own_code_stamp() -> str:
    """trainlint's own files (size and mtime): a changed rule or catalog invalidates the cache, even within
    one version (editable installs)."""
    root = Path(__file__).resolve().parent
    stamp = []
    for file in sorted(root.rglob("*")):
        if file.suffix in (".py", ".json") and "__pycache__" not in file.parts:
            st = file.stat()
            stamp.append(f"{file.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")
    return sha256("\n".join(stamp).encode()).hexdigest()


def _key(path: Path, settings: Settings, codes: frozenset[str]) -> str | None:
    from trainlint.history import base_blob
    from trainlint.knowledge.environment import environment_stamp
    from trainlint.knowledge.versions import installed_version, project_pins

    try:
        data = path.read_bytes()
    except OSError:
        return None
    resolved = _resolve(path)
    h = sha256()
    h.update(data)
    h.update(_own_code_stamp().encode())
    h.update(repr((__version__, sorted(codes), settings.__dict__ | {"root": str(settings.root)})).encode())
    h.update(repr([installed_version(lib) for lib in ("transformers", "trl", "peft")]).encode())
    h.update(repr(project_pins(resolved.parent)).encode())
    h.update(environment_stamp(resolved.parent).encode())  # the packages the repository declares (TL103)
    h.update(repr(base_blob(resolved, settings.diff_base, resolved=True)).encode())  # TL401 compares with the git base
    h.update(str(resolved).encode())
    if resolved.suffix in (".yml", ".yaml"):  # a framework config: the release its project pins decides
        from trainlint.sniff import looks_like

        if looks_like(data):
            from trainlint.framework_lint import framework_release

            h.update(repr([framework_release(resolved, f) for f in ("axolotl", "llamafactory")]).encode())
    if settings.discover_launches and _PARAMETER_BYTES.search(data):
        h.update(_launch_stamp(resolved, settings).encode())  # launchers and the configs they pass decide its values
    if settings.discover_launches and settings.gpu is None and not settings.gpus:
        from trainlint.launch.discover import _root, index_stamp
        from trainlint.launch.skypilot import task_stamp

        where = _root(resolved.parent, settings.root.resolve())  # the GPU a launcher or a SkyPilot task requests
        h.update((index_stamp(*where) + task_stamp(*where)).encode())
    return h.hexdigest()


_PARAMETER_BYTES = re.compile(rb"HfArgumentParser|TrlParser|ArgumentParser|parse_args|hydra|OmegaConf")


def _launch_stamp(path: Path, settings: Settings) -> str:
    from trainlint.launch.discover import _root, config_stamp, index_stamp

    return index_stamp(*_root(path.parent, settings.root.resolve())) + config_stamp(path, settings)


@lru_cache(maxsize=4096)
def _resolve_dir(directory: Path) -> Path:
    return directory.resolve()


def _resolve(path: Path) -> Path:
    """path.resolve(), resolving each folder once: realpath's lstat of every component was most of the
    key's cost on a big tree."""
    if path.is_symlink() or path.name in ("", ".", ".."):
        return path.resolve()
    parent = path.parent if path.is_absolute() else Path.cwd() / path.parent  # (the cache must not outlive a chdir)
    return _resolve_dir(parent) / path.name


def _to_record(o: Outcome) -> dict:
    return {"diagnostics": [{**asdict(d), "fix": d.fix.to_json() if d.fix is not None else None}
                            for d in o.diagnostics], "skipped": o.skipped}


def _from_record(path: Path, display: str, record: dict) -> Outcome:
    diags = []
    for d in record["diagnostics"]:
        d = dict(d)
        d["span"] = Span(**d["span"])
        d["related"] = tuple((f, Span(**s), what) for f, s, what in d.get("related", ()))
        d["assumptions"] = tuple(d.get("assumptions", ()))
        d["versions"] = tuple(d.get("versions", ()))
        d["fix"] = Fix.from_json(d["fix"]) if d.get("fix") else None
        diags.append(Diagnostic(**d))
    return Outcome(path, display, diags, record["skipped"], [], cached=True)


def run(files: list[Path], settings: Settings, codes: set[str], jobs: int | None = None, cache: bool = True,
        verbose: bool = False) -> list[Outcome]:
    frozen = frozenset(codes)
    cache_root = settings.root / CACHE_DIR / __version__
    from trainlint.launch import store

    store.use(cache_root if cache else None)  # launchers read before are not lexed again
    outcomes: dict[int, Outcome] = {}
    todo: list[tuple[int, Path, str | None]] = []
    for i, path in enumerate(files):
        key = _key(path, settings, frozen) if cache else None
        if key is not None and not verbose:  # --verbose wants the analysis itself, so it re-lints
            entry = cache_root / key[:2] / f"{key}.json"
            try:
                record = json.loads(entry.read_text(encoding="utf-8"))
                display = record.get("display", str(path))
                if _reached_changed(record.get("reached", {})):
                    raise ValueError("a module it follows changed")
                outcomes[i] = _from_record(path, display, record)
                continue
            except (OSError, ValueError, TypeError, KeyError):
                pass
        todo.append((i, path, key))
    tasks = [(path, settings, frozen, verbose) for _, path, _ in todo]
    sizes = _sizes(tasks) if (jobs is None and len(tasks) >= PARALLEL_MIN_FILES) or (jobs or 1) > 1 else []
    workers = _workers(jobs, len(tasks), sum(sizes))
    if workers > 1:
        results = _in_parallel(tasks, sizes, workers)
    else:
        results = [_lint_one(t) for t in tasks]
    for (i, path, key), outcome in zip(todo, results):
        outcomes[i] = outcome
        if key is not None:
            # a file that hit the time limit is cached too (the limit is part of the key): a pathological
            # file should not cost its full limit on every pre-commit run
            _store(cache_root, key, outcome)
    return merge_repeated(merge_reached([outcomes[i] for i in range(len(files))]))


def merge_reached(outcomes: list[Outcome]) -> list[Outcome]:
    """A finding in a repository module reached from several scripts (the same helper, the same outcome) is
    reported once: at the first script's outcome, naming the others; a different outcome stays separate."""
    first: dict[tuple, tuple[Outcome, int, list[str]]] = {}
    drop: set[tuple[int, int]] = set()
    for o in outcomes:
        for k, d in enumerate(o.diagnostics):
            if d.filename == o.display or not d.message.startswith(f"{o.display}: "):
                continue
            key = (d.code, d.filename, d.cell, d.span, d.message[len(o.display) + 2:])
            if key in first:
                first[key][2].append(o.display)
                drop.add((id(o), k))
            else:
                first[key] = (o, k, [])
    for (_, _, _, _, text), (o, k, others) in first.items():
        if others:
            d = o.diagnostics[k]
            names = ", ".join(dict.fromkeys(others))
            o.diagnostics[k] = replace(d, message=f"{o.display} (and {names}): {text}")
    for o in outcomes:
        if any(oid == id(o) for oid, _ in drop):
            o.diagnostics = [d for k, d in enumerate(o.diagnostics) if (id(o), k) not in drop]
    return outcomes


def merge_repeated(outcomes: list[Outcome], shown: int = 3) -> list[Outcome]:
    """A TL0xx finding (trainlint's own: a launcher's missing script, a framework key that does nothing, a version
    that cannot run the calls) whose message is word for word the same in several places, the same fact about the
    repository met again (the same script run on two lines of a launcher, one stale key copied into a dozen example
    configs, a notebook copied into several folders), is reported once: at its first place, its message naming the
    others, which it carries as `related`. A rule's finding is about its own run and is never merged."""
    first: dict[tuple[str, str], tuple[Outcome, int]] = {}
    more: dict[tuple[str, str], list[Diagnostic]] = {}
    for o in outcomes:
        keep = []
        for d in o.diagnostics:
            key = (d.code, d.message)
            if not d.code.startswith("TL0"):
                keep.append(d)
            elif key in first:
                more.setdefault(key, []).append(d)
            else:
                first[key] = (o, len(keep))
                keep.append(d)
        o.diagnostics = keep
    for key, others in more.items():
        o, k = first[key]
        d = o.diagnostics[k]
        places = [_place(x, d.filename) for x in others]
        names = list(dict.fromkeys(places))
        listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
        related = tuple((x.filename, x.span, "the same finding" + (f" (cell {x.cell})" if x.cell else ""))
                        for x in others)
        o.diagnostics[k] = replace(d, message=f"{d.message} (the same in {listed})", related=d.related + related)
    return outcomes


def _place(d: Diagnostic, beside: str) -> str:
    """Where a repeated finding also is: its line when in the same file, else the file."""
    if d.filename == beside:
        return f"{'cell %d ' % d.cell if d.cell else ''}line {d.span.line}"
    return d.filename


def _reached_changed(reached: dict[str, str]) -> bool:
    return any(_stamp(path) != stamp for path, stamp in reached.items())


def _workers(jobs: int | None, files: int, size: int) -> int:
    """`-j N`: N processes. `-j auto` (None, the default): one per CPU once there are PARALLEL_MIN_FILES
    files and PARALLEL_MIN_BYTES to lint, else none besides this one."""
    if jobs is not None:
        return jobs if files > 1 else 1
    return (os.cpu_count() or 1) if files >= PARALLEL_MIN_FILES and size >= PARALLEL_MIN_BYTES else 1


def _sizes(tasks: list[tuple[Path, Settings, frozenset[str], bool]]) -> list[int]:
    sizes = []
    for path, *_ in tasks:
        try:
            sizes.append(path.stat().st_size)
        except OSError:
            sizes.append(0)
    return sizes


def _lint_many(batch: list[tuple[Path, Settings, frozenset[str], bool]]) -> list[Outcome]:
    return [_lint_one(task) for task in batch]


def _in_parallel(tasks: list[tuple[Path, Settings, frozenset[str], bool]], sizes: list[int],
                 workers: int) -> list[Outcome]:
    """Largest files first, so no big file starts last and keeps one core busy while the others idle;
    small files travel in batches of about equal bytes (one round trip each, not one per file).
    Results come back in the order of `tasks`."""
    from concurrent.futures import ProcessPoolExecutor

    order = sorted(range(len(tasks)), key=lambda k: -sizes[k])
    target = max(1, sum(sizes) // (workers * 16))
    batches: list[list[int]] = [[]]
    weight = 0
    for k in order:
        batches[-1].append(k)
        weight += sizes[k]
        if weight >= target:
            batches.append([])
            weight = 0
    batches = [b for b in batches if b]
    results: list[Outcome | None] = [None] * len(tasks)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = pool.map(_lint_many, [[tasks[k] for k in batch] for batch in batches])
        for batch, outcomes in zip(batches, done):
            for k, outcome in zip(batch, outcomes):
                results[k] = outcome
    return results  # type: ignore[return-value]


def _store(cache_root: Path, key: str, outcome: Outcome) -> None:
    entry = cache_root / key[:2] / f"{key}.json"
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        gitignore = cache_root.parent / ".gitignore"
        if not gitignore.exists():
            gitignore.write_text("*\n")
        record = {**_to_record(outcome), "display": outcome.display,
                  "reached": {path: _stamp(path) for path in outcome.reached}}
        write_bytes_atomic(entry, json.dumps(record).encode("utf-8"))
    except OSError:
        pass  # a read-only tree simply runs without a cache
