r"""The fields of transformers' / TRL's argument dataclasses per version, and how HfArgumentParser / TrlParser turn
command-line words and config-file values into field values.

Data: arguments.json, written by bench/gen_argument_fields.py from the released wheels' source (read with `ast`,
never imported): every release of transformers 4.36.0-5.25.0 and trl 0.7.0-1.16.0 (213 in all, including the
yanked transformers 4.46.0, 4.52.0, 4.57.0, 5.10.0; trl 0.9.0, 0.9.1, 0.9.5 and 0.10.0 were never on PyPI). A class
is recorded only in the releases that define it (ModelConfig from trl 0.7.11, DPOConfig / SFTConfig from 0.9.2). A version is answered by the nearest version read at or below
it. Nothing here imports torch / transformers / trl. The caller decides that a class name means the library's class
(imported from transformers / trl): a script's own `ScriptArguments` dataclass is not TRL's.

How the parsers behave. Read in every release listed; "hf_argparser.py" is transformers', "scripts/utils.py" TRL's;
line numbers are transformers 5.24.0 / trl 1.16.0 unless a version is named. Verified against the real parsers of
transformers 4.36.2, 4.46.3, 4.51.3, 4.56.2, 4.57.6, 5.0.0, 5.22.2, 5.24.0 with trl 0.12.2-1.16.0, and of trl 0.7.0,
0.7.2, 0.7.10, 0.7.11 (transformers 4.36.2), 0.8.6 (4.38.2), 0.9.6, 0.10.1, 0.11.4 (4.44.2)
(`bench/gen_argument_fields.py --verify-imported`). The TrlParser rows below were read in trl 0.12.0 and later only.

| behaviour | versions | source |
|---|---|---|
| `bool` field: `type=string_to_bool, nargs="?", const=True`; a bare `--x` is True; yes/true/t/y/1 and no/false/f/n/0 (any case) are accepted, anything else is an argparse error | all | hf_argparser.py:36-46, :204-219 |
| `Optional[bool]` / `bool \| None`: the same, but nargs="?"/const only when the default is neither None nor missing: default None needs a value ("expected one argument"), unless the field's metadata passes nargs/const (TrainingArguments `activation_checkpointing`/`gradient_checkpointing` 5.23+, `fsdp` 5.13+: a bare flag is True) | all | hf_argparser.py:211, :155 |
| metadata other than help/aliases goes to add_argument: `choices` (TrainingArguments.log_level: utils/logging.py log_levels + "passive"), `nargs`, `const` | all | hf_argparser.py:155, :235 |
| a `bool` field without a default parses to False; a list field with a plain `default=` parses to None (only `default_factory` is passed); a str default goes through the type when the flag is absent (argparse), so `scale_rewards: str \| bool = "group"` (trl 1.0.0 experimental SDFT/SDPO configs) makes every parse fail | all | hf_argparser.py:213, :223-226 |
| `--no_x` (store_false) for a bool / Optional[bool] field whose default is `True` | all | hf_argparser.py:241-249 |
| `--no-x-y` besides `--no_x_y`, and `--x-y` besides `--x_y` | since 4.46.0 (4.45.2 registers only `--x_y` / `--no_x_y`) | hf_argparser.py:151-153, :243-246 |
| prefix abbreviations (`--per_device_train 4`) are accepted when unambiguous: no release passes `allow_abbrev` (HfArgumentParser hands its kwargs to ArgumentParser; TrlParser adds none), so argparse's default True applies | all | hf_argparser.py:128-138 |
| `Union[X, str]` -> X; `Optional[Union[X, str]]` -> its second member (str for `dict \| str \| None`); another Union without str raises ValueError, and `Optional[Union[A, G]]` with G a subscripted generic raises TypeError (`isinstance(None, G)`), when the parser is built | all | hf_argparser.py:169-187 |
| `list[X]`: nargs="+", type=X (a list of an Enum: `Enum(word)`) | all | hf_argparser.py:220-226 |
| Enum / Literal: choices = the values, a word maps to the choice whose `str()` it is, else "invalid choice" | all | hf_argparser.py:192-203 |
| a plain `dict` / `dict[...]` field: type=dict, so any non-empty word fails (`dict("")` is {}); `typing.Dict[...]` cannot be called at all | all | hf_argparser.py:227-228 |
| JSON strings for dict fields: TrainingArguments.__post_init__ json.loads a str starting with "{" for the `_VALID_DICT_FIELDS`, then `_convert_str_dict` ("true"/"false" -> bool, digit strings -> int/float, nested); another str is kept (a file path); invalid JSON raises JSONDecodeError | none <= 4.39.3; module-level list 4.40.0-4.50.3; class attribute since 4.51.0, extended by TRL configs (`TrainingArguments._VALID_DICT_FIELDS + ["model_init_kwargs", ...]`, trl >= 0.19.0; GRPOConfig 0.17-0.18) | training_args.py:761-768, :1526-1531, :161-176 (4.40.0 :180, :1421) |
| unknown command-line words: ValueError "Some specified arguments are not used by the HfArgumentParser", unless `return_remaining_strings=True` (then returned) | all | hf_argparser.py:338, :350-354 |
| `<script>.args` next to the entry point (`look_for_args_file=True` by default): its words go first, the command line wins | all | hf_argparser.py:309-337 |
| `parse_dict` / `parse_json_file` / `parse_yaml_file`: no string conversion (values go to the dataclass as they are); unknown keys: ValueError "Some keys are not used by the HfArgumentParser" unless `allow_extra_keys=True` (then ignored) | all | hf_argparser.py:358-384, :403-428 |
| TrlParser `--config FILE`: the exact word `--config` only (not `--config=FILE`), the first one; `env:` sets os.environ (str values); every other key that is an argument's dest becomes that argument's default (and not required), so the command line overrides it; keys are dests (`gradient_checkpointing`, not `gradient-checkpointing`) | trl 0.12.0-1.16.0 (0.12: commands/cli_utils.py:225, reads `sys.argv` only) | scripts/utils.py:321-340, :377-380 |
| a config value that is a str goes through the argument's type (argparse converts str defaults: "false" -> False, "2e-5" -> 2e-05; an enum word is mapped, its choice not checked); other values are kept | trl 0.12.0-1.16.0, CPython argparse | argparse.py:2139-2144 (CPython 3.11) |
| unknown config keys | 0.12.x: ValueError "Some specified config arguments are not used by the TrlParser" unless `ignore_extra_args=True` (cli_utils.py:250, :256); 0.13.0-0.18.2: dropped silently unless `return_remaining_strings=True` (then `--key str(value)`); since 0.19.0: ValueError "Unknown arguments from config file" unless `fail_with_unknown_args=False` or `return_remaining_strings=True` | 0.18.2 scripts/utils.py:203-213; 1.16.0 :348-357, :384-387 |

Renamed fields and changed defaults of the fields trainlint decides on (library default; "effective" is after
__post_init__, see `effective_values`):

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


# --------------------------------------------------------------------------------------------------------------
# __post_init__
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PostInitStep:
    """One `self.<field> = ...` of a __post_init__ (for the fields trainlint decides on), as read from the source."""

    field: str
    action: str        # "set" | "setdefault"
    value: str         # the expression, in a small readable form
    when: str | None   # the conditions of the enclosing `if`s
    source: str        # "trl 1.16.0 trl/trainer/base_config.py:108"


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


_UNKNOWN = _Unknown()


def _show(e: dict) -> str:
    if "self" in e:
        return e["self"]
    if "const" in e:
        return repr(e["const"])
    if "not" in e:
        inner = e["not"]
        if "is_none" in inner:
            return f"{_show(inner['is_none'])} is not None"
        return f"not {_show(inner)}"
    if "and" in e or "or" in e:
        op = "and" if "and" in e else "or"
        return f" {op} ".join(f"({_show(x)})" if ("and" in x or "or" in x) else _show(x) for x in e[op])
    if "ifelse" in e:
        c, a, b = e["ifelse"]
        return f"{_show(a)} if {_show(c)} else {_show(b)}"
    if "is_none" in e:
        return f"{_show(e['is_none'])} is None"
    if "eq" in e:
        return f"{_show(e['eq'][0])} == {_show(e['eq'][1])}"
    if "in" in e:
        return f"{_show(e['in'][0])} in {_show(e['in'][1])}"
    if "index" in e:
        return f"{_show(e['index'][0])}[{e['index'][1]!r}]"
    if "len" in e:
        return f"len({_show(e['len'])})"
    if "hasattr" in e:
        return f"hasattr({_show(e['hasattr'][0])}, {e['hasattr'][1]!r})"
    if "isinstance" in e:
        return f"isinstance({_show(e['isinstance'][0])}, {'/'.join(e['isinstance'][1])})"
    if "version" in e:
        lib, op, ver = e["version"]
        return f"{lib} {op} {ver}"
    return e.get("opaque", "?")


_TYPES = {"bool": bool, "int": int, "float": float, "str": str, "dict": dict, "list": list, "tuple": tuple}


def _version_cmp(have: tuple[int, ...], op: str, want: tuple[int, ...]) -> bool:
    n = max(len(have), len(want))
    a, b = have + (0,) * (n - len(have)), want + (0,) * (n - len(want))
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _eval(e: dict, values: dict[str, object], versions: Versions) -> object:
    """Python semantics over known values; _UNKNOWN as soon as an unknown value decides the result."""
    if "self" in e:
        v = values.get(e["self"], _UNKNOWN)
        return _UNKNOWN if isinstance(v, (Unresolved, EnvDependent, _Required)) else v
    if "const" in e:
        return json.loads(json.dumps(e["const"]))  # a fresh copy: __post_init__ may mutate it
    if "not" in e:
        v = _eval(e["not"], values, versions)
        return _UNKNOWN if v is _UNKNOWN else not v
    if "and" in e or "or" in e:
        is_and = "and" in e
        v: object = None
        for sub in e["and" if is_and else "or"]:
            v = _eval(sub, values, versions)
            if v is _UNKNOWN or (not v if is_and else bool(v)):
                return v
        return v
    if "ifelse" in e:
        c = _eval(e["ifelse"][0], values, versions)
        if c is _UNKNOWN:
            return _UNKNOWN
        return _eval(e["ifelse"][1] if c else e["ifelse"][2], values, versions)
    if "version" in e:
        lib, op, ver = e["version"]
        lv = getattr(versions, lib, None)
        return _UNKNOWN if lv is None else _version_cmp(lv.tuple, op, parse_version(ver))
    args = {k: v for k, v in e.items()}
    try:
        if "is_none" in args:
            v = _eval(args["is_none"], values, versions)
            return _UNKNOWN if v is _UNKNOWN else v is None
        if "eq" in args or "in" in args:
            a, b = (_eval(x, values, versions) for x in args.get("eq") or args["in"])
            if a is _UNKNOWN or b is _UNKNOWN:
                return _UNKNOWN
            return a == b if "eq" in args else a in b
        if "index" in args:
            v = _eval(args["index"][0], values, versions)
            return _UNKNOWN if v is _UNKNOWN else v[args["index"][1]]
        if "len" in args:
            v = _eval(args["len"], values, versions)
            return _UNKNOWN if v is _UNKNOWN else len(v)
        if "hasattr" in args:
            v = _eval(args["hasattr"][0], values, versions)
            return _UNKNOWN if v is _UNKNOWN else hasattr(v, args["hasattr"][1])
        if "isinstance" in args:
            v = _eval(args["isinstance"][0], values, versions)
            return _UNKNOWN if v is _UNKNOWN else isinstance(v, tuple(_TYPES[t] for t in args["isinstance"][1]))
    except (TypeError, KeyError, IndexError):
        return _UNKNOWN
    return _UNKNOWN


def post_init_rules(class_name: str, versions: Versions) -> tuple[PostInitStep, ...] | None:
    """The recorded __post_init__ rewrites of the deciding fields, in the order they run (a class's statements before
    its `super().__post_init__()`, then the base's, then the rest), each with the conditions of its enclosing `if`s.
    None for an unknown class."""
    chain = _chain_for(class_name, versions)
    if chain is None:
        return None
    out: list[PostInitStep] = []

    def flatten(program: list, conds: list[str], where: tuple[str, str, str], i: int) -> None:
        lib, ver, module = where
        for node in program:
            if node.get("super"):
                run(_super_index(chain, i, node["super"]), conds)
            elif "if" in node:
                cond = _show(node["if"])
                flatten(node["then"], conds + [cond], where, i)
                flatten(node["else"], conds + [f"not ({cond})"], where, i)
            else:
                names = node.get("set") or node.get("setdefault")
                for name in names if isinstance(names, list) else [names]:
                    out.append(PostInitStep(
                        field=name, action="set" if "set" in node else "setdefault",
                        value=(_show(node["value"]) if "set" in node
                               else f"[{node['key']!r}] = {_show(node['value'])}"),
                        when=" and ".join(conds) or None, source=f"{lib} {ver} {module}:{node['line']}"))

    def run(i: int, conds: list[str]) -> None:
        while i >= 0 and chain[i][2].get("post_init") is None:
            i -= 1  # a class without its own __post_init__ runs its base's
        if i >= 0:
            lib, ver, rec, _name = chain[i]
            flatten(rec["post_init"], conds, (lib, ver, rec["module"]), i)

    run(len(chain) - 1, [])
    return tuple(out)


def _chain_for(class_name: str, versions: Versions) -> list | None:
    lib = library_class_of(class_name)
    if lib is None:
        return None
    stored = snapshot_version(lib, getattr(versions, lib).version)
    return None if stored is None else _class_chain(lib, stored, class_name, versions)


def _super_index(chain: list, i: int, target: object) -> int:
    """The chain index `super().__post_init__()` (target True) or `Base.__post_init__(self)` (target "Base") runs."""
    if target is True:
        return i - 1
    for j in range(i - 1, -1, -1):
        if chain[j][3].split(".")[-1] == target:
            return j
    return i - 1


def _assigned(program: list) -> set[str]:
    names: set[str] = set()
    for node in program:
        if "if" in node:
            names |= _assigned(node["then"]) | _assigned(node["else"])
        elif not node.get("super"):
            n = node.get("set") or node.get("setdefault")
            names.update(n if isinstance(n, list) else [n])
    return names


def effective_values(class_name: str, versions: Versions, given: dict[str, object] | None = None
                     ) -> dict[str, object] | None:
    """The deciding fields' values once the dataclass is built: the library defaults, overridden by `given` (values
    already converted, e.g. by convert_cli), then the recorded __post_init__ rewrites (TRL's `bf16 = not fp16` when
    None; transformers 5.23+'s `gradient_checkpointing` <-> `activation_checkpointing` mirroring; deprecated-alias
    copies such as SFTConfig `max_seq_length` -> `max_length`). A value the rewrites cannot decide (a condition on
    an unknown value) becomes Unresolved naming the statement. Fields other than the deciding ones keep their
    given / default value (their __post_init__ normalisations, e.g. `fsdp` str -> list, are not applied). None for
    an unknown class."""
    fields = library_fields(class_name, versions)
    chain = _chain_for(class_name, versions)
    if fields is None or chain is None:
        return None
    values: dict[str, object] = {name: info.default for name, info in fields.items()}
    values.update(given or {})

    def execute(program: list, where: tuple[str, str, str], i: int) -> None:
        lib, ver, module = where
        for node in program:
            at = f"{lib} {ver} {module}:{node['line']}"
            if node.get("super"):
                run(_super_index(chain, i, node["super"]))
            elif "if" in node:
                cond = _eval(node["if"], values, versions)
                if cond is _UNKNOWN:
                    for name in _assigned(node["then"]) | _assigned(node["else"]):
                        values[name] = Unresolved(f"__post_init__ at {at}: condition {_show(node['if'])} not known")
                    for n in node["then"] + node["else"]:
                        if n.get("super"):
                            run(_super_index(chain, i, n["super"]))
                            break
                else:
                    execute(node["then"] if cond else node["else"], where, i)
            elif "set" in node:
                new = _eval(node["value"], values, versions)
                for name in node["set"] if isinstance(node["set"], list) else [node["set"]]:
                    values[name] = (Unresolved(f"__post_init__ at {at}: {_show(node['value'])} not known")
                                    if new is _UNKNOWN else new)
            else:
                name, new, current = node["setdefault"], _eval(node["value"], values, versions), values.get(
                    node["setdefault"])
                if isinstance(current, dict) and new is not _UNKNOWN:
                    current = dict(current)
                    current.setdefault(node["key"], new)
                    values[name] = current
                else:
                    values[name] = Unresolved(f"__post_init__ at {at}: setdefault on {current!r}")

    def run(i: int) -> None:
        while i >= 0 and chain[i][2].get("post_init") is None:
            i -= 1
        if i >= 0:
            lib, ver, rec, _name = chain[i]
            execute(rec["post_init"], (lib, ver, rec["module"]), i)

    run(len(chain) - 1)
    return values


# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------

_TRUE = ("yes", "true", "t", "y", "1")
_FALSE = ("no", "false", "f", "n", "0")


def is_literal(value: object) -> bool:
    """A value the data states (not an Unresolved expression or an EnvDependent choice)."""
    return not isinstance(value, (Unresolved, EnvDependent))


def string_to_bool(word: str) -> bool | None:
    """transformers hf_argparser.py:36 `string_to_bool` (unchanged 4.36.0-5.24.0); None where it raises."""
    if word.lower() in _TRUE:
        return True
    if word.lower() in _FALSE:
        return False
    return None


def arity(info: FieldInfo) -> str:
    """argparse `nargs` of the field's option: "?" (0 or 1 word), "1" (exactly one), "+" (one or more)."""
    return info.nargs or "1"


