"""The Run's components (policy, reference, reward, value, teacher) and the generation phase of the RL trainers, one
test per behaviour that changes across TRL versions (knowledge/trl_trainers.py "Components" / "Generation"), on
scripts in the shapes of TRL's examples/scripts (dpo.py, grpo.py, ppo.py, gkd.py), open-r1's grpo.py and the
alignment-handbook's run_dpo.py; and the estimate's phases and components built from them."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from trainlint.cli import main
from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import lint_file
from trainlint.memory import GIB
from trainlint.memory.estimate import estimate
from trainlint.memory.phases import generation_peak, kv_cache_bytes
from trainlint.planning import Overrides, plan_for
from trainlint.run import Run, resolve

QWEN = "Qwen/Qwen2.5-0.5B-Instruct"


def run_of(tmp_path: Path, source: str, trl: str = "1.16.0", transformers: str = "4.57.6") -> Run:
    (tmp_path / "requirements.txt").write_text(f"transformers=={transformers}\ntrl=={trl}\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    project_pins.cache_clear()
    clear_caches()
    ctx = lint_file(script, Settings(root=tmp_path), set()).context
    assert ctx is not None and ctx.versions.trl.version == trl
    return resolve(ctx)


def ref(run: Run):
    return run.components.get("reference")


# --- GRPO (open-r1 src/open_r1/grpo.py shape: model id string, reward functions, GRPOConfig) -------------------
GRPO = '''
from datasets import load_dataset
from trl import GRPOConfig, GRPOTrainer


def accuracy_reward(completions, solution, **kwargs):
    return [float(c == s) for c, s in zip(completions, solution)]


dataset = load_dataset("open-r1/OpenR1-Math-220k", split="train")
training_args = GRPOConfig(output_dir="out", per_device_train_batch_size=8, gradient_accumulation_steps=4,
                           num_generations=8, max_completion_length=1024, bf16=True{extra})
trainer = GRPOTrainer(model="{model}", reward_funcs=[accuracy_reward], args=training_args,
                      train_dataset=dataset{trainer_extra})
trainer.train()
'''


def grpo(extra: str = "", trainer_extra: str = "", model: str = QWEN) -> str:
    return GRPO.replace("{extra}", extra).replace("{trainer_extra}", trainer_extra).replace("{model}", model)


def test_grpo_beta_default_keeps_the_reference_until_0_19(tmp_path):
    """beta defaults to 0.04 in 0.14-0.18 (a reference copy, assumed), to 0.0 from 0.19 (none)."""
    old = ref(run_of(tmp_path, grpo(), "0.18.2"))
    assert old.resident.value is True and old.how == "copy" and not old.resident.certain
    assert old.drop == "beta=0.0" and "beta 0.04" in old.resident.notes[0]
    new = ref(run_of(tmp_path, grpo(), "0.19.1"))
    assert new.resident.value is False and new.how == "none (beta=0.0)"


def test_grpo_beta_zero_drops_the_reference_only_from_0_16(tmp_path):
    src = grpo(", beta=0.0")
    assert ref(run_of(tmp_path, src, "0.15.2")).resident.value is True  # 0.15.2 grpo_trainer.py:252-258
    assert ref(run_of(tmp_path, src, "0.16.1")).resident.value is False  # 0.16.1 :316-318


def test_grpo_written_beta_is_certain_and_peft_disables_the_adapter_instead(tmp_path):
    written = ref(run_of(tmp_path, grpo(", beta=0.04"), "1.16.0"))
    assert written.resident.value is True and written.resident.certain
    peft = ref(run_of(tmp_path, grpo(", beta=0.04", ", peft_config=LoraConfig(r=16)"), "1.16.0"))
    assert peft.resident.value is False and peft.how == "adapter disabled"


def test_grpo_batch_counts_prompts_in_0_14_and_completions_from_0_15(tmp_path):
    g14 = run_of(tmp_path, grpo(), "0.14.0").generation.value
    assert (g14.rows, g14.logps_rows) == (64, 64)  # 8 prompts x 8 generations, one logps forward
    g15 = run_of(tmp_path, grpo(), "0.15.2").generation.value
    assert (g15.rows, g15.logps_rows) == (8, 8)


def test_grpo_steps_per_generation_from_0_18_and_logps_chunked_from_0_17(tmp_path):
    g16 = run_of(tmp_path, grpo(), "0.16.1").generation.value
    g17 = run_of(tmp_path, grpo(), "0.17.0").generation.value
    g18 = run_of(tmp_path, grpo(), "0.18.2").generation.value
    assert (g16.rows, g17.rows, g18.rows) == (8, 8, 32)  # 0.18: per_device x steps_per_generation (= GA 4)
    assert g18.logps_rows == 8  # chunked by per_device_train_batch_size
    g = run_of(tmp_path, grpo(", generation_batch_size=64"), "1.16.0").generation.value
    assert g.rows == 64
    g = run_of(tmp_path, grpo(", steps_per_generation=2"), "1.16.0").generation.value
    assert g.rows == 16


def test_grpo_fused_logps_from_1_15_and_completion_default_per_version(tmp_path):
    src = GRPO.replace(", max_completion_length=1024", "").replace("{extra}", "").replace(
        "{trainer_extra}", "").replace("{model}", QWEN)
    old, new = run_of(tmp_path, src, "1.14.0").generation.value, run_of(tmp_path, src, "1.16.0").generation.value
    assert (old.fused_logps, new.fused_logps) == (False, True)
    before = run_of(tmp_path, src, "1.8.0").generation.value
    assert (before.completion, old.completion) == (256, 512)  # grpo_config.py 1.8.0:486, 1.10.0:492


@pytest.mark.parametrize("trl,mode,share", [("0.17.0", "server", 0.9), ("0.18.2", "server", 0.3),
                                            ("0.29.1", "server", 0.3), ("1.0.0", "colocate", 0.3)])
def test_vllm_mode_and_share_defaults_per_version(tmp_path, trl, mode, share):
    g = run_of(tmp_path, grpo(", use_vllm=True"), trl).generation.value
    assert (g.vllm, g.vllm_share) == (mode, share)


# --- DPO (TRL examples/scripts/dpo.py, alignment-handbook run_dpo.py shapes) ---------------------------------
DPO = '''
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("{model}", torch_dtype=torch.bfloat16)
tokenizer = AutoTokenizer.from_pretrained("{model}")
training_args = DPOConfig(output_dir="out", per_device_train_batch_size=4, max_length=2048{extra})
trainer = DPOTrainer(model=model, args=training_args, train_dataset=ds, processing_class=tokenizer{trainer_extra})
trainer.train()
'''


def dpo(extra: str = "", trainer_extra: str = "") -> str:
    return DPO.replace("{extra}", extra).replace("{trainer_extra}", trainer_extra).replace("{model}", QWEN)


@pytest.mark.parametrize("trl,resident", [("0.26.2", False), ("0.29.1", True), ("1.0.0", True), ("1.5.1", False),
                                          ("1.16.0", False)])
def test_dpo_precompute_ref_log_probs_drops_the_reference_except_0_29_to_1_4(tmp_path, trl, resident):
    r = ref(run_of(tmp_path, dpo(", precompute_ref_log_probs=True"), trl))
    assert r.resident.value is resident
    if resident:
        assert r.drop == "upgrade TRL to >= 1.5"


@pytest.mark.parametrize("trl,width", [("0.26.2", 2), ("0.29.1", 4), ("1.13.0", 4), ("1.16.0", 2)])
def test_dpo_reference_dtype_follows_model_init_kwargs_in_0_29_to_1_15(tmp_path, trl, width):
    """A bf16 policy passed as an instance: a deep copy (<= 0.28), create_model_from_path's float32 (0.29-1.15), the
    policy's dtype (1.16: setdefault("dtype", self.model.dtype))."""
    assert ref(run_of(tmp_path, dpo(), trl)).dtype_bytes.value == width


