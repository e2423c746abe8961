"""LLaMA-Factory and axolotl RL / preference stages on the Run's components and phases (frameworks/knowledge.py
"RL / preference stages"): which models each stage keeps resident, the batch its loss builds logits for, the `trl:`
keys of axolotl's GRPO, and TL303 / TL304 / TL702 on the configs, at the key that decides them. Fixtures are our own
configs in the shapes of LLaMA-Factory's examples/train_lora/*_dpo.yaml, *_kto.yaml, *_ppo.yaml and axolotl's
examples/*/dpo*.yml and GRPO configs; two real sample configs are read by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import enabled_codes, lint_file
from trainlint.planning import Overrides, plan_for
from trainlint.run import resolve

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "configs"
if not SAMPLE.is_dir():
    SAMPLE = Path("/work/shared/configs")

QWEN7 = "Qwen/Qwen2.5-7B-Instruct"  # 7,615,616,512 parameters (knowledge/models.json)


def lint(tmp_path: Path, text: str, pin: str | None = None, gpu: str | None = None):
    """(diagnostics, context) of one config in its own folder, `pin` a requirements line (axolotl==0.12.0)."""
    if pin is not None:
        (tmp_path / "requirements.txt").write_text(pin + "\n")
    path = tmp_path / "config.yaml"
    path.write_text(text)
    project_pins.cache_clear()
    clear_caches()
    s = Settings(root=tmp_path, gpu=gpu)
    result = lint_file(path, s, enabled_codes(s))
    return result.diagnostics, result.context


def comps(ctx):
    return [(c.role, c.how, c.resident.value) for c in resolve(ctx).components.items]


def codes(found, code):
    return [(d.code, d.span.line, d.span.col) for d in found if d.code == code]


# --- LLaMA-Factory (examples/train_lora/llama3_lora_dpo.yaml shape) -----------------------------------------------
LF_DPO = """\
### model
model_name_or_path: {model}

