"""A launch's words bound to the script's parameters, the way the script's parser would read them:
HfArgumentParser / TrlParser dataclass fields (`--flag True`, a bare bool flag, `--no_flag`, lists, JSON
dict strings, a single `.json` args file, TrlParser's `--config recipe.yaml`), or argparse options
(actions, types, nargs, unambiguous prefixes). Nothing is executed; a word that depends on something
unknown binds an unknown value."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from trainlint.diagnostics import Span
from trainlint.discovery import display as _display
from trainlint.facts.model import ArgparseParam, ClassDef, ScriptFacts
from trainlint.facts.values import Value
from trainlint.knowledge.versions import Versions
from trainlint.launch.model import HYDRA_DEFAULT, ConfigReading, Launch, Word



def surface(facts: ScriptFacts, versions: Versions) -> dict[str, Any]:
    """Every field the script's dataclass parsers accept, as knowledge.arguments.FieldInfo: its own dataclasses'
    (kinds from their annotations, parsed as HfArgumentParser would) and the library classes' (per version)."""
    from trainlint.knowledge.arguments import FieldInfo, REQUIRED, flag_aliases, library_fields

    out: dict[str, Any] = {}
    for parsed in facts.parsed:
        if parsed.parser == "argparse" or parsed.class_name is None:
            continue
        for klass in facts.mro(parsed.class_name):
            if isinstance(klass, ClassDef):
                for f in klass.fields:
                    if f.name in out:
                        continue
                    default = f.default.value if f.default.known else REQUIRED if f.default.unset else None
                    # hf_argparser.py _parse_dataclass_field: lists nargs="+"; bools (and Optional[bool] with a
                    # default) nargs="?" const=True; a bool defaulting to True also gets `--no_<name>`
                    nargs, const = ("+", None) if f.kind == "list" else ("?", True) if f.kind == "bool" or (
                        f.kind == "optional_bool" and default is not None and default is not REQUIRED) else (None, None)
                    negative = (f"--no_{f.name}",) if default is True and f.kind in ("bool", "optional_bool") else ()
                    out[f.name] = FieldInfo(f.name, f.kind, default, f"{facts.path} {klass.name}.{f.name}",
                                            flags=flag_aliases(f.name, versions), negative_flags=negative,
                                            nargs=nargs, const=const,
                                            json_dict=f.kind in ("dict", "dict_or_str"))
            else:
                for name, info in (library_fields(klass, versions) or _older(klass, versions)).items():
                    out.setdefault(name, info)
    return out


@lru_cache(maxsize=32)
def _older(class_name: str, versions: Versions) -> dict[str, Any]:
    """A library version older than any trainlint read (transformers < 4.36, trl < 0.7): only the fields whose
    kind and default are the same in every release read of that major version (4.x, 0.x), taken as they were
    then (per_device_train_batch_size, gradient_checkpointing, ...); any other flag stays unknown."""
    from dataclasses import replace as _replace

    from trainlint.knowledge.arguments import library_class_of, library_fields, read_versions, snapshot_version

    lib = library_class_of(class_name)
    if lib is None:
        return {}
    current = getattr(versions, lib)
    if snapshot_version(lib, current.version) is not None:
        return {}  # the class does not exist in that version: nothing to extrapolate
    major = current.version.split(".")[0]
    tables = [library_fields(class_name, _replace(versions, **{lib: _replace(current, version=v)})) or {}
              for v in read_versions(lib) if v.split(".")[0] == major]
    if not tables:
        return {}
    return {name: info for name, info in tables[0].items()
            if all(name in t and (t[name].kind, t[name].default) == (info.kind, info.default) for t in tables)}


def _known(value: Any) -> bool:
    from trainlint.knowledge.arguments import is_literal

    return is_literal(value)


