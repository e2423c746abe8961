"""TL302: the evaluation loop keeps every eval batch's logits for compute_metrics; per version (batch_eval_metrics
from transformers 4.41), per trainer and head, with the eval set's size when written; confirmed on CPU."""

import json
import os
import subprocess
import sys

import pytest

from conftest import codes

TRAINER = '''
from datasets import load_dataset
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16")
enc = tokenizer(texts, max_length=1024, truncation=True)
eval_ds = load_dataset("json", data_files="eval.jsonl", split="train[:500]")
args = TrainingArguments(output_dir="out", eval_strategy="steps", eval_steps=100)


def compute_metrics(pred):
    return {}


trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds,
                  compute_metrics=compute_metrics)
'''


def tl302(found):
    return [(line, message) for c, line, message in found if c == "TL302"]


def test_compute_metrics_on_a_vocabulary_head_is_flagged_with_bytes_per_example_and_total(lint):
    [(line, message)] = tl302(lint(TRAINER))
    assert line == 15
    # 1,024 tokens x 151,936 x 2 bytes (bf16 weights, no mixed precision) = 296.75 MiB; x 500 = 144.9 GiB
    assert "compute_metrics on a 151,936-token vocabulary without preprocess_logits_for_metrics" in message
    assert "keeps every eval batch's logits on the GPU" in message
    assert "~297 MiB per eval example (1,024 tokens x 151,936 vocabulary, 16-bit)" in message
    assert '~144.9 GiB for the 500 examples of split="train[:500]"' in message
    assert message.endswith("or batch_eval_metrics=True")


def test_mixed_precision_keeps_fp32_logits_and_eval_accumulation_moves_them_to_host(lint):
    src = TRAINER.replace('eval_steps=100', 'eval_steps=100, bf16=True, eval_accumulation_steps=4')
    [(_, message)] = tl302(lint(src))
    assert "~594 MiB per eval example (1,024 tokens x 151,936 vocabulary, fp32)" in message
    assert "in host RAM (eval_accumulation_steps moves them off the GPU every 4 steps)" in message


@pytest.mark.parametrize("dataset,size,how", [
    ('eval_ds = raw["validation"].select(range(200))', "200", ".select(range(200))"),
    ('eval_ds = raw.train_test_split(test_size=100)["test"]', "100", "train_test_split(test_size=100)"),
    ('eval_ds = load_dataset("json", data_files="e.jsonl", split="train[100:350]")', "250", 'split="train[100:350]"'),
])
def test_eval_set_sizes_that_are_written(lint, dataset, size, how):
    src = TRAINER.replace('eval_ds = load_dataset("json", data_files="eval.jsonl", split="train[:500]")', dataset)
    [(_, message)] = tl302(lint(src))
    assert f"for the {size} examples of {how}" in message


@pytest.mark.parametrize("dataset", ['eval_ds = load_dataset("json", split="train[:10%]")', 'eval_ds = raw["test"]',
                                     "eval_ds = raw.filter(keep)"])
def test_eval_set_size_not_written_is_not_guessed(lint, dataset):
    src = TRAINER.replace('eval_ds = load_dataset("json", data_files="eval.jsonl", split="train[:500]")', dataset)
    [(_, message)] = tl302(lint(src))
    assert "per eval example" in message and "examples of" not in message


@pytest.mark.parametrize("change", [
    ("compute_metrics=compute_metrics)", "compute_metrics=compute_metrics,\n    preprocess_logits_for_metrics=keep)"),
    ('eval_steps=100', 'eval_steps=100, batch_eval_metrics=True'),
    ('eval_steps=100', 'eval_steps=100, prediction_loss_only=True'),
    ('eval_strategy="steps", ', ''),
    ('eval_strategy="steps"', 'eval_strategy="no"'),
    ("AutoModelForCausalLM", "AutoModelForSequenceClassification"),
    (",\n                  compute_metrics=compute_metrics)", ")"),
    ("eval_dataset=eval_ds,", ""),
])
def test_quiet_when_nothing_is_kept_or_no_eval_runs(lint, change):
    assert tl302(lint(TRAINER.replace(*change))) == []


def test_evaluate_call_runs_the_loop_without_an_eval_strategy(lint):
    src = TRAINER.replace('eval_strategy="steps", ', '') + "trainer.evaluate()\n"
    assert len(tl302(lint(src))) == 1


