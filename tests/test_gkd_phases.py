"""GKDTrainer's teacher, on-policy generation and generalized-JSD loss per TRL version (knowledge/trl_trainers.py
"GKD", run/components.py `_gkd_generation` / `_teacher_init_kwargs_dtype`, memory.estimate `jsd_loss_bytes`).
Fixtures are our own scripts in the shape of TRL's examples/scripts/gkd.py (a student, a teacher by name or loaded,
GKDConfig's lmbda / seq_kd / max_new_tokens)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import lint_file
from trainlint.memory.estimate import (activation_bytes_per_layer, jsd_loss_bytes, models_bytes, optimizer_bytes,
                                       weights_bytes)
from trainlint.memory.phases import eval_logits_bytes, eval_peak, generation_parts
from trainlint.planning import Overrides, plan_for
from trainlint.run import resolve

STUDENT = "Qwen/Qwen2.5-0.5B-Instruct"  # 151,936-token vocabulary, 24 layers (knowledge/models.json)

GKD = '''
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from {module} import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("{student}", {dtype}="bfloat16")
ds = load_dataset("trl-lib/chatbot_arena_completions")
args = GKDConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024, max_new_tokens=256{extra})
trainer = GKDTrainer(model=model, teacher_model="Qwen/Qwen2.5-0.5B-Instruct", args=args, train_dataset=ds["train"]{targs})
trainer.train()
'''


def ctx_of(tmp_path: Path, trl: str, extra: str = "", transformers: str = "4.57.6", targs: str = ""):
    new = trl.startswith("1.")
    src = GKD.format(module="trl.experimental.gkd" if new else "trl", student=STUDENT,
                     dtype="dtype" if new else "torch_dtype", extra=extra, targs=targs)
    (tmp_path / "requirements.txt").write_text(f"trl=={trl}\ntransformers=={transformers}\n")
    path = tmp_path / "train.py"
    path.write_text(src)
    project_pins.cache_clear()
    clear_caches()
    return lint_file(path, Settings(root=tmp_path), set()).context


def test_lmbda_default_makes_the_student_generate_max_new_tokens(tmp_path):
    ctx = ctx_of(tmp_path, "0.19.1")
    gen = resolve(ctx).generation
    g = gen.value
    assert (g.trainer, g.rows, g.prompt, g.completion, g.cache) == ("GKDTrainer", 2, 768, 256, True)
    assert gen.why == "the student generates"
    assert "lmbda 0.5: GKDConfig's default (the student generates that share of the steps)" in gen.notes
    parts = dict(generation_parts(plan_for(ctx, Overrides())[0]))
    assert set(parts) == {"kv_cache", "generate_step"}  # no scoring forward of its own


def test_lmbda_zero_without_seq_kd_never_generates_but_seq_kd_makes_the_teacher_generate(tmp_path):
    assert resolve(ctx_of(tmp_path, "0.19.1", ", lmbda=0.0")).generation.value is None
    gen = resolve(ctx_of(tmp_path, "0.19.1", ", lmbda=0.0, seq_kd=True")).generation
    assert gen.value is not None and gen.why == "the teacher (seq_kd) generates"


def test_gradient_checkpointing_generates_without_a_cache(tmp_path):
    """use_cache=False under gradient_checkpointing (0.19.1 gkd_trainer.py:135, 1.16.0 :221): no KV cache, the last
    decoding step a no-grad forward over every row's whole prefix."""
    ctx = ctx_of(tmp_path, "1.16.0", ", gradient_checkpointing=True")
    plan = plan_for(ctx, Overrides())[0]
    assert plan.generation.cache is False
    assert set(dict(generation_parts(plan))) == {"generate_step"}


