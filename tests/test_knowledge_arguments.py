"""The argument-field knowledge (knowledge/arguments.py + arguments.json) against the real libraries.

The transformers / trl releases pinned for the tests (pyproject.toml's `test` extra, conftest.PINNED) are installed by
the README's test command; their real HfArgumentParser / TrlParser / dataclasses are the ground truth. Older releases are not installed in the test environment: the values asserted for them below were
read by hand in the released wheels' source (`pip download --no-deps`, unzipped) at the file and line each test
names, and the whole JSON was checked against the real libraries installed aside (`bench/gen_argument_fields.py
--verify-imported` with transformers 4.36.2/trl 0.12.2, 4.46.3/0.12.2, 4.51.3/0.19.1, 4.56.2/0.22.2, 4.57.6/0.27.2,
4.57.6/0.29.1, 5.0.0/1.14.2, 5.22.2/1.0.0, and trl 0.7.0, 0.7.2, 0.7.10, 0.7.11 with 4.36.2, 0.8.6 with 4.38.2, 0.9.6,
0.10.1, 0.11.4 with 4.44.2: 0 disagreements). When the generator's source cache ($TRAINLINT_ARGSRC)
is present, the cited lines are re-read too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from conftest import PINNED, pinned_installed
from trainlint.knowledge import arg_parsers as P
from trainlint.knowledge import arguments as A
from trainlint.knowledge import post_init as PI
from trainlint.knowledge.versions import LibraryVersion, Versions

ROOT = Path(__file__).resolve().parents[1]


def V(transformers: str, trl: str) -> Versions:
    return Versions(LibraryVersion("transformers", transformers, "test"), LibraryVersion("trl", trl, "test"),
                    LibraryVersion("peft", "0.21.2", "test"))


TF, TRL = PINNED["transformers"], PINNED["trl"]
NEW = V(TF, TRL)

needs_real = pytest.mark.skipif(
    not pinned_installed("transformers", "trl"),
    reason=f"ground truth needs the pinned transformers {TF} and trl {TRL} installed (the README's test command)")


@pytest.fixture(scope="module")
def real():
    warnings.filterwarnings("ignore")
    import transformers
    import trl

    return transformers, trl


def _parse(parser, words):
    """(True, namespace) or (False, argparse's message)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns, rest = parser.parse_known_args(words)
    except SystemExit:
        return False, err.getvalue().strip().splitlines()[-1]
    if rest:
        return False, f"unrecognized {rest}"
    return True, ns


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------------------------------------------------------
# Defaults and fields vs dataclasses.fields() of the real classes
# ---------------------------------------------------------------------------------------------------------------

DECIDING = ("per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
            "gradient_checkpointing_kwargs", "use_liger_kernel", "bf16", "fp16", "max_length", "packing",
            "padding_free", "auto_find_batch_size", "optim", "deepspeed", "fsdp", "torch_compile",
            "model_name_or_path", "attn_implementation", "dtype", "use_peft", "lora_r", "lora_alpha",
            "lora_target_modules", "lora_task_type", "load_in_4bit", "load_in_8bit")

REAL_CLASSES = [("transformers", "TrainingArguments"), ("transformers", "Seq2SeqTrainingArguments"),
                ("trl", "SFTConfig"), ("trl", "DPOConfig"), ("trl", "GRPOConfig"), ("trl", "KTOConfig"),
                ("trl", "RewardConfig"), ("trl", "RLOOConfig"), ("trl", "ModelConfig"), ("trl", "ScriptArguments"),
                ("trl.experimental.orpo", "ORPOConfig"), ("trl.experimental.cpo", "CPOConfig"),
                ("trl.experimental.gkd", "GKDConfig"), ("trl.experimental.online_dpo", "OnlineDPOConfig")]


def _real_class(module: str, name: str):
    return getattr(importlib.import_module(module), name)


def _real_default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return A.REQUIRED
    if hasattr(value, "value") and not isinstance(value, (str, int, float)):
        value = value.value  # an Enum member
    return list(value) if isinstance(value, tuple) else value


@needs_real
@pytest.mark.parametrize("module,name", REAL_CLASSES)
def test_fields_and_defaults_equal_the_real_dataclass(real, module, name):
    cls = _real_class(module, name)
    fields = A.library_fields(name, NEW)
    real_fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    assert list(fields) == list(real_fields)  # same fields, in dataclass order
    for fname, f in real_fields.items():
        mine = fields[fname].default
        want = _real_default(f)
        if isinstance(mine, A.EnvDependent):
            # the optim default: decided by the torch installed; here torch 2.13 -> the first case
            assert want in {v for _, v in mine.cases} | {mine.otherwise}, fname
            assert fname == "optim" and want == "adamw_torch_fused"
        elif isinstance(mine, A.Unresolved):
            assert fname in ("exp_name",), (fname, mine)
        else:
            assert mine == want and type(mine) is type(want), (fname, mine, want)


@needs_real
def test_deciding_field_defaults_in_5_24_and_1_16(real):
    sft = A.library_fields("SFTConfig", NEW)
    ta = A.library_fields("TrainingArguments", NEW)
    mc = A.library_fields("ModelConfig", NEW)
    assert {k: sft[k].default for k in ("per_device_train_batch_size", "gradient_accumulation_steps",
                                         "gradient_checkpointing", "bf16", "fp16", "max_length", "packing",
                                         "padding_free", "use_liger_kernel", "auto_find_batch_size")} == {
        "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "gradient_checkpointing": True,
        "bf16": None, "fp16": False, "max_length": 1024, "packing": False, "padding_free": False,
        "use_liger_kernel": False, "auto_find_batch_size": False}
    assert sft["gradient_checkpointing"].source == "trl 1.16.0 trl/trainer/base_config.py:62"
    assert ta["gradient_checkpointing"].default is None and ta["gradient_checkpointing"].kind == "optional_bool"
    assert ta["activation_checkpointing"].default is None
    assert (ta["deepspeed"].kind, ta["fsdp"].kind, ta["torch_compile"].default) == ("dict_or_str", "str", False)
    assert {k: mc[k].default for k in ("model_name_or_path", "attn_implementation", "dtype", "use_peft", "lora_r",
                                        "lora_alpha", "lora_target_modules", "lora_task_type", "load_in_4bit",
                                        "load_in_8bit")} == {
        "model_name_or_path": None, "attn_implementation": None, "dtype": "float32", "use_peft": False,
        "lora_r": 16, "lora_alpha": 32, "lora_target_modules": None, "lora_task_type": "CAUSAL_LM",
        "load_in_4bit": False, "load_in_8bit": False}
    assert "torch_dtype" not in mc and "max_seq_length" not in sft and "use_liger" not in sft
    assert A.library_class_of("SFTConfig") == "trl" and A.library_class_of("TrainingArguments") == "transformers"
    assert A.library_class_of("MyArguments") is None and A.library_fields("MyArguments", NEW) is None


# ---------------------------------------------------------------------------------------------------------------
# The argparse actions HfArgumentParser builds
# ---------------------------------------------------------------------------------------------------------------

@needs_real
@pytest.mark.parametrize("module,name", REAL_CLASSES)
def test_parser_actions_equal_what_hfargumentparser_builds(real, module, name):
    transformers, _ = real
    parser = transformers.HfArgumentParser(_real_class(module, name))
    by_dest: dict[str, list] = {}
    for action in parser._actions:
        by_dest.setdefault(action.dest, []).append(action)
    fields = A.library_fields(name, NEW)
    required = [w for n, i in fields.items() if P.parser_default(i) is A.REQUIRED for w in (f"--{n}", "x")]
    ok, absent = _parse(parser, required)  # what the parser stores for every flag not given
    assert ok, absent
    for fname, info in fields.items():
        main, *negs = by_dest[fname]
        assert tuple(main.option_strings) == info.flags, fname
        assert main.nargs == info.nargs, fname
        if main.nargs == "?":
            assert main.const == info.const, fname
        assert (tuple(main.choices) if main.choices is not None else None) == info.choice_values, fname
        assert tuple(s for a in negs for s in a.option_strings) == info.negative_flags, fname
        assert main.required == (P.parser_default(info) is A.REQUIRED), fname
        if not isinstance(info.default, (A.EnvDependent, A.Unresolved)) and not main.required:
            d = getattr(absent, fname)
            d = d.value if hasattr(d, "value") and not isinstance(d, (str, int, float)) else d
            assert _same(d, P.parser_default(info)) or d == P.parser_default(info), fname


@needs_real
def test_a_field_marked_parser_error_is_one_hfargumentparser_cannot_build(real):
    transformers, trl = real
    from trl.scripts.utils import DatasetConfig

    info = A.library_fields("DatasetConfig", NEW)["data_files"]
    assert info.parser_error and info.kind == "other"  # str | list[str] | dict[str, str] | None
    with pytest.raises(TypeError):
        transformers.HfArgumentParser(DatasetConfig)
    assert not any(f.parser_error for f in A.library_fields("SFTConfig", NEW).values())


# ---------------------------------------------------------------------------------------------------------------
# convert_cli / negative_flag / resolve_option vs parse_known_args of the parser a TRL script builds
# ---------------------------------------------------------------------------------------------------------------

CLI_TABLE = [
    ("gradient_checkpointing", []), ("gradient_checkpointing", ["True"]), ("gradient_checkpointing", ["false"]),
    ("gradient_checkpointing", ["1"]), ("gradient_checkpointing", ["yes"]), ("gradient_checkpointing", ["N"]),
    ("gradient_checkpointing", ["maybe"]), ("gradient_checkpointing", ["true", "x"]),
    ("packing", []), ("packing", ["T"]), ("bf16", ["true"]), ("bf16", []), ("fp16", ["0"]),
    ("activation_checkpointing", []), ("activation_checkpointing", ["off"]), ("use_liger_kernel", ["y"]),
    ("per_device_train_batch_size", ["4"]), ("per_device_train_batch_size", ["4.0"]),
    ("per_device_train_batch_size", ["1_000"]), ("per_device_train_batch_size", []),
    ("gradient_accumulation_steps", ["-1"]), ("max_length", ["None"]), ("max_length", ["8192"]),
    ("learning_rate", ["2e-5"]), ("learning_rate", ["x"]), ("num_train_epochs", ["nan"]),
    ("optim", ["adamw_torch"]), ("optim", ["paged_adamw_8bit"]), ("optim", ["adam"]),
    ("lr_scheduler_type", ["cosine"]), ("eval_strategy", ["steps"]), ("eval_strategy", ["step"]),
    ("log_level", ["info"]), ("log_level", ["verbose"]),
    ("lora_target_modules", ["q_proj", "v_proj"]), ("lora_target_modules", ["all-linear"]),
    ("lora_target_modules", []), ("lora_r", ["8"]), ("lora_task_type", ["SEQ_CLS"]),
    ("attn_implementation", ["flash_attention_2"]), ("dtype", ["bfloat16"]), ("use_peft", []),
    ("load_in_4bit", ["True"]), ("model_name_or_path", ["Qwen/Qwen3-0.6B"]),
    ("fsdp", []), ("fsdp", ["full_shard auto_wrap"]), ("deepspeed", ["ds_z3.json"]),
    ("report_to", ["none"]), ("report_to", ["wandb", "tensorboard"]),
    ("dataset_name", ["trl-lib/Capybara"]), ("liger_kernel_config", [""]), ("liger_kernel_config", ['{"a": 1}']),
]


@pytest.fixture(scope="module")
def trl_script_parser(real):
    transformers, trl = real
    return transformers.HfArgumentParser((trl.ScriptArguments, trl.SFTConfig, trl.ModelConfig))


def _fields_of_script() -> dict[str, A.FieldInfo]:
    out: dict[str, A.FieldInfo] = {}
    for cls in ("ScriptArguments", "SFTConfig", "ModelConfig"):
        out.update(A.library_fields(cls, NEW))
    return out


@needs_real
@pytest.mark.parametrize("name,raw", CLI_TABLE)
def test_convert_cli_agrees_with_the_real_parser(trl_script_parser, name, raw):
    info = _fields_of_script()[name]
    ok, ns = _parse(trl_script_parser, [f"--{name}", *raw])
    mine_ok, mine = P.convert_cli(info, raw)
    assert mine_ok == ok, (ns if not ok else getattr(ns, name), mine)
    if ok:
        assert _same(getattr(ns, name), mine), (getattr(ns, name), mine)


@needs_real
@pytest.mark.parametrize("raw,expected", [
    ('{"use_reentrant": false}', {"use_reentrant": False}),
    ('{"use_reentrant": "false", "every": "2", "r": "0.5"}', {"use_reentrant": False, "every": 2, "r": 0.5}),
    ("kwargs.json", "kwargs.json"),
])
def test_json_dict_strings_are_loaded_by_post_init(real, raw, expected):
    _, trl = real
    info = A.library_fields("SFTConfig", NEW)["gradient_checkpointing_kwargs"]
    assert info.kind == "dict_or_str" and info.json_dict
    ok, value = P.convert_cli(info, [raw])
    cfg = trl.SFTConfig(output_dir="/tmp/o", use_cpu=True, gradient_checkpointing_kwargs=raw)
    assert ok and value == expected == cfg.gradient_checkpointing_kwargs


@needs_real
def test_invalid_json_fails_in_post_init_and_dict_field_membership_matches(real):
    transformers, trl = real
    info = A.library_fields("SFTConfig", NEW)["model_init_kwargs"]
    ok, why = P.convert_cli(info, ["{dtype: bfloat16}"])
    assert not ok and "json.loads" in why
    with pytest.raises(json.JSONDecodeError):
        trl.SFTConfig(output_dir="/tmp/o", use_cpu=True, model_init_kwargs="{dtype: bfloat16}")
    for name, cls in (("SFTConfig", trl.SFTConfig), ("DPOConfig", trl.DPOConfig), ("GRPOConfig", trl.GRPOConfig),
                      ("TrainingArguments", transformers.TrainingArguments)):
        flagged = {n for n, f in A.library_fields(name, NEW).items() if f.json_dict}
        assert flagged == set(cls._VALID_DICT_FIELDS), name


@needs_real
@pytest.mark.parametrize("flag,field", [
    ("--no_gradient_checkpointing", "gradient_checkpointing"), ("--no-gradient-checkpointing", "gradient_checkpointing"),
    ("--no_remove_unused_columns", "remove_unused_columns"), ("--no_bf16", None), ("--no_packing", None),
    ("--no-gradient_checkpointing", None), ("--no_dataloader_pin_memory", "dataloader_pin_memory"),
])
def test_negative_flags_agree_with_the_real_parser(trl_script_parser, flag, field):
    fields = _fields_of_script()
    assert P.negative_flag(fields, flag) == field
    ok, ns = _parse(trl_script_parser, [flag])
    if field is None:
        # no such complement: argparse either fails or takes it as a prefix of another option
        assert not ok or flag not in trl_script_parser._option_string_actions
    else:
        assert ok and getattr(ns, field) is False


@needs_real
def test_plain_training_arguments_5_24_has_no_no_gradient_checkpointing(real):
    transformers, _ = real
    fields = A.library_fields("TrainingArguments", NEW)
    assert P.negative_flag(fields, "--no_gradient_checkpointing") is None  # default None there, not True
    ok, _ = _parse(transformers.HfArgumentParser(transformers.TrainingArguments), ["--no_gradient_checkpointing"])
    assert not ok


@needs_real
@pytest.mark.parametrize("word", [
    "--per_device_train 4", "--grad 2", "--gradient_checkpointing=false", "--per-device-train-batch-size 2",
    "--no_grad", "--lora_tar q_proj", "--packing=yes", "--bogus_flag 1", "--h",
])
def test_resolve_option_follows_argparse_abbreviations(trl_script_parser, word):
    fields = _fields_of_script()
    words = word.split()
    match = P.resolve_option([fields], words[0])
    ok, ns = _parse(trl_script_parser, words)
    if match.error:
        assert not ok and "ambiguous option" in ns and "ambiguous option" in match.error
    elif match.field is None:
        assert not ok
    else:
        assert ok
        info = fields[match.field]
        raw = ([match.explicit] if match.explicit is not None else []) + words[1:]
        value = False if match.negated else P.convert_cli(info, raw)[1]
        assert _same(getattr(ns, match.field), value)


def test_flag_aliases_by_version():
    assert A.flag_aliases("gradient_checkpointing", NEW) == ("--gradient_checkpointing", "--gradient-checkpointing")
    assert A.flag_aliases("bf16", NEW) == ("--bf16",)
    # transformers 4.45.2 hf_argparser.py:141 `field_name = f"--{field.name}"` only; 4.46.0 :145-147 adds the dash
    assert A.flag_aliases("gradient_checkpointing", V("4.45.2", "0.12.0")) == ("--gradient_checkpointing",)
    assert A.flag_aliases("gradient_checkpointing", V("4.46.0", "0.12.0"))[1] == "--gradient-checkpointing"
    old = A.library_fields("SFTConfig", V("4.45.2", "0.22.0"))
    assert old["gradient_checkpointing"].negative_flags == ("--no_gradient_checkpointing",)
    new = A.library_fields("SFTConfig", V("4.46.0", "0.22.0"))
    assert new["gradient_checkpointing"].negative_flags == ("--no_gradient_checkpointing",
                                                           "--no-gradient-checkpointing")


# ---------------------------------------------------------------------------------------------------------------
# Config files
# ---------------------------------------------------------------------------------------------------------------

@needs_real
def test_trl_config_yaml_values_are_defaults_converted_when_strings(real, tmp_path: Path):
    _, trl = real
    cfg = tmp_path / "sft.yaml"
    cfg.write_text("env:\n  TRAINLINT_TEST_ENV: 7\nper_device_train_batch_size: 2\nlearning_rate: 2e-5\n"
                   "gradient_checkpointing: 'false'\nlr_scheduler_type: cosine\nlora_r: '8'\n"
                   "max_length: 4096\noutput_dir: /tmp/o\nuse_cpu: true\n")
    parser = trl.TrlParser((trl.ScriptArguments, trl.SFTConfig, trl.ModelConfig))
    script, sft, model = parser.parse_args_and_config(["--config", str(cfg), "--max_length", "2048"])
    assert os.environ.pop("TRAINLINT_TEST_ENV") == "7"
    fields = _fields_of_script()
    import yaml

    data = yaml.safe_load(cfg.read_text())
    assert data["learning_rate"] == "2e-5"  # PyYAML: no dot, so a string
    for key, obj in (("per_device_train_batch_size", sft), ("learning_rate", sft), ("gradient_checkpointing", sft),
                     ("lora_r", model)):
        ok, value = P.convert_config_value(fields[key], data[key], via="trl_config")
        assert ok and _same(getattr(obj, key), value), key
    assert sft.max_length == 2048  # the command line overrides the config file
    ok, value = P.convert_config_value(fields["lr_scheduler_type"], "cosine", via="trl_config")
    assert ok and value == "cosine" and sft.lr_scheduler_type.value == "cosine"  # __post_init__ makes the enum


@needs_real
def test_trl_config_unknown_key_raises_in_1_16(real, tmp_path: Path):
    _, trl = real
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("output_dir: /tmp/o\nuse_cpu: true\nmax_seq_length: 4096\n")
    parser = trl.TrlParser((trl.ScriptArguments, trl.SFTConfig))
    with pytest.raises(ValueError, match="Unknown arguments from config file"):
        parser.parse_args_and_config(["--config", str(cfg)])
    *_, rest = parser.parse_args_and_config(["--config", str(cfg)], return_remaining_strings=True)
    assert rest == ["--max_seq_length", "4096"]
    assert P.trl_config_unknown_keys(NEW) == "error"
    assert P.trl_config_unknown_keys(NEW, return_remaining_strings=True) == "returned"
    assert P.trl_config_unknown_keys(V("4.51.3", "0.18.2")) == "dropped"  # 0.18.2 scripts/utils.py: no raise
    assert P.trl_config_unknown_keys(V("4.46.3", "0.12.2")) == "error"  # 0.12: "not used by the TrlParser"


@needs_real
def test_parse_dict_does_no_string_conversion_and_rejects_unknown_keys(real):
    transformers, trl = real
    parser = transformers.HfArgumentParser(trl.ModelConfig)
    (model,) = parser.parse_dict({"lora_r": "8", "use_peft": "yes"})
    fields = A.library_fields("ModelConfig", NEW)
    assert P.convert_config_value(fields["lora_r"], "8") == (True, "8") and model.lora_r == "8"
    assert P.convert_config_value(fields["use_peft"], "yes") == (True, "yes") and model.use_peft == "yes"
    with pytest.raises(ValueError, match="Some keys are not used"):
        parser.parse_dict({"lora_rank": 8})
    (model,) = parser.parse_dict({"lora_rank": 8}, allow_extra_keys=True)
    assert model.lora_r == 16


@needs_real
def test_unknown_cli_words_raise_unless_returned(real):
    transformers, trl = real
    parser = transformers.HfArgumentParser(trl.ModelConfig)
    with pytest.raises(ValueError, match="not used by the HfArgumentParser"):
        parser.parse_args_into_dataclasses(["--lora_rank", "8"], look_for_args_file=False)
    *_, rest = parser.parse_args_into_dataclasses(["--lora_rank", "8"], return_remaining_strings=True,
                                                  look_for_args_file=False)
    assert rest == ["--lora_rank", "8"]


# ---------------------------------------------------------------------------------------------------------------
# __post_init__ effects
# ---------------------------------------------------------------------------------------------------------------

@needs_real
@pytest.mark.parametrize("given", [{}, {"bf16": False}, {"gradient_checkpointing": False},
                                   {"activation_checkpointing": False}, {"gradient_checkpointing_kwargs": {"a": 1}}])
def test_effective_values_match_the_constructed_config(real, given):
    _, trl = real
    cfg = trl.SFTConfig(output_dir="/tmp/o", use_cpu=True, **given)
    eff = PI.effective_values("SFTConfig", NEW, given)
    for key in ("bf16", "gradient_checkpointing", "activation_checkpointing", "gradient_checkpointing_kwargs",
                "activation_checkpointing_kwargs", "max_length", "torch_compile"):
        assert eff[key] == getattr(cfg, key), key
    ta = PI.effective_values("TrainingArguments", NEW)
    assert (ta["gradient_checkpointing"], ta["activation_checkpointing"]) == (False, False)
    assert PI.effective_values("SFTConfig", NEW, {"fp16": True})["bf16"] is False  # (fp16 needs a GPU to build)


def test_post_init_rules_are_cited():
    steps = PI.post_init_rules("SFTConfig", NEW)
    assert steps[0] == PI.PostInitStep("bf16", "set", "not fp16 if bf16 is None else bf16", None,
                                      "trl 1.16.0 trl/trainer/base_config.py:108")
    assert any(s.field == "gradient_checkpointing" and s.source.startswith(f"transformers {TF}") for s in steps)


# ---------------------------------------------------------------------------------------------------------------
# Older releases: values read by hand in the wheels (file:line named), plus the generator cache when present
# ---------------------------------------------------------------------------------------------------------------

def _d(cls: str, field: str, tf: str, trl: str):
    fields = A.library_fields(cls, V(tf, trl))
    return None if fields is None or field not in fields else fields[field]


def test_sft_gradient_checkpointing_default_by_trl_version():
    # trl 0.21.0 SFTConfig does not declare it: transformers' False. 0.22.0 sft_config.py:111 `bool = True`;
    # 0.29.0 moved it to trainer/base_config.py BaseConfig (:61), 1.0.0 renamed the class _BaseConfig.
    assert _d("SFTConfig", "gradient_checkpointing", "4.55.4", "0.21.0").default is False
    assert _d("SFTConfig", "gradient_checkpointing", "4.55.4", "0.21.0").source.startswith("transformers 4.55.4")
    assert _d("SFTConfig", "gradient_checkpointing", "4.56.2", "0.22.0").source == \
        "trl 0.22.0 trl/trainer/sft_config.py:111"
    assert _d("SFTConfig", "gradient_checkpointing", "4.57.6", "0.29.0").source == \
        "trl 0.29.0 trl/trainer/base_config.py:61"
    assert _d("SFTConfig", "gradient_checkpointing", "4.57.6", "0.29.0").default is True
    # 0.12.x: plain TrainingArguments False
    assert _d("SFTConfig", "gradient_checkpointing", "4.46.3", "0.12.2").default is False


def test_sft_max_seq_length_became_max_length():
    # 0.12.0 sft_config.py:64 `max_seq_length: Optional[int] = None`; 0.15.0 :98 default 1024;
    # 0.16.0 :95 `max_length` 1024 and :149 `max_seq_length` None (deprecated, copied at :188); gone in 0.20.0.
    assert _d("SFTConfig", "max_seq_length", "4.46.3", "0.12.2").default is None
    assert _d("SFTConfig", "max_length", "4.46.3", "0.12.2") is None
    assert _d("SFTConfig", "max_seq_length", "4.48.3", "0.15.2").default == 1024
    assert _d("SFTConfig", "max_length", "4.50.3", "0.16.0").default == 1024
    assert _d("SFTConfig", "max_seq_length", "4.50.3", "0.16.0").default is None
    assert PI.effective_values("SFTConfig", V("4.51.3", "0.19.1"), {"max_seq_length": 4096})["max_length"] == 4096
    assert _d("SFTConfig", "max_seq_length", "4.55.4", "0.20.0") is None
    assert _d("SFTConfig", "max_length", "4.55.4", "0.20.0").default == 1024


def test_trl_bf16_defaults_true_unless_fp16_since_0_19():
    # 0.19.0 sft_config.py:111 `bf16: Optional[bool] = None`, :252 `self.bf16 = not (self.fp16) if ...`
    assert PI.effective_values("SFTConfig", V("4.51.3", "0.18.2"))["bf16"] is False
    assert _d("SFTConfig", "bf16", "4.51.3", "0.19.0").default is None
    assert PI.effective_values("SFTConfig", V("4.51.3", "0.19.0"))["bf16"] is True
    assert PI.effective_values("DPOConfig", V("4.51.3", "0.19.0"), {"fp16": True})["bf16"] is False


def test_model_config_torch_dtype_became_dtype():
    # 0.12.0 model_config.py:77 Literal['auto','bfloat16','float16','float32']; 0.14.0 :83 Optional[str];
    # 0.23.0 :93 `dtype` None, torch_dtype deprecated and copied (:193-198); 0.27.0 :91 dtype "float32", no torch_dtype.
    assert _d("ModelConfig", "torch_dtype", "4.46.3", "0.12.2").kind == "enum"
    assert _d("ModelConfig", "torch_dtype", "4.46.3", "0.12.2").choices == ("auto", "bfloat16", "float16", "float32")
    assert _d("ModelConfig", "dtype", "4.55.4", "0.22.2") is None
    assert _d("ModelConfig", "dtype", "4.56.2", "0.23.0").default is None
    assert PI.effective_values("ModelConfig", V("4.56.2", "0.23.0"), {"torch_dtype": "bfloat16"})["dtype"] == "bfloat16"
    assert _d("ModelConfig", "dtype", "4.57.6", "0.27.0").default == "float32"
    assert _d("ModelConfig", "torch_dtype", "4.57.6", "0.27.0") is None


def test_old_trl_layouts_0_7_to_0_11():
    # trl 0.7.11 is the first release with trl/trainer/model_config.py (0.7.10 has none); 0.8.6 model_config.py:21
    # `torch_dtype: Optional[str] = field(default=None, metadata={..., "choices": ["auto", "bfloat16", ...]})`
    assert _d("ModelConfig", "torch_dtype", "4.36.2", "0.7.10") is None
    dtype = _d("ModelConfig", "torch_dtype", "4.38.2", "0.8.6")
    assert (dtype.default, dtype.kind, dtype.source) == (None, "str", "trl 0.8.6 trl/trainer/model_config.py:21")
    assert dtype.choices == ("auto", "bfloat16", "float16", "float32")
    assert P.convert_cli(dtype, ["bfloat16"]) == (True, "bfloat16") and P.convert_cli(dtype, ["bf16"])[0] is False
    # 0.7.2-0.7.9: RewardConfig in trl/trainer/training_configs.py (:23, max_length :38); reward_config.py from 0.7.10
    assert _d("RewardConfig", "max_length", "4.36.2", "0.7.1") is None
    assert _d("RewardConfig", "max_length", "4.36.2", "0.7.2").source == "trl 0.7.2 trl/trainer/training_configs.py:38"
    assert _d("RewardConfig", "max_length", "4.36.2", "0.7.10").source.startswith("trl 0.7.10 trl/trainer/reward_config.py:")
    # ... and declares `gradient_checkpointing: Optional[bool] = True` there (0.7.2 :40, 0.7.10 reward_config.py:39);
    # 0.7.11 drops it (TrainingArguments' False)
    assert _d("RewardConfig", "gradient_checkpointing", "4.36.2", "0.7.2").default is True
    assert _d("RewardConfig", "gradient_checkpointing", "4.36.2", "0.7.10").source == \
        "trl 0.7.10 trl/trainer/reward_config.py:39"
    assert _d("RewardConfig", "gradient_checkpointing", "4.36.2", "0.7.11").default is False
    # ModelConfig.lora_target_modules: ["all-linear"] -> "all-linear" from 0.8.2 (model_config.py:89), any
    # one-element list from 0.9.6 (:89); 0.8.1 keeps the list
    for trl, want in (("0.8.1", ["all-linear"]), ("0.8.2", "all-linear"), ("0.9.6", "all-linear")):
        assert PI.effective_values("ModelConfig", V("4.40.2", trl),
                                  {"lora_target_modules": ["all-linear"]})["lora_target_modules"] == want
    assert PI.effective_values("ModelConfig", V("4.40.2", "0.9.4"), {"lora_target_modules": ["q_proj"]})[
        "lora_target_modules"] == ["q_proj"]
    # DPOConfig / SFTConfig arrive in 0.9.2 (0.9.2 dpo_config.py:21, max_length :86); 0.8.6 has neither
    assert _d("DPOConfig", "max_length", "4.38.2", "0.8.6") is None
    assert _d("DPOConfig", "max_length", "4.40.2", "0.9.2").source == "trl 0.9.2 trl/trainer/dpo_config.py:86"
    assert _d("DPOConfig", "gradient_checkpointing", "4.40.2", "0.9.2").default is False  # TrainingArguments'
    # 0.10.1 dpo_config.py:108 `label_smoothing: float = 0` (an int), 0.11.0 :134 `= 0.0`: stored as a change
    assert _same(_d("DPOConfig", "label_smoothing", "4.44.2", "0.10.1").default, 0)
    assert _same(_d("DPOConfig", "label_smoothing", "4.44.2", "0.11.0").default, 0.0)
    # the script-argument dataclasses: trl/commands/cli_utils.py from 0.8.0 (DpoScriptArguments, then
    # DPOScriptArguments from 0.9.2); 0.7.x has no cli_utils.py
    assert A.library_fields("DpoScriptArguments", V("4.38.2", "0.8.6")) is not None
    assert A.library_fields("DpoScriptArguments", V("4.38.2", "0.7.11")) is None
    assert A.library_fields("DPOScriptArguments", V("4.40.2", "0.9.2")) is not None


def test_two_dataclass_bases_take_the_reversed_mro_order():
    # trl 0.9.6 ppov2_config.py:15 `class PPOv2Config(OnpolicyRuntimeConfig, TrainingArguments)`: dataclasses collect
    # fields along the reversed MRO, so TrainingArguments' come first, then OnpolicyRuntimeConfig's (utils.py:967
    # world_size, ...), then its own (:17 exp_name); checked against the real class with --verify-imported
    # (transformers 4.44.2, trl 0.9.6)
    v = V("4.44.2", "0.9.6")
    ta = list(A.library_fields("TrainingArguments", v))
    runtime = list(A.library_fields("OnpolicyRuntimeConfig", v))
    fields = list(A.library_fields("PPOv2Config", v))
    assert fields[:len(ta)] == ta and fields[len(ta):len(ta) + len(runtime)] == runtime
    assert fields[len(ta) + len(runtime)] == "exp_name"
    assert A.library_fields("RLOOConfig", v)["world_size"].source == "trl 0.9.6 trl/trainer/utils.py:967"


def test_training_arguments_changes_across_transformers():
    # 4.36.0 training_args.py:1181 gradient_checkpointing_kwargs `Optional[dict]` (CLI: type=dict -> error);
    # 4.40.0 :1286 `Optional[Union[dict, str]]` and the module-level _VALID_DICT_FIELDS (:180)
    gk = _d("TrainingArguments", "gradient_checkpointing_kwargs", "4.36.2", "0.12.0")
    assert gk.kind == "dict" and not gk.json_dict and P.convert_cli(gk, ['{"use_reentrant": false}'])[0] is False
    gk = _d("TrainingArguments", "gradient_checkpointing_kwargs", "4.40.0", "0.12.0")
    assert gk.kind == "dict_or_str" and gk.json_dict
    assert P.convert_cli(gk, ['{"use_reentrant": false}']) == (True, {"use_reentrant": False})
    # use_liger_kernel: absent in 4.44.2, Optional[bool] False in 4.45.0 (:1507), bool False in 4.57.1 (:1560)
    assert _d("TrainingArguments", "use_liger_kernel", "4.44.2", "0.12.0") is None
    assert _d("TrainingArguments", "use_liger_kernel", "4.45.0", "0.12.0").kind == "optional_bool"
    assert _d("TrainingArguments", "use_liger_kernel", "4.57.1", "0.12.0").kind == "bool"
    # activation_checkpointing arrives in 5.23.0 (:908), gradient_checkpointing becomes `bool | None = None` (:926)
    assert _d("TrainingArguments", "activation_checkpointing", "5.22.2", "1.16.0") is None
    assert _d("TrainingArguments", "gradient_checkpointing", "5.22.2", "1.16.0").default is False
    assert _d("TrainingArguments", "gradient_checkpointing", "5.23.0", "1.16.0").default is None
    assert PI.effective_values("TrainingArguments", V("5.23.0", "1.16.0"))["gradient_checkpointing"] is False
    # optim: "adamw_torch" literal in 4.53.3; chosen by torch >= 2.8 from 4.54.0 (:1292)
    assert _d("TrainingArguments", "optim", "4.53.3", "0.19.1").default == "adamw_torch"
    assert isinstance(_d("TrainingArguments", "optim", "4.54.0", "0.19.1").default, A.EnvDependent)
    # evaluation_strategy -> eval_strategy in 4.41.0; evaluation_strategy gone in 4.51.0
    assert _d("TrainingArguments", "eval_strategy", "4.40.2", "0.12.0") is None
    assert _d("TrainingArguments", "evaluation_strategy", "4.51.0", "0.12.0") is None
    # per_device_train_batch_size 8, gradient_accumulation_steps 1 in every version read
    for tf in A.read_versions("transformers"):
        fields = A.library_fields("TrainingArguments", V(tf, "1.16.0"))
        assert (fields["per_device_train_batch_size"].default, fields["gradient_accumulation_steps"].default,
                fields["bf16"].default, fields["fp16"].default) == (8, 1, False, False), tf


def test_a_patch_release_fix_is_captured():
    # transformers 4.57.0-4.57.4 training_args.py:931 `lr_scheduler_kwargs: Union[dict[str, Any], str]` ->
    # HfArgumentParser type=dict (a JSON string fails); 4.57.5 :931 `Optional[Union[dict, str]]` again (trl 1.16.0
    # trl/trainer/base_config.py:76-78 works around exactly this: "fixed in ... 4.57.5").
    broken = _d("TrainingArguments", "lr_scheduler_kwargs", "4.57.4", "0.22.0")
    assert broken.kind == "dict" and P.convert_cli(broken, ['{"num_cycles": 2}'])[0] is False
    fixed = _d("TrainingArguments", "lr_scheduler_kwargs", "4.57.5", "0.22.0")
    assert fixed.kind == "dict_or_str" and P.convert_cli(fixed, ['{"num_cycles": 2}']) == (True, {"num_cycles": 2})
    # TRL's own override (trl 1.16.0 base_config.py:79) makes SFTConfig parse it under 4.57.4 too
    assert _d("SFTConfig", "lr_scheduler_kwargs", "4.57.4", "1.16.0").kind == "dict_or_str"


def test_versions_are_answered_by_the_nearest_read_at_or_below():
    assert A.snapshot_version("transformers", "4.57.3") == "4.57.3"  # every release from 4.36.0 on was read
    assert A.snapshot_version("transformers", "4.57.9") == "4.57.6"
    assert A.snapshot_version("trl", "0.10.1") == "0.10.1"  # every release from 0.7.0 on was read
    assert A.snapshot_version("trl", "0.9.5") == "0.9.4"  # (0.9.0, 0.9.1, 0.9.5, 0.10.0 are not on PyPI)
    assert A.snapshot_version("trl", "0.6.0") is None
    from trainlint.knowledge.versions import NEWEST_KNOWN

    # a release newer than those read is answered by the newest read, which is what versions.py calls newest known
    assert A.snapshot_version("transformers", "5.99.0") == A.read_versions("transformers")[-1] == NEWEST_KNOWN["transformers"]
    assert A.read_versions("trl")[-1] == NEWEST_KNOWN["trl"]
    assert A.snapshot_version("transformers", "4.30.0") is None
    assert A.library_fields("SFTConfig", V("4.30.0", "0.12.0")) is None  # its TrainingArguments is unknown
    assert A.library_fields("SFTConfig", V("5.24.0", "0.8.6")) is None  # SFTConfig is new in trl 0.9.2
    assert A.library_fields("SFTConfig", V("5.24.0", "0.6.0")) is None
    required = {"transformers": ["4.36.2", "4.46.3", "4.51.3", "4.57.6", "5.0.0", "5.24.0"],
                "trl": ["0.7.0", "0.7.11", "0.8.6", "0.9.2", "0.11.4", "0.12.2", "0.19.1", "0.22.2", "0.29.1", "1.0.0", "1.14.2", "1.16.0"]}
    for lib, versions in required.items():
        assert set(versions) <= set(A.read_versions(lib))


def _cited_source(lib: str, version: str, path: str) -> Path:
    """The cited file: in the installed pinned release, else in the generator's source cache."""
    if version == PINNED.get(lib) and pinned_installed(lib):
        module = importlib.import_module(lib)
        return Path(module.__file__).parents[1] / path
    return Path(os.environ.get("TRAINLINT_ARGSRC", "/tmp/trainlint-argsrc")) / f"{lib}-{version}" / path


def test_cited_lines_in_the_sources():
    """Cited lines of older releases are re-read where the generator's cache is; those of the pinned releases always
    (they are installed by the test command), so the test checks something on a fresh machine."""
    checked = 0
    for cls, tf, trl, field in [("TrainingArguments", TF, TRL, "activation_checkpointing"), ("SFTConfig", TF, TRL, "max_length"),
                                ("SFTConfig", TF, TRL, "gradient_checkpointing"), ("SFTConfig", "4.56.2", "0.22.0", "gradient_checkpointing"),
                                ("SFTConfig", "4.46.3", "0.12.2", "max_seq_length"),
                                ("ModelConfig", "4.57.6", "0.27.0", "dtype"),
                                ("ModelConfig", "4.38.2", "0.8.6", "torch_dtype"),
                                ("RewardConfig", "4.36.2", "0.7.2", "gradient_checkpointing"),
                                ("TrainingArguments", "4.36.2", "0.12.0", "gradient_checkpointing_kwargs"),
                                ("TrainingArguments", "5.23.0", "1.16.0", "activation_checkpointing")]:
        info = _d(cls, field, tf, trl)
        lib, version, where = info.source.split(" ")
        path, line = where.rsplit(":", 1)
        src = _cited_source(lib, version, path)
        if not src.exists():
            continue
        assert src.read_text(encoding="utf-8").splitlines()[int(line) - 1].lstrip().startswith(f"{field}:")
        checked += 1
    if not checked:
        pytest.skip("neither the pinned transformers / trl nor the generator's source cache is here")


# ---------------------------------------------------------------------------------------------------------------
# The generator and the lint path
# ---------------------------------------------------------------------------------------------------------------

def _generator():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("gen_argument_fields")
    finally:
        sys.path.pop(0)


@needs_real
def test_checked_in_json_equals_the_generator_on_the_installed_sources(real):
    transformers, trl = real
    gen = _generator()
    site = {"transformers": Path(transformers.__file__).parents[1], "trl": Path(trl.__file__).parents[1]}
    fresh = gen.build(download=False, only={"transformers": [TF], "trl": [TRL]},
                      roots_override={("transformers", TF): site["transformers"], ("trl", TRL): site["trl"]})
    for lib, version in (("transformers", TF), ("trl", TRL)):
        assert fresh["libraries"][lib]["data"][version] == A._snapshot(lib, version), lib
    again = gen.build(download=False, only={"transformers": [TF], "trl": [TRL]},
                      roots_override={("transformers", TF): site["transformers"], ("trl", TRL): site["trl"]})
    assert gen.dumps(again) == gen.dumps(fresh)  # deterministic


def test_generator_and_lint_path_rebuild_every_version_alike():
    gen = _generator()
    data = json.loads((ROOT / "src/trainlint/knowledge/arguments.json").read_text(encoding="utf-8"))
    for lib, entry in data["libraries"].items():
        snap = None
        for v in entry["stored"]:
            snap = entry["data"][v] if snap is None else gen.apply_diff(snap, entry["data"][v])
            assert snap == A._snapshot(lib, v), (lib, v)


def test_lint_path_module_imports_no_training_library():
    probe = ("import sys\nfrom trainlint.knowledge import arg_parsers, arguments as A, post_init\n"
             "from trainlint.knowledge.versions import "
             "Versions, LibraryVersion as L\nv = Versions(L('transformers','5.24.0',''), L('trl','1.16.0',''), "
             "L('peft','0.21.2',''))\nassert A.library_fields('SFTConfig', v)\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch','transformers','trl','yaml')))")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert r.stdout.strip() == "[]", r.stdout + r.stderr
