"""Which launches run a script: launchers (shell, Slurm) and documented commands (Markdown) found in the
script's repository, indexed once per run, read without executing anything, and bound to the script's
parameters. Only scripts that declare parameters ask for this (see ScriptFacts.declares_parameters)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from trainlint._hash import sha256
from trainlint.config import Settings
from trainlint.discovery import _root, repo_root  # noqa: F401  (re-exported: the launch layer's callers)
from trainlint.discovery import display, file_stamp
from trainlint.facts.model import ScriptFacts
from trainlint.facts.values import Value
from trainlint.knowledge.versions import Versions
from trainlint.launch.model import HYDRA_DEFAULT, ConfigReading, Invocation, Launch, LaunchProblem, Word
from trainlint.notebook import place
from trainlint.launch.shell import cut_short
from trainlint.launch.tree import (DOC_SUFFIXES, LAUNCHER_SUFFIXES, MAX_LAUNCHER_BYTES, NOTEBOOK_SUFFIX, candidates,
                                   launch_bytes, launcher_stamps, listing, mentioned)

_NOTEBOOK_LAUNCH_WORDS = (b"python", b"torchrun", b"accelerate", b"deepspeed", b"%run")


@dataclass(frozen=True)
class Indexed:
    invocations: tuple[Invocation, ...]
    problems: tuple[LaunchProblem, ...]


@lru_cache(maxsize=64)
def tree_files(root: Path, recursive: bool = True) -> tuple[Path, ...]:
    """The files under root the launch layer looks at (not under launch/tree.py SKIP or hidden folders), in walk order: what
    `git ls-files` lists in a repository, else walked (launch/tree.py), once per run (the tree does not change
    while it is linted). Only a launcher's own check needs them all (a missing script's namesakes)."""
    return tuple(root / rel for rel in listing(root, recursive)[1])


def launcher_files(root: Path, recursive: bool = True) -> tuple[Path, ...]:
    """Launcher and Markdown files under root (from the discovery index, launch/tree.py)."""
    return candidates(root, recursive)[0]


def is_launcher(path: Path, head: bytes) -> bool:
    from trainlint.launch.shell import looks_like_launcher

    return looks_like_launcher(path, head)


@lru_cache(maxsize=4096)
def _raw(path: Path) -> bytes | OSError:
    try:
        return path.read_bytes()[: MAX_LAUNCHER_BYTES + 1]
    except OSError as exc:
        return exc


@lru_cache(maxsize=4096)
def _searchable(path: Path) -> bytes | OSError:
    """What index_for searches for a script's name: a launcher's bytes; for a notebook only its command lines
    (launch/tree.py launch_bytes), so a tree of notebooks full of outputs is not scanned again for every file."""
    if path.suffix != NOTEBOOK_SUFFIX:
        return _raw(path)
    try:  # (not through _raw's cache: a notebook's outputs are not kept in memory for the run)
        with open(path, "rb") as fh:
            raw = fh.read(MAX_LAUNCHER_BYTES + 1)
    except OSError as exc:
        return exc
    return launch_bytes(path.name, raw)


@lru_cache(maxsize=4096)
def read_launcher(path: Path) -> Indexed:
    """The invocations a launcher or a Markdown file holds; problems instead of exceptions (read once a run)."""
    raw = _raw(path)
    if isinstance(raw, OSError):
        exc = raw
        return Indexed((), (LaunchProblem(path, _origin(), f"cannot read: {exc.strerror or exc}"),))
    if path.suffix == NOTEBOOK_SUFFIX and (len(raw) > MAX_LAUNCHER_BYTES or
                                           not any(w in raw for w in _NOTEBOOK_LAUNCH_WORDS)):
        # a notebook is linted as one (TL002 if it does not load); as a launcher it only adds what it launches,
        # and one over 2 MiB (outputs, images) is not read for that
        return Indexed((), ())
    if len(raw) > MAX_LAUNCHER_BYTES and path.suffix != NOTEBOOK_SUFFIX:
        return Indexed((), (LaunchProblem(path, _origin(), "over 2 MiB; not read as a launcher"),))
    if b"\x00" in raw[:8192]:
        return Indexed((), (LaunchProblem(path, _origin(), "binary file; not read as a launcher"),))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Indexed((), (LaunchProblem(path, _origin(), f"not UTF-8 ({exc.reason} at byte {exc.start})"),))
    return _read_stored(text, path, raw)


def _read_stored(text: str, path: Path, raw: bytes) -> Indexed:
    """read_launch_text through the store: text read before with the same bytes (and the files it sources
    unchanged) is not lexed again."""
    from trainlint.launch import store

    stored = store.load(path, raw)
    if stored is not None:
        return Indexed(*stored)
    read: list[str] = []
    indexed = read_launch_text(text, path, read)
    store.save(path, raw, indexed.invocations, indexed.problems, read)
    return indexed


def read_launch_text(text: str, path: Path, read: list[str] | None = None) -> Indexed:
    """A launcher's (or Markdown file's) text, read by the suffix of `path`; `read` collects the other files
    the reading opened (`source env.sh`)."""
    from trainlint.launch.shell import read_markdown, read_shell

    def read_text(other: Path) -> str | None:
        if read is not None:
            read.append(str(Path(other).resolve()))
        return _read_text(other)

    if path.suffix == NOTEBOOK_SUFFIX:
        from trainlint.launch.notebook import invocations
        from trainlint.notebook import NotebookError, read_notebook

        try:
            nb = read_notebook(text)
        except NotebookError:  # the notebook's own lint says so (TL002); as a launcher it launches nothing
            return Indexed((), ())
        return Indexed(tuple(invocations(nb, path)), ())
    if path.suffix in DOC_SUFFIXES:
        if not any(k in text for k in ("python", "torchrun", "accelerate", "deepspeed")):
            return Indexed((), ())
        reading = read_markdown(text, path)
    else:
        reading = read_shell(text, path, read_text)
    return Indexed(tuple(reading.invocations), tuple(reading.problems))


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _origin():
    from trainlint.diagnostics import Span

    return Span.point(1)


def task_files(root: Path, recursive: bool = True) -> tuple[Path, ...]:
    """YAML files under root that look like SkyPilot tasks (a `run:` and an `accelerators:` key), from the
    discovery index (launch/tree.py); launch/skypilot.py reads them."""
    return candidates(root, recursive)[1]


def clear_caches() -> None:
    """Forget what was read (for a process that lints a tree more than once while it changes: tests, a server)."""
    from trainlint.facts.modules import clear_cache

    from trainlint.launch import tree

    for cached in (_root, tree_files, index_stamp, _raw, read_launcher, docstring_launches):
        cached.cache_clear()
    tree.clear()
    clear_cache()


def index_for(path: Path, settings: Settings) -> tuple[tuple[Path, Indexed], ...]:
    """The launchers of path's repository that can launch it: only files that mention its name (`train.py`, or
    `pkg.train` as `python -m` names it) are lexed at all."""
    root, recursive = _root(path.resolve().parent, settings.root.resolve())
    if path.name == "__main__.py":
        needles = [path.parent.name.encode()]
    else:  # `train.py`, or `-m pkg.train`
        needles = [path.name.encode()] + ([f"{path.parent.name}.{path.stem}".encode()] if path.suffix == ".py" else [])
    out = []
    said = launcher_stamps(root, recursive)
    for launcher in launcher_files(root, recursive):
        mentions = said.get(launcher, (None, None))[1]
        if mentions is not None:  # what the discovery index knows it mentions: not read unless it names the script
            hits = [mentioned(n, mentions) for n in needles]
            if None not in hits:
                if any(hits):
                    out.append((launcher, read_launcher(launcher)))
                continue
        raw = _searchable(launcher)
        if isinstance(raw, OSError) or any(n in raw for n in needles):
            out.append((launcher, read_launcher(launcher)))
    if path.suffix == ".py":
        documented = docstring_launches(path.resolve())
        if documented.invocations:
            out.append((path.resolve(), documented))
    return tuple(out)


_DOC_COMMAND = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:python3?|torchrun|accelerate|deepspeed)\s")


@lru_cache(maxsize=4096)
def docstring_launches(path: Path) -> Indexed:
    """The commands a script documents in its module docstring (`python examples/scripts/sft.py --model_name_or_path
    ... \\` and their continuation lines), read as a launcher at their own lines and columns. Only lines that
    start a command are read; the prose around them is not shell, and nothing unreadable in a docstring is
    reported (it is documentation, not a launcher that runs)."""
    import ast

    raw = _raw(path)
    if isinstance(raw, OSError) or path.name.encode() not in raw or \
            b'"""' not in raw[:20000] and b"'''" not in raw[:20000]:
        return Indexed((), ())  # a command that runs this script names it: most files are passed over unparsed
    try:
        text = raw.decode("utf-8-sig")
        tree = ast.parse(text)
    except (UnicodeDecodeError, SyntaxError, ValueError):
        return Indexed((), ())
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        return Indexed((), ())
    lines = text.splitlines()
    kept = [""] * len(lines)
    i, end = first.lineno - 1, first.end_lineno
    while i < end:
        line = lines[i]
        if i == first.lineno - 1:  # the opening quotes (and any prefix) become blanks: columns stay as written
            line = re.sub(r"^(\s*[rRuU]?)(\"\"\"|''')", lambda m: " " * len(m.group(0)), line)
        if _DOC_COMMAND.match(line):
            while True:
                kept[i] = re.sub(r"(\"\"\"|''')\s*$", "", line) if i == end - 1 else line
                if not line.rstrip().endswith("\\") or i + 1 >= end:
                    break
                i += 1
                line = lines[i]
        i += 1
    if not any(kept):
        return Indexed((), ())  # (the shell reader is not even imported: most docstrings document no command)
    from trainlint.launch.shell import read_shell

    reading = read_shell("\n".join(kept) + "\n", path, lambda other: None)
    return Indexed(tuple(reading.invocations), ())


