"""TL501: frozen weights (LoRA base, reference model, teacher) loaded in fp32 while the run computes in 16 bit;
the default load dtype by transformers version (4.x fp32, 5.x "auto")."""

import pytest

from conftest import codes

LORA = '''
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")
model = get_peft_model(model, LoraConfig(r=16, target_modules="all-linear"))
args = TrainingArguments(output_dir="out", bf16=True)
trainer = Trainer(model=model, args=args)
'''
V4 = {"versions": {"transformers": "4.57.6"}}
V5 = {"versions": {"transformers": "5.0.0"}}


def tl501(found):
    return [(line, m) for c, line, m in found if c == "TL501"]


def test_lora_base_without_dtype_on_transformers_4_is_flagged_with_the_saving(lint):
    [(line, message)] = tl501(lint(LORA, settings=V4))
    assert line == 6
    # Llama-3.1-8B: 8,030,261,248 parameters (knowledge/models.json) x 4 = 29.9 GiB; x 2 = 15.0 GiB
    assert message == ("LoRA's frozen base model is loaded in fp32 (no dtype given, and transformers 4.57.6 loads in "
                       "fp32 by default) while the run computes in bf16; it does not train, so its 8.03 B parameters "
                       "take ~29.9 GiB in fp32 where bfloat16 takes ~15.0 GiB: ~15.0 GiB saved; load it with "
                       "dtype=torch.bfloat16")  # from_pretrained takes `dtype` from 4.56 (test_fix_versions.py)


def test_transformers_5_loads_auto_so_a_bf16_checkpoint_is_not_fp32(lint):
    assert tl501(lint(LORA, settings=V5)) == []


def test_explicit_float32_fires_on_every_version_and_the_fix_says_dtype_on_5(tmp_path, lint):
    src = LORA.replace('"meta-llama/Llama-3.1-8B")', '"meta-llama/Llama-3.1-8B", dtype=torch.float32)')
    [(_, message)] = tl501(lint(src, settings=V5))
    assert "(dtype=float32 is explicit)" in message and message.endswith("load it with dtype=torch.bfloat16")
    from trainlint.config import from_table
    from trainlint.lint import enabled_codes, lint_file

    script = tmp_path / "train.py"
    script.write_text(src)
    settings = from_table(V5, tmp_path, "test")
    [diag] = [d for d in lint_file(script, settings, enabled_codes(settings)).diagnostics if d.code == "TL501"]
    assert diag.fix.applicability == "unsafe"
    assert [e.content for e in diag.fix.edits] == ["dtype=torch.bfloat16"]


def test_fp16_runs_are_told_float16(lint):
    [(_, message)] = tl501(lint(LORA.replace("bf16=True", "fp16=True"), settings=V4))
    assert "computes in fp16" in message and message.endswith(" dtype=torch.float16")


def test_fp32_checkpoint_loaded_auto_on_5(lint):
    config = ('{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 2048,'
              ' "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 16, "intermediate_size": '
              '5632, "torch_dtype": "%s"}')
    src = LORA.replace("meta-llama/Llama-3.1-8B", "./ckpt")
    found = tl501(lint(src, files={"ckpt/config.json": config % "float32"}, settings=V5))
    assert len(found) == 1
    assert 'no dtype given: transformers 5.0.0 loads "auto" and the checkpoint\'s config.json says float32' in found[0][1]
    assert tl501(lint(src, files={"ckpt/config.json": config % "bfloat16"}, settings=V5)) == []


@pytest.mark.parametrize("change", [
    ("bf16=True", "learning_rate=1e-4"),  # computes in fp32
    ("model = get_peft_model(model, LoraConfig(r=16, target_modules=\"all-linear\"))\n", ""),  # full fine-tuning
    ('"meta-llama/Llama-3.1-8B")', '"meta-llama/Llama-3.1-8B", quantization_config=BitsAndBytesConfig('
                                   'load_in_4bit=True))'),  # QLoRA
    ('"meta-llama/Llama-3.1-8B")', '"meta-llama/Llama-3.1-8B", torch_dtype=torch.bfloat16)'),
    ("model = get_peft_model", "model = model.to(torch.bfloat16)\nmodel = get_peft_model"),
    ('bf16=True', 'bf16=use_bf16'),  # not readable
])
def test_quiet_cases(lint, change):
    assert tl501(lint(LORA.replace(*change), settings=V4)) == []


