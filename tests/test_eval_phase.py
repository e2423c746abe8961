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

from conftest import pinned_installed

from trainlint.cli import main
from trainlint.memory import fmt_bytes
from trainlint.memory.estimate import EvalPhase, Geometry, Plan
from trainlint.memory.phases import eval_logits_bytes

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


# --- TRL DPOTrainer's evaluation step: its loss under no_grad on chosen + rejected at the eval batch ----------------
DPO = """\
import torch
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.bfloat16)
args = DPOConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024, gradient_checkpointing=True,
                 eval_strategy="steps", eval_steps=100)
trainer = DPOTrainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds)
trainer.train()
"""


def _dpo(tmp_path, pin: str | None, source: str = DPO) -> dict:
    return as_json(_project(tmp_path, pin), source)


def _project(tmp_path, pin: str | None):
    """A folder of its own per pin (what a checkout pins is read once per folder)."""
    folder = tmp_path / (pin or "unpinned")
    folder.mkdir(parents=True, exist_ok=True)
    if pin:
        (folder / "requirements.txt").write_text(f"trl=={pin}\n")
    return folder


def test_dpo_eval_step_on_the_fused_head_and_on_full_logits(tmp_path):
    """TRL >= 1.15: no logits-sized tensor in eval (the fused head's tile); 1.13: chosen + rejected full logits of 8
    pairs over a 151,936 vocabulary, the reference's too: the evaluation is the run's peak."""
    fused = _dpo(tmp_path, "1.16.0")
    assert fused["phases"]["evaluation"] < fused["peak"]
    r = estimate(_project(tmp_path, "1.16.0"), DPO, "--gpu", "24GB")
    assert "evaluation step (eval batch 8 pairs, 16 rows, no logits (fused loss))" in r.output
    full = _dpo(tmp_path, "1.13.0")
    rows, seq, vocab = 16, 1024, 151936
    # the eval step's logits (11 B per logit in bf16, EVAL_STEP_BYTES) and the reference's (2 B)
    assert full["phases"]["evaluation"] - fused["phases"]["evaluation"] > rows * seq * vocab * 13 * 0.9
    assert full["phases"]["evaluation"] > full["peak"]
    r = estimate(_project(tmp_path, "1.13.0"), DPO, "--gpu", "24GB")
    assert r.exit_code == 1 and "fits for training; the first evaluation needs" in r.output, r.output
    assert "DPOTrainer evaluates chosen and rejected together: 16 rows per eval step (8 pairs)" in r.output


@pytest.mark.parametrize("pin,kept", [("1.13.0", True), ("0.19.1", False)])
def test_dpo_compute_metrics_keeps_the_logits_only_where_prediction_step_returns_them(tmp_path, pin, kept):
    """0.29-1.14 return `outputs.logits` to the loop with compute_metrics (1.13.0 dpo_trainer.py:1813); 0.19.1 returns
    scalar metrics (:1771-1776)."""
    plain = _dpo(tmp_path / "plain", pin)["phases"]["evaluation"]
    metrics = _dpo(tmp_path / "metrics", pin, DPO.replace("eval_dataset=eval_ds)", "eval_dataset=eval_ds, compute_metrics=m)")
                   .replace("eval_steps=100", "eval_steps=100, eval_accumulation_steps=4"))
    assert (metrics["phases"]["evaluation"] > plain) is kept


def test_dpo_eval_without_eval_dataset_or_strategy_has_no_phase(tmp_path):
    assert _dpo(tmp_path / "a", "1.16.0", DPO.replace(", eval_dataset=eval_ds", ""))["phases"] == {}
    assert _dpo(tmp_path / "b", "1.16.0", DPO.replace('eval_strategy="steps", eval_steps=100', ""))["phases"] == {}


KTO = DPO.replace("DPOConfig", "KTOConfig").replace("DPOTrainer", "KTOTrainer")


def test_kto_eval_step_is_its_loss_at_the_eval_batch_one_row_per_example(tmp_path):
    """KTOTrainer's prediction_step runs its loss under no_grad (1.13.0 kto_trainer.py): 8 rows of full logits and the
    reference's through 1.14; the fused head from 1.15."""
    full = _dpo(tmp_path / "full", "1.13.0", KTO)
    fused = _dpo(tmp_path / "fused", "1.16.0", KTO)
    rows, seq, vocab = 8, 1024, 151936
    assert full["phases"]["evaluation"] - fused["phases"]["evaluation"] > rows * seq * vocab * 13 * 0.9
    r = estimate(_project(tmp_path / "text", "1.13.0"), KTO)
    assert "evaluation step (eval batch 8, the logits of one eval batch)" in r.output, r.output
    assert "chosen and rejected" not in r.output


