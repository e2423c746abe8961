r"""How HfArgumentParser / TrlParser turn command-line words and config-file values into field values, over the
field table of arguments.py (its FieldInfo per class and version).

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
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trainlint.knowledge.arguments import REQUIRED, FieldInfo, Unresolved
from trainlint.knowledge.versions import Versions

# --------------------------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------------------------

_TRUE = ("yes", "true", "t", "y", "1")
_FALSE = ("no", "false", "f", "n", "0")


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
