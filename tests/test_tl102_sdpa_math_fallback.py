"""TL102: fp32 attention inputs on a grouped-query model make SDPA run the math kernel on CUDA. The truth for when it
happens is the H200 probe (../shared/gpu-truth/sdpa-kernels-h200.json, checked row by row in test_sdpa_dispatch.py);
the truth for what it costs is the H200 peaks (bench/estimate_gpu.py). These tests lint real scripts written in a
temporary project; the figure in the message is the estimate's own."""

from __future__ import annotations

import re

from conftest import codes

from trainlint.config import Settings
from trainlint.context import FileContext
from trainlint.lint import lint_file
from trainlint.memory import fmt_bytes
from trainlint.memory.estimate import estimate, fix_saving
from trainlint.planning import Overrides, plan_for


def script(model="meta-llama/Llama-3.2-1B", dtype="torch.float32", bf16=False, max_length=2048, extra=""):
    return f'''
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("{model}")
model = AutoModelForCausalLM.from_pretrained("{model}", dtype={dtype}, attn_implementation="sdpa")
data = tokenizer(["..."], max_length={max_length}, truncation=True)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16={bf16}{extra})
trainer = Trainer(model=model, args=args)
'''


def tl102(found):
    return [m for c, _, m in found if c == "TL102"]


def test_fires_for_fp32_weights_sdpa_and_grouped_query_heads_at_2048(lint):
    found = tl102(lint(script()))
    assert len(found) == 1, found
    message = found[0]
    assert "math kernel" in message and "enable_gqa=True" in message and "32 query / 8 K/V heads" in message
    assert "dtype=torch.bfloat16" in message and "bf16=True" in message


def test_the_message_gives_the_estimates_own_figure(lint, tmp_path):
    message = tl102(lint(script()))[0]
    ctx: FileContext = lint_file(tmp_path / "train.py", Settings(root=tmp_path), {"TL102"}).context
    plan = plan_for(ctx, Overrides())[0]  # what `trainlint estimate` plans
    assert plan.attention == "sdpa-math"
    added = fix_saving(plan, "TL102")
    assert added > 10e9  # 16 layers of batch 2 x 32 heads x 2,048^2 fp32 scores
    assert f"~{fmt_bytes(added)} more at the run's peak" in message
    lever = next(lv for lv in estimate(plan).levers if lv.name.startswith("a fused SDPA kernel"))
    assert lever.saves == added


def test_quiet_with_bf16_weights(lint):
    assert "TL102" not in codes(lint(script(dtype="torch.bfloat16")))


def test_quiet_when_bf16_autocast_gives_sdpa_bf16_inputs(lint):
    assert "TL102" not in codes(lint(script(bf16=True)))


def test_quiet_for_a_model_without_grouped_query_heads(lint):
    # GPT-2: 12 query and 12 K/V heads; fp32 SDPA runs the memory-efficient kernel (H200: 14.6 GiB measured)
    assert "TL102" not in codes(lint(script(model="openai-community/gpt2", max_length=1024)))
    assert "TL102" not in codes(lint(script(model="openai-community/gpt2", max_length=4096)))


def test_quiet_for_short_sequences(lint):
    assert "TL102" not in codes(lint(script(max_length=1024)))


def test_quiet_when_the_autocast_setting_is_not_known(lint):
    found = lint(script(bf16="os.environ.get('BF16') == '1'").replace("import torch", "import os\nimport torch"))
    assert "TL102" not in codes(found)


def test_quiet_before_transformers_passes_enable_gqa(lint):
    # transformers 4.53 always repeats K/V (huggingface/transformers#39412 is in 4.54): plain heads, memory-efficient
    found = lint(script(dtype="torch.float32"), files={"requirements.txt": "transformers==4.53.3\n"})
    assert "TL102" not in codes(found)
    found = lint(script(dtype="torch.float32"), files={"requirements.txt": "transformers==4.54.1\n"})
    assert "TL102" in codes(found)


def test_checkpointing_still_fires_but_says_the_peak_is_not_raised_when_it_is_not(lint):
    message = tl102(lint(script(extra=", gradient_checkpointing=True, use_liger_kernel=False")))[0]
    assert re.search(r"per layer( \(under checkpointing|, ~)", message)