def test_teacher_by_name_takes_teacher_model_init_kwargs_dtype_per_version(tmp_path):
    """`torch_dtype` before 1.0 (0.19.1 gkd_trainer.py:117), `dtype` in 1.x; unset with transformers 4: fp32."""
    teacher = resolve(ctx_of(tmp_path, "0.19.1", ', teacher_model_init_kwargs={"torch_dtype": "bfloat16"}'))\
        .components.get("teacher")
    assert teacher.dtype_bytes.value == 2
    teacher = resolve(ctx_of(tmp_path, "1.16.0", ', teacher_model_init_kwargs={"dtype": "bfloat16"}'))\
        .components.get("teacher")
    assert teacher.dtype_bytes.value == 2
    ctx = ctx_of(tmp_path, "0.19.1")
    teacher = resolve(ctx).components.get("teacher")
    assert teacher.dtype_bytes.value == 4 and "fp32" in teacher.dtype_bytes.why
    plan = plan_for(ctx, Overrides())[0]
    assert plan.models == (("teacher", plan.geometry.params * 4),)


def test_jsd_reads_the_completion_before_1_8_and_every_position_after(tmp_path):
    """0.19.1 gkd_trainer.py:235-238 slices `prompt_lengths - 1 : -1`; 1.8.0 :414-415 and 1.16.0 :344-345 `[:, :-1]`.
    The loss bytes: the two models' logits plus JSD_TENSORS (15) vocabulary-sized tensors per position read, in fp32
    (the config's default bf16 mixed precision: accelerate's fp32 outputs, run/components.py
    `distillation_logits_bytes`)."""
    old = plan_for(ctx_of(tmp_path, "0.19.1"), Overrides())[0]
    new = plan_for(ctx_of(tmp_path, "1.16.0"), Overrides())[0]
    assert (old.jsd_positions, new.jsd_positions) == (256, 1024)
    assert (old.jsd_bytes, new.jsd_bytes) == (4, 4)
    assert jsd_loss_bytes(old) == 2 * 151_936 * 4 * (2 * 1024 + 15 * 256)
    assert jsd_loss_bytes(new) == 2 * 151_936 * 4 * (2 * 1024 + 15 * 1024)
    assert old.logits_seq is None and new.logits_seq is None  # the student's forward keeps every position's logits


def test_liger_jsd_leaves_the_full_logits_formula(tmp_path):
    """0.22-1.13 `use_liger_kernel=True` is LigerFusedLinearJSDLoss (knowledge/trl_trainers.py LOSS): no JSD tensors."""
    plan = plan_for(ctx_of(tmp_path, "0.22.2", ", use_liger_kernel=True"), Overrides())[0]
    assert plan.jsd_positions is None and plan.loss == "liger"


EVAL = ", eval_strategy='steps', eval_steps=50, per_device_eval_batch_size=8, bf16=True"
EVAL_DS = ', eval_dataset=ds["test"]'


def test_the_evaluation_step_is_the_loss_under_no_grad_at_the_eval_batch(tmp_path):
    """GKDTrainer's eval step (run/eval.py `_distillation_eval`: Trainer's / SFTTrainer's prediction_step calls its
    compute_loss under no_grad): both models' [8 x 1,024 x 151,936] bf16 logits and JSD_NOGRAD_TENSORS (10) over the
    positions the JSD reads (every position from 1.8, the completion before), above the resident weights, teacher
    and optimizer state; nothing of the on-policy generation."""
    for trl, positions in (("1.16.0", 1024), ("0.19.1", 256)):
        ctx = ctx_of(tmp_path, trl, EVAL, targs=EVAL_DS)
        plan = plan_for(ctx, Overrides())[0]
        e = plan.evaluation
        assert (e.batch, e.jsd, e.logits, e.kept_bytes, e.generation) == (8, True, False, 0, None), trl
        assert eval_logits_bytes(plan) == 8 * 151_936 * 4 * (2 * 1024 + 10 * positions)  # fp32 under bf16=True
        layer = activation_bytes_per_layer(replace(plan, batch=8, lora_r=None), 8 * 1024)
        assert layer < eval_logits_bytes(plan)
        assert eval_peak(plan) == weights_bytes(plan) + models_bytes(plan) + optimizer_bytes(plan)[0] + \
            eval_logits_bytes(plan)
        assert resolve(ctx).evaluation.why.startswith("GKDTrainer's loss under no_grad at the eval batch")