def test_dpo_reference_model_and_distillation_teacher(lint):
    dpo = '''
import torch
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.bfloat16)
ref = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.float32)
args = DPOConfig(output_dir="out")
trainer = DPOTrainer(model=model, ref_model=ref, args=args)
'''
    found = tl501(lint(dpo))
    assert [line for line, _ in found] == [7]
    # DPOConfig leaves bf16 None -> `bf16 = not fp16` (trl base_config.py); 494,032,768 x 2 bytes (942 MiB) saved
    assert found[0][1].startswith("the reference model is loaded in fp32 (dtype=float32 is explicit) while the run "
                                  "computes in bf16")
    assert "~942 MiB saved" in found[0][1]
    # TRL 0.12's configs default to bf16=False: the run is fp32 there
    assert tl501(lint(dpo, settings={"versions": {"trl": "0.12.0"}})) == []
    teacher = dpo.replace("DPOConfig", "GKDConfig").replace("DPOTrainer", "GKDTrainer").replace("ref_model=ref",
                                                                                                "teacher_model=ref")
    assert [line for line, _ in tl501(lint(teacher))] == [7]


def test_a_launch_decides_the_precision_and_the_pin_decides_the_load_dtype(tmp_path):
    """FastChat-style layout: the script loads Llama-2-7b without a dtype, its repository pins transformers 4.46.3,
    the launcher passes --bf16 True: reported in the script, naming the launch."""
    import json

    from test_launch import layout, run

    repo = layout("fastchat_lora", tmp_path)
    data = json.loads(run("check", "--output-format", "json", "--select", "TL501", ".", cwd=repo).stdout)
    assert [(d["filename"], d["location"]["row"]) for d in data] == [("chatlora/train/train_lora.py", 38)]
    assert "transformers 4.46.3 loads in fp32 by default" in data[0]["message"]
    assert "~12.6 GiB saved" in data[0]["message"] and "launched by scripts/train_lora.sh" in data[0]["message"]


# Two loads of one variable in the branches of a test nothing decides (the model name is not known): the fp32 one
# may not be the one that runs, so TL501 says nothing; a launch that names the model decides the branch.
BRANCHES = '''
from dataclasses import dataclass, field

import torch
import transformers
from peft import LoraConfig, get_peft_model


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default=None)


parser = transformers.HfArgumentParser((ModelArguments, transformers.TrainingArguments))
model_args, training_args = parser.parse_args_into_dataclasses()
if "mpt" in model_args.model_name_or_path:
    model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
else:
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_args.model_name_or_path, torch_dtype=(torch.bfloat16 if training_args.bf16 else None))
model = get_peft_model(model, LoraConfig(r=16, target_modules="all-linear"))
trainer = transformers.Trainer(model=model, args=training_args)
'''


def test_a_load_in_a_branch_nothing_decides_is_not_judged_alone(tmp_path):
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(BRANCHES)
    (tmp_path / "requirements.txt").write_text("transformers==4.46.3\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)

    def check(*words):
        r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL501", "train.py",
                            "--", *words], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return r.stdout

    assert "TL501" not in check("--bf16", "True", "--output_dir", "o", "--model_name_or_path", "$MODEL")
    assert "TL501" not in check("--bf16", "True", "--output_dir", "o", "--model_name_or_path", "meta-llama/Llama-3.1-8B")
    fired = check("--bf16", "True", "--output_dir", "o", "--model_name_or_path", "mosaicml/mpt-7b")
    assert "train.py:17:13: TL501 LoRA's frozen base model is loaded in fp32" in fired