@dataclass(frozen=True)
class ArgparseError:
    """What `parser_default` gives when argparse fails on the default itself: a str default goes through the
    argument's type when the flag is absent, and that type rejects it (trl 1.0.0 experimental SDFTConfig
    `scale_rewards: str | bool = "group"`: HfArgumentParser takes `bool`, so every parse without --scale_rewards
    fails with "Truthy value expected: got group")."""

    message: str


def _convert_string_default(info: FieldInfo, value: str) -> tuple[bool, object]:
    """argparse `_get_value(action, default)` for a str default (or a str config value set as default): the type
    function, no choices check; a list field's item type on the whole string."""
    kind = info.kind
    if kind == "list":
        kind = info.item or "other"
        if kind == "bool":
            return True, bool(value)
        if kind == "enum":
            return _enum_item(info, value)
    if kind == "enum":
        return True, {str(c): c for c in info.choice_values or ()}.get(value, value)
    return _convert_word(kind, value, info)


def parser_default(info: FieldInfo) -> object:
    """What HfArgumentParser stores when the flag is absent: the dataclass default, except that a `bool` field with
    no default gets False (hf_argparser.py:213), an `Optional[bool]` field with no default gets None (no default
    and not required), a list field with a plain `default=` (not a factory) gets None: the list branch only
    passes `default_factory()` to argparse (hf_argparser.py:223-226; TrainingArguments.debug `str | list[DebugOption]
    = ""` parses to None), and a str default goes through the argument's type (argparse converts string defaults;
    ArgparseError where that fails, which makes every parse of the class fail). REQUIRED where argparse reports
    "the following arguments are required"."""
    if info.kind == "list" and not info.default_factory and info.default is not REQUIRED:
        return None
    if info.default is REQUIRED:
        if info.kind == "bool":
            return False
        if info.kind == "optional_bool":
            return None
    if isinstance(info.default, str) and not info.parser_error:
        ok, value = _convert_string_default(info, info.default)
        return value if ok else ArgparseError(str(value))
    return info.default