@lru_cache(maxsize=64)
def index_stamp(root: Path, recursive: bool = True) -> str:
    """Paths, sizes and mtimes of the launcher files under root (for the cache key)."""
    h = sha256()
    said = launcher_stamps(root, recursive)  # (stated this run by the discovery index, when there is one)
    for path in launcher_files(root, recursive):
        stamp = said[path][0] if path in said else file_stamp(str(path))
        if stamp != "missing":
            h.update(f"{path}:{stamp}\n".encode())
    return h.hexdigest()


def config_stamp(path: Path, settings: Settings) -> str:
    """Paths, sizes and mtimes of the files the launchers of `path` pass (recipes, args files, accelerate and
    DeepSpeed configs), for the cache key: a launch reads them, so a cached result must not outlive a change
    to one (a recipe staged alone, in pre-commit)."""
    h = sha256()
    root = repo_root(path, settings)
    for launcher, indexed in index_for(path, settings):
        for inv in indexed.invocations:
            bases = ([launcher.parent / inv.cwd] if inv.cwd else [launcher.parent]) + [root]
            for word in [*inv.args, *(w for _, w in inv.options if w is not None)]:
                if not (word.text and word.text.endswith(CONFIG_SUFFIXES)):
                    continue
                for base in bases:
                    try:
                        st = (base / word.text).stat()
                    except OSError:
                        continue
                    h.update(f"{base / word.text}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _ancestors(launcher: Path, root: Path, cwd: str) -> list[Path]:
    """The folders between the launcher's and the root, nearest first (after `cwd`): a launcher kept in
    `project/scripts/` that names `train.py` is run from `project/` (the convention of a project vendored below the
    repository's root), where the root itself does not hold the script."""
    root = root.resolve()
    out, folder = [], launcher.resolve().parent.parent
    try:
        folder.relative_to(root)
    except ValueError:
        return []
    while folder != root and root in folder.parents:
        out.append(folder / cwd)
        folder = folder.parent
    return out


def target_of(inv: Invocation, launcher: Path, root: Path) -> Path | None:
    """The script an invocation runs: relative to the launcher's folder (after its `cd`), then the root, then the
    folders between them (nearest first)."""
    if inv.cwd is None:
        bases = [root]
    else:
        bases = [launcher.parent / inv.cwd, root / inv.cwd, root] + _ancestors(launcher, root, inv.cwd)
    candidates: list[Path] = []
    if inv.script is not None and inv.script.text:
        rel = Path(inv.script.text)
        candidates = [rel] if rel.is_absolute() else [b / rel for b in bases]
    elif inv.module:
        parts = Path(*inv.module.split("."))
        for b in bases:
            candidates += [b / parts.with_suffix(".py"), b / "src" / parts.with_suffix(".py"), b / parts / "__main__.py"]
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return None


def config_reader(bases: list[Path], texts: dict[str, str] | None = None,
                  notebook: tuple[Path, dict[str, tuple[str, int]]] | None = None):
    """Reads a config file a launch names, relative to where the launch runs; None when it does not exist.
    `texts` (Settings.launch_texts) replaces a file's contents by absolute path. `notebook`: the launching
    notebook and the configs its `%%writefile` cells write (launch.notebook.written_configs); a file on disk
    wins, else the cell's text is read and its spans are the notebook's (combined-source rows)."""
    def read(name: str) -> ConfigReading | None:
        from trainlint.launch.configs import read_config

        rel = Path(name)
        for base in ([Path("/")] if rel.is_absolute() else bases):
            path = base / rel
            key = str(path.resolve())
            if path.is_file():
                return read_config(path, (texts or {}).get(key))
            if notebook is not None and key in notebook[1]:
                text, offset = notebook[1][key]
                return _moved(read_config(path, text), notebook[0], offset)
        return None

    return read


def _moved(reading: ConfigReading, file: Path, rows: int) -> ConfigReading:
    """A config read from a notebook cell's text, its spans moved `rows` down into the notebook `file`."""
    def at(span):
        return replace(span, line=span.line + rows, end_line=span.end_line + rows)

    def problem(p: LaunchProblem) -> LaunchProblem:
        return replace(p, file=file, span=at(p.span))

    return replace(reading, file=file,
                   entries=tuple(replace(e, span=at(e.span), key_span=at(e.key_span)) for e in reading.entries),
                   problem=problem(reading.problem) if reading.problem is not None else None,
                   problems=tuple(problem(p) for p in reading.problems))


def launch_of(inv: Invocation, launcher: Path, root: Path, facts: ScriptFacts, versions: Versions,
              texts: dict[str, str] | None = None, script: Path | None = None) -> Launch:
    from trainlint.launch.bind import bind_words

    where = display(launcher)
    bases = [launcher.parent / inv.cwd] if inv.cwd else [launcher.parent]
    bases += [root]
    bases += _ancestors(launcher, root, inv.cwd or "") if inv.cwd is not None else []
    notebook = None
    if launcher.suffix == NOTEBOOK_SUFFIX:  # the configs its `%%writefile` cells write
        from trainlint.launch.notebook import written_configs

        notebook = (launcher, written_configs(launcher))
    read = config_reader(bases, texts, notebook)
    accel = _accelerate_settings(inv, read)  # the accelerate config, read once for all it decides
    world = _world_size(inv, where, accel)
    launch = bind_words(facts, versions, list(inv.args), where, place(where, inv.span.line), bases[0], read,
                        inv.span, world, script=script)
    sharding = _accelerate_sharding(accel)
    if sharding is not None:
        launch = replace(launch, sharding=sharding)
    offload, checkpointing, mixed = _accelerate_offload(accel)
    if offload is not None or checkpointing is not None or mixed is not None:
        launch = replace(launch, offload=offload, fsdp_checkpointing=checkpointing, fsdp2_mixed=mixed)
    from trainlint.launch.gpu import requested_gpu

    gpu, note = requested_gpu(inv, where)
    return replace(launch, gpu=gpu, gpu_note=note)


def _accelerate_settings(inv: Invocation, read):
    config = inv.option("config_file")
    if not inv.launcher.endswith("accelerate launch") or config is None or not config.text:
        return None, None
    from trainlint.launch.configs import accelerate_settings  # (only an accelerate launch reads its config)

    reading = read(config.text)
    if reading is None or reading.problem is not None:
        return None, None
    return accelerate_settings(reading), reading


def _accelerate_sharding(accel) -> Value | None:
    """ZeRO-2/3 or FSDP from `accelerate launch --config_file`: what the estimate shards the states by.
    accelerate: a DeepSpeed plugin without zero_stage is stage 2; FSDP v1 FULL_SHARD (the default) and v2
    reshard_after_forward (default true) shard parameters too (launch/accelerate.py cites them)."""
    settings, reading = accel
    if settings is None or settings.distributed_type is None:
        return None
    kind, span = settings.distributed_type
    where = display(reading.file)
    if kind == "DEEPSPEED" and settings.deepspeed is not None:
        stage = settings.deepspeed.zero_stage
        value = stage[0] if stage is not None else 2
        if value in (2, 3):
            return Value("known", f"zero{value}", (stage[1] if stage else span).in_file(where), "accelerate DeepSpeed")
    if kind == "FSDP" and settings.fsdp is not None:
        f = settings.fsdp
        version = f.version[0] if f.version is not None else 1
        if str(version) == "2":
            full = f.reshard_after_forward is None or f.reshard_after_forward[0] in (True, "true", "True")
        else:
            full = f.sharding_strategy is None or str(f.sharding_strategy[0]).upper() in ("FULL_SHARD", "1",
                                                                                        "HYBRID_SHARD", "4")
        wrap = f.auto_wrap_policy
        if full and wrap is not None and str(wrap[0]).upper() == "NO_WRAP":
            # one FSDP unit for the whole model: its parameters are all-gathered whole for the forward and again
            # for the backward, and its full gradient exists before the reduce-scatter (PyTorch's FSDP tutorial:
            # without an auto-wrap policy all layers are one unit and every GPU holds all of its parameters while
            # it runs); only the optimizer state of the flat shard stays sharded, as ZeRO-1
            return Value("known", "zero1", wrap[1].in_file(where), "accelerate FSDP with NO_WRAP (one unit, gathered "
                                                                   "whole)")
        return Value("known", "zero3" if full else "zero2", span.in_file(where), "accelerate FSDP")
    return None


def _accelerate_offload(accel) -> tuple[Value | None, Value | None, Value | None]:
    """What `accelerate launch --config_file` moves to the CPU, and whether its FSDP plugin checkpoints activations.
    DeepSpeed plugin: `offload_optimizer_device` / `offload_param_device` "cpu" | "nvme" (default "none";
    accelerate utils/dataclasses.py DeepSpeedPlugin). FSDP: `offload_params` true is torch's
    `CPUOffload(offload_params=True)`: parameters, their gradients and the optimizer step on the CPU;
    `activation_checkpointing` true: accelerate wraps each transformer layer with non-reentrant checkpointing in
    `prepare` (accelerator.py, `apply_activation_checkpointing` with `CheckpointImpl.NO_REENTRANT`). Third: FSDP
    version 2 with a mixed precision other than "no" (what makes accelerate upcast parameters to fp32)."""
    settings, reading = accel
    if settings is None or settings.distributed_type is None:
        return None, None, None
    kind, span = settings.distributed_type
    where = display(reading.file)
    moved, at = [], None
    if kind == "DEEPSPEED" and settings.deepspeed is not None and settings.deepspeed.deepspeed_config_file is None:
        for what, setting in (("optimizer", settings.deepspeed.offload_optimizer_device),
                              ("params", settings.deepspeed.offload_param_device)):
            if setting is not None and str(setting[0]).lower() in ("cpu", "nvme"):
                moved.append(what)
                at = at or setting[1]
    checkpointing, mixed = None, None
    if kind == "FSDP" and settings.fsdp is not None:
        f = settings.fsdp
        precision = settings.mixed_precision
        if f.version is not None and str(f.version[0]) == "2" and precision is not None and \
                str(precision[0]).lower() not in ("no", "none", "false"):
            mixed = Value("known", True, f.version[1].in_file(where), f"accelerate FSDP2 with mixed_precision {precision[0]}")
        if f.offload_params is not None and f.offload_params[0] in (True, "true", "True"):
            moved += ["params", "gradients", "optimizer"]
            at = f.offload_params[1]
        if f.activation_checkpointing is not None and f.activation_checkpointing[0] in (True, "true", "True"):
            checkpointing = Value("known", True, f.activation_checkpointing[1].in_file(where),
                                  "accelerate FSDP activation_checkpointing")
    offload = Value("known", tuple(dict.fromkeys(moved)), at.in_file(where), f"accelerate {kind}") if moved else None
    return offload, checkpointing, mixed


# the words launch.shell.world_size counts processes from
_COUNTED = frozenset(("nproc_per_node", "nnodes", "num_gpus", "num_nodes", "include", "num_processes", "ntasks",
                      "nodes", "ntasks_per_node", "np", "PET_NPROC_PER_NODE", "PET_NNODES", "CUDA_VISIBLE_DEVICES"))


def _world_size(inv: Invocation, where: str, accel) -> Value | None:
    from trainlint.launch.shell import world_size

    size = world_size(inv)
    if size is not None:
        from trainlint.launch.bind import assumed

        counted = [w for n, w in inv.options + inv.job_options + inv.env if n in _COUNTED]
        return Value("known", size, inv.span.in_file(where), f"{inv.launcher} processes", assumed(*counted))
    settings, reading = accel
    n = settings.num_processes if settings is not None else None
    if n is not None and isinstance(n[0], int) and not isinstance(n[0], bool) and n[0] > 0:
        return Value("known", n[0], n[1].in_file(display(reading.file)), "accelerate config num_processes")
    return None


def launches_for(path: Path, facts: ScriptFacts, versions: Versions, settings: Settings) -> list[Launch]:
    """The launches of `path` found in its repository (or the explicit ones of this run)."""
    texts = dict(settings.launch_texts)
    if settings.launch_args is not None:
        from trainlint.launch.bind import bind_words
        from trainlint.diagnostics import Span

        words = [Word(a, Span.point(1), a) for a in settings.launch_args]
        bases = [Path.cwd(), path.parent]
        return [bind_words(facts, versions, words, "", "command line", Path.cwd(), config_reader(bases, texts),
                           script=path)]
    if not settings.discover_launches:
        return _hydra_default(path, facts, versions, settings, texts) if facts.hydra else []
    me = path.resolve()
    out: list[Launch] = []
    launchers = [(Path(f), _read_as(Path(f), texts)) for f in settings.launch_files] if settings.launch_files \
        else index_for(path, settings)
    for launcher, indexed in launchers:
        here = repo_root(launcher, settings)
        only = {Path(c) for c in settings.launch_configs}
        mine = [inv for inv in indexed.invocations if target_of(inv, launcher, here) == me and not cut_short(inv)
                and (not only or _names_config(inv, launcher, here, only))]
        for ordinal, inv in enumerate(mine):
            launch = launch_of(inv, launcher, here, facts, versions, texts, script=me)
            out.append(replace(launch, launcher=str(launcher.resolve()), ordinal=ordinal))
    if not out and settings.launches:
        stated = _stated_launch(path, facts, versions, settings)
        if stated is not None:
            out.append(stated)
    if not out and facts.hydra:
        out = _hydra_default(path, facts, versions, settings, texts)
    return out


def _hydra_default(path: Path, facts: ScriptFacts, versions: Versions, settings: Settings, texts) -> list[Launch]:
    """No launch found: the Hydra / OmegaConf config as the script names it, composed without overrides."""
    from trainlint.launch.bind import bind_words

    me = path.resolve()
    return [bind_words(facts, versions, [], "", HYDRA_DEFAULT, me.parent,
                       config_reader([me.parent, repo_root(path, settings)], texts), script=me)]


def _stated_launch(path: Path, facts: ScriptFacts, versions: Versions, settings: Settings) -> Launch | None:
    """`[tool.trainlint] launches = { "train.py" = "--model_name_or_path ..." }`: the run the user states for a
    script no launcher, README or notebook launches (instead of its defaults), recorded as the source."""
    import shlex

    from trainlint.config import for_path
    from trainlint.diagnostics import Span
    from trainlint.launch.bind import bind_words

    found = for_path(settings.launches, path, settings.root)
    if found is None:
        return None
    pattern, args = found
    where = f"{settings.source} launches.\"{pattern}\""
    words = [Word(a, Span.point(1), a) for a in shlex.split(str(args))]
    return bind_words(facts, versions, words, "", where, path.resolve().parent,
                      config_reader([path.resolve().parent, settings.root], dict(settings.launch_texts)),
                      script=path.resolve())


def _read_as(path: Path, texts: dict[str, str]) -> Indexed:
    text = texts.get(str(path.resolve()))
    return read_launcher(path) if text is None else read_launch_text(text, path)


def base_launch(launch: Launch, script: Path, facts: ScriptFacts, versions: Versions, settings: Settings,
                ref: str) -> tuple[Launch | None, str]:
    """The same launch at the git base (its launcher's text there), for TL401; None and why when there is none."""
    from trainlint.history import base_version

    if launch.launcher is None:
        return launch, ""
    launcher = Path(launch.launcher)
    old = base_version(launcher, ref)
    if old.text is None:
        return None, f"launcher {display(launcher)}: {old.note}"
    root = repo_root(launcher, settings)
    me = script.resolve()
    mine = [inv for inv in _read_base(old.text, launcher).invocations
            if target_of(inv, launcher, root) == me and not cut_short(inv)]
    if launch.ordinal >= len(mine):
        return None, f"launcher {display(launcher)} at {ref} does not launch it"
    return launch_of(mine[launch.ordinal], launcher, root, facts, versions), f"launcher {old.note}"


def _read_base(text: str, launcher: Path) -> Indexed:
    """The launcher's text at the git base, read through the store (an unchanged launcher is not lexed again)."""
    return _read_stored(text, launcher, text.encode("utf-8"))


CONFIG_SUFFIXES = (".yaml", ".yml", ".json")


def expand_explicit(files: list[Path], settings: Settings) -> tuple[list[Path], tuple[str, ...], tuple[str, ...]]:
    """`check scripts/train.sh` / `check recipes/sft.yaml`: the files to lint (a launcher itself, for TL005 and
    TL006, plus the scripts it runs; a config is not linted as a file) and the launch files the scripts are
    then checked under (the launcher, or the launchers that pass the config), and the configs."""
    out: list[Path] = []
    launchers: list[Path] = []
    configs: list[Path] = []
    for path in files:
        if path.suffix in CONFIG_SUFFIXES and not _framework_config(path):
            launchers.extend(_launchers_naming(path, settings))
            configs.append(path.resolve())
            continue
        out.append(path)
        if path.suffix in LAUNCHER_SUFFIXES + DOC_SUFFIXES:  # a launcher, or a README's documented commands
            launchers.append(path)
    seen = {p.resolve() for p in out if p.exists()}
    for launcher in launchers:
        root = repo_root(launcher, settings)
        for inv in read_launcher(launcher).invocations:
            if configs and not _names_config(inv, launcher, root, set(configs)):
                continue
            target = target_of(inv, launcher, root)
            if target is not None and target not in seen:
                seen.add(target)
                out.append(Path(display(target)))
    return out, tuple(str(p.resolve()) for p in dict.fromkeys(launchers)), tuple(str(c) for c in configs)


def _framework_config(path: Path) -> bool:
    """An axolotl / LLaMA-Factory config is linted as a file of its own (frameworks/), not only as what a launch reads."""
    from trainlint.launch.framework_config import is_framework_config

    return is_framework_config(path)


def _launchers_naming(config: Path, settings: Settings) -> list[Path]:
    """Launchers in the repository with a word that names this config file."""
    me = config.resolve()
    root = repo_root(config, settings)
    return [launcher for launcher, indexed in index_for(config, settings)
            if any(_names_config(inv, launcher, root, {me}) for inv in indexed.invocations)]


def _names_config(inv: Invocation, launcher: Path, root: Path, configs: set[Path]) -> bool:
    """A word of the invocation (an argument or a launcher option) names one of these files."""
    bases = ([launcher.parent / inv.cwd] if inv.cwd else [launcher.parent]) + [root]
    words = [*inv.args, *(w for _, w in inv.options if w is not None)]
    return any(w.text and (b / w.text).resolve() in configs for w in words for b in bases)


def launchers_naming(config: Path, settings: Settings) -> list[Path]:
    """The repository's launchers that pass this config file (a recipe, an args file), for `verify`."""
    return _launchers_naming(config, settings)