def test_dpo_model_init_kwargs_dtype_sets_the_reference_dtype(tmp_path):
    r = ref(run_of(tmp_path, dpo(', model_init_kwargs={"dtype": "bfloat16"}'), "1.13.0"))
    assert r.dtype_bytes.value == 2


def test_dpo_with_peft_has_no_second_model_and_force_use_ref_model_keeps_a_passed_one(tmp_path):
    peft = ref(run_of(tmp_path, dpo("", ", peft_config=peft_config"), "1.16.0"))
    assert peft.resident.value is False and peft.how == "adapter disabled"
    src = dpo(", force_use_ref_model=True", ", peft_config=peft_config, ref_model=ref_model").replace(
        "tokenizer = ", f'ref_model = AutoModelForCausalLM.from_pretrained("{QWEN}", torch_dtype=torch.float16)\n'
        "tokenizer = ")
    passed = ref(run_of(tmp_path, src, "0.19.1"))
    assert passed.resident.value is True and passed.how == "loaded" and passed.dtype_bytes.value == 2


@pytest.mark.parametrize("trainer", ["ORPO", "CPO"])
def test_orpo_and_cpo_have_no_reference(tmp_path, trainer):
    src = dpo().replace("DPO", trainer)
    run = run_of(tmp_path, src, "0.19.1")
    assert run.components.trainer == f"{trainer}Trainer" and ref(run) is None