def test_no_evaluation_without_an_eval_dataset_or_with_eval_strategy_no(tmp_path):
    assert plan_for(ctx_of(tmp_path, "1.16.0", EVAL), Overrides())[0].evaluation is None
    assert plan_for(ctx_of(tmp_path, "1.16.0", ", eval_strategy='no'", targs=EVAL_DS), Overrides())[0].evaluation \
        is None


def test_compute_metrics_keeps_the_students_fp32_logits_unless_reduced(tmp_path):
    """With compute_metrics the student's outputs are the loop's predictions (SFTTrainer.prediction_step returns
    `outputs.logits`, trl 1.16.0 sft_trainer.py:1686), fp32 under bf16 mixed precision; an argmax in
    preprocess_logits_for_metrics keeps nothing logits-sized."""
    metrics = EVAL_DS + ", compute_metrics=lambda p: {}"
    plan = plan_for(ctx_of(tmp_path, "1.16.0", EVAL, targs=metrics), Overrides())[0]
    e = plan.evaluation
    assert (e.jsd, e.kept_bytes, e.kept_batches) == (True, 4, None)
    step = 8 * 151_936 * 4 * (2 * 1024 + 10 * 1024)
    kept = 8 * 1024 * 151_936 * 4
    assert eval_logits_bytes(plan) == max(step, 2 * kept)
    reduced = metrics + ", preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1)"
    assert plan_for(ctx_of(tmp_path, "1.16.0", EVAL, targs=reduced), Overrides())[0].evaluation.kept_bytes == 0


def test_liger_jsd_evaluates_without_the_jsd_tensors(tmp_path):
    plan = plan_for(ctx_of(tmp_path, "0.22.2", EVAL + ", use_liger_kernel=True", targs=EVAL_DS), Overrides())[0]
    assert plan.evaluation.jsd is False and plan.evaluation.logits is False


def test_estimate_names_the_evaluation_step_and_the_verdict_on_it(tmp_path):
    """The 1.16 eval step at batch 8 (~60 GiB with the resident state: fp32 logits under bf16=True) is over a 40 GiB
    card whose training step (~24 GiB) fits: the verdict is on the evaluation."""
    from click.testing import CliRunner

    from trainlint.cli import main

    ctx_of(tmp_path, "1.16.0", EVAL + ", gradient_checkpointing=True", targs=EVAL_DS)
    r = CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--gpu", "40GB"])
    assert "other phases: evaluation step (eval batch 8, student and teacher logits and the generalized JSD under " \
           "no_grad): " in r.output, r.output
    assert "40 GiB: fits for training; the first evaluation needs" in r.output, r.output


def test_beta_zero_or_one_takes_one_kl_div(tmp_path):
    """beta 0 (forward KL) / 1 (reverse KL): generalized_jsd_loss's single kl_div (1.16.0
    experimental/gkd/gkd_trainer.py:278-281), JSD_KL_TENSORS (7) with grad and under no_grad alike."""
    for beta, copy in (("0.0", 0), ("1", 256)):
        # beta 1 (reverse KL) keeps exp(student) and the difference saved, so `jsd[mask]`'s copy of the labelled
        # positions (the 256 completion tokens of 1,024) is alive beside them; not under no_grad
        plan = plan_for(ctx_of(tmp_path, "1.16.0", f", beta={beta}" + EVAL, targs=EVAL_DS), Overrides())[0]
        assert plan.jsd_single_kl and plan.jsd_mask_copy == copy
        assert jsd_loss_bytes(plan) == 2 * 151_936 * 4 * (2 * 1024 + 7 * 1024 + copy)
        assert eval_logits_bytes(plan) == 8 * 151_936 * 4 * (2 * 1024 + 7 * 1024)
    assert not plan_for(ctx_of(tmp_path, "1.16.0", ", beta=0.1"), Overrides())[0].jsd_single_kl


