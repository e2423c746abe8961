"""The evaluation step's memory (issue 27, part 3): memory.estimate.eval_logits_bytes / eval_peak against a real
Trainer.evaluate() measured on CPU, and `trainlint estimate` listing the eval step under the training peak with a
verdict on the higher, through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from click.testing import CliRunner

from trainlint.cli import main
from trainlint.memory import fmt_bytes
from trainlint.memory.estimate import EvalPhase, Geometry, Plan, eval_logits_bytes

# Ground truth: verify's live-bytes tracker (trainlint.verify.harness.memory_cpu) around a real Trainer.evaluate() of
# a tiny Llama built from a config (no downloads), the peak above the bytes live before it. transformers 5.25.0.
MEASURE = r'''
import json, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
from trainlint.verify.harness.memory_cpu import make_cpu_tracker

def run(out_dir, dtype, metrics, batches=4, bs=2, seq=128, vocab=16384):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, intermediate_size=128)
    torch.set_default_dtype(dtype)
    model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    data = [{"input_ids": torch.randint(0, vocab, (seq,)), "labels": torch.randint(0, vocab, (seq,))}
            for _ in range(bs * batches)]
    args = TrainingArguments(output_dir=out_dir, per_device_eval_batch_size=bs, report_to=[], use_cpu=True)
    trainer = Trainer(model=model, args=args, eval_dataset=data,
                      compute_metrics=(lambda p: {"n": 0}) if metrics else None)
    tracker = make_cpu_tracker(torch)
    with tracker:
        before = tracker.current
        trainer.evaluate()
    return tracker.peak - before

out = sys.argv[1]
json.dump({"fp32_loss_only": run(out, torch.float32, False), "bf16_loss_only": run(out, torch.bfloat16, False),
           "fp32_kept": run(out, torch.float32, True)}, sys.stdout)
'''
TINY = Geometry(vocab=16384, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=128, params=0)


def test_eval_step_arithmetic_matches_a_real_evaluate_on_cpu(tmp_path):
    """One eval step's logits and loss (loss-only: no compute_metrics), and four eval batches of fp32 logits kept for
    compute_metrics (the last torch.cat holds the old and the new container: 2 x 4 batches), each within 10%.
    On CPU the host copies `get_arrays` makes of 16-bit logits are counted too, so the kept case is measured fp32."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    fp32 = Plan(TINY, batch=2, seq=128, dtype_bytes=4, act_bytes=4, evaluation=EvalPhase(2))
    predicted = {
        "fp32_loss_only": eval_logits_bytes(fp32),
        "bf16_loss_only": eval_logits_bytes(replace(fp32, dtype_bytes=2, act_bytes=2)),
        "fp32_kept": eval_logits_bytes(replace(fp32, evaluation=EvalPhase(2, kept_bytes=4, kept_batches=4))),
    }
    for case, value in predicted.items():
        assert 0.9 <= measured[case] / value <= 1.1, (case, measured, predicted)


SCRIPT = '''
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="bfloat16")
data = tokenizer(["..."], max_length=2048, truncation=True)
eval_ds = load_dataset("json", data_files="eval.jsonl", split="train[:64]")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True, use_liger_kernel=True,
                         gradient_checkpointing=True, eval_strategy="steps", per_device_eval_batch_size=8)


def compute_metrics(pred):
    return {}


trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=eval_ds, compute_metrics=compute_metrics)
'''


def estimate(tmp_path, source: str, *args: str):
    (tmp_path / "train.py").write_text(source)
    return CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), *args])


def as_json(tmp_path, source: str) -> dict:
    return json.loads(estimate(tmp_path, source, "--format", "json").output)


def test_fits_for_training_but_the_first_evaluation_does_not(tmp_path):
    """Llama-3.2-1B, Liger, checkpointing: the training step fits an 80 GiB card; eight eval batches of 8 x 2,048 x
    128,256 fp32 logits kept for compute_metrics (64 examples) do not."""
    data = as_json(tmp_path, SCRIPT)
    gib = 1024**3
    evaluation, training = data["phases"]["evaluation"], data["peak"]
    assert training + data["cuda_overhead"] < 80 * gib < evaluation + data["cuda_overhead"]
    r = estimate(tmp_path, SCRIPT, "--gpu", "A100-80GB")
    assert r.exit_code == 1
    more = fmt_bytes(evaluation + data["cuda_overhead"] - 80 * gib)  # the project's formatter for GPU figures
    assert f"verdict: A100-80GB (80.0 GiB): fits for training; the first evaluation needs {more} more" in r.output
    assert "other phases: evaluation step (eval batch 8, logits kept on the GPU for 8 eval batches)" in r.output


def test_eval_accumulation_steps_and_an_argmax_bring_the_evaluation_down(tmp_path):
    kept = as_json(tmp_path, SCRIPT)["phases"]["evaluation"]
    moved = as_json(tmp_path, SCRIPT.replace("per_device_eval_batch_size=8", "per_device_eval_batch_size=8, "
                                                                            "eval_accumulation_steps=2"))
    argmax = as_json(tmp_path, SCRIPT.replace("compute_metrics=compute_metrics)", "compute_metrics=compute_metrics, "
                                              "preprocess_logits_for_metrics=keep)"))
    assert argmax["phases"]["evaluation"] < moved["phases"]["evaluation"] < kept
    # one eval batch's logits and loss is still over the Liger training step's loss: the eval step builds them
    assert argmax["phases"]["evaluation"] > argmax["consumers"]["logits"] + argmax["consumers"]["weights"]
    r = estimate(tmp_path, SCRIPT.replace("per_device_eval_batch_size=8", "per_device_eval_batch_size=8, "
                                                                          "eval_accumulation_steps=2"), "--gpu", "H200")
    assert r.exit_code == 0 and "logits kept on the GPU for 2 eval batches" in r.output


@pytest.mark.parametrize("change,line", [
    (('eval_strategy="steps"', 'eval_strategy="no"'), None),
    (("eval_dataset=eval_ds, ", ""), None),
    ((", compute_metrics=compute_metrics)", ")"), "eval batch 8, no logits (fused loss)"),
    (("per_device_eval_batch_size=8", "per_device_eval_batch_size=8, prediction_loss_only=True"),
     "eval batch 8, no logits (fused loss)"),
])
def test_no_eval_phase_or_a_loss_only_eval_with_liger(tmp_path, change, line):
    r = estimate(tmp_path, SCRIPT.replace(*change))
    assert r.exit_code == 0, r.output
    if line is None:
        assert "other phases" not in r.output
        assert as_json(tmp_path, SCRIPT.replace(*change))["phases"] == {}
    else:
        assert f"other phases: evaluation step ({line})" in r.output
        data = as_json(tmp_path, SCRIPT.replace(*change))
        assert data["phases"]["evaluation"] < data["peak"]


def test_a_loss_only_eval_without_liger_builds_the_logits(tmp_path):
    src = SCRIPT.replace("use_liger_kernel=True,", "").replace(", compute_metrics=compute_metrics)", ")")
    assert "use_liger_kernel" not in src
    assert "other phases: evaluation step (eval batch 8, the logits of one eval batch)" in estimate(tmp_path, src).output