# --- PPO, Online DPO, GKD, Reward ----------------------------------------------------------------------------
PPO = f'''
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
from trl import PPOConfig, PPOTrainer

policy = AutoModelForCausalLM.from_pretrained("{QWEN}", torch_dtype="bfloat16")
value_model = AutoModelForSequenceClassification.from_pretrained("{QWEN}", num_labels=1, torch_dtype="bfloat16")
reward_model = AutoModelForSequenceClassification.from_pretrained("{QWEN}", num_labels=1, torch_dtype="bfloat16")
args = PPOConfig(output_dir="out", per_device_train_batch_size=4)
trainer = PPOTrainer(args=args, processing_class=tok, model=policy, ref_model=None, reward_model=reward_model,
                     value_model=value_model, train_dataset=ds)
'''


def test_ppo_keeps_policy_reference_reward_and_value(tmp_path):
    run = run_of(tmp_path, PPO, "0.19.1")
    assert [(c.role, c.how, c.resident.value) for c in run.components.items] == [
        ("policy", "trained", True), ("reference", "copy", True), ("reward", "loaded", True),
        ("value", "loaded", True)]


def test_online_dpo_judge_is_not_a_resident_model_but_a_reward_model_is(tmp_path):
    base = f'''
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
from trl import OnlineDPOConfig, OnlineDPOTrainer, PairRMJudge

model = AutoModelForCausalLM.from_pretrained("{QWEN}", torch_dtype="bfloat16")
rm = AutoModelForSequenceClassification.from_pretrained("{QWEN}", num_labels=1, torch_dtype="bfloat16")
args = OnlineDPOConfig(output_dir="out")
trainer = OnlineDPOTrainer(model=model, args=args, train_dataset=ds, processing_class=tok, {{kw}})
'''
    judged = run_of(tmp_path, base.replace("{kw}", "judge=PairRMJudge()"), "0.19.1").components
    assert [(c.role, c.resident.value) for c in judged.items] == [("policy", True), ("reference", True),
                                                                   ("reward", False)]
    rewarded = run_of(tmp_path, base.replace("{kw}", "reward_model=rm"), "0.19.1").components
    assert [(c.role, c.resident.value) for c in rewarded.items] == [("policy", True), ("reference", True),
                                                                     ("reward", True)]


def test_gkd_teacher_is_resident_with_its_own_geometry(tmp_path):
    src = '''
from transformers import AutoModelForCausalLM
from trl import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", torch_dtype="bfloat16")
teacher_model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct", torch_dtype="bfloat16")
args = GKDConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024)
trainer = GKDTrainer(model=model, teacher_model=teacher_model, args=args, train_dataset=ds)
'''
    run = run_of(tmp_path, src, "0.19.1")
    teacher = run.components.get("teacher")
    assert teacher.resident.value and not teacher.same_model and teacher.dtype_bytes.value == 2
    plan = plan_for(run.ctx, Overrides())[0]
    [(role, size)] = plan.models
    assert role == "teacher" and 1.4e9 * 2 < size < 1.6e9 * 2  # Qwen2.5-1.5B's parameters in bf16


def test_reward_trainer_has_no_reference(tmp_path):
    src = f'''
from transformers import AutoModelForSequenceClassification
from trl import RewardConfig, RewardTrainer

model = AutoModelForSequenceClassification.from_pretrained("{QWEN}", num_labels=1)
trainer = RewardTrainer(model=model, args=RewardConfig(output_dir="out"), train_dataset=ds)
'''
    run = run_of(tmp_path, src, "0.19.1")
    assert [c.role for c in run.components.items] == ["policy"]