# TRL's own example-script shape (trl >= 1.x scripts/sft.py, written here from scratch): the parser comes from a
# helper that builds it from a tuple bound to a name, the script sets `training_args.model_init_kwargs` with
# `dtype=model_args.dtype`, and SFTTrainer loads the model from its name. In trl 1.9.0 ModelConfig.dtype defaults
# to "float32" (knowledge/arguments.json, trl/trainer/model_config.py), and TRL configs default to bf16: a LoRA
# launch keeps the frozen base in fp32.
TRL_SCRIPT = '''
def main(script_args, training_args, model_args):
    from trl import SFTTrainer, get_peft_config

    training_args.model_init_kwargs = dict(
        revision=model_args.model_revision,
        dtype=model_args.dtype,
    )
    trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args,
                         peft_config=get_peft_config(model_args))
    trainer.train()


def make_parser():
    from trl import ModelConfig, ScriptArguments, SFTConfig, TrlParser

    dataclass_types = (ScriptArguments, SFTConfig, ModelConfig)
    parser = TrlParser(dataclass_types)
    return parser


if __name__ == "__main__":
    parser = make_parser()
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
'''


@pytest.mark.parametrize("flags, fires", [
    ("--use_peft --lora_r 16", True),
    ("--use_peft --dtype bfloat16", False),  # the base loads in bf16
    ("", False),  # full fine-tuning: the fp32 weights are the master weights
])
def test_a_trl_script_whose_model_config_defaults_to_fp32(tmp_path, flags, fires):
    import json

    from test_launch import run

    (tmp_path / "requirements.txt").write_text("trl==1.9.0\ntransformers==5.0.0\n")
    (tmp_path / "sft.py").write_text(TRL_SCRIPT)
    (tmp_path / "train.sh").write_text(f"python sft.py --model_name_or_path Qwen/Qwen2-0.5B --output_dir out {flags}\n")
    data = json.loads(run("check", "--output-format", "json", "--no-cache", "--select", "TL501", "sft.py",
                          cwd=tmp_path).stdout)
    if not fires:
        assert data == []
        return
    (d,) = data
    assert (d["filename"], d["location"]["row"]) == ("sft.py", 9)
    assert d["message"].startswith("LoRA's frozen base model is loaded in fp32 (dtype float32: the ModelConfig "
                                   "default (trl 1.9.0 ")
    assert "computes in bf16" in d["message"] and 'with dtype "bfloat16" (model_init_kwargs)' in d["message"]


def test_a_model_the_trainer_loads_without_a_dtype_is_not_judged(lint):
    # what TRL's own loader does with no dtype is not modelled per version here: nothing is claimed
    script = '''
from trl import SFTConfig, SFTTrainer
from peft import LoraConfig
trainer = SFTTrainer(model="meta-llama/Llama-3.1-8B", args=SFTConfig(output_dir="o", bf16=True),
                     peft_config=LoraConfig(r=16))
'''
    assert tl501(lint(script, settings=V4)) == []
    explicit = script.replace('bf16=True)', 'bf16=True, model_init_kwargs={"dtype": "float32"})')
    assert [line for line, _ in tl501(lint(explicit, settings=V4))] == [4]


def test_a_reference_or_teacher_passed_positionally(lint):
    # `DPOTrainer(model, model_ref, args=...)`: ref_model is the second parameter of DPOTrainer / KTOTrainer
    # (teacher_model of GKDTrainer), in trl 0.8 as in 1.x
    dpo = '''
import torch
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.bfloat16)
model_ref = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.float32)
trainer = DPOTrainer(model, model_ref, args=DPOConfig(output_dir="out"))
'''
    found = tl501(lint(dpo))
    assert [line for line, _ in found] == [7] and found[0][1].startswith("the reference model is loaded in fp32")
    gkd = dpo.replace("DPOConfig", "GKDConfig").replace("DPOTrainer", "GKDTrainer")
    assert [m.split(" is ")[0] for _, m in tl501(lint(gkd))] == ["the teacher model"]
    # a trainer whose second positional parameter is something else: not a frozen copy
    sft = dpo.replace("DPOConfig", "SFTConfig").replace("DPOTrainer", "SFTTrainer")
    assert tl501(lint(sft)) == []