def _convert_str_dict(value: dict) -> dict:
    """transformers training_args.py:161 `_convert_str_dict` (unchanged 4.40.0-5.24.0)."""
    for key, v in value.items():
        if isinstance(v, dict):
            value[key] = _convert_str_dict(v)
        elif isinstance(v, str):
            if v.lower() in ("true", "false"):
                value[key] = v.lower() == "true"
            elif v.isdigit():
                value[key] = int(v)
            elif v.replace(".", "", 1).isdigit():
                value[key] = float(v)
    return value


def _post_init(info: FieldInfo, value: object) -> tuple[bool, object]:
    if info.json_dict and isinstance(value, str) and value.startswith("{"):
        try:
            loaded = json.loads(value)
        except ValueError as exc:
            return False, f"TrainingArguments.__post_init__ json.loads fails on {info.name}: {exc}"
        if not isinstance(loaded, dict):
            return False, f"TrainingArguments.__post_init__: {info.name} JSON is not an object"
        return True, _convert_str_dict(loaded)
    return True, value


def _convert_word(kind: str, word: str, info: FieldInfo) -> tuple[bool, object]:
    if kind in ("bool", "optional_bool"):
        b = string_to_bool(word)
        if b is None:
            return False, (f"argument {info.flags[0] if info.flags else info.name}: Truthy value expected: got {word} "
                           "but expected one of yes/no, true/false, t/f, y/n, 1/0 (case insensitive).")
        return True, b
    if kind == "int":
        try:
            return True, int(word)
        except ValueError:
            return False, f"argument --{info.name}: invalid int value: {word!r}"
    if kind == "float":
        try:
            return True, float(word)
        except ValueError:
            return False, f"argument --{info.name}: invalid float value: {word!r}"
    if kind in ("str", "dict_or_str"):
        return True, word
    if kind == "dict":
        if info.typing_dict:
            return False, f"argument --{info.name}: invalid Dict value: {word!r} (typing.Dict cannot be instantiated)"
        if word == "":
            return True, {}
        return False, f"argument --{info.name}: invalid dict value: {word!r} (type=dict: dict() of a string fails)"
    if kind == "enum":
        mapping = {str(c): c for c in info.choice_values or ()}
        return True, mapping.get(word, word)  # make_choice_type_function; the choice is checked by the caller
    return True, Unresolved(f"argparse type of {info.annotation!r} applied to {word!r}")