@pytest.mark.parametrize("pin,kept", [("1.13.0", True), ("1.7.0", True), ("1.5.1", False), ("0.19.1", False)])
def test_kto_compute_metrics_keeps_the_logits_from_1_7(tmp_path, pin, kept):
    """1.7.0 experimental/kto and 1.8+ return `outputs.logits` with compute_metrics; 1.5.1 a dummy tensor; 0.19.1
    scalar metrics (knowledge/trl_trainers.py EVAL_RETURNS_LOGITS)."""
    plain = _dpo(tmp_path / "plain", pin, KTO)["phases"]["evaluation"]
    metrics = _dpo(tmp_path / "metrics", pin, KTO.replace("eval_dataset=eval_ds)", "eval_dataset=eval_ds, compute_metrics=m)")
                   .replace("eval_steps=100", "eval_steps=100, eval_accumulation_steps=4"))
    assert (metrics["phases"]["evaluation"] > plain) is kept


def _fused_head_peak(rows: int, hidden: int, vocab: int) -> int:
    """TRL's ChunkedLogProbFunction.forward under no_grad on fake bf16 tensors (CPU: its torch fold), the tracker's
    peak above the inputs (hidden states, head weight, targets)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from trl.kernels import ChunkedLogProbFunction

    from trainlint.verify.measure import StepMemTracker

    with FakeTensorMode(shape_env=ShapeEnv()):
        states = torch.randn(rows, hidden, dtype=torch.bfloat16)
        weight = torch.randn(vocab, hidden, dtype=torch.bfloat16)
        targets = torch.randint(0, vocab, (rows,))
        tracker = StepMemTracker()
        tracker.track_external(states, weight, targets)
        with tracker:
            tracker.set_phase(1, "eval")
            with torch.no_grad():
                out = ChunkedLogProbFunction.apply(states, weight, None, targets, 1.0, 32768, None, 1.0, ())
            del out
        return int(tracker.peaks["all"][0]) - (rows * hidden * 2 + vocab * hidden * 2 + rows * 8)


@pytest.mark.skipif(not pinned_installed("torch", "trl"), reason="needs the test extra's torch and trl")
@pytest.mark.parametrize("rows,cpu_mib", [(2048, 896), (16384, 1792)])
def test_fused_head_working_set_under_no_grad_is_what_trl_allocates(rows, cpu_mib):
    """Ground truth: TRL 1.16's fused head under no_grad; fused_head_nograd_bytes for CPU kernels is what it
    allocates (flat from 4,096 rows), for CUDA (Triton folds the tile in place) only the bf16 tile."""
    from trainlint.memory.phases import fused_head_nograd_bytes

    geometry = Geometry(vocab=151936, hidden=896, layers=1, heads=14, kv_heads=2, head_dim=64, intermediate=4864,
                        params=0)
    plan = Plan(geometry=geometry, batch=1, seq=rows, dtype_bytes=2, act_bytes=2)
    cpu = fused_head_nograd_bytes(replace(plan, device="cpu"), rows)
    assert cpu == cpu_mib * 2**20
    # the per-row fp32 statistics (a few x 4 bytes per row) are not billed
    assert 0 <= _fused_head_peak(rows, 896, 151936) - cpu <= 64 * rows
    assert fused_head_nograd_bytes(plan, rows) == min(rows, 4096) * 32768 * 2


@pytest.mark.skipif(not pinned_installed("torch", "trl"), reason="needs the test extra's torch and trl")
def test_fused_head_buffer_is_32768_columns_wide_below_that_vocabulary():
    """A 4,096-token vocabulary still gets TRL's full-width tile buffer (chunked_logprob.py l.347); only the CPU
    path's fp32 tile copies shrink with it. Billing min(vocab, 32,768) for the buffer under-predicted 8x here."""
    from trainlint.memory.phases import fused_head_nograd_bytes

    rows, vocab = 2048, 4096
    geometry = Geometry(vocab=vocab, hidden=256, layers=1, heads=4, kv_heads=4, head_dim=64, intermediate=1024,
                        params=0)
    plan = Plan(geometry=geometry, batch=1, seq=rows, dtype_bytes=2, act_bytes=2, device="cpu")
    predicted = fused_head_nograd_bytes(plan, rows)
    assert predicted == rows * (32768 * 2 + vocab * 12)
    assert 0 <= _fused_head_peak(rows, 256, vocab) - predicted <= 64 * rows