class Binder:
    """Collects bindings for one launch; later sources override earlier ones (a recipe, then the CLI)."""

    def __init__(self, display: str, label: str) -> None:
        self.display = display
        self.label = label
        self.bindings: dict[str, Value] = {}
        self.notes: list[str] = []
        self.sources: list[str] = []  # files read besides the launch itself (a recipe, an args file)
        self.assumed: tuple[str, ...] = ()  # what every value set now rests on (a recipe named by a default)

    def set(self, name: str, value: Any, span: Span | None, file: str, ok: bool = True, why: str = "",
            words: tuple[Word | None, ...] = ()) -> None:
        """`words`: the launch's words the value is read from (their assumptions become the value's)."""
        origin = span.in_file(file) if span is not None else None
        if ok:
            self.bindings[name] = Value("known", value, origin, f"launch {self.label}",
                                        tuple(dict.fromkeys(self.assumed + assumed(*words))))
        else:
            self.bindings[name] = Value("unknown", None, origin, f"launch {self.label}")
            if why:
                self.notes.append(f"{name}: {why}")


def assumed(*words: Word | None) -> tuple[str, ...]:
    """The defaults the words rest on, said with each file as the report shows it."""
    return tuple(dict.fromkeys(a.said(_display(Path(a.file))) for w in words if w is not None for a in w.assumed))


def value_span(flag: Word, value: Word | None) -> Span:
    """Where a flag's value is written: the value word, or the part after `=` of `--flag=value`."""
    if value is not None:
        return value.origin or value.span
    return flag.origin or flag.span


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def bind_dataclass_cli(binder: Binder, facts: ScriptFacts, versions: Versions, words: list[Word], file: str,
                       read_config) -> list[Word]:
    """Bind `--field value` words the way HfArgumentParser / TrlParser would (knowledge.arg_parsers: option
    strings, `--no_x`, prefixes, nargs, conversions); returns the positional words left over."""
    from trainlint.knowledge.arg_parsers import arity, convert_cli, resolve_option

    fields = surface(facts, versions)
    trl = any(p.parser == "trl" for p in facts.parsed)
    positional: list[Word] = []
    given: list[tuple[Word, str, bool, list[Word]]] = []  # flag word, field, negated, value words
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        text = word.text
        if text is None or not text.startswith("-") or _is_number(text):
            positional.append(word)
            continue
        if trl and text.split("=", 1)[0] == "--config":  # TrlParser's own option (trl/scripts/utils.py)
            value = _inline(word) if "=" in text else (words[i] if i < len(words) else None)
            i += 0 if "=" in text else 1
            if value is not None and value.text:
                reading = read_config(value.text)
                if reading is not None:
                    bind_config(binder, reading, fields, via="trl_config", words=(word, value))
                    binder.sources.append(_display(reading.file))
            continue
        match = resolve_option([fields], text)
        if match.field is None or match.field not in fields:
            if match.error:
                binder.notes.append(f"{text}: {match.error}")
            elif fields:  # HfArgumentParser raises on an unknown flag; the run as launched would fail
                binder.notes.append(f"{text.split('=', 1)[0]} is not a field of the script's dataclasses")
            continue
        info = fields[match.field]
        values: list[Word] = []
        if match.explicit is not None:
            values = [_inline(word)]
        elif not match.negated:
            n = arity(info)
            while i < len(words) and (n == "+" or len(values) < 1):
                nxt = words[i].text
                if nxt is not None and nxt.startswith("-") and not _is_number(nxt):
                    break
                values.append(words[i])
                i += 1
        given.append((word, match.field, match.negated, values))
    for flag, name, negated, values in given:
        if negated:
            binder.set(name, False, flag.origin or flag.span, file, words=(flag,))  # store_false complement
            continue
        unknown = next((w for w in values if w.text is None), None)
        if unknown is not None:
            binder.set(name, None, value_span(flag, values[0]), file, False,
                       unknown.note or "set by something not known here")
            continue
        ok, value = convert_cli(fields[name], [w.text for w in values])
        good = ok and _known(value)
        binder.set(name, value if good else None, value_span(flag, values[0] if values else None), file, good,
                   "" if good else str(value), (flag, *values))
    return positional