def _check_choice(info: FieldInfo, value: object, word: str) -> tuple[bool, object]:
    """argparse `_check_value`: after the type conversion, the value must be one of `choices` (Enum / Literal
    values, or the field's metadata choices such as TrainingArguments.log_level)."""
    if info.choice_values is not None and value not in info.choice_values:
        shown = ", ".join(repr(c) for c in info.choice_values)
        return False, f"argument --{info.name}: invalid choice: {word!r} (choose from {shown})"
    return True, value


def convert_cli(info: FieldInfo, raw: list[str]) -> tuple[bool, object]:
    """What HfArgumentParser leaves in the dataclass for `--name raw...` (raw: the words after the flag, [] for a
    bare flag): (True, value) or (False, reason) where argparse (or the dataclass's __post_init__ JSON step) fails.

    The caller groups the words: argparse gives an option the following words that do not start with "-" (a negative
    number like -1 or -.5 is a word), up to `arity(info)`; words beyond that are unrecognized arguments."""
    if info.parser_error:
        return False, f"HfArgumentParser cannot be built: {info.why}"
    n = arity(info)
    if n == "?" and len(raw) > 1:
        return False, f"unrecognized arguments: {' '.join(raw[1:])} (--{info.name} takes at most one value)"
    if n == "1" and len(raw) != 1:
        if not raw:
            return False, f"argument --{info.name}: expected one argument"
        return False, f"unrecognized arguments: {' '.join(raw[1:])} (--{info.name} takes one value)"
    if n == "+" and not raw:
        return False, f"argument --{info.name}: expected at least one argument"
    if n == "?" and not raw:
        return True, info.const  # a bare flag stores const (True for bool fields), not type-converted
    if info.kind == "list":
        item = info.item or "other"
        out = []
        for word in raw:
            if item == "bool":
                out.append(bool(word))  # type=bool: any non-empty word is True
                continue
            if item == "enum":
                ok, v = _enum_item(info, word)
            else:
                ok, v = _convert_word(item, word, info)
            if not ok:
                return False, v
            out.append(v)
        return True, out
    ok, value = _convert_word(info.kind, raw[0], info)
    if ok:
        ok, value = _check_choice(info, value, raw[0])
    if not ok:
        return False, value
    return _post_init(info, value)