### method
stage: {stage}
do_train: true
finetuning_type: {ft}
lora_rank: 8
lora_target: all
pref_beta: 0.1
pref_loss: {loss}
{extra}
### dataset
dataset: dpo_en_demo
template: qwen
cutoff_len: 2048

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 5.0e-6
bf16: true
"""


def lf(stage="dpo", ft="lora", loss="sigmoid", extra="", model=QWEN7):
    return LF_DPO.format(stage=stage, ft=ft, loss=loss, extra=extra, model=model)


def test_lf_dpo_lora_reference_is_the_policy_with_its_adapters_disabled(tmp_path):
    """create_ref_model returns None for finetuning_type lora; compute_reference_log_probs disables the adapter."""
    _, ctx = lint(tmp_path, lf())
    run = resolve(ctx)
    assert run.components.trainer == "DPOTrainer"
    assert comps(ctx) == [("policy", "trained", True), ("reference", "adapter disabled", False)]
    shape = run.loss.shape  # chosen + rejected in one forward, the reference's logits in the same step
    assert (shape.rows, shape.reference, shape.trainer) == (2, "reference", "CustomDPOTrainer")
    plan = plan_for(ctx, Overrides())[0]
    assert plan.batch == 2 and plan.reference_logits and plan.models == ()


def test_lf_dpo_full_keeps_a_second_copy_of_the_model_in_its_dtype(tmp_path):
    _, ctx = lint(tmp_path, lf(ft="full"))
    assert comps(ctx) == [("policy", "trained", True), ("reference", "copy", True)]
    ref = resolve(ctx).components.get("reference")
    assert ref.span.line == 7 and ref.drop == "finetuning_type: lora"  # the key that decides it
    plan = plan_for(ctx, Overrides())[0]
    assert plan.models == (("reference", 7_615_616_512 * 2),)  # bf16, as the policy (ModelArguments.copyfrom)


@pytest.mark.parametrize("loss", ["orpo", "simpo"])
def test_lf_dpo_reference_free_losses_load_no_reference(tmp_path, loss):
    """use_ref_model is False for pref_loss orpo / simpo (finetuning_args.py 0.9.5:574), full fine-tuning or not."""
    _, ctx = lint(tmp_path, lf(ft="full", loss=loss))
    assert comps(ctx) == [("policy", "trained", True), ("reference", f"none (pref_loss {loss})", False)]
    assert resolve(ctx).loss.shape.reference is None
    assert plan_for(ctx, Overrides())[0].models == ()


def test_lf_dpo_ref_model_key_loads_that_model(tmp_path):
    _, ctx = lint(tmp_path, lf(extra="ref_model: Qwen/Qwen2.5-7B\n"))
    ref = resolve(ctx).components.get("reference")
    assert (ref.how, ref.resident.value, ref.span.line) == ("loaded", True, 12)
    assert "sized as the policy's" in ref.resident.notes[0]


def test_lf_kto_has_a_reference_whatever_pref_loss_says(tmp_path):
    """kto/workflow.py calls create_ref_model with no use_ref_model gate (that one is DPO's)."""
    _, ctx = lint(tmp_path, lf(stage="kto", ft="full", loss="simpo"))
    assert resolve(ctx).components.trainer == "KTOTrainer"
    assert comps(ctx) == [("policy", "trained", True), ("reference", "copy", True)]
    _, ctx = lint(tmp_path, lf(stage="kto"))
    assert comps(ctx) == [("policy", "trained", True), ("reference", "adapter disabled", False)]


def test_lf_ppo_reward_model_full_is_a_second_resident_model(tmp_path):
    _, ctx = lint(tmp_path, lf(stage="ppo", ft="full",
                               extra="reward_model: Qwen/Qwen2.5-0.5B\nreward_model_type: full\n"))
    run = resolve(ctx)
    assert run.components.trainer == "PPOTrainer"
    assert comps(ctx) == [("policy", "trained", True), ("reference", "copy", True), ("reward", "loaded", True)]
    # LLaMA-Factory's own rollout (ppo/trainer.py get_inputs): per_device_train_batch_size prompts of up to cutoff_len
    # tokens, max_new_tokens (1024 by default) generated after them
    g = run.generation.value
    assert (g.rows, g.prompt, g.completion, g.logps_rows, g.scores_prompt) == (1, 2048, 1024, 1, True)
    assert "max_new_tokens 1024: LLaMA-Factory's default (GeneratingArguments)" in run.generation.notes


def test_lf_ppo_lora_reward_is_an_adapter_on_the_policy(tmp_path):
    _, ctx = lint(tmp_path, lf(stage="ppo", extra="reward_model: saves/qwen/lora/reward\n"))
    assert comps(ctx) == [("policy", "trained", True), ("reference", "adapter disabled", False),
                          ("reward", "adapter on the policy", False)]


LF_PPO = """\
### model
model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct
reward_model: saves/qwen/lora/reward

### method
stage: ppo
do_train: true
finetuning_type: full

### dataset
dataset: identity
template: qwen
cutoff_len: {cutoff}

### train
per_device_train_batch_size: {batch}
gradient_accumulation_steps: 8
{extra}learning_rate: 1.0e-5
bf16: true

### generate
max_new_tokens: {new}
top_k: 0
top_p: 0.9
"""


def test_lf_ppo_rollout_is_a_generation_phase_of_mini_batches(tmp_path):
    """ppo_train generates per_device_train_batch_size rows at a time and moves the responses to the CPU: neither
    gradient_accumulation_steps nor ppo_buffer_size enlarges the round; the training forward runs on prompt +
    completion (cutoff_len + max_new_tokens), every position's logits through the value head."""
    _, ctx = lint(tmp_path, LF_PPO.format(cutoff=512, batch=2, new=256, extra="ppo_buffer_size: 4\n"))
    g = resolve(ctx).generation.value
    assert (g.trainer, g.rows, g.prompt, g.completion, g.logps_rows) == ("PPOTrainer", 2, 512, 256, 2)
    plan = plan_for(ctx, Overrides())[0]
    assert (plan.batch, plan.seq, plan.logits_seq) == (2, 768, None)
    assert (plan.generation.rows, plan.generation.scores_prompt) == (2, True)
    from trainlint.memory.phases import generation_parts, kv_cache_bytes, value_head_logps_bytes
    # Qwen2.5-1.5B: 28 layers, 2 KV heads x 128, 151,936 vocabulary; bf16
    assert kv_cache_bytes(plan.geometry, 2, 768, 2) == 2 * 28 * 2 * 128 * 2 * 768 * 2
    assert value_head_logps_bytes(plan, 2, 768) == 2 * 768 * 151_936 * (2 + 4 + 4)
    parts = dict(generation_parts(plan))
    assert set(parts) == {"logps"} and parts["logps"] > value_head_logps_bytes(plan, 2, 768)


def test_lf_ppo_rollout_stays_below_its_training_step_so_tl303_is_silent(tmp_path):
    """The scoring mini-batch is the training mini-batch (both per_device_train_batch_size rows over prompt +
    completion), and the training forward keeps its logits with grad: the round peaks below the step."""
    found, ctx = lint(tmp_path, LF_PPO.format(cutoff=2048, batch=8, new=2048, extra=""), gpu="H100-80GB")
    from trainlint.memory.estimate import estimate
    from trainlint.memory.phases import phase_peaks
    plan = plan_for(ctx, Overrides())[0]
    peaks = phase_peaks(plan)
    assert plan.seq == 4096 and peaks["train"] == estimate(plan).peak
    assert 0 < peaks["generation"] < peaks["train"]
    assert codes(found, "TL303") == []


def test_lf_rm_stage_has_no_reference(tmp_path):
    _, ctx = lint(tmp_path, lf(stage="rm"))
    assert resolve(ctx).components.trainer is None


def test_lf_reference_is_llamafactorys_decision_under_either_release(tmp_path):
    """LLaMA-Factory 0.9.2 pins trl 0.8.6-0.9.6, 0.9.5 trl 0.18-0.24: CustomDPOTrainer calls Trainer.__init__ itself
    in both, so TRL's own reference rules never apply (a full run keeps LLaMA-Factory's copy in either)."""
    for pin in ("llamafactory==0.9.2", "llamafactory==0.9.5"):
        _, ctx = lint(tmp_path, lf(ft="full"), pin=pin)
        assert ctx.mapped.release == pin.split("==")[1]
        assert comps(ctx) == [("policy", "trained", True), ("reference", "copy", True)]


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the shared sample of framework configs is not here")
def test_lf_real_qwen3vl_lora_dpo_sample(tmp_path):
    path = SAMPLE / "llama-factory" / "examples__train_lora__qwen3vl_lora_dpo.yaml"
    s = Settings(root=path.parent)
    ctx = lint_file(path, s, enabled_codes(s)).context
    assert comps(ctx) == [("policy", "trained", True), ("reference", "adapter disabled", False)]


# --- axolotl (examples/llama-3/*dpo*.yml and GRPO config shapes) ------------------------------------------------
AX_DPO = """\
base_model: {model}

rl: {rl}
{extra}datasets:
  - path: org/preferences
    split: train
    type: chatml.intel

sequence_len: 2048
micro_batch_size: 2
gradient_accumulation_steps: 4
bf16: auto
flash_attention: true
"""

AX_LORA = "adapter: lora\nlora_r: 16\nlora_alpha: 32\nlora_target_linear: true\n"


def ax(rl="dpo", extra="", model="meta-llama/Llama-2-7b-hf"):
    return AX_DPO.format(rl=rl, extra=extra, model=model)


def test_ax_dpo_with_an_adapter_lets_trl_disable_it_for_the_reference(tmp_path):
    """setup_reference_model: adapter -> model_ref None; the trainer gets peft_config and TRL uses the policy with
    its adapters disabled."""
    _, ctx = lint(tmp_path, ax(extra=AX_LORA))
    assert comps(ctx) == [("policy", "trained", True), ("reference", "adapter disabled", False)]


def test_ax_dpo_without_an_adapter_passes_its_own_load_as_ref_model(tmp_path):
    found, ctx = lint(tmp_path, ax())
    run = resolve(ctx)
    ref = run.components.get("reference")
    assert (ref.how, ref.resident.value, ref.span.line) == ("loaded", True, 3)
    assert run.loss.reference_copy is None  # passed, not a copy TRL builds (axolotl loads it in bf16)
    assert plan_for(ctx, Overrides())[0].models == (("reference", 6_738_415_616 * 2),)
    assert codes(found, "TL304") == []


def test_ax_dpo_precompute_ref_log_probs_does_not_free_axolotls_reference(tmp_path):
    found, _ = lint(tmp_path, ax(extra="precompute_ref_log_probs: true\n"))
    assert codes(found, "TL304") == [("TL304", 4, 1)]
    msg = next(d.message for d in found if d.code == "TL304")
    assert "precompute_ref_log_probs: true does not free the reference model" in msg and "~12.6 GiB" in msg
    found, _ = lint(tmp_path, ax(extra="precompute_ref_log_probs: true\n" + AX_LORA))
    assert codes(found, "TL304") == []


def test_ax_orpo_loads_no_reference(tmp_path):
    _, ctx = lint(tmp_path, ax(rl="orpo"))
    assert resolve(ctx).components.trainer == "ORPOTrainer"
    assert comps(ctx) == [("policy", "trained", True)]


def test_ax_simpo_loads_a_reference_it_never_uses_and_frees_it(tmp_path):
    """setup_reference_model loads model_ref for every rl but orpo; builders/rl.py passes it to dpo / ipo only."""
    _, ctx = lint(tmp_path, ax(rl="simpo"))
    assert resolve(ctx).components.trainer == "CPOTrainer"
    assert comps(ctx) == [("policy", "trained", True),
                          ("reference", "loaded by axolotl, not passed to the trainer", False)]
    assert plan_for(ctx, Overrides())[0].models == ()


@pytest.mark.parametrize(("pin", "trl", "fires"), [("axolotl==0.19.0", "1.9.0", True),
                                                   ("axolotl==0.12.0", "0.21.0", False)])
def test_ax_kto_full_reference_is_fp32_on_trl_1_9_only(tmp_path, pin, trl, fires):
    """axolotl never passes KTO its model_ref, so KTOTrainer builds its own: trl 1.9.0 kto_trainer.py:912-927
    create_model_from_path (float32 without model_init_kwargs, which axolotl has no key for); trl 0.21.0 deep-copies
    the policy (its dtype)."""
    found, ctx = lint(tmp_path, ax(rl="kto"), pin=pin)
    assert ctx.versions.trl.version == trl
    assert [r for r, _, _ in comps(ctx)] == ["policy", "reference", "reference"]
    assert codes(found, "TL304") == ([("TL304", 3, 1)] if fires else [])
    if fires:
        msg = next(d.message for d in found if d.code == "TL304")
        assert "no key for KTOConfig's model_init_kwargs" in msg and "~25.1 GiB resident" in msg


AX_GRPO = """\
base_model: {model}

rl: grpo
trl:
{trl}
vllm:
{vllm}
datasets:
  - path: org/math
    type: rewards.prompt_transform

sequence_len: 2048
micro_batch_size: {micro}
gradient_accumulation_steps: {accum}
bf16: true
gradient_checkpointing: true
adapter: lora
lora_r: 16
lora_target_linear: true
"""


def grpo(trl="  beta: 0.0\n  num_generations: 8\n  max_completion_length: 512",
         vllm="  host: 0.0.0.0", micro=4, accum=2, model="meta-llama/Llama-2-7b-hf"):
    return AX_GRPO.format(trl=trl, vllm=vllm, micro=micro, accum=accum, model=model)


def test_ax_grpo_trl_section_sizes_the_generation_round(tmp_path):
    _, ctx = lint(tmp_path, grpo())
    gen = resolve(ctx).generation.value
    # trl >= 0.18: micro_batch_size completions x steps_per_generation (= gradient_accumulation_steps)
    assert (gen.trainer, gen.rows, gen.completion, gen.vllm, gen.span.line) == ("GRPOTrainer", 8, 512, None, 3)


@pytest.mark.parametrize(("beta", "resident"), [("0.0", False), ("0.04", True)])
def test_ax_grpo_beta_under_trl_decides_the_reference_without_an_adapter(tmp_path, beta, resident):
    text = grpo(trl=f"  beta: {beta}\n  num_generations: 8").replace("adapter: lora\n", "")
    _, ctx = lint(tmp_path, text)
    ref = resolve(ctx).components.get("reference")  # TRL's own (axolotl's model_ref is freed)
    assert ref.resident.value is resident


def test_ax_grpo_colocated_vllm_takes_axolotls_0_9_default_share(tmp_path):
    """axolotl passes vllm.gpu_memory_utilization (default 0.9) only with trl.vllm_mode: colocate."""
    text = grpo(trl="  beta: 0.0\n  use_vllm: true\n  vllm_mode: colocate\n  num_generations: 8")
    found, ctx = lint(tmp_path, text, gpu="H100-80GB")
    gen = resolve(ctx).generation
    assert (gen.value.vllm, gen.value.vllm_share) == ("colocate", 0.9)
    assert any("axolotl default" in n for n in gen.notes)
    assert codes(found, "TL702") == [("TL702", 7, 3)]  # trl.vllm_mode: the key that made axolotl pass 0.9
    msg = next(d.message for d in found if d.code == "TL702")
    assert "vllm.gpu_memory_utilization=0.9" in msg and "trl.vllm_mode: server" in msg


def test_ax_grpo_written_share_that_fits_is_silent_and_placed_at_its_key(tmp_path):
    text = grpo(trl="  beta: 0.0\n  use_vllm: true\n  vllm_mode: colocate", vllm="  gpu_memory_utilization: 0.5")
    found, ctx = lint(tmp_path, text, gpu="H100-80GB")
    assert resolve(ctx).generation.value.vllm_share == 0.5
    assert codes(found, "TL702") == []
    found, _ = lint(tmp_path, text.replace("0.5", "0.85"), gpu="H100-80GB")
    assert codes(found, "TL702") == [("TL702", 9, 3)]


def test_ax_grpo_use_vllm_without_a_mode_takes_trls_defaults(tmp_path):
    """vllm_mode unset: axolotl passes neither mode nor share; trl 1.9.0 defaults to colocate and 0.3."""
    _, ctx = lint(tmp_path, grpo(trl="  beta: 0.0\n  use_vllm: true"))
    gen = resolve(ctx).generation.value
    assert (gen.vllm, gen.vllm_share) == ("colocate", 0.3)


def test_ax_grpo_hf_generation_over_training_is_tl303_at_rl(tmp_path):
    found, _ = lint(tmp_path, grpo(trl="  beta: 0.0\n  num_generations: 16\n  max_completion_length: 2048",
                                   micro=16, accum=8))
    assert codes(found, "TL303") == [("TL303", 3, 1)]
    found, _ = lint(tmp_path, grpo(trl="  beta: 0.0\n  num_generations: 16\n  max_completion_length: 2048\n"
                                       "  use_vllm: true\n  vllm_mode: server", micro=16, accum=8))
    assert codes(found, "TL303") == []


def test_ax_gdpo_is_grpo(tmp_path):
    _, ctx = lint(tmp_path, grpo().replace("rl: grpo", "rl: gdpo"), pin="axolotl==0.18.0")
    assert resolve(ctx).components.trainer == "GRPOTrainer"


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the shared sample of framework configs is not here")
@pytest.mark.parametrize(("name", "expected"), [
    ("examples__llama-3__lora-1b-deduplicate-dpo.yml", [("policy", "trained", True),
                                                         ("reference", "adapter disabled", False)]),
    ("examples__mistral__orpo__mistral-qlora-orpo.yml", [("policy", "trained", True)]),
])
def test_ax_real_samples(name, expected):
    path = SAMPLE / "axolotl" / name
    s = Settings(root=path.parent)
    ctx = lint_file(path, s, enabled_codes(s)).context
    assert comps(ctx) == expected