def _inline(word: Word) -> Word:
    """The value part of `--flag=value`, with its own span when the word is written plainly."""
    name, _, rest = word.text.partition("=")
    if word.raw == word.text and word.origin is None:
        col = word.span.col + len(name) + 1
        return Word(rest, Span(word.span.line, col, word.span.end_line, word.span.end_col), rest,
                    assumed=word.assumed)
    return Word(rest, word.span, rest, word.origin, assumed=word.assumed)


def bind_config(binder: Binder, reading: ConfigReading, fields: dict[str, Any] | None, via: str = "file",
                words: tuple[Word | None, ...] = ()) -> None:
    """Top-level keys of an args file (via="file": HfArgumentParser.parse_json_file / parse_yaml_file) or of a
    TrlParser recipe (via="trl_config": the values become parser defaults), converted as the parser does.
    `words`: the launch's words that name the file (a file named by a default is an assumption)."""
    saved, binder.assumed = binder.assumed, binder.assumed + assumed(*words)
    _bind_entries(binder, reading, fields, via)
    binder.assumed = saved


def _bind_entries(binder: Binder, reading: ConfigReading, fields: dict[str, Any] | None, via: str) -> None:
    from trainlint.knowledge.arg_parsers import convert_config_value

    display = _display(reading.file)
    for problem in getattr(reading, "problems", ()) or ((reading.problem,) if reading.problem else ()):
        binder.notes.append(f"{display}:{problem.span.line}: {problem.message}")
    for entry in reading.top_level():
        info = (fields or {}).get(entry.key)
        if info is None:
            binder.set(entry.key, entry.value, entry.span, display)
            continue
        ok, value = convert_config_value(info, entry.value, via=via)
        good = ok and _known(value)
        binder.set(entry.key, value if good else None, entry.span, display, good, "" if good else str(value))


def bind_argparse(binder: Binder, params: tuple[ArgparseParam, ...], words: list[Word], file: str) -> None:
    """argparse: exact option strings, then unambiguous long prefixes (allow_abbrev=True, the default)."""
    by_flag = {flag: p for p in params for flag in p.flags}
    i = 0
    while i < len(words):
        word = words[i]
        text = word.text
        i += 1
        if text is None or not text.startswith("-") or _is_number(text):
            continue
        flag, eq, inline = text.partition("=")
        param = by_flag.get(flag)
        if param is None and flag.startswith("--"):
            matches = {p.dest: p for f, p in by_flag.items() if f.startswith(flag)}
            param = next(iter(matches.values())) if len(matches) == 1 else None
        if param is None:
            continue
        if param.action in ("store_true", "store_false", "store_const"):
            value = True if param.action == "store_true" else False if param.action == "store_false" else \
                param.const.value if param.const.known else None
            binder.set(param.dest, value, word.origin or word.span, file, param.action != "store_const" or
                       param.const.known, words=(word,))
            continue
        if eq:
            values = [_inline(word)]
        else:
            count = 1 if param.nargs in (None, "?") else param.nargs if isinstance(param.nargs, int) else None
            values = []
            while i < len(words) and (count is None or len(values) < count):
                nxt = words[i].text
                if nxt is not None and nxt.startswith("-") and not _is_number(nxt):
                    break
                values.append(words[i])
                i += 1
        if not values:
            ok, value, why = (True, param.const.value, "") if param.nargs == "?" and param.const.known else \
                (False, None, "flag without a value")
            binder.set(param.dest, value, word.span, file, ok, why, (word,))
            continue
        kind = "list" if param.nargs in ("+", "*") or isinstance(param.nargs, int) and param.nargs > 1 else param.kind
        ok, value, why = convert(kind if kind != "str" else "str", values)
        binder.set(param.dest, value, value_span(word, values[0]), file, ok, why, (word, *values))