def test_beta_zero_still_builds_the_mixture_before_0_16(tmp_path):
    """0.13.0-0.15.2 generalized_jsd_loss has no branch on beta (0.13.0 gkd_trainer.py:189-201): the mixture's 15."""
    plan = plan_for(ctx_of(tmp_path, "0.15.2", ", beta=0.0"), Overrides())[0]
    assert not plan.jsd_single_kl
    assert plan_for(ctx_of(tmp_path, "0.16.0", ", beta=0.0"), Overrides())[0].jsd_single_kl


def test_trl_0_22_checkpoints_by_default_so_gkd_generates_without_a_cache(tmp_path):
    """SFTConfig's (so GKDConfig's) gradient_checkpointing defaults to True from TRL 0.22: GKDTrainer then builds
    its GenerationConfig with use_cache=False (0.22.2 gkd_trainer.py:158); 0.19.1's default is False."""
    assert plan_for(ctx_of(tmp_path, "0.22.2"), Overrides())[0].generation.cache is False
    assert plan_for(ctx_of(tmp_path, "0.19.1"), Overrides())[0].generation.cache is True
    assert plan_for(ctx_of(tmp_path, "0.22.2", ", gradient_checkpointing=False"), Overrides())[0].generation.cache


def test_tl303_words_gkds_own_levers(tmp_path):
    """TL303's account of a GKD generation phase (rules/tl303_generation_peak.py `describe`): lmbda, max_new_tokens,
    the batch and checkpointing's use_cache=False; never GRPO's steps_per_generation / generation_batch_size or vLLM.
    (At realistic settings GKD's training step, with its JSD tensors, stays above its generation phase, so the rule
    itself does not fire: the wording is checked on the real plans of both generation shapes.)"""
    from trainlint.rules.tl303_generation_peak import describe

    ctx = ctx_of(tmp_path, "0.19.1")  # checkpointing off by default: a KV cache
    plan = plan_for(ctx, Overrides())[0]
    part, size = max(generation_parts(plan), key=lambda kv: kv[1])
    what, advice = describe(ctx, plan, part, size)
    assert part == "kv_cache" and what.startswith("HF generate's KV cache for 2 completions x 1,024 tokens is ~")
    assert advice == ("lower max_new_tokens or per_device_train_batch_size, or lmbda (the share of steps on which the "
                      "student generates; 0 without seq_kd: never); or set gradient_checkpointing=True: GKDTrainer then "
                      "generates with use_cache=False (no KV cache; each new token re-runs the whole prefix: slower)")
    ctx = ctx_of(tmp_path, "1.16.0")  # checkpointing on by default from 0.22: no cache
    plan = plan_for(ctx, Overrides())[0]
    part, size = max(generation_parts(plan), key=lambda kv: kv[1])
    what, advice = describe(ctx, plan, part, size)
    assert part == "generate_step"
    assert what.startswith("without a KV cache (use_cache=False under gradient checkpointing) the last decoding step "
                           "is a no-grad forward over 2 x 1,024 tokens, ~")
    for text in (what, advice):
        assert "steps_per_generation" not in text and "vLLM" not in text and "generation_batch_size" not in text


def test_a_teacher_named_by_id_is_counted_at_its_own_size(tmp_path):
    """`teacher_model="Qwen/Qwen2.5-7B"` is loaded by the trainer (create_model_from_path / from_pretrained): its
    parameters are the catalog's for that id, not the student's (they were counted as the student's before)."""
    from trainlint.knowledge.models import lookup_model

    src = GKD.format(module="trl.experimental.gkd", student=STUDENT, dtype="dtype", extra="", targs="")
    for teacher, want in (("Qwen/Qwen2.5-7B", lookup_model("Qwen/Qwen2.5-7B", tmp_path).num_parameters),
                          ("someone/unknown-teacher", None)):
        (tmp_path / "requirements.txt").write_text("trl==1.16.0\ntransformers==5.25.0\n")
        (tmp_path / "train.py").write_text(src.replace('teacher_model="Qwen/Qwen2.5-0.5B-Instruct"',
                                                       f'teacher_model="{teacher}"'))
        project_pins.cache_clear()
        clear_caches()
        ctx = lint_file(tmp_path / "train.py", Settings(root=tmp_path), set()).context
        plan, _, notes, _ = plan_for(ctx, Overrides())
        if want is None:
            assert plan.models == (("teacher", plan.geometry.params * 2),)
            assert "teacher model 'someone/unknown-teacher' unknown: counted at the trained model's size" in notes
        else:
            assert want > 7_000_000_000 and plan.models == (("teacher", want * 2),)