# --- the estimate: phases and components ---------------------------------------------------------------------
def test_rows_add_up_to_the_peak_and_the_reference_is_its_own_row(tmp_path):
    run = run_of(tmp_path, grpo(", beta=0.04"), "1.14.0")
    plan = plan_for(run.ctx, Overrides())[0]
    est = estimate(plan)
    assert sum(b for _, b in est.rows) == est.peak
    assert dict(est.rows)["models"] == plan.geometry.params * 4  # TRL loads a model id in fp32
    g = plan.generation
    assert plan.seq == 512 + 1024 and plan.logits_seq == 1024
    assert generation_peak(plan) > kv_cache_bytes(plan.geometry, g.rows, 1536, 2)


def test_estimate_json_has_the_generation_phase_and_the_vllm_verdict(tmp_path):
    (tmp_path / "requirements.txt").write_text("transformers==4.57.6\ntrl==1.16.0\n")
    (tmp_path / "train.py").write_text(textwrap.dedent(grpo(", use_vllm=True, vllm_gpu_memory_utilization=0.9")))
    out = CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--gpu", "24GB", "--format", "json"])
    data = json.loads(out.output)
    assert set(data["phases"]) == {"generation"} and data["vllm_colocated"] == int(0.9 * 24 * GIB)
    text = CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--gpu", "24GB"]).output
    assert "does NOT fit with vllm_gpu_memory_utilization=0.9" in text
    assert "fits only with vllm_gpu_memory_utilization <= 0." in text
    assert "other phases: generation (vLLM colocated, 32 completions x 1,536 tokens)" in text


def test_verdict_names_the_generation_phase_when_only_it_is_over_the_card(tmp_path):
    """256 completions of 4,608 tokens on Qwen2.5-1.5B (TL303's example): training ~36.2 GiB fits 40 GiB, HF
    generate's round (~48.9 GiB) does not."""
    src = '''
from trl import GRPOConfig, GRPOTrainer

args = GRPOConfig(output_dir="out", per_device_train_batch_size=16, gradient_accumulation_steps=16,
                  num_generations=16, max_completion_length=4096, gradient_checkpointing=True)
trainer = GRPOTrainer(model="Qwen/Qwen2.5-1.5B-Instruct", reward_funcs=[accuracy_reward], args=args,
                      train_dataset=dataset)
'''
    (tmp_path / "requirements.txt").write_text("transformers==4.57.6\ntrl==1.16.0\n")
    (tmp_path / "train.py").write_text(src)
    out = CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--gpu", "40GB"]).output
    assert "verdict: 40 GiB: fits for training; generation needs 9.5 GiB more" in out
    assert "kv cache of generate 31.5 GiB" in out


@pytest.mark.parametrize("kwargs,width", [("", 4), (', ref_model_init_kwargs={"torch_dtype": "bfloat16"}', 2)])
def test_dpo_reference_by_name_follows_ref_model_init_kwargs_before_0_29(tmp_path, kwargs, width):
    """0.19.1 dpo_trainer.py:297-303, :504-530: a ref_model id is loaded with ref_model_init_kwargs; without a
    torch_dtype transformers 4's from_pretrained loads fp32."""
    src = dpo(kwargs, f', ref_model="{QWEN}"')
    r = ref(run_of(tmp_path, src, "0.19.1"))
    assert r.how == "loaded" and r.dtype_bytes.value == width


@pytest.mark.parametrize("trl,width", [("1.0.0", 2), ("1.13.0", 4), ("1.16.0", 2)])
def test_kto_reference_dtype_from_model_init_kwargs_in_1_5_to_1_15(tmp_path, trl, width):
    """1.0.0 experimental/kto deep-copies the policy (:449); 1.5.1-1.13.0 create_model_from_path (fp32 default);
    1.16.0 :935 the policy's dtype."""
    src = dpo().replace("DPO", "KTO")
    assert ref(run_of(tmp_path, src, trl)).dtype_bytes.value == width