def _enum_item(info: FieldInfo, word: str) -> tuple[bool, object]:
    # list[SomeEnum]: type=SomeEnum, so SomeEnum(word) - a value, else ValueError -> argparse error
    values = info.item_choices or ()
    if word in values:
        return True, word
    return False, f"argument --{info.name}: invalid {info.annotation} value: {word!r}"


def negative_flag(fields: dict[str, FieldInfo], flag: str) -> str | None:
    """`--no_xxx` -> "xxx" when HfArgumentParser registers that complement for these fields (`store_false`: the
    field becomes False; it takes no value). Exact spellings only; see `resolve_option` for prefixes."""
    flag = flag.split("=", 1)[0]
    for name, info in fields.items():
        if flag in info.negative_flags:
            return name
    return None


@dataclass(frozen=True)
class OptionMatch:
    field: str | None       # the field the word sets; None when no option matches
    negated: bool = False   # a `--no_...` complement
    explicit: str | None = None  # the value after "=" in `--flag=value`
    error: str | None = None     # argparse's message ("ambiguous option: ...") where it fails


def resolve_option(fields_list: list[dict[str, FieldInfo]], word: str) -> OptionMatch:
    """Which field a command-line word such as `--grad_accum=4` or `--no-gradient-checkpointing` sets, as CPython
    3.11 argparse decides (argparse.py `_parse_optional` / `_get_option_tuples`): an exact option string first, then
    `--opt=value`, then the unique option string the word (up to "=") is a prefix of; two or more: "ambiguous option".
    `fields_list`: the field sets of all dataclasses given to the parser (`-h` / `--help` are also options)."""
    table: dict[str, tuple[str, bool]] = {"-h": ("help", False), "--help": ("help", False)}
    for fields in fields_list:
        for name, info in fields.items():
            for f in info.flags or (f"--{name}",):
                table.setdefault(f, (name, False))
            for f in info.negative_flags:
                table.setdefault(f, (name, True))
    if word in table:
        return OptionMatch(*table[word])
    opt, explicit = (word.split("=", 1) + [None])[:2] if "=" in word else (word, None)
    if opt in table:
        return OptionMatch(*table[opt], explicit=explicit)
    if not word.startswith("--"):
        return OptionMatch(None)
    matches = sorted(s for s in table if s.startswith(opt))
    if len(matches) > 1:
        return OptionMatch(None, error=f"ambiguous option: {opt} could match {', '.join(matches)}")
    if len(matches) == 1:
        return OptionMatch(*table[matches[0]], explicit=explicit)
    return OptionMatch(None)