def test_seq_kd_the_teacher_generates_with_its_own_model_and_the_phase_is_the_larger(tmp_path):
    """seq_kd=True: the teacher generates (0.19.1 gkd_trainer.py:287-303: before the student in the same step <= 1.0,
    instead of it >= 1.8), never at the same time as the student, so the phase is the larger of the two; a 7B
    teacher by id (Qwen2.5-7B: 28 layers, 4 KV heads of 128) makes the KV cache its own: 2 x 28 x 4 x 128 x 2 rows x
    1,024 tokens x 2 bytes; the student's (24 x 2 x 64) is smaller."""
    from trainlint.memory.phases import kv_cache_bytes

    src = GKD.format(module="trl", student=STUDENT, dtype="torch_dtype",
                     extra=', seq_kd=True, teacher_model_init_kwargs={"torch_dtype": "bfloat16"}', targs="")
    (tmp_path / "requirements.txt").write_text("trl==0.19.1\ntransformers==4.57.6\n")
    (tmp_path / "train.py").write_text(src.replace('teacher_model="Qwen/Qwen2.5-0.5B-Instruct"',
                                                   'teacher_model="Qwen/Qwen2.5-7B"'))
    project_pins.cache_clear()
    clear_caches()
    ctx = lint_file(tmp_path / "train.py", Settings(root=tmp_path), set()).context
    plan = plan_for(ctx, Overrides())[0]
    assert resolve(ctx).generation.why == "the student and the teacher (seq_kd) generates"
    teacher_geo, width = plan.generation.teacher
    assert (teacher_geo.layers, teacher_geo.kv_heads, teacher_geo.head_dim, width) == (28, 4, 128, 2)
    parts = dict(generation_parts(plan))
    assert parts["kv_cache"] == 2 * 28 * 4 * 128 * 2 * 1024 * 2 == kv_cache_bytes(teacher_geo, 2, 1024, 2)
    assert parts["kv_cache"] > kv_cache_bytes(plan.geometry, 2, 1024, 2)
    # the same teacher, lmbda=0: only the teacher generates, with the same parts
    (tmp_path / "train.py").write_text((tmp_path / "train.py").read_text().replace("seq_kd=True", "seq_kd=True, "
                                                                                   "lmbda=0.0"))
    clear_caches()
    ctx = lint_file(tmp_path / "train.py", Settings(root=tmp_path), set()).context
    plan = plan_for(ctx, Overrides())[0]
    assert plan.generation.student is False and dict(generation_parts(plan)) == parts


DISTILL = '''
from transformers import AutoModelForCausalLM
from trl.experimental.distillation import DistillationConfig, DistillationTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", dtype="bfloat16")
args = DistillationConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024{extra})
trainer = DistillationTrainer(model=model, teacher_model="Qwen/Qwen2.5-0.5B-Instruct", args=args,
                              train_dataset=ds["train"]{targs})
'''


def distill_ctx(tmp_path: Path, trl: str, extra: str = "", targs: str = ""):
    (tmp_path / "requirements.txt").write_text(f"trl=={trl}\ntransformers==4.57.6\n")
    (tmp_path / "train.py").write_text(DISTILL.format(extra=extra, targs=targs))
    project_pins.cache_clear()
    clear_caches()
    return lint_file(tmp_path / "train.py", Settings(root=tmp_path), set()).context