def _fused_head_train_peak(rows: int, hidden: int, vocab: int, head: bool) -> int:
    """TRL's ChunkedLogProbFunction forward and backward on fake bf16 tensors (CPU: its torch folds), the tracker's
    peak above the inputs (hidden states, head weight, targets); `head`: the weight requires grad."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from trl.kernels import ChunkedLogProbFunction

    from trainlint.verify.measure import StepMemTracker

    with FakeTensorMode(shape_env=ShapeEnv()):
        states = torch.randn(rows, hidden, dtype=torch.bfloat16, requires_grad=True)
        weight = torch.randn(vocab, hidden, dtype=torch.bfloat16, requires_grad=head)
        targets = torch.randint(0, vocab, (rows,))
        tracker = StepMemTracker()
        tracker.track_external(states, weight, targets)
        with tracker:
            tracker.set_phase(1, "train")
            out = ChunkedLogProbFunction.apply(states, weight, None, targets, 1.0, 32768, None, 1.0, ())
            loss = -out[0].sum()
            del out
            loss.backward()
            del loss
        return int(tracker.peaks["all"][0]) - (rows * hidden * 2 + vocab * hidden * 2 + rows * 8)


@pytest.mark.skipif(not pinned_installed("torch", "trl"), reason="needs the test extra's torch and trl")
@pytest.mark.parametrize("rows,head,where", [(2048, True, "fold"), (2048, False, "fold"), (64, True, "cast"),
                                             (64, False, "matmul")])
def test_fused_head_backward_working_set_is_what_trl_allocates(rows, head, where):
    """Ground truth: TRL 1.16's fused head, forward + backward, CPU folds; fused_head_backward_bytes to within the
    per-row fp32 statistics. Each case peaks at another moment of the backward: the tile fold's fp32 copies, the casts
    of the fp32 gradients (few rows, a trainable head), the 16-bit matmul's fp32 copies (few rows, frozen head)."""
    from trainlint.memory.estimate import FUSED_HEAD_CPU_BACKWARD, fused_head_backward_bytes

    hidden, vocab = 896, 151936
    geometry = Geometry(vocab=vocab, hidden=hidden, layers=1, heads=14, kv_heads=2, head_dim=64, intermediate=4864,
                        params=0)
    plan = Plan(geometry=geometry, batch=1, seq=rows, dtype_bytes=2, act_bytes=2, device="cpu",
                lora_r=None if head else 16)
    predicted = fused_head_backward_bytes(plan, rows)
    fixed = rows * hidden * 4 + (vocab * hidden * 4 if head else 0) + rows * 32768 * 2
    moment = {"fold": FUSED_HEAD_CPU_BACKWARD * rows * 32768, "cast": rows * hidden * 2 + vocab * hidden * 2,
              "matmul": 4 * 32768 * (rows + hidden)}[where]
    assert predicted == fixed + moment
    assert 0 <= _fused_head_train_peak(rows, hidden, vocab, head) - predicted <= 64 * rows
    # CUDA (Triton folds in place, fp32-output matmuls): the tile buffer, the fp32 gradients and their casts
    cuda = fused_head_backward_bytes(replace(plan, device="cuda"), rows)
    assert cuda == fixed + rows * hidden * 2 + (vocab * hidden * 2 if head else 0)


FUSED_SFT = """\
import torch
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.bfloat16)
args = SFTConfig(output_dir="out", per_device_train_batch_size=4, max_length=1024, gradient_checkpointing=True)
trainer = SFTTrainer(model=model, args=args, train_dataset=train_ds)
trainer.train()
"""


@pytest.mark.parametrize("source,pin,fused", [(DPO, "1.16.0", True), (DPO, "1.15.0", True), (FUSED_SFT, "1.16.0", True),
                                              (FUSED_SFT, "1.14.2", False), (DPO, "1.13.0", False)])
def test_training_logits_are_the_fused_heads_where_trl_runs_it(tmp_path, source, pin, fused):
    """DPO / SFT from TRL 1.15 train through the fused LM head: the logits consumer is fused_head_train_bytes (on CUDA:
    no fp32 tile copies, so ~1 GiB for 4 rows x 1,024 tokens of Qwen2.5-0.5B, not the flat 4 GiB); SFT 1.14's
    chunked_nll is another code path (the flat CHUNKED_LOSS_BYTES, below the full logits here), DPO 1.13 builds the full logits."""
    from trainlint.memory.estimate import CHUNKED_LOSS_BYTES, fused_head_train_bytes

    result = as_json(_project(tmp_path, pin), source)
    logits = result["consumers"]["logits"]
    rows = 4  # DPO: 2 pairs, chosen + rejected; SFT: 4 rows
    geometry = Geometry(vocab=151936, hidden=896, layers=24, heads=14, kv_heads=2, head_dim=64, intermediate=4864,
                        params=0)
    plan = Plan(geometry=geometry, batch=rows, seq=1024, dtype_bytes=2, act_bytes=2, loss="chunked", fused_head=True)
    if fused:
        assert logits == fused_head_train_bytes(plan)
        n = rows * 1023
        assert logits == n * 896 * (2 + 4 + 2) + 151936 * 896 * (4 + 2) + n * 32768 * 2
    elif source is FUSED_SFT:
        assert logits == CHUNKED_LOSS_BYTES
    else:
        assert logits > CHUNKED_LOSS_BYTES
