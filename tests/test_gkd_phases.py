"""GKDTrainer's teacher, on-policy generation and generalized-JSD loss per TRL version (knowledge/trl_trainers.py
"GKD", run/components.py `_gkd_generation` / `_teacher_init_kwargs_dtype`, memory.estimate `jsd_loss_bytes`).
Fixtures are our own scripts in the shape of TRL's examples/scripts/gkd.py (a student, a teacher by name or loaded,
GKDConfig's lmbda / seq_kd / max_new_tokens)."""

from __future__ import annotations

from pathlib import Path

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import lint_file
from trainlint.memory.estimate import generation_parts, jsd_loss_bytes
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
trainer = GKDTrainer(model=model, teacher_model="Qwen/Qwen2.5-0.5B-Instruct", args=args, train_dataset=ds["train"])
trainer.train()
'''


def ctx_of(tmp_path: Path, trl: str, extra: str = "", transformers: str = "4.57.6"):
    new = trl.startswith("1.")
    src = GKD.format(module="trl.experimental.gkd" if new else "trl", student=STUDENT,
                     dtype="dtype" if new else "torch_dtype", extra=extra)
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
    The loss bytes: the two models' logits plus JSD_TENSORS (15) vocabulary-sized tensors per position read."""
    old = plan_for(ctx_of(tmp_path, "0.19.1"), Overrides())[0]
    new = plan_for(ctx_of(tmp_path, "1.16.0"), Overrides())[0]
    assert (old.jsd_positions, new.jsd_positions) == (256, 1024)
    assert jsd_loss_bytes(old) == 2 * 151_936 * 2 * (2 * 1024 + 15 * 256)
    assert jsd_loss_bytes(new) == 2 * 151_936 * 2 * (2 * 1024 + 15 * 1024)
    assert old.logits_seq is None and new.logits_seq is None  # the student's forward keeps every position's logits


def test_liger_jsd_leaves_the_full_logits_formula(tmp_path):
    """0.22-1.13 `use_liger_kernel=True` is LigerFusedLinearJSDLoss (knowledge/trl_trainers.py LOSS): no JSD tensors."""
    plan = plan_for(ctx_of(tmp_path, "0.22.2", ", use_liger_kernel=True"), Overrides())[0]
    assert plan.jsd_positions is None and plan.loss == "liger"