def test_distillation_trainer_1_3_to_1_9_is_gkds_jsd_on_the_completion_with_the_reverse_kl_by_default(tmp_path):
    """DistillationTrainer 1.3-1.9 (knowledge/trl_trainers.py "DistillationTrainer"): the generalized JSD over the
    completion's max_completion_length (default 512) positions, DistillationConfig's default beta 1.0 (the reverse
    KL: 7 tensors and the mask's copy of the 512 labelled positions); the evaluation step is its loss under no_grad
    (no prediction_step of its own); from 1.10 the chunked divergence loss builds none of it."""
    ctx = distill_ctx(tmp_path, "1.9.2", ", eval_strategy='steps', per_device_eval_batch_size=4",
                      ', eval_dataset=ds["test"]')
    plan, _, notes, _ = plan_for(ctx, Overrides())
    assert (plan.jsd_positions, plan.jsd_single_kl, plan.jsd_mask_copy) == (512, True, 512)
    assert jsd_loss_bytes(plan) == 2 * 151_936 * 4 * (2 * 1024 + 7 * 512 + 512)
    assert "max_completion_length 512: DistillationConfig's default" in notes
    assert plan.evaluation.jsd and plan.evaluation.batch == 4
    assert eval_logits_bytes(plan) == 4 * 151_936 * 4 * (2 * 1024 + 7 * 512)
    mixture = plan_for(distill_ctx(tmp_path, "1.9.2", ", beta=0.5, max_completion_length=256"), Overrides())[0]
    assert (mixture.jsd_positions, mixture.jsd_single_kl) == (256, False)
    assert jsd_loss_bytes(mixture) == 2 * 151_936 * 4 * (2 * 1024 + 15 * 256)
    assert plan_for(distill_ctx(tmp_path, "1.10.0"), Overrides())[0].jsd_positions is None


JSD_MEASURE = r'''
import json, sys
import torch
from trl.experimental.gkd import GKDTrainer
from trainlint.verify.harness.memory_cpu import make_cpu_tracker

def run(beta, grad, labelled):
    rows, seq, vocab = 2, 65, 4096
    leaf = torch.randn(rows, seq, vocab, requires_grad=grad)
    teacher = torch.randn(rows, seq, vocab)
    labels = torch.zeros(rows, seq - 1, dtype=torch.long)
    labels[:, :seq - 1 - labelled] = -100
    tracker = make_cpu_tracker(torch)
    with tracker, (torch.enable_grad() if grad else torch.no_grad()):
        before = tracker.current
        student = leaf * 1  # the LM head's output: one [rows x seq x vocab] tensor
        GKDTrainer.generalized_jsd_loss(student[:, :-1], teacher[:, :-1], labels=labels, beta=beta, temperature=0.9)
    n = rows * (seq - 1) * vocab * 4
    # the leaf and the teacher's logits are counted when an op first reads them (memory_cpu), the student's made
    # inside: three [rows x seq x vocab] fp32 tensors that are the models', not the loss's
    return (tracker.peak - before - 3 * rows * seq * vocab * 4) / n

json.dump({"mixture": run(0.5, True, 48), "mixture_nograd": run(0.5, False, 48), "forward_kl": run(0.0, True, 48),
           "reverse_kl": run(1.0, True, 48), "reverse_kl_nograd": run(1.0, False, 48)}, sys.stdout)
'''


def test_jsd_tensor_counts_on_real_tensors_with_the_labels_mask(tmp_path):
    """TRL 1.16's generalized_jsd_loss on real CPU tensors with labels (48 of 64 positions labelled), under verify's
    live-bytes tracker: 15 N with grad, 10 under no_grad, 7 for the forward KL, and for the reverse KL 7 + the
    mask's copy of the labelled share (0.75 N) with grad (memory.estimate JSD_* and Plan.jsd_mask_copy)."""
    import json
    import os
    import subprocess
    import sys

    from trainlint.memory.estimate import JSD_KL_TENSORS, JSD_NOGRAD_TENSORS, JSD_TENSORS

    script = tmp_path / "measure.py"
    script.write_text(JSD_MEASURE)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    want = {"mixture": JSD_TENSORS, "mixture_nograd": JSD_NOGRAD_TENSORS, "forward_kl": JSD_KL_TENSORS,
            "reverse_kl": JSD_KL_TENSORS + 0.75, "reverse_kl_nograd": JSD_KL_TENSORS}
    # (the boolean mask and its indices are a few hundred bytes: 0.001 N here)
    assert all(abs(got[k] - want[k]) < 0.01 for k in want), got


