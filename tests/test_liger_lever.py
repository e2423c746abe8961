"""A lever that does nothing (issue 28, part 4): `use_liger_kernel=True` on a model type the targeted liger-kernel
release has no kernels for. transformers' Trainer hands the model to liger's `_apply_liger_kernel_to_instance`,
which logs and returns for such a type (knowledge/liger.py cites the release table), so the full logits stay:
TL301 says so, with the GiB the user believes saved, and estimate bills the unfused loss."""

from __future__ import annotations

import json

from conftest import codes

SCRIPT = '''
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("{model}")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16=True, use_liger_kernel=True)
enc = tokenizer(texts, max_length=2048, truncation=True)
Trainer(model=model, args=args, train_dataset=ds).train()
'''


def test_a_model_type_liger_never_patched(lint):
    found = [f for f in lint(SCRIPT.format(model="bigscience/bloom-7b1"),
                             files={"requirements.txt": "liger-kernel==0.8.5\n"}) if f[0] == "TL301"]
    assert len(found) == 1 and found[0][1] == 7
    message = found[0][2]
    assert "use_liger_kernel=True does nothing for model type bloom: liger-kernel 0.8.5" in message
    assert "250,880-token vocabulary" in message and "off this run's peak with a fused loss" in message
    assert "LigerFusedLinearCrossEntropyLoss" in message  # no release patches bloom: patch the loss yourself


def test_a_model_type_a_later_release_patches(lint):
    found = [f for f in lint(SCRIPT.format(model="Qwen/Qwen3-30B-A3B"),
                             files={"requirements.txt": "liger-kernel>=0.5.0,<0.5.10\n"}) if f[0] == "TL301"]
    assert len(found) == 1
    assert "liger-kernel 0.5.9" in found[0][2]  # the newest release in the range
    assert "upgrade liger-kernel (liger-kernel >= 0.5.10 patches it)" in found[0][2]


def test_the_release_that_patches_it_is_quiet(lint):
    src = SCRIPT.format(model="Qwen/Qwen3-30B-A3B")
    assert "TL301" not in codes(lint(src, files={"requirements.txt": "liger-kernel==0.5.10\n"}))
    assert "TL301" not in codes(lint(src))  # unpinned: the newest release read, 0.8.5


def test_a_supported_or_unknown_model_is_quiet(lint):
    assert "TL301" not in codes(lint(SCRIPT.format(model="meta-llama/Llama-3.1-8B"),
                                     files={"requirements.txt": "liger-kernel==0.3.0\n"}))
    assert "TL301" not in codes(lint(SCRIPT.format(model="my-org/private-model"),
                                     files={"requirements.txt": "liger-kernel==0.3.0\n"}))


def test_estimate_bills_the_unfused_loss(tmp_path):
    from test_launch import run

    (tmp_path / "train.py").write_text(SCRIPT.format(model="bigscience/bloom-7b1"))
    (tmp_path / "requirements.txt").write_text("liger-kernel==0.8.5\n")
    r = run("estimate", "train.py", "--format", "json", cwd=tmp_path)
    data = json.loads(r.stdout)
    assert "unfused loss" in data["plan"] and data["consumers"]["logits"] > 0
