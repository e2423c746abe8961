"""TL301 on a repository's own training loop, in the shapes of DPO and distillation codebases (written here from
scratch): per-token log-probabilities gathered from `logits.log_softmax(-1)` in a helper module, a loss class of the
repository wrapping `nn.CrossEntropyLoss`, a student and a teacher sharing one vocabulary, a parser subclass whose
`parse()` returns the one dataclass, and a fine-tune named `<family>-<its name>-<size>`."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_launch import findings, run
from trainlint.knowledge.models import _catalog
from trainlint.knowledge.names import derive

PARSER = '''
import sys
from dataclasses import dataclass, field
from transformers import HfArgumentParser


@dataclass
class FlatArguments:
    model_name_or_path: str = field(default=None)
    max_seq_length: int = field(default=512)
    per_device_train_batch_size: int = field(default=8)


class ArgumentParserPlus(HfArgumentParser):
    def parse(self):
        output = self.parse_args_into_dataclasses()
        if len(output) == 1:
            output = output[0]
        return output
'''

DPO_UTILS = '''
import torch


def concatenated_forward(model, batch):
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.to(torch.float32)
    labels = batch["labels"][:, 1:].clone()
    per_token_logps = torch.gather(logits[:, :-1, :].log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    return per_token_logps.sum(-1)
'''

DPO_TUNE = '''
import torch
from transformers import AutoModelForCausalLM

from mylab.dpo_utils import concatenated_forward
from mylab.utils import ArgumentParserPlus, FlatArguments


def main(args):
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-7)
    for batch in loader:
        chosen = concatenated_forward(model, batch)
        loss = -torch.nn.functional.logsigmoid(chosen).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    parser = ArgumentParserPlus((FlatArguments))
    args = parser.parse()
    main(args)
'''


def dpo_repo(tmp_path: Path, model: str) -> Path:
    pkg = tmp_path / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(PARSER)
    (pkg / "dpo_utils.py").write_text(DPO_UTILS)
    (pkg / "dpo_tune.py").write_text(DPO_TUNE)
    (tmp_path / "README.md").write_text(
        "# DPO\n\n```bash\naccelerate launch --num_processes 8 mylab/dpo_tune.py \\\n"
        f"    --model_name_or_path {model} \\\n    --max_seq_length 2048 \\\n    --per_device_train_batch_size 1\n```\n")
    return tmp_path


def tl301(tmp_path: Path, target: str) -> list[dict]:
    return [d for d in findings(run("check", "--output-format", "json", "--no-cache", target, cwd=tmp_path))
            if d["code"] == "TL301"]


def test_a_dpo_loop_gathering_log_probs_in_a_helper_module(tmp_path):
    dpo_repo(tmp_path, "allenai/Llama-3.1-Tulu-3-8B-SFT")
    (d,) = tl301(tmp_path, "mylab/dpo_tune.py")
    assert d["filename"] == "README.md"  # decided by the launch's model
    assert "gathers per-token log-probabilities from a log-softmax over the model's full logits" in d["message"]
    assert "128,256-token vocabulary (assumed the geometry of meta-llama/Llama-3.1-8B from the name" in d["message"]
    assert "[1 x 2,048 x 128,256]" in d["message"]


def test_a_small_vocabulary_is_not_flagged(tmp_path):
    dpo_repo(tmp_path, "HuggingFaceTB/SmolLM2-360M")  # 49,152 tokens: under the threshold
    assert tl301(tmp_path, "mylab/dpo_tune.py") == []


LOSS = '''
import torch.nn.functional as F
from torch import nn


class GPTLMLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(ignore_index=-100)

    def forward(self, logits, labels):
        return self.loss(logits[..., :-1, :].reshape(-1, logits.size(-1)), labels[..., 1:].reshape(-1))
'''

KD = '''
import argparse

import torch
from transformers import AutoModelForCausalLM

from kd.loss import GPTLMLoss


def train(args):
    student = AutoModelForCausalLM.from_pretrained(args.pretrain, torch_dtype=torch.bfloat16)
    teacher = AutoModelForCausalLM.from_pretrained(args.teacher_model, torch_dtype=torch.bfloat16)
    loss_fn = GPTLMLoss()
    for batch in loader:
        output = student(batch["input_ids"])
        loss = loss_fn(output.logits, batch["labels"])
        loss.backward()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrain", type=str, default=None)
    parser.add_argument("--teacher_model", type=str, default=None)
    parser.add_argument("--max_len", type=int, default=2048)
    args = parser.parse_args()
    train(args)
'''


@pytest.mark.parametrize("teacher, fires", [
    ("meta-llama/Meta-Llama-3-70B-Instruct", True),  # the same 128,256-token vocabulary as the student
    ("Qwen/Qwen2.5-7B-Instruct", False),  # another vocabulary: which logits the loss sees is not known
])
def test_a_distillation_loop_with_the_repositorys_loss_class(tmp_path, teacher, fires):
    (tmp_path / "kd").mkdir()
    (tmp_path / "kd" / "__init__.py").write_text("")
    (tmp_path / "kd" / "loss.py").write_text(LOSS)
    (tmp_path / "kd" / "train_kd.py").write_text(KD)
    (tmp_path / "train_kd.sh").write_text(
        f"deepspeed --module kd.train_kd --pretrain meta-llama/Meta-Llama-3-8B-Instruct --teacher_model {teacher}\n")
    found = tl301(tmp_path, "kd/train_kd.py")
    assert bool(found) is fires
    if fires:
        assert "the loss is computed on the model's full logits on a 128,256-token vocabulary" in found[0]["message"]


@pytest.mark.parametrize("name, base", [
    ("allenai/Llama-3.1-Tulu-3-8B-SFT", "meta-llama/Llama-3.1-8B"),
    ("someone/Llama-3.1-Tulu-3-8B-DPO-4bit", "meta-llama/Llama-3.1-8B"),
    ("someone/Qwen2.5-VL-Tulu-7B", None),  # a vision-language sibling is another model
    ("someone/Llama-3.1-Tulu-3-8B-70B-mix", None),  # two sizes: not decided
    ("someone/Llama-tiny-3.1-x-y-z-8B", None),  # the family's words too far apart
])
def test_a_fine_tune_named_between_family_and_size(name, base):
    found = derive(name, _catalog())
    assert (found.base_id if found is not None else None) == base