def test_grpo_sync_ref_model_keeps_the_reference(tmp_path):
    """sync_ref_model=True needs the reference copy (0.15.2 grpo_trainer.py:448); from 0.29 TRL rejects it with beta=0.0
    or PEFT (:779-792), so a resident reference is all a run that starts can have."""
    r = ref(run_of(tmp_path, grpo(", beta=0.04, sync_ref_model=True"), "0.29.1"))
    assert r.resident.value is True and r.resident.why == "beta=0.04 and sync_ref_model=True"


@pytest.mark.parametrize("trl,path", [("0.18.2", "full"), ("0.26.2", "liger")])
def test_use_liger_kernel_fuses_grpo_loss_only_from_0_25(tmp_path, trl, path):
    """GRPO 0.17-0.24's fused loss is use_liger_loss (0.17.0 grpo_trainer.py:543); use_liger_kernel only patches the
    layers and `_get_per_token_logps` reads `outputs.logits`; from 0.25 use_liger_kernel is the flag (open-r1's
    recipes on TRL 0.18: realrepos-dev openr1_grpo_use_liger_kernel_not_loss)."""
    assert run_of(tmp_path, grpo(", use_liger_kernel=True"), trl).loss.path.value == path


# --- PPO (0.12-1.12) and RLOO (< 0.22): their own rollout loop keeps every generated token's fp32 logits ----------
PPO_ROLLOUT = '''
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
from trl import PPOConfig, PPOTrainer

policy = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
ref_policy = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
value_model = AutoModelForSequenceClassification.from_pretrained("Qwen/Qwen2.5-0.5B", num_labels=1)
reward_model = AutoModelForSequenceClassification.from_pretrained("Qwen/Qwen2.5-0.5B", num_labels=1)
args = PPOConfig(output_dir="out", per_device_train_batch_size=2, gradient_accumulation_steps=32,
                 response_length=1024, gradient_checkpointing=True{extra})
trainer = PPOTrainer(args=args, processing_class=tok, model=policy, ref_model=ref_policy,
                     reward_model=reward_model, value_model=value_model, train_dataset=ds)
trainer.train()
'''


def test_ppo_rollout_keeps_every_rows_generation_logits(tmp_path):
    run = run_of(tmp_path, PPO_ROLLOUT.format(extra=""), trl="0.19.1")
    gen = run.generation.value
    assert (gen.trainer, gen.rows, gen.completion, gen.logps_rows, gen.kept_logits) == (
        "PPOTrainer", 64, 1024, 64, True)
    plan = plan_for(run.ctx, Overrides())[0]
    kept = 64 * 1024 * 151936 * 4
    from trainlint.memory.phases import generation_parts

    # all 64 rows scored at once: the reference's logits over prompt + response beside the kept ones
    parts = dict(generation_parts(plan))
    assert parts["generation_logits"] == kept and parts["logps"] > kept
    # scored 16 rows at a time: the peak is batch_generation's `pad`, a second copy of every row's logits
    (tmp_path / "c").mkdir()
    chunked = plan_for(run_of(tmp_path / "c", PPO_ROLLOUT.format(extra=", local_rollout_forward_batch_size=16"),
                              trl="0.19.1").ctx, Overrides())[0]
    assert chunked.generation.logps_rows == 16 and dict(generation_parts(chunked)) == {"generation_logits": 2 * kept}


@pytest.mark.parametrize("trainer,trl,kept", [("PPOTrainer", "0.11.4", None), ("PPOTrainer", "1.10.0", True),
                                              ("RLOOTrainer", "0.21.0", True), ("RLOOTrainer", "0.22.2", False)])
def test_rollout_loop_per_version(tmp_path, trainer, trl, kept):
    """PPO's step API before 0.12 generates outside the trainer (no phase); RLOO from 0.22 is GRPO-shaped."""
    source = PPO_ROLLOUT.format(extra="") if trainer == "PPOTrainer" else RLOO_OWN_LOOP
    gen = run_of(tmp_path, source, trl=trl).generation.value
    assert (gen.kept_logits if gen is not None else None) == kept


RLOO_OWN_LOOP = '''
from trl import RLOOConfig, RLOOTrainer

args = RLOOConfig(output_dir="out", per_device_train_batch_size=4, gradient_accumulation_steps=4)
trainer = RLOOTrainer(model="Qwen/Qwen2.5-0.5B", reward_funcs=reward, args=args, train_dataset=ds)
trainer.train()
'''