def test_batch_eval_metrics_arrived_in_4_41(lint):
    src = TRAINER.replace('eval_steps=100', 'eval_steps=100, batch_eval_metrics=True')
    [(_, message)] = tl302(lint(src, settings={"versions": {"transformers": "4.40.2"}}))
    assert "batch_eval_metrics needs transformers >= 4.41; this file targets 4.40.2" in message
    assert tl302(lint(src, settings={"versions": {"transformers": "4.41.0"}})) == []


def test_sft_trainer_keeps_trainers_eval_loop_dpo_does_not(lint):
    sft = TRAINER.replace("from transformers import AutoModelForCausalLM, Trainer, TrainingArguments",
                          "from transformers import AutoModelForCausalLM\nfrom trl import SFTConfig, SFTTrainer")
    sft = sft.replace("TrainingArguments(", "SFTConfig(").replace("trainer = Trainer(", "trainer = SFTTrainer(")
    assert len(tl302(lint(sft))) == 1
    dpo = sft.replace("SFTConfig", "DPOConfig").replace("SFTTrainer", "DPOTrainer")
    assert tl302(lint(dpo)) == []


def test_seq2seq_generate_keeps_token_ids_not_logits(lint):
    src = TRAINER.replace("Trainer, TrainingArguments", "Seq2SeqTrainer, Seq2SeqTrainingArguments").replace(
        "TrainingArguments(", "Seq2SeqTrainingArguments(").replace("trainer = Trainer(", "trainer = Seq2SeqTrainer(")
    assert len(tl302(lint(src))) == 1
    assert tl302(lint(src.replace("eval_steps=100", "eval_steps=100, predict_with_generate=True"))) == []


def test_unsafe_fix_adds_an_argmax_preprocessor(tmp_path):
    from trainlint.config import Settings
    from trainlint.lint import enabled_codes, lint_file

    script = tmp_path / "train.py"
    script.write_text(TRAINER)
    settings = Settings(root=tmp_path)
    [diag] = [d for d in lint_file(script, settings, enabled_codes(settings)).diagnostics if d.code == "TL302"]
    assert diag.fix.applicability == "unsafe"
    assert diag.fix.edits[0].content.startswith(", preprocess_logits_for_metrics=lambda logits, labels:")


MEASURE = r'''
import json, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments
from trainlint.verify.harness.memory_cpu import make_cpu_tracker as _make_cpu_tracker

def run(preprocess, out_dir, batches=4, bs=2, seq=64, vocab=2000):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=64)
    model = LlamaForCausalLM(cfg)
    data = [{"input_ids": torch.randint(0, vocab, (seq,)), "labels": torch.randint(0, vocab, (seq,))}
            for _ in range(bs * batches)]
    tracker = _make_cpu_tracker(torch)
    seen = []

    class Probe(TrainerCallback):
        def on_prediction_step(self, args, state, control, **kw):
            seen.append(tracker.current)

    args = TrainingArguments(output_dir=out_dir, per_device_eval_batch_size=bs, report_to=[], use_cpu=True)
    trainer = Trainer(model=model, args=args, eval_dataset=data, compute_metrics=lambda p: {"n": 0},
                      preprocess_logits_for_metrics=(lambda l, y: l.argmax(-1)) if preprocess else None,
                      callbacks=[Probe()])
    with tracker:
        trainer.evaluate()
    return [b - a for a, b in zip(seen, seen[1:])]

json.dump({"plain": run(False, sys.argv[1]), "argmax": run(True, sys.argv[1])}, sys.stdout)
'''