# --------------------------------------------------------------------------------------------------------------
# Config files
# --------------------------------------------------------------------------------------------------------------

def convert_config_value(info: FieldInfo, value: object, via: str = "file") -> tuple[bool, object]:
    """How a value read from an args file becomes the field's value.

    via="file": HfArgumentParser.parse_dict / parse_json_file / parse_yaml_file: the value goes to the dataclass as
    it is (no string conversion; `"4"` stays a str), then __post_init__'s JSON step for dict fields.
    via="trl_config": TrlParser.parse_args_and_config `--config` YAML (when the flag is not also on the command
    line): the value becomes the argparse default; a str default goes through the argument's `type` (argparse converts
    string defaults: `"false"` -> False, `"2e-5"` -> 2e-05, an enum word is mapped but its choice not checked; a list
    field's item type is applied to the whole string), any other value is kept. Note that PyYAML's safe_load reads
    `2e-5` (no dot) as the string "2e-5" and `yes`/`on` as True."""
    if via not in ("file", "trl_config"):
        raise ValueError(f"unknown via={via!r}")
    if via == "trl_config" and isinstance(value, str):
        if info.parser_error:
            return False, f"HfArgumentParser cannot be built: {info.why}"
        ok, value = _convert_string_default(info, value)
        if not ok:
            return False, value
    return _post_init(info, value)


def trl_config_unknown_keys(versions: Versions, return_remaining_strings: bool = False) -> str:
    """What TrlParser.parse_args_and_config does with a `--config` YAML key that is no argument's dest:
    "error" (ValueError), "dropped" (ignored silently) or "returned" (in the remaining strings)."""
    trl = versions.trl.tuple
    if trl < (0, 13):
        # trl 0.12.x commands/cli_utils.py: keys land in parser._defaults -> an extra Namespace -> ValueError
        # "Some specified config arguments are not used by the TrlParser" (unless ignore_extra_args=True)
        return "returned" if return_remaining_strings else "error"
    if return_remaining_strings:
        return "returned"
    if trl < (0, 19):
        return "dropped"  # 0.13.0-0.18.2 scripts/utils.py: `config_remaining_strings` only returned on request
    return "error"        # since 0.19.0: `fail_with_unknown_args=True` -> ValueError "Unknown arguments from config file"