def convert(kind: str, words: list[Word]) -> tuple[bool, Any, str]:
    """HfArgumentParser's conversion of a flag's value words: (ok, value, why not)."""
    if any(w.text is None for w in words):
        return False, None, next(w.note for w in words if w.text is None) or "set by something not known here"
    texts = [w.text for w in words]
    if kind in ("bool", "optional_bool"):
        if not texts:
            return True, True, ""  # a bare bool flag: nargs="?", const=True
        from trainlint.knowledge.arg_parsers import string_to_bool

        flag = string_to_bool(texts[0])  # transformers hf_argparser.py string_to_bool's spellings
        return (True, flag, "") if flag is not None else (False, None, f"{texts[0]!r} is not a boolean")
    if not texts:
        return False, None, "flag without a value"
    if kind == "list":
        return True, list(texts), ""
    text = texts[0]
    if kind == "int":
        try:
            return True, int(text), ""
        except ValueError:
            return False, None, f"{text!r} is not an int"
    if kind == "float":
        try:
            return True, float(text), ""
        except ValueError:
            return False, None, f"{text!r} is not a float"
    if kind in ("dict", "dict_or_str") and text.lstrip().startswith("{"):
        import json

        try:
            return True, json.loads(text), ""
        except ValueError:
            return False, None, f"{text!r} is not JSON"
    return True, text, ""


def bind_words(facts: ScriptFacts, versions: Versions, words: list[Word], file: str, label: str, base_dir: Path,
               read_config, span: Span | None = None, world_size: Value | None = None,
               sources: tuple[str, ...] = (), script: Path | None = None) -> Launch:
    """The Launch of a script run with `words` (its own arguments, as a launcher or `check -- ...` gives them)."""
    binder = Binder(file, label)
    dataclass_parser = any(p.parser in ("hf", "trl") for p in facts.parsed)
    if dataclass_parser:
        positional = bind_dataclass_cli(binder, facts, versions, words, file, read_config)
        methods = {m for p in facts.parsed for m in p.methods}
        if len(positional) == 1 and (not binder.bindings or facts.argv_config_overrides) and positional[0].text and \
                positional[0].text.endswith((".json", ".yaml", ".yml")) and (
                facts.json_argv_branch or methods & {"parse_json_file", "parse_yaml_file"}):
            reading = read_config(positional[0].text)
            if reading is not None:
                given = dict(binder.bindings)  # `recipe.yaml --key=value`: the command line overrides the file
                bind_config(binder, reading, surface(facts, versions), words=(positional[0],))
                binder.bindings.update(given)
                binder.sources.append(_display(reading.file))
    if facts.argparse_params:
        bind_argparse(binder, facts.argparse_params, words, file)
    problems = ()
    if facts.hydra:  # Hydra / OmegaConf configs, composed under these words (launch/hydra.py)
        from trainlint.launch.hydra import hydra_bindings

        found, problems, files, notes = hydra_bindings(facts, script, words, file, base_dir, read_config, facts.path,
                                                       documented=label != HYDRA_DEFAULT)
        binder.bindings.update(found)
        binder.sources += files
        binder.notes += notes
    for name in ("deepspeed",):  # a path the script resolves from the directory it is run in
        value = binder.bindings.get(name)
        if value is not None and value.known and isinstance(value.value, str) and value.value.endswith(".json"):
            path = Path(value.value)
            full = path if path.is_absolute() else base_dir / path
            if full.is_file():
                binder.bindings[name] = Value("known", str(full), value.origin, value.via, value.assumed)
    fsdp_config = binder.bindings.get("fsdp_config")
    if fsdp_config is not None and fsdp_config.known and isinstance(fsdp_config.value, str) and \
            fsdp_config.value.endswith(".json"):
        # transformers reads the file itself (5.25.0 training_args.py `_process_fsdp_args`: json.load, `fsdp_` prefixes
        # dropped); the value becomes that mapping, each key where it is written
        reading = read_config(fsdp_config.value)
        if reading is not None and not reading.problems:
            loaded = {e.key[len("fsdp_"):] if e.key.startswith("fsdp_") else e.key: e.value
                      for e in reading.top_level()}
            binder.bindings["fsdp_config"] = Value("known", loaded, fsdp_config.origin, fsdp_config.via,
                                                   fsdp_config.assumed)
            binder.sources.append(_display(reading.file))
    return Launch(label, file or None, span, tuple(binder.bindings.items()), world_size,
                  ((file,) if file else ()) + sources + tuple(binder.sources),
                  tuple(binder.notes), problems=tuple(problems))