def test_the_jsd_is_fp32_under_mixed_precision_unless_deepspeed_or_off(tmp_path):
    """accelerate's `convert_outputs_to_fp32` wraps both models' forward under native bf16 / fp16 mixed precision
    (accelerate 1.15.0 accelerator.py:1790-1801), so the JSD reads fp32 logits; DeepSpeed leaves native_amp off
    (l.557-566), and without mixed precision the logits keep the bf16 weights' dtype. The config's bf16 defaults to
    True from TRL 0.19 (0.19.1 sft_config.py:252), not in 0.18.2."""
    assert plan_for(ctx_of(tmp_path, "1.16.0"), Overrides())[0].jsd_bytes == 4
    assert plan_for(ctx_of(tmp_path, "1.16.0", ", bf16=False"), Overrides())[0].jsd_bytes is None
    off = plan_for(ctx_of(tmp_path, "1.16.0", ", bf16=False"), Overrides())[0]
    assert jsd_loss_bytes(off) == 2 * 151_936 * 2 * (2 * 1024 + 15 * 1024)
    assert plan_for(ctx_of(tmp_path, "1.16.0", ', deepspeed="ds.json"'), Overrides())[0].jsd_bytes is None
    assert plan_for(ctx_of(tmp_path, "0.18.2"), Overrides())[0].jsd_bytes is None
    assert plan_for(ctx_of(tmp_path, "0.18.2", ", bf16=True"), Overrides())[0].jsd_bytes == 4


def test_distillation_1_3_to_1_9_generates_each_slice_with_hf_generate_or_vllm(tmp_path):
    """DistillationTrainer 1.3-1.9: each gradient-accumulation slice of per_device_train_batch_size rows generates
    max_completion_length tokens (1.9.0 distillation_trainer.py:797-812) with the default cache after prompts of
    max_length - max_completion_length; no scoring pass; vLLM colocate by default when use_vllm (share 0.3); lmbda=0
    never generates before 1.9. From 1.10 not modelled."""
    gen = resolve(distill_ctx(tmp_path, "1.9.2")).generation
    g = gen.value
    assert (g.trainer, g.rows, g.prompt, g.completion, g.logps_rows, g.cache, g.vllm) == \
        ("DistillationTrainer", 2, 512, 512, 0, True, None)
    plan = plan_for(distill_ctx(tmp_path, "1.9.2"), Overrides())[0]
    assert set(dict(generation_parts(plan))) == {"kv_cache", "generate_step"} and plan.logits_seq is None
    colocated = plan_for(distill_ctx(tmp_path, "1.9.2", ", use_vllm=True"), Overrides())[0]
    assert (colocated.generation.vllm, colocated.vllm_share) == ("colocate", 0.3)
    assert resolve(distill_ctx(tmp_path, "1.5.1", ", lmbda=0.0")).generation.value is None
    assert resolve(distill_ctx(tmp_path, "1.10.0")).generation.value is None


def test_tl303_words_distillations_own_levers(tmp_path):
    from trainlint.rules.tl303_generation_peak import describe

    ctx = distill_ctx(tmp_path, "1.9.2")
    plan = plan_for(ctx, Overrides())[0]
    part, size = max(generation_parts(plan), key=lambda kv: kv[1])
    what, advice = describe(ctx, plan, part, size)
    assert what.startswith("HF generate's KV cache for 2 completions x 1,024 tokens is ~")
    assert advice == ("lower per_device_train_batch_size (the rows each slice generates at once) or "
                      "max_completion_length, or generate with vLLM (use_vllm)")
