"""The Run (trainlint.run): one immutable, typed description of what will execute, each decision with its span and
whether it is certain or assumed. Truth used: the library defaults the decisions cite (transformers 5.25.0
training_args.py optim default; transformers' default attention per version, knowledge/libraries.py;
knowledge/libraries.py gc_reentrant_default), and the scripts written here: a value written in the script is
certain and points at its keyword, a library default is assumed and says so. planning.plan_for must read the same
decisions (the estimate's Plan is made of them, its assumptions are their notes)."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import lint_file
from trainlint.memory.estimate import EvalPhase
from trainlint.planning import Overrides, plan_for
from trainlint.run import Decided, Run, resolve
from trainlint.run.batch import args_shape

LLAMA = "meta-llama/Llama-3.2-1B"


def run_of(tmp_path: Path, source: str, transformers: str = "5.25.0", trl: str = "1.16.0") -> Run:
    (tmp_path / "requirements.txt").write_text(f"transformers=={transformers}\ntrl=={trl}\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    project_pins.cache_clear()
    clear_caches()
    ctx = lint_file(script, Settings(root=tmp_path), set()).context
    assert ctx is not None and ctx.versions.transformers.version == transformers
    return resolve(ctx)


def trainer_script(args: str = "", load: str = 'dtype="bfloat16"', trainer: str = "") -> str:
    return f'''
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("{LLAMA}", {load})
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4{args})
trainer = Trainer(model=model, args=args{trainer})
'''


def text_at(run: Run, decided: Decided) -> str:
    """The script's text under a decision's span (one line)."""
    span = decided.span
    line = run.ctx.text.splitlines()[span.line - 1]
    return line[span.col - 1:span.end_col - 1]


# -- optimizer --------------------------------------------------------------------------------------------------
def test_optim_unset_is_the_trainers_fused_adamw_assumed_with_its_note(tmp_path):
    optim = run_of(tmp_path, trainer_script()).optimizer
    assert optim.value == "adamw_torch_fused"
    assert optim.assumed and optim.span is None
    assert optim.assumption == ("optim not set: transformers 5.25.0's default adamw_torch_fused (assuming torch >= 2.8 "
                                "where it runs; older torch gets adamw_torch)")


def test_optim_unset_before_4_54_is_adamw_torch(tmp_path):
    optim = run_of(tmp_path, trainer_script(load='torch_dtype="bfloat16"'), transformers="4.50.0").optimizer
    assert (optim.value, optim.certain, optim.notes) == ("adamw_torch", False, ())


def test_optim_written_is_certain_and_points_at_its_keyword(tmp_path):
    run = run_of(tmp_path, trainer_script(args=', optim="adafactor"'))
    assert (run.optimizer.value, run.optimizer.certain, run.optimizer.assumption) == ("adafactor", True, None)
    assert text_at(run, run.optimizer) == 'optim="adafactor"'


# -- attention --------------------------------------------------------------------------------------------------
def test_attention_unset_is_the_versions_default_and_assumed(tmp_path):
    run = run_of(tmp_path, trainer_script())
    attention = run.trained.attention
    assert (attention.value, attention.certain, attention.span) == ("sdpa", False, None)
    assert attention.why == "transformers 5.25.0 default"
    old = run_of(tmp_path, trainer_script(load=""), transformers="4.35.0").trained.attention
    assert (old.value, old.certain) == ("eager", False)
    assert "< 4.36" in old.why


def test_attention_written_is_certain_at_its_keyword(tmp_path):
    run = run_of(tmp_path, trainer_script(load='dtype="bfloat16", attn_implementation="eager"'))
    attention = run.trained.attention
    assert (attention.value, attention.certain) == ("eager", True)
    assert text_at(run, attention) == 'attn_implementation="eager"'
    assert run.trained.kernel.value == "eager"


def test_fp32_gqa_sdpa_falls_back_to_the_math_kernel(tmp_path):
    run = run_of(tmp_path, trainer_script(load='dtype=torch.float32, attn_implementation="sdpa"'))
    assert run.trained.math_fallback is not None
    kernel = run.trained.kernel
    assert kernel.value == "sdpa-math" and kernel.notes and "math kernel" in kernel.notes[0]
    bf16 = run_of(tmp_path, trainer_script(load='dtype=torch.bfloat16, attn_implementation="sdpa"'))
    assert bf16.trained.math_fallback is None and bf16.trained.kernel.value == "sdpa"


# -- loss -------------------------------------------------------------------------------------------------------
def test_liger_flag_makes_the_loss_fused_at_the_flags_span(tmp_path):
    run = run_of(tmp_path, trainer_script(args=", use_liger_kernel=True"))
    path = run.loss.path
    assert (path.value, path.certain) == ("liger", True)
    assert text_at(run, path) == "use_liger_kernel=True"
    assert run.loss.shape is None and run.loss.reference_copy is None


def test_plain_trainer_computes_the_full_logits(tmp_path):
    path = run_of(tmp_path, trainer_script()).loss.path
    assert (path.value, path.certain, path.span) == ("full", False, None)


def test_sft_trainer_on_trl_1_16_is_chunked_by_default(tmp_path):
    run = run_of(tmp_path, f'''
from trl import SFTConfig, SFTTrainer

args = SFTConfig(output_dir="out", max_length=1024)
trainer = SFTTrainer(model="{LLAMA}", args=args, train_dataset=data)
''')
    assert (run.loss.path.value, run.loss.path.certain) == ("chunked", False)


def test_apply_liger_kernel_is_fused_at_the_call(tmp_path):
    run = run_of(tmp_path, trainer_script().replace(
        "from transformers", "from liger_kernel.transformers import apply_liger_kernel_to_llama\n"
                             "apply_liger_kernel_to_llama()\nfrom transformers"))
    assert run.fused_loss_applied and run.loss.path.value == "liger" and run.loss.path.certain
    assert text_at(run, run.loss.path) == "apply_liger_kernel_to_llama()"


# -- checkpointing ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version, reentrant", [("4.57.0", True), ("5.25.0", False)])
def test_checkpointing_reentrant_default_per_transformers(tmp_path, version, reentrant):
    load = 'dtype="bfloat16"' if version.startswith("5") else 'torch_dtype="bfloat16"'
    run = run_of(tmp_path, trainer_script(args=", gradient_checkpointing=True", load=load), transformers=version)
    gc = run.checkpointing
    assert (gc.on.value, gc.on.certain) == (True, True)
    assert text_at(run, gc.on) == "gradient_checkpointing=True"
    assert (gc.reentrant.value, gc.reentrant.certain) == (reentrant, False)
    assert "default" in gc.reentrant.why


def test_checkpointing_use_reentrant_written_is_certain(tmp_path):
    run = run_of(tmp_path, trainer_script(
        args=', gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True}'))
    assert (run.checkpointing.reentrant.value, run.checkpointing.reentrant.certain) == (True, True)


def test_checkpointing_off_by_default_on_a_trainer(tmp_path):
    gc = run_of(tmp_path, trainer_script()).checkpointing
    assert gc.on.value is False and gc.reentrant.value is None


# -- batch (TL401 asks it) --------------------------------------------------------------------------------------
def test_batch_written_certain_accumulation_default_assumed(tmp_path):
    run = run_of(tmp_path, trainer_script())
    batch = run.batch
    assert (batch.micro.value, batch.micro.certain) == (4, True)
    assert text_at(run, batch.micro) == "per_device_train_batch_size=4"
    assert (batch.accumulation.value, batch.accumulation.certain) == (1, False)
    shape = batch.shape_for(run.ctx.facts.args_objects[0])
    assert (shape.batch, shape.accum, shape.accum_span) == (4, 1, None)
    assert shape == args_shape(run.ctx.facts.args_objects[0])


def test_sft_default_sequence_length_is_assumed(tmp_path):
    run = run_of(tmp_path, f'''
from trl import SFTConfig, SFTTrainer

args = SFTConfig(output_dir="out", packing=True)
trainer = SFTTrainer(model="{LLAMA}", args=args, train_dataset=data)
''')
    assert (run.batch.seq_len.value, run.batch.seq_len.certain) == (1024, False)
    assert (run.batch.packing.value, run.batch.packing.certain) == (True, True)


# -- eval phase -------------------------------------------------------------------------------------------------
def test_eval_phase_with_default_eval_batch_is_assumed(tmp_path):
    run = run_of(tmp_path, trainer_script(args=', eval_strategy="steps"',
                                          trainer=", eval_dataset=ds, compute_metrics=metrics"))
    evaluation = run.evaluation
    assert evaluation.value == EvalPhase(8, kept_bytes=2, kept_batches=None)
    assert evaluation.assumed and evaluation.notes[0].startswith("eval batch 8")
    assert run_of(tmp_path, trainer_script()).evaluation.value is None


# -- the Run is immutable and made once --------------------------------------------------------------------------
def test_run_is_frozen_and_made_once_per_context(tmp_path):
    run = run_of(tmp_path, trainer_script())
    assert resolve(run.ctx) is run
    first = run.optimizer
    assert run.optimizer is first  # decided once
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.ctx = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.value = "sgd"
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.trained.load = None
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.batch.micro = None


# -- planning reads the Run -------------------------------------------------------------------------------------
def test_the_plan_is_made_of_the_runs_decisions(tmp_path):
    run = run_of(tmp_path, trainer_script(args=', eval_strategy="steps", gradient_checkpointing=True',
                                          trainer=", eval_dataset=ds, compute_metrics=metrics"))
    plan, model, notes, unknown = plan_for(run.ctx, Overrides())
    trained = run.trained
    assert model is trained.load and unknown == ["sequence length"]
    assert plan.geometry == trained.geometry.value
    assert (plan.dtype_bytes, plan.act_bytes) == trained.precision.value
    assert plan.attention == trained.kernel.value == "sdpa"
    assert plan.loss == run.loss.path.value == "full"
    assert plan.optimizer == run.optimizer.value == "adamw_torch_fused"
    assert plan.checkpointing is True and plan.evaluation == run.evaluation.value
    assert (plan.batch, plan.seq) == (4, 1)  # no sequence length written: unknown, planned as 1
    assert run.batch.seq_len.value is None
    # the estimate's assumptions are the decisions' notes, in the order the estimate lists them
    assert plan.assumptions == tuple(notes) == (*trained.geometry.notes, *trained.precision.notes, *run.lora.notes,
                                                *trained.kernel.notes, *run.checkpointing.on.notes,
                                                *run.sharding.notes, *run.optimizer.notes, *run.evaluation.notes)
    assert any(n.startswith("optim not set") for n in plan.assumptions)


def test_no_rule_imports_another_rule_and_planning_imports_no_rule():
    """The decisions rules shared (attention, precision, loss, eval, batch, checkpointing) live in trainlint.run:
    grimp's graph (module- and function-level imports) has no arrow from one rule module to another, and none
    from planning to the rules."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (test extra)")
    graph = grimp.build_graph("trainlint", cache_dir=None)
    rules = {m for m in graph.modules if m.startswith("trainlint.rules.tl")}
    assert len(rules) >= 10
    arrows = [(m, i) for m in sorted(rules) for i in graph.find_modules_directly_imported_by(m) if i in rules]
    assert arrows == []
    assert not [i for i in graph.find_modules_directly_imported_by("trainlint.planning")
                if i.startswith("trainlint.rules")]