@pytest.mark.parametrize("trl,on", [("0.19.1", False), ("1.10.0", False), ("0.11.4", True)])
def test_ppo_own_train_loop_never_enables_checkpointing(tmp_path, trl, on):
    """0.12-1.12: PPOTrainer.train() replaces Trainer.train(), where transformers enables checkpointing; the 0.11
    step API has no trainer loop (the flag is the script's business: nothing to decide against it)."""
    run = run_of(tmp_path, PPO_ROLLOUT.format(extra=""), trl=trl)
    assert run.checkpointing.on.value is on
    if not on:
        assert "never enables checkpointing" in run.checkpointing.on.why


# --- GRPO / RLOO evaluation: a generation round at the eval batch (knowledge/trl_trainers.py evaluates_by_generating)
GRPO_EVAL = ''', eval_strategy="steps", eval_steps=50, per_device_eval_batch_size=64'''


def test_grpo_eval_step_generates_its_eval_batch_of_completions_from_0_15(tmp_path):
    from dataclasses import replace

    from trainlint.memory.phases import eval_peak

    run = run_of(tmp_path, grpo(GRPO_EVAL, ", eval_dataset=dataset"), "1.16.0")
    e = run.evaluation.value
    assert e is not None and e.generation is not None and run.evaluation.certain
    assert (e.batch, e.generation.rows, e.generation.logps_rows) == (64, 64, 64)
    train = run.generation.value
    assert (e.generation.prompt, e.generation.completion, e.generation.fused_logps) == (
        train.prompt, train.completion, train.fused_logps)
    plan = plan_for(run.ctx, Overrides())[0]
    assert eval_peak(plan) == generation_peak(replace(plan, generation=plan.evaluation.generation))
    assert eval_peak(plan) > generation_peak(plan)  # 64 completions at once against training's 32
    assert run_of(tmp_path, grpo(GRPO_EVAL, ", eval_dataset=dataset"), "0.15.2").evaluation.value.generation.rows == 64


def test_grpo_eval_step_needs_an_eval_dataset_and_an_eval_strategy_and_0_14_is_not_modelled(tmp_path):
    assert run_of(tmp_path, grpo(GRPO_EVAL), "1.16.0").evaluation.value is None  # no eval_dataset
    assert run_of(tmp_path, grpo("", ", eval_dataset=dataset"), "1.16.0").evaluation.value is None  # strategy "no"
    old = run_of(tmp_path, grpo(GRPO_EVAL, ", eval_dataset=dataset"), "0.14.0").evaluation  # no prediction_step
    assert old.value is None and not old.certain and "not modelled" in old.why


def test_grpo_eval_default_batch_is_an_assumption(tmp_path):
    run = run_of(tmp_path, grpo(', eval_strategy="steps"', ", eval_dataset=dataset"), "1.16.0")
    assert run.evaluation.value.batch == 8 and not run.evaluation.certain
    assert any("per_device_eval_batch_size default" in n for n in run.evaluation.notes)


def test_estimate_says_the_first_grpo_evaluation_is_over_the_card(tmp_path):
    (tmp_path / "requirements.txt").write_text("transformers==4.57.6\ntrl==1.16.0\n")
    src = grpo(GRPO_EVAL.replace("=64", "=256"), ", eval_dataset=dataset")
    (tmp_path / "train.py").write_text(textwrap.dedent(src))
    data = json.loads(CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--format", "json"]).output)
    gib = -(-(max(data["phases"]["generation"], data["peak"]) + GIB) // GIB)  # training and generation fit it
    assert data["phases"]["evaluation"] > gib * GIB
    out = CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--gpu", f"{gib}GB"]).output
    assert "evaluation step (eval batch 256 completions, generated with HF generate and scored under no_grad)" in out
    assert f"{gib} GiB: fits for training; the first evaluation needs" in out


@pytest.mark.parametrize("trl,generates", [("0.21.0", False), ("0.22.0", True), ("1.16.0", True)])
def test_rloo_evaluates_by_generating_from_0_22(tmp_path, trl, generates):
    src = grpo(GRPO_EVAL, ", eval_dataset=dataset").replace("GRPO", "RLOO")
    e = run_of(tmp_path, src, trl).evaluation
    assert (e.value is not None and e.value.generation is not None) is generates
    if generates:
        assert e.value.generation.rows == 64