def test_eval_memory_grows_by_one_batch_of_logits_per_step_on_cpu(tmp_path):
    """A real Trainer.evaluate() on a tiny Llama (vocabulary 2,000, eval batch 2 x 64, fp32) under verify's
    live-bytes tracker: each eval batch adds its [2 x 64 x 2,000] fp32 logits (1,024,000 bytes); with
    preprocess_logits_for_metrics taking the argmax, a few KB."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = subprocess.run([sys.executable, "-c", MEASURE, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    growth = json.loads(done.stdout.strip().splitlines()[-1])
    logits = 2 * 64 * 2000 * 4
    assert len(growth["plain"]) == 3
    assert all(g >= 0.95 * logits for g in growth["plain"]), growth
    assert all(abs(g - logits) / logits < 0.05 for g in growth["plain"][1:]), growth
    assert all(g < 16_384 for g in growth["argmax"]), growth


# -- use_liger_kernel: the fused loss is training-only (issue 27, part 3) -----------------------------------------
LIGER = TRAINER.replace('eval_steps=100', 'eval_steps=100, bf16=True, use_liger_kernel=True, '
                                          'per_device_eval_batch_size=4')


def test_liger_training_with_an_eval_that_needs_logits_says_what_one_eval_step_builds(lint):
    from trainlint.memory import fmt_bytes
    from trainlint.memory.phases import EVAL_STEP_BYTES

    src = LIGER.replace("compute_metrics=compute_metrics)", "compute_metrics=compute_metrics,\n"
                        "                  preprocess_logits_for_metrics=keep)")
    [(_, message)] = tl302(lint(src))
    step = 4 * 1024 * 151936 * EVAL_STEP_BYTES[2]  # the bf16 checkpoint's logits and loss, one eval batch
    assert message.startswith("use_liger_kernel=True fuses the loss only in training: each eval step builds the "
                              f"[4 x 1,024 x 151,936] logits and their loss, ~{fmt_bytes(step)}, where the training "
                              "step's fused loss holds ~"), message
    assert "keeps every eval batch" not in message  # the argmax keeps ids, not logits


def test_liger_and_accumulated_logits_are_one_finding(lint):
    [(_, message)] = tl302(lint(LIGER))
    assert "keeps every eval batch's logits on the GPU" in message
    assert "; also, use_liger_kernel=True fuses the loss only in training" in message


@pytest.mark.parametrize("change", [
    ('eval_steps=100', 'eval_steps=100, prediction_loss_only=True'),  # transformers 5.25 passes skip_logits=True
    ('eval_strategy="steps"', 'eval_strategy="no"'),
    ("use_liger_kernel=True, ", ""),  # the training step builds the logits too: TL301's matter
])
def test_liger_quiet_when_eval_builds_no_logits_or_training_does_too(lint, change):
    src = LIGER.replace("compute_metrics=compute_metrics)", "compute_metrics=compute_metrics,\n"
                        "                  preprocess_logits_for_metrics=keep)")
    assert tl302(lint(src.replace(*change))) == []


def test_an_image_captioning_model_trained_with_compute_metrics_keeps_its_logits(lint):
    """GIT (microsoft/git-base, AutoModelForCausalLM) in the transformers task-guide shape: compute_metrics takes the
    argmax itself, after the evaluation loop kept every batch's logits."""
    src = '''
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("microsoft/git-base")

    def compute_metrics(eval_pred):
        logits, labels = eval_pred
        return {"wer": score(logits.argmax(-1), labels)}

    args = TrainingArguments(output_dir="git-captions", fp16=True, per_device_train_batch_size=32,
                             eval_strategy="steps", eval_steps=50)
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=test_ds,
                      compute_metrics=compute_metrics)
    trainer.train()
    '''
    found = lint(src)
    assert codes(found) == ["TL302"]
    assert "30,522-token vocabulary" in found[0][2] and "fp32" in found[0][2]


GKD = '''
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from trl.experimental.gkd import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16")
ds = load_dataset("trl-lib/chatbot_arena_completions")
args = GKDConfig(output_dir="out", max_length=1024, eval_strategy="steps", eval_steps=100, bf16=True)


def compute_metrics(pred):
    return {}


trainer = GKDTrainer(model=model, teacher_model="Qwen/Qwen2.5-0.5B", args=args, train_dataset=ds["train"],
                     eval_dataset=ds["test"], compute_metrics=compute_metrics)
'''


def test_gkd_keeps_the_students_logits_for_compute_metrics(lint):
    """GKDTrainer has no prediction_step of its own: SFTTrainer's (trl 1.16.0 sft_trainer.py:1679) returns the
    student's logits from compute_loss, and the loop keeps them (fp32 under bf16 mixed precision)."""
    files = {"requirements.txt": "trl==1.16.0\ntransformers==5.25.0\n"}
    [(line, message)] = tl302(lint(GKD, files=files))
    assert line == 15
    assert "~594 MiB per eval example (1,024 tokens x 151,936 vocabulary, fp32)" in message
    reduced = GKD.replace("compute_metrics=compute_metrics)", "compute_metrics=compute_metrics,\n"
                          "                     preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1))")
    assert tl302(lint(reduced, files=files)) == []
