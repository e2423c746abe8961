"""Issue 19: each fixable rule's edit is valid for the library versions the file pins, at each version boundary
(fix offered / a different fix / no fix, and then the message says what is needed). Run through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def lint(tmp_path: Path, pins: str, script: str, code: str, *extra: str) -> tuple[dict | None, str]:
    """(the rule's diagnostic as JSON or None, the script after `--fix --unsafe-fixes`)."""
    (tmp_path / "requirements.txt").write_text(pins + "\n")
    (tmp_path / "train.py").write_text(script)
    base = [sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", code, *extra, "train.py"]
    out = subprocess.run(base[:4] + ["--output-format", "json"] + base[4:], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    found = [d for d in json.loads(out.stdout) if d["code"] == code]
    subprocess.run(base[:4] + ["--fix", "--unsafe-fixes"] + base[4:], cwd=tmp_path, capture_output=True, text=True,
                   timeout=120)
    return (found[0] if found else None), (tmp_path / "train.py").read_text()


def eager(model_id: str, attn: str = ', attn_implementation="eager"') -> str:
    return (f'from transformers import AutoModelForCausalLM\n'
            f'model = AutoModelForCausalLM.from_pretrained("{model_id}"{attn})\nMAX_SEQ_LENGTH = 8192\n')


# (pin, model id, applicability or None for no fix, value written, words the message must carry)
TL101_CASES = [
    # the keyword arrives in 4.36.0 (4.35.2 modeling_utils.py has none)
    ("transformers==4.35.2", "meta-llama/Llama-3.1-8B", None, None, "attn_implementation needs transformers >= 4.36"),
    ("transformers==4.36.0", "meta-llama/Llama-3.1-8B", "safe", "sdpa", 'set attn_implementation="sdpa"'),
    # GPT-NeoX (Pythia): no `_supports_sdpa` up to 4.41, flash-attention 2 declared -> the unsafe flash fix
    ("transformers==4.41.2", "EleutherAI/pythia-1.4b", "unsafe", "flash_attention_2",
     "gpt_neox has no SDPA path in transformers 4.41.2"),
    ("transformers==4.42.0", "EleutherAI/pythia-1.4b", "safe", "sdpa", 'set attn_implementation="sdpa"'),
    # GPT-J: never SDPA in 4.x; `_supports_flash_attn_2` from 4.39
    ("transformers==4.38.2", "EleutherAI/gpt-j-6b", None, None,
     "gptj has neither an SDPA nor a flash-attention path in transformers 4.38.2"),
    ("transformers==4.39.0", "EleutherAI/gpt-j-6b", "unsafe", "flash_attention_2", "flash-attn package"),
    # BLOOM in 5.x: no `_supports_sdpa` at all; its flash-attention flag is not read for 5.x -> say less
    ("transformers==5.24.0", "bigscience/bloom-560m", None, None, "bloom has no SDPA path (and whether"),
    # Gemma 2's softcap: never SDPA (different numerics); flex_attention from 4.47.0
    ("transformers==4.46.3", "google/gemma-2-9b", None, None, "flex_attention needs transformers >= 4.47"),
    ("transformers==4.47.0", "google/gemma-2-9b", "unsafe", "flex_attention", "SDPA cannot express its logit softcap"),
    # a local checkpoint with no config.json: the architecture is unknown, so SDPA is not known to load
    ("transformers==4.57.6", "./ckpt", "unsafe", "sdpa", "whether this model supports sdpa in transformers 4.57.6 is "
                                                         "not known"),
]


@pytest.mark.parametrize("pin, model_id, applicability, value, words", TL101_CASES)
def test_tl101_fix_per_version_and_architecture(tmp_path, pin, model_id, applicability, value, words):
    diag, fixed = lint(tmp_path, pin, eager(model_id), "TL101")
    assert diag is not None and words in diag["message"], diag
    if applicability is None:
        assert diag["fix"] is None and "no fix" in diag["message"]
        assert fixed == eager(model_id)
    else:
        assert diag["fix"]["applicability"] == applicability
        assert f'attn_implementation="{value}"' in fixed and 'attn_implementation="eager"' not in fixed


def test_tl101_safe_fix_only_applies_with_fix_alone_where_sdpa_is_declared(tmp_path):
    (tmp_path / "requirements.txt").write_text("transformers==4.41.2\n")
    (tmp_path / "train.py").write_text(eager("EleutherAI/pythia-1.4b"))
    subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--fix", "train.py"], cwd=tmp_path,
                   capture_output=True, timeout=120)
    assert (tmp_path / "train.py").read_text() == eager("EleutherAI/pythia-1.4b")  # the flash fix is unsafe


LORA_FP32 = '''import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B"{dtype})
model = get_peft_model(model, LoraConfig(r=16))
Trainer(model=model, args=TrainingArguments(output_dir="o", bf16=True)).train()
'''


@pytest.mark.parametrize("pin, written, expected", [
    # from_pretrained takes `dtype=` from 4.56.0 (modeling_utils.py l.4751); 4.55.4 pops only torch_dtype
    ("transformers==4.55.4", "", "torch_dtype=torch.bfloat16"),
    ("transformers==4.56.0", "", "dtype=torch.bfloat16"),
    ("transformers==4.55.4", ", dtype=torch.float32", "torch_dtype=torch.bfloat16"),  # a dtype= 4.55 ignores
    ("transformers==4.57.6", ", torch_dtype=torch.float32", "torch_dtype=torch.bfloat16"),  # still taken
])
def test_tl501_writes_the_dtype_keyword_the_release_takes(tmp_path, pin, written, expected):
    diag, fixed = lint(tmp_path, pin + "\npeft==0.13.2", LORA_FP32.format(dtype=written), "TL501")
    assert diag is not None and diag["fix"]["applicability"] == "unsafe"
    assert f'"meta-llama/Llama-3.1-8B", {expected})' in fixed, fixed


LORA_GC = '''from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
peft_model = get_peft_model(model, LoraConfig(r=8))
args = TrainingArguments(output_dir="o", gradient_checkpointing=True)
Trainer(model=peft_model, args=args).train()
'''


@pytest.mark.parametrize("pin, fixed_line", [
    # enable_input_require_grads: 4.27.0 modeling_utils.py l.1150, absent from 4.26.1; no kwargs before 4.35
    ("transformers==4.26.1", None),
    ("transformers==4.27.0", "peft_model.enable_input_require_grads()"),
])
def test_tl201_input_grads_fix_needs_transformers_4_27(tmp_path, pin, fixed_line):
    diag, fixed = lint(tmp_path, pin + "\npeft==0.3.0", LORA_GC, "TL201")
    assert diag is not None, "TL201 should fire"
    if fixed_line is None:
        assert diag["fix"] is None and fixed == LORA_GC
        assert "enable_input_require_grads needs transformers >= 4.27" in diag["message"]
    else:
        assert diag["fix"]["applicability"] == "safe" and fixed_line in fixed


SFT = '''from trl import SFTConfig, SFTTrainer
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", dtype="bfloat16")
SFTTrainer(model=model, args=SFTConfig(output_dir="o", max_length=4096), train_dataset=None).train()
'''


@pytest.mark.parametrize("pin, advice", [
    # loss_type="chunked_nll": TRL 1.4.0 sft_config.py l.264-268; 1.3.0 has only nll / dft
    ("trl==1.3.0", "upgrade TRL to >= 1.15"),
    ("trl==1.4.0", 'set loss_type="chunked_nll"'),
])
def test_tl301_advises_chunked_nll_only_where_trl_takes_it(tmp_path, pin, advice):
    diag, fixed = lint(tmp_path, pin + "\ntransformers==4.57.6", SFT, "TL301")
    assert diag is not None and advice in diag["message"], diag
    assert ("chunked_nll" in diag["message"]) is (pin == "trl==1.4.0")


AXOLOTL = '''base_model: {model}
adapter: lora
lora_r: 16
sequence_len: 8192
micro_batch_size: 2
attn_implementation: eager
bf16: auto
'''


@pytest.mark.parametrize("model, applicability, words", [
    ("meta-llama/Llama-3.2-1B", "safe", "set attn_implementation: sdpa"),
    # axolotl 0.19.0 pins transformers 5.16.1, where BLOOM has no SDPA: writing `sdpa` would fail the load
    ("bigscience/bloom-560m", None, "bloom has no SDPA path"),
    ("./local-ckpt", "unsafe", "set attn_implementation: sdpa"),  # architecture unknown
])
def test_framework_config_fix_follows_the_same_validity(tmp_path, model, applicability, words):
    (tmp_path / "requirements.txt").write_text("axolotl==0.19.0\n")
    (tmp_path / "ax.yml").write_text(AXOLOTL.format(model=model))
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL101",
                          "--output-format", "json", "ax.yml"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    [diag] = json.loads(out.stdout)
    assert words in diag["message"]
    assert (diag["fix"] and diag["fix"]["applicability"]) == applicability


def test_inserted_kwargs_dict_follows_the_files_quotes(tmp_path):
    script = ("from peft import LoraConfig, get_peft_model\n"
              "from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
              "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.2-1B')\n"
              "args = TrainingArguments(output_dir='o', gradient_checkpointing=True)\n"
              "Trainer(model=get_peft_model(model, LoraConfig(r=8)), args=args).train()\n")
    diag, fixed = lint(tmp_path, "transformers==4.46.3\npeft==0.13.2", script, "TL201")
    assert diag is not None and "gradient_checkpointing_kwargs={'use_reentrant': False}" in fixed, fixed


@pytest.mark.parametrize("pin, offered", [
    ("transformers==4.52.4", False),  # no "flash_attention_3" in 4.52.4's modeling_utils.py
    ("transformers==4.53.0", True),   # 4.53.3 l.2306
])
def test_flash_attention_3_as_the_chosen_fix_needs_4_53(tmp_path, pin, offered):
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\nfix-attention = "flash_attention_3"\n')
    diag, fixed = lint(tmp_path, pin, eager("meta-llama/Llama-3.1-8B"), "TL101")
    assert diag is not None
    if offered:
        assert diag["fix"]["applicability"] == "unsafe" and 'attn_implementation="flash_attention_3"' in fixed
    else:
        assert diag["fix"] is None and "flash_attention_3 needs transformers >= 4.53" in diag["message"]


LAUNCHED = '''from dataclasses import dataclass, field

from transformers import AutoModelForCausalLM, HfArgumentParser


@dataclass
class Args:
    model_name_or_path: str = field(default="gpt2")
    attn_implementation: str = field(default="sdpa")
    max_length: int = field(default=512)


args, = HfArgumentParser((Args,)).parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, attn_implementation=args.attn_implementation)
'''
RUN_SH = "python train.py --model_name_or_path EleutherAI/gpt-j-6b --attn_implementation eager --max_length 8192\n"


@pytest.mark.parametrize("pin, launcher_after", [
    ("transformers==4.38.2", RUN_SH),  # GPT-J: neither SDPA nor flash-attention 2 declared in 4.38
    ("transformers==4.39.0", RUN_SH.replace("eager", "flash_attention_2")),
])
def test_a_launcher_value_is_rewritten_only_with_a_valid_value(tmp_path, pin, launcher_after):
    (tmp_path / "train.py").write_text(LAUNCHED)
    (tmp_path / "run.sh").write_text(RUN_SH)
    (tmp_path / "requirements.txt").write_text(pin + "\n")
    subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL101", "--fix",
                    "--unsafe-fixes", "."], cwd=tmp_path, capture_output=True, timeout=120)
    assert (tmp_path / "run.sh").read_text() == launcher_after
    assert (tmp_path / "train.py").read_text() == LAUNCHED
