r"""The fields of transformers' / TRL's argument dataclasses per version: the versioned table. How HfArgumentParser /
TrlParser turn command-line words and config-file values into field values is in hf_argparser.py; what the classes'
__post_init__ does to the deciding fields (their effective values) is in post_init.py.

Data: arguments.json, written by bench/gen_argument_fields.py from the released wheels' source (read with `ast`,
never imported): every release of transformers 4.36.0-5.25.0 and trl 0.7.0-1.16.0 (213 in all, including the
yanked transformers 4.46.0, 4.52.0, 4.57.0, 5.10.0; trl 0.9.0, 0.9.1, 0.9.5 and 0.10.0 were never on PyPI). A class
is recorded only in the releases that define it (ModelConfig from trl 0.7.11, DPOConfig / SFTConfig from 0.9.2). A version is answered by the nearest version read at or below
it. Nothing here imports torch / transformers / trl. The caller decides that a class name means the library's class
(imported from transformers / trl): a script's own `ScriptArguments` dataclass is not TRL's.

Renamed fields and changed defaults of the fields trainlint decides on (library default; "effective" is after
__post_init__, see `post_init.effective_values`):

| field | change | source |
|---|---|---|
| TrainingArguments.activation_checkpointing(_kwargs) | new in 5.23.0 (absent in 5.22.2), `bool \| None = None`; `gradient_checkpointing(_kwargs)` become `bool \| None = None` deprecated aliases, mirrored both ways in __post_init__, effective False when neither is set | 5.23.0 training_args.py:908, :926; 5.24.0 :1533-1546 |
| TrainingArguments.gradient_checkpointing | `bool = False` 4.36.0-5.22.2 | 5.22.2 training_args.py:900 |
| TrainingArguments.gradient_checkpointing_kwargs | `Optional[dict]` 4.36.0-4.39.3 (a CLI value always fails); `Optional[Union[dict, str]]` + JSON from 4.40.0 | 4.36.0 training_args.py:1181; 4.40.0 :1286 |
| TrainingArguments.deepspeed | `Optional[str]` <= 4.39.3; `Optional[Union[dict, str]]` from 4.40.0 | 4.39.3 :1145; 4.40.0 :1182 |
| TrainingArguments.lr_scheduler_kwargs | `Union[dict[str, Any], str]` 4.57.0-4.57.4: type=dict, a CLI JSON string fails; fixed 4.57.5 | 4.57.0 :931; 4.57.5 :931 |
| TrainingArguments.use_liger_kernel | new in 4.45.0 `Optional[bool] = False`; `bool = False` from 4.57.0 | 4.45.0 :1507; 4.57.0 :1560 |
| TrainingArguments.optim | "adamw_torch" <= 4.53.3; from 4.54.0 "adamw_torch_fused" when torch >= 2.8 is installed, else "adamw_torch" | 4.53.3 :1287; 4.54.0 :1292 |
| TrainingArguments.fsdp | `""` <= 4.56.2; 4.57.0 `Union[list[FSDPOption], str, bool]` = [] (a list on the CLI); None from 4.57.1; `str \| None` from 5.10.0, nargs "?"/const True from 5.13.0 | 4.56.2 :1231; 4.57.0 :1227; 4.57.1 :1227; 5.10.0 :1379 |
| TrainingArguments.eval_strategy | new in 4.41.0; `evaluation_strategy` (None, copied) until 4.50.3 | 4.41.0 :784; 4.50.3 :1430 |
| TrainingArguments per_device_train_batch_size 8, gradient_accumulation_steps 1, bf16 False, fp16 False, auto_find_batch_size False, torch_compile False | unchanged 4.36.0-5.24.0 | 5.24.0 :777 ... |
| SFTConfig / DPO / GRPO / KTO / Reward / RLOO / ORPO / CPO gradient_checkpointing | inherited False <= 0.21.0, except RewardConfig 0.7.2-0.7.10 `Optional[bool] = True`; `bool = True` from 0.22.0 (in each config), in trainer/base_config.py `BaseConfig` from 0.29.0, `_BaseConfig` from 1.0.0 | 0.7.2 training_configs.py:40; 0.7.10 reward_config.py:39; 0.22.0 sft_config.py:111; 0.29.0 base_config.py:61; 1.16.0 :62 |
| the same configs' bf16 | inherited False <= 0.18.2; `Optional[bool] = None`, effective `not fp16` (True) from 0.19.0 | 0.19.0 sft_config.py:111, :252; 1.16.0 base_config.py:68, :108 |
| SFTConfig.max_seq_length -> max_length | 0.9.2-0.14.0 `max_seq_length` None; 0.15.x 1024; 0.16.0 `max_length` 1024 and `max_seq_length` None, copied into max_length when set, until 0.19.1; gone in 0.20.0 | 0.12.0 sft_config.py:64; 0.15.0 :98; 0.16.0 :95, :149, :188 |
| SFTConfig.use_liger -> use_liger_kernel | `use_liger` False from 0.10.1 (`Optional[bool]` 0.10.1, `bool` 0.11.0-0.15.2); `Optional[bool] = None` copied into use_liger_kernel 0.16.0-0.17.0; gone in 0.18.0 | 0.12.0 :72; 0.16.0 :153, :195 |
| DPO / GRPO / KTO use_liger_loss | False (DPO 0.19.0, GRPO/KTO 0.17.0) - 0.24.0; `bool = None` copied into use_liger_kernel 0.25.0-0.27.2; gone in 0.28.0 | 0.19.0 dpo_config.py:337; 0.25.0 :390, :531 |
| SFTConfig.packing False (all), padding_free False (from 0.16.0); DPO/KTO/ORPO/CPO/Reward max_length None <= 0.13.0, 1024 from 0.14.0 | | 0.16.0 sft_config.py:110; 0.14.0 dpo_config.py:231 |
| GRPOConfig per_device_train_batch_size 1, gradient_accumulation_steps 8 | only in 0.14.0 (inherited 8 / 1 otherwise) | 0.14.0 grpo_config.py:159, :166 |
| ModelConfig.torch_dtype -> dtype | default None in every release that has it (0.7.11-0.26.2); `Optional[str]` with metadata choices auto/bfloat16/float16/float32 0.7.11-0.10.1 (0.8.6 model_config.py:21), `Optional[Literal['auto','bfloat16','float16','float32']]` 0.11.0-0.13.0, `Optional[str]` 0.14.0-0.26.2; `dtype` None from 0.23.0 (torch_dtype copied into it when dtype is unset); 0.27.0 `dtype = "float32"`, no torch_dtype | 0.12.0 model_config.py:77; 0.23.0 :93, :198; 0.27.0 :91 |
| ModelConfig model_name_or_path None, attn_implementation None, use_peft False, lora_r 16, lora_alpha 32, lora_target_modules None (a one-element list becomes its string), lora_task_type "CAUSAL_LM" (from 0.8.0), load_in_4bit/8bit False | unchanged 0.7.11-1.16.0; the list rule: none in 0.7.11-0.8.1, only `["all-linear"]` -> "all-linear" in 0.8.2-0.9.4 (0.8.2 :89), any one-element list from 0.9.6 (:89) | 1.16.0 model_config.py:96, :107, :131, :156, :178 |
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache

from trainlint.knowledge.versions import Versions, parse_version

_DATA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "arguments.json")


class _Required:
    """The default of a field that has none (the dataclass, and argparse, require it)."""

    _instance: _Required | None = None

    def __new__(cls) -> _Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"

    def __reduce__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class Unresolved:
    """A default that is not a literal: the source expression (e.g. `os.path.basename(__file__)[:-len('.py')]`)."""

    expr: str


@dataclass(frozen=True)
class EnvDependent:
    """A default chosen when the library is imported: the first case whose condition holds, else `otherwise`.

    transformers 5.x TrainingArguments.optim: "adamw_torch_fused" when torch >= 2.8 is installed, else "adamw_torch".
    """

    cases: tuple[tuple[str, object], ...]
    otherwise: object


@dataclass(frozen=True)
class FieldInfo:
    name: str
    kind: str      # "bool" | "optional_bool" | "int" | "float" | "str" | "list" | "dict" | "dict_or_str" | "enum" | "other"
    default: object  # the library default; REQUIRED when it has none; Unresolved / EnvDependent when not a literal
    source: str    # "trl 1.16.0 trl/trainer/sft_config.py:123"
    choices: tuple[str, ...] | None = None   # Enum / Literal values, or the metadata choices (as str); argparse checks them
    item: str | None = None                  # kind "list": the item type ("str" | "int" | "float" | "bool" | "enum" | "other")
    annotation: str = ""                     # as written in the source
    json_dict: bool = False                  # __post_init__ json.loads a "{...}" string (_VALID_DICT_FIELDS)
    why: str | None = None                   # kind "other": what HfArgumentParser does with it
    parser_error: bool = False               # HfArgumentParser raises while building the parser for this field
    flags: tuple[str, ...] = ()              # the option strings HfArgumentParser registers for the field
    negative_flags: tuple[str, ...] = ()     # the `--no_...` complements (store False)
    choice_values: tuple[object, ...] | None = None  # the choices as the library holds them (Literal[1, 2] -> ints)
    nargs: str | None = None                 # argparse nargs: "?" (0 or 1 word), "+" (1 or more), None (exactly 1)
    const: object = None                     # what a bare flag stores when nargs is "?"
    item_choices: tuple[object, ...] | None = None  # kind "list" of an Enum: the values `Enum(word)` accepts
    default_factory: bool = False            # the default comes from `default_factory` (its value when a literal)
    typing_dict: bool = False                # kind "dict" annotated typing.Dict[...]: argparse cannot call it at all


# --------------------------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _data() -> dict:
    with open(_DATA_PATH, encoding="utf-8") as fh:
        return json.load(fh)


def _apply(base: dict, d: dict) -> dict:
    """A stored version from the previous one and its difference (bench/gen_argument_fields.py apply_diff)."""
    out = {key: value for key, value in base.items() if key in _TOP_KEYS}
    out["classes"] = dict(base["classes"])
    for name, cd in d.get("classes", {}).items():
        if cd is None:
            out["classes"].pop(name, None)
        elif not cd.get("$diff"):
            out["classes"][name] = cd
        else:
            c = dict(out["classes"][name])
            c["fields"] = dict(c["fields"])
            for key, value in cd.items():
                if key == "fields":
                    for fname, rec in value.items():
                        if rec is None:
                            c["fields"].pop(fname, None)
                        else:
                            c["fields"][fname] = rec
                elif key != "$diff":
                    if value is None:
                        c.pop(key, None)
                    else:
                        c[key] = value
            out["classes"][name] = c
    for key in _TOP_KEYS:
        if key in d:
            if d[key] is None:
                out.pop(key, None)
            else:
                out[key] = d[key]
    return out


# Snapshot entries besides "classes": transformers' module-level _VALID_DICT_FIELDS (4.40-4.50) and the
# option strings its HfArgumentParser registers.
_TOP_KEYS = ("module_dict_fields", "parser")


@lru_cache(maxsize=None)
def _snapshot(lib: str, stored: str) -> dict:
    entry = _data()["libraries"][lib]
    order = entry["stored"]
    i = order.index(stored)
    if i == 0:
        return entry["data"][stored]
    return _apply(_snapshot(lib, order[i - 1]), entry["data"][stored])


def read_versions(lib: str) -> tuple[str, ...]:
    """The versions of `lib` whose source was read (oldest first)."""
    return tuple(_data()["libraries"][lib]["stored"])


@lru_cache(maxsize=256)
def snapshot_version(lib: str, version: str) -> str | None:
    """The version read that answers for `version`: the nearest one at or below it; None below the oldest.
    (Cached: every field's option strings ask it, and it scans every release read.)"""
    want = parse_version(version)
    best = None
    for v in _data()["libraries"][lib]["stored"]:
        if parse_version(v) <= want:
            best = v
    return best


@lru_cache(maxsize=None)
def _class_names(lib: str) -> frozenset[str]:
    entry = _data()["libraries"][lib]
    names: set[str] = set()
    for v in entry["stored"]:
        for name, cd in entry["data"][v].get("classes", {}).items():
            if cd is not None:
                names.add(name)
    return frozenset(names)


def library_class_of(class_name: str) -> str | None:
    """"transformers" | "trl" for a class read from that library (in any version), else None."""
    for lib in ("transformers", "trl"):
        if class_name in _class_names(lib):
            return lib
    return None


# --------------------------------------------------------------------------------------------------------------
# Fields
# --------------------------------------------------------------------------------------------------------------

def _default(value: object) -> object:
    if isinstance(value, dict):
        if "$required" in value:
            return REQUIRED
        if "$factory" in value:
            return value["value"] if "value" in value else Unresolved(f"default_factory={value['$factory']}")
        if "$expr" in value:
            return Unresolved(value["$expr"])
        if "$cond" in value:
            return EnvDependent(tuple((c, _default(v)) for c, v in value["$cond"]), _default(value["else"]))
    return value


def _parser_record(versions: Versions) -> dict:
    """The `_parse_dataclass_field` facts of the transformers release (the oldest read below 4.36)."""
    stored = snapshot_version("transformers", versions.transformers.version) or read_versions("transformers")[0]
    return _snapshot("transformers", stored)["parser"]


def _from_template(template: str, name: str) -> str | None:
    """f"--no-{field.name.replace('_', '-')}" (as read from hf_argparser.py) -> the option string for `name`."""
    body = template[2:-1] if template[:2] in ("f'", 'f"') else template
    body = body.replace("{field.name.replace('_', '-')}", name.replace("_", "-")).replace("{field.name}", name)
    return None if "{" in body else body


def flag_aliases(name: str, version: Versions) -> tuple[str, ...]:
    """The option strings HfArgumentParser registers for field `name` under `version.transformers`: `--name`, and
    `--na-me` for a name with "_" where the release adds it (`long_options.append(...)`, since 4.46.0; 4.45.2 has
    only `--{field.name}`).

    Besides these, argparse accepts `--flag=value` and any unambiguous prefix of any of the parser's option strings:
    no HfArgumentParser release read sets `allow_abbrev` (hf_argparser.py passes its kwargs to ArgumentParser), nor
    does TrlParser, so argparse's default True applies. See `resolve_option`."""
    flags = [f"--{name}"]
    if "_" in name and _parser_record(version).get("dash_alias"):
        flags.append(f"--{name.replace('_', '-')}")
    return tuple(flags)


def _negative_flags(name: str, kind: str, default: object, versions: Versions) -> tuple[str, ...]:
    # hf_argparser.py: `if field.default is True and (field.type is bool or field.type == bool | None)`
    if default is not True or kind not in ("bool", "optional_bool"):
        return ()
    templates = (_parser_record(versions).get("negative") or {}).get("options", [])
    return tuple(o for o in (_from_template(t, name) for t in templates) if o)


def _class_chain(lib: str, stored: str, name: str, versions: Versions, depth: int = 0) -> list | None:
    """[(lib, stored version, class record, class key), ...] from the root base to `name`: the reversed MRO, which is
    the order dataclasses collect fields in (and, read backwards, the order `super().__post_init__()` walks). Only
    trl 0.9.2-0.9.6 PPOv2Config / RLOOConfig have two dataclass bases, `(OnpolicyRuntimeConfig, TrainingArguments)`
    (ppov2_config.py, rloo_config.py): TrainingArguments' fields come first. None when a class is missing in the
    version asked."""
    rec = _snapshot(lib, stored)["classes"].get(name)
    if rec is None or depth > 16:
        return None
    chain: list = []
    for base in reversed(rec["bases"]):
        if base.startswith("?"):
            continue  # not a dataclass read here (a mixin or `object`-like base): it declares no fields
        blib, bname = base.split(":", 1) if ":" in base else (lib, base)
        bstored = stored if blib == lib else snapshot_version(blib, getattr(versions, blib).version)
        if bstored is None:
            return None
        sub = _class_chain(blib, bstored, bname, versions, depth + 1)
        if sub is None:
            return None
        chain.extend(item for item in sub if all((item[0], item[3]) != (c[0], c[3]) for c in chain))
    chain.append((lib, stored, rec, name))
    return chain


def _dict_fields(chain: list, versions: Versions) -> set[str]:
    """The fields TrainingArguments.__post_init__ json-loads for this class (see the module table): the
    module-level list before transformers 4.51 (plus TRL's additions: GRPOConfig 0.17-0.18 appends to it; a TRL
    config written `TrainingArguments._VALID_DICT_FIELDS + [...]`, trl >= 0.19, does not even import there), else
    the class attribute the most derived class defines."""
    tf = versions.transformers.tuple
    stored = snapshot_version("transformers", versions.transformers.version)
    tsnap = _snapshot("transformers", stored) if stored else {"classes": {}}
    targs = tsnap["classes"].get("TrainingArguments", {})
    if tf < (4, 51):
        mod = tsnap.get("module_dict_fields")
        found = set(mod["list"]) if mod else set()
        for _lib, _v, rec, _n in chain:  # trl GRPOConfig 0.17-0.18 appends to the module-level list
            df = rec.get("dict_fields")
            if df and "add" in df and _lib == "trl":
                found.update(df["add"])
        return found

    def lookup(idx: int) -> set[str]:
        for j in range(idx, -1, -1):
            lib, _v, rec, name = chain[j]
            df = rec.get("dict_fields")
            if df is None:
                continue
            if "list" in df:
                return set(df["list"])
            base = df.get("base")
            base_set: set[str]
            if base == "TrainingArguments":
                base_set = set(targs.get("dict_fields", {}).get("list", []))
            else:
                k = next((i for i, c in enumerate(chain) if c[3] == base), None)
                base_set = lookup(k) if k is not None else set()
            return base_set | set(df.get("add", []))
        return set()

    return lookup(len(chain) - 1)


def _nargs(f: dict, default: object) -> tuple[str | None, object]:
    """argparse nargs/const as HfArgumentParser._parse_dataclass_field sets them (hf_argparser.py:204-226): lists
    "+"; bool "?" with const True; Optional[bool] the same when the default is not None (and not missing); else what
    the field's metadata passes (transformers 5.13+ `fsdp`, 5.23+ `activation_checkpointing`: nargs "?", const True)."""
    kind = f["k"]
    if kind == "list":
        return "+", None
    if kind == "bool" or (kind == "optional_bool" and default is not None and default is not REQUIRED):
        return "?", True
    return f.get("na"), f.get("co")


def _chain_for(class_name: str, versions: Versions) -> list | None:
    lib = library_class_of(class_name)
    if lib is None:
        return None
    stored = snapshot_version(lib, getattr(versions, lib).version)
    return None if stored is None else _class_chain(lib, stored, class_name, versions)


def library_fields(class_name: str, versions: Versions) -> dict[str, FieldInfo] | None:
    """The fields of a library argument class for the versions `versions` assigns (nearest version read at or below
    it); None when the class does not exist in that version or is not a library class. TRL classes get the
    TrainingArguments fields of `versions.transformers`. Fields declared `init=False` are left out: neither the
    constructor nor HfArgumentParser takes them. The dict is the caller's (a fresh copy each call)."""
    fields = _library_fields(class_name, versions)
    return None if fields is None else dict(fields)


@lru_cache(maxsize=256)
def _library_fields(class_name: str, versions: Versions) -> tuple[tuple[str, FieldInfo], ...] | None:
    chain = _chain_for(class_name, versions)
    if chain is None:
        return None
    json_fields = _dict_fields(chain, versions)
    recs: dict[str, tuple[str, str, dict, str, int]] = {}
    for clib, cver, rec, _name in chain:
        lines = dict(zip(rec["order"], rec["lines"]))
        for fname in rec["order"]:
            recs[fname] = (clib, cver, rec["fields"][fname], rec["module"], lines[fname])
    out: dict[str, FieldInfo] = {}
    for fname, (clib, cver, f, module, line) in recs.items():
        default = _default(f["d"])
        choices = tuple(str(c) for c in f["c"]) if "c" in f else None
        nargs, const = _nargs(f, default)
        out[fname] = FieldInfo(
            name=fname, kind=f["k"], default=default, source=f"{clib} {cver} {module}:{line}",
            choices=choices, item=f.get("i"), annotation=f.get("a", ""),
            json_dict=fname in json_fields,
            why=f.get("why"), parser_error=bool(f.get("fatal")),
            flags=flag_aliases(fname, versions), negative_flags=_negative_flags(fname, f["k"], default, versions),
            choice_values=tuple(f["c"]) if "c" in f else None, nargs=nargs, const=const,
            item_choices=tuple(f["ic"]) if "ic" in f else None, default_factory=bool(f.get("f")),
            typing_dict=bool(f.get("tg")),
        )
    return tuple(out.items())


def is_literal(value: object) -> bool:
    """A value the data states (not an Unresolved expression or an EnvDependent choice)."""
    return not isinstance(value, (Unresolved, EnvDependent))
