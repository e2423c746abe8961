"""Hydra / OmegaConf in a script, read in the facts pass: `@hydra.main(config_path=, config_name=)` on a function
taking `cfg: DictConfig`, `initialize(config_path=)` + `cfg = compose(config_name=, overrides=[...])`,
`cfg = OmegaConf.load("x.yaml")`, `OmegaConf.merge(a, b)` and `OmegaConf.from_cli()`. The config variable becomes a
parsed object of parser "hydra": `cfg.model.name_or_path` and `cfg["model"]["name_or_path"]` are Params with the
dotted path as attribute, kept symbolic until launch/hydra.py composes the config under a launch."""

from __future__ import annotations

import libcst as cst

from trainlint.diagnostics import Span
from trainlint.facts.model import HydraSource

MAIN = "hydra.main"
COMPOSE = {"hydra.compose", "hydra.experimental.compose"}
INITIALIZE = {"hydra.initialize", "hydra.experimental.initialize", "hydra.initialize_config_dir",
              "hydra.experimental.initialize_config_dir", "hydra.initialize_config_module"}
LOAD = "omegaconf.OmegaConf.load"
MERGE = {"omegaconf.OmegaConf.merge", "omegaconf.OmegaConf.unsafe_merge"}
FROM_CLI = "omegaconf.OmegaConf.from_cli"
INSTANTIATE = {"hydra.utils.instantiate", "hydra.utils.call"}
INSTANTIATE_NAME = "hydra.utils.instantiate"
# calls that hand back the same configuration (a container, a resolved copy): `OmegaConf.to_container(cfg.training)`
SAME = {"omegaconf.OmegaConf.to_container", "omegaconf.OmegaConf.to_object", "omegaconf.OmegaConf.create"}


def _kw(call: cst.Call, name: str, position: int | None = None) -> tuple[bool, cst.BaseExpression | None]:
    """(given, node) for keyword `name` (or the positional argument at `position`)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return True, arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        return True, positional[position].value
    return False, None


def _text(node: cst.BaseExpression | None) -> tuple[bool, str | None]:
    """(readable, text): a string literal, or None written as None; anything else is not readable."""
    if node is None or isinstance(node, cst.Name) and node.value == "None":
        return True, None
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - an odd literal is simply not read
            return False, None
        return (True, value) if isinstance(value, str) else (False, None)
    return False, None


def main_source(node: cst.FunctionDef, qualname, span: Span) -> HydraSource | None:
    """`@hydra.main(config_path="configs", config_name="train")` on `def main(cfg)`."""
    for decorator in node.decorators:
        call = decorator.decorator
        if not isinstance(call, cst.Call) or qualname(call.func) != MAIN:
            continue
        params = [*node.params.posonly_params, *node.params.params]
        if not params:
            return None
        ok_path, path = _text(_kw(call, "config_path", 0)[1])
        ok_name, name = _text(_kw(call, "config_name", 1)[1])
        return HydraSource(params[0].name.value, "main", path, name, cli=True, span=span, known=ok_path and ok_name)
    return None


def initialize_path(call: cst.Call, qualname) -> tuple[bool, str | None] | None:
    """The config_path an `initialize(...)` call sets (config_dir for initialize_config_dir); None when `call` is
    not one."""
    name = qualname(call.func) or ""
    if name not in INITIALIZE:
        return None
    if name.endswith("initialize_config_module"):
        return False, None  # a Python package's configs: not looked up
    key = "config_dir" if name.endswith("config_dir") else "config_path"
    return _text(_kw(call, key, 0)[1])


def assigned_source(variable: str, value: cst.BaseExpression, qualname, span: Span, initialized,
                    known_sources: dict[str, HydraSource]) -> HydraSource | None:
    """The source `variable = value` binds, when `value` is a compose / load / merge call (or a config already read)."""
    if isinstance(value, cst.Name) and value.value in known_sources:
        source = known_sources[value.value]
        return HydraSource(variable, source.kind, source.config_path, source.config_name, source.files,
                           source.overrides, source.cli, span, source.known)
    if not isinstance(value, cst.Call):
        return None
    name = qualname(value.func) or ""
    if name in COMPOSE:
        ok_name, config_name = _text(_kw(value, "config_name", 0)[1])
        given, node = _kw(value, "overrides", 1)
        overrides: list[str] = []
        ok = ok_name and initialized is not None and initialized[0]
        if given:
            if isinstance(node, (cst.List, cst.Tuple)):
                for element in node.elements:
                    readable, text = _text(element.value)
                    ok = ok and readable and text is not None
                    overrides.append(text or "")
            else:
                ok = False
        return HydraSource(variable, "compose", initialized[1] if initialized else None, config_name,
                           overrides=tuple(overrides), span=span, known=ok)
    if name == LOAD:
        readable, path = _text(_kw(value, "file_", 0)[1])
        return HydraSource(variable, "load", None, None, files=(path,) if path else (), span=span,
                           known=readable and path is not None)
    if name == FROM_CLI:
        return HydraSource(variable, "load", None, None, cli=True, span=span)
    if name in MERGE:
        files: list[str] = []
        cli, ok = False, True
        for arg in value.args:
            if arg.star or arg.keyword is not None:
                ok = False
                continue
            inner = assigned_source(variable, arg.value, qualname, span, initialized, known_sources)
            if inner is None or inner.kind != "load":
                ok = False  # a merge of something else (a dict, a structured config): not composed
                continue
            files += inner.files
            cli = cli or inner.cli
            ok = ok and inner.known
        return HydraSource(variable, "load", None, None, files=tuple(files), cli=cli, span=span, known=ok)
    return None
