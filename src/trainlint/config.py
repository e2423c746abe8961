"""Settings from `[tool.trainlint]` in the nearest pyproject.toml (or --config), validated strictly."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(Exception):
    """A bad setting; the CLI prints it and exits 2."""


CODE_RE = re.compile(r"^TL\d{0,3}$")


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ("TL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    exclude: tuple[str, ...] = ()
    long_context: int = 2048
    large_vocab: int = 100_000
    gpu: str | None = None
    gpus: tuple[tuple[str, str], ...] = ()  # per-path GPU: (glob relative to root, GPU); first match wins over `gpu`
    versions: tuple[tuple[str, str], ...] = ()
    models: tuple[tuple[str, str], ...] = ()  # [tool.trainlint.models]: private id or path -> catalog id or config
    fix_attention: str = "sdpa"  # what TL101's fix sets
    per_file_timeout: float = 10.0  # seconds; a pathological file cannot stall a pre-commit hook
    diff_base: str = "HEAD"  # TL401 compares each file with its version at this git ref
    root: Path = field(default_factory=Path.cwd)  # patterns are relative to this
    source: str = "defaults"
    # Explicit launches (`check train.py -- ARGS`, `check scripts/train.sh`): when set, scripts are checked
    # under these only instead of the launches discovered in the repository.
    launch_args: tuple[str, ...] | None = None
    launch_files: tuple[str, ...] = ()
    launch_configs: tuple[str, ...] = ()  # `check recipe.yaml`: only the launches that pass one of these
    discover_launches: bool = True
    # How many calls deep the repository's own functions and classes are followed (0: the file alone)
    follow_hops: int = 3
    # (absolute path, text) of launch files read as that text instead of their contents: `verify`'s fixed run,
    # whose launcher / recipe / args-file values are fixed in temporary copies but linted where they are written.
    launch_texts: tuple[tuple[str, str], ...] = ()
    # Report only findings that hold whatever the caller passes: none resting on a launcher's default that an
    # option or the environment could override (`certain-only`, `--certain-only`).
    certain_only: bool = False
    # What cannot be read, stated by the user ([tool.trainlint]): `launches = { "scripts/train.py" = "--model ..." }`
    # the arguments a script is run with when no launch of it is found (glob relative to root -> argument string);
    # `world-size = { "scripts/**" = 8 }` the processes its runs use (over what a launch says)
    launches: tuple[tuple[str, str], ...] = ()
    world_sizes: tuple[tuple[str, int], ...] = ()

    def version_overrides(self) -> dict[str, str]:
        return dict(self.versions)


def _codes(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"`{key}` must be a list of rule codes or prefixes, e.g. [\"TL1\", \"TL301\"]")
    for code in value:
        validate_code(code, key)
    return tuple(value)


def validate_code(code: str, where: str) -> str:
    if not CODE_RE.match(code):
        raise ConfigError(f"`{where}`: {code!r} is not a trainlint rule code or prefix (TL, TL1, TL101, ...)")
    return code


def _positive_int(value: object, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"`{key}` must be a positive integer, got {value!r}")
    return value


def from_table(table: dict, root: Path, source: str) -> Settings:
    s = Settings(root=root, source=source)
    known = {"select", "ignore", "extend-select", "per-file-ignores", "exclude", "long-context", "large-vocab", "gpu",
             "gpus", "versions", "diff-base", "fix-attention",
             "per-file-timeout", "follow-hops", "models", "certain-only", "launches", "world-size"}
    for key in table:
        if key not in known:
            raise ConfigError(f"{source}: unknown key `{key}` in [tool.trainlint]; known keys: "
                              f"{', '.join(sorted(known))}")
    changes: dict = {}
    if "select" in table:
        changes["select"] = _codes(table["select"], "select")
    if "ignore" in table:
        changes["ignore"] = _codes(table["ignore"], "ignore")
    if "extend-select" in table:
        changes["extend_select"] = _codes(table["extend-select"], "extend-select")
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError("`per-file-ignores` must be a table of glob = [codes]")
        changes["per_file_ignores"] = tuple((g, _codes(c, f"per-file-ignores.{g}")) for g, c in pfi.items())
    if "exclude" in table:
        ex = table["exclude"]
        if not isinstance(ex, list) or not all(isinstance(e, str) for e in ex):
            raise ConfigError("`exclude` must be a list of glob patterns")
        changes["exclude"] = tuple(ex)
    if "long-context" in table:
        changes["long_context"] = _positive_int(table["long-context"], "long-context")
    if "large-vocab" in table:
        changes["large_vocab"] = _positive_int(table["large-vocab"], "large-vocab")
    if "gpu" in table:
        from trainlint.knowledge.gpus import parse_gpu

        if not isinstance(table["gpu"], str):
            raise ConfigError("`gpu` must be a string such as \"24GB\" or \"A100-80GB\"")
        try:
            parse_gpu(table["gpu"])
        except ValueError as exc:
            raise ConfigError(f"`gpu`: {exc}") from None
        changes["gpu"] = table["gpu"]
    if "gpus" in table:
        changes["gpus"] = _gpu_table(table["gpus"])
    if "per-file-timeout" in table:
        t = table["per-file-timeout"]
        if isinstance(t, bool) or not isinstance(t, (int, float)) or t <= 0:
            raise ConfigError("`per-file-timeout` must be a positive number of seconds")
        changes["per_file_timeout"] = float(t)
    if "follow-hops" in table:
        hops = table["follow-hops"]
        if isinstance(hops, bool) or not isinstance(hops, int) or not 0 <= hops <= 10:
            raise ConfigError(f"`follow-hops` must be an integer from 0 (the file alone) to 10, got {hops!r}")
        changes["follow_hops"] = hops
    if "fix-attention" in table:
        allowed = ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
        if table["fix-attention"] not in allowed:
            raise ConfigError(f"`fix-attention` must be one of {', '.join(allowed)}")
        changes["fix_attention"] = table["fix-attention"]
    if "diff-base" in table:
        if not isinstance(table["diff-base"], str) or not table["diff-base"].strip():
            raise ConfigError("`diff-base` must be a git ref such as \"HEAD\" or \"origin/main\"")
        changes["diff_base"] = table["diff-base"]
    if "versions" in table:
        versions = table["versions"]
        if not isinstance(versions, dict):
            raise ConfigError("`versions` must be a table, e.g. versions = { transformers = \"4.57.6\" }")
        for lib, ver in versions.items():
            if lib not in ("transformers", "trl", "peft"):
                raise ConfigError(f"`versions`: unknown library {lib!r} (transformers, trl, peft)")
            if not isinstance(ver, str) or not re.fullmatch(r"\d+(\.\d+){0,2}", ver):
                raise ConfigError(f"`versions.{lib}` must be a version such as \"4.57.6\", got {ver!r}")
        changes["versions"] = tuple(sorted(versions.items()))
    if "models" in table:
        changes["models"] = _models(table["models"], root)
    if "launches" in table:
        changes["launches"] = _launches(table["launches"])
    if "world-size" in table:
        sizes = table["world-size"]
        if not isinstance(sizes, dict):
            raise ConfigError("`world-size` must be a table of glob = processes, e.g. world-size = { \"train.py\" = 8 }")
        changes["world_sizes"] = tuple((g, _positive_int(n, f"world-size.{g}")) for g, n in sizes.items())
    if "certain-only" in table:
        if not isinstance(table["certain-only"], bool):
            raise ConfigError(f"`certain-only` must be true or false, got {table['certain-only']!r}")
        changes["certain_only"] = table["certain-only"]
    return replace(s, **changes)


def _launches(value: object) -> tuple[tuple[str, str], ...]:
    """`launches = { "scripts/train.py" = "--model_name_or_path meta-llama/Llama-3.1-8B --bf16 True" }`."""
    import shlex

    if not isinstance(value, dict):
        raise ConfigError("`launches` must be a table of glob = \"the script's arguments\"")
    for pattern, args in value.items():
        if not isinstance(args, str):
            raise ConfigError(f"`launches.{pattern}` must be a string of arguments, got {args!r}")
        try:
            shlex.split(args)
        except ValueError as exc:
            raise ConfigError(f"`launches.{pattern}`: {exc}") from None
    return tuple(value.items())


def for_path(table: tuple[tuple[str, object], ...], path: Path, root: Path) -> tuple[str, object] | None:
    """The first (glob, value) of a per-path setting whose glob matches `path` (relative to root), or None."""
    from fnmatch import fnmatch

    try:
        rel = path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        rel = path.as_posix()
    return next(((g, v) for g, v in table if fnmatch(rel, g) or fnmatch(path.name, g)), None)


def _models(value: object, root: Path) -> tuple[tuple[str, str], ...]:
    """`models = { "my-org/private-7b" = "meta-llama/Llama-3.1-8B", "./ckpt" = "configs/ckpt.json" }`."""
    from trainlint.knowledge.models import declared_target_problem

    if not isinstance(value, dict):
        raise ConfigError("`models` must be a table of model id or path = catalog id or config.json path")
    for key, target in value.items():
        if not isinstance(target, str) or not target.strip():
            raise ConfigError(f"`models.{key}` must be a catalog id or a config.json path, got {target!r}")
        problem = declared_target_problem(target, root)
        if problem:
            raise ConfigError(f"`models.{key}`: {problem}")
    return tuple(value.items())


def _gpu_table(value: object) -> tuple[tuple[str, str], ...]:
    """`gpus = { "jobs/small/**" = "24GB" }`: the GPU a path's jobs run on (TL202, TL701)."""
    from trainlint.knowledge.gpus import parse_gpu

    if not isinstance(value, dict):
        raise ConfigError("`gpus` must be a table of glob = GPU, e.g. gpus = { \"jobs/small/**\" = \"24GB\" }")
    for pattern, gpu in value.items():
        if not isinstance(gpu, str):
            raise ConfigError(f"`gpus.{pattern}` must be a string such as \"24GB\" or \"A100-80GB\"")
        try:
            parse_gpu(gpu)
        except ValueError as exc:
            raise ConfigError(f"`gpus.{pattern}`: {exc}") from None
    return tuple(value.items())


def load_file(path: Path) -> Settings:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    table = data.get("tool", {}).get("trainlint", {}) if path.name == "pyproject.toml" else data
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.trainlint] must be a table")
    return from_table(table, path.parent.resolve(), str(path))


def discover(start: Path) -> Settings:
    """The nearest pyproject.toml with a [tool.trainlint] table, walking up from `start`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            try:
                text = candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "[tool.trainlint" in text:
                return load_file(candidate)
    return Settings()
