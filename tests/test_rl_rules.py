"""TL303 (generation phase over the training step), TL304 (reference model resident where a setting of the version
drops it, or wider than the policy), TL702 (colocated vLLM share + training over the card): real scripts in the
shapes of open-r1's grpo.py and TRL's examples/scripts/dpo.py, judged per TRL version."""

from __future__ import annotations

import pytest

GRPO = '''
from trl import GRPOConfig, GRPOTrainer

args = GRPOConfig(output_dir="out", per_device_train_batch_size=8, gradient_accumulation_steps=4,
                  num_generations=8, max_completion_length=1024{extra})
trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=[accuracy_reward], args=args,
                      train_dataset=dataset)
'''

DPO = '''
import torch
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", torch_dtype=torch.bfloat16)
args = DPOConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024{extra})
trainer = DPOTrainer(model=model, args=args, train_dataset=ds)
'''


def pins(trl: str) -> dict[str, str]:
    return {"requirements.txt": f"trl=={trl}\ntransformers==4.57.6\n"}


def only(found, code):
    return [(line, message) for c, line, message in found if c == code]


@pytest.mark.parametrize("trl,fires", [("0.16.1", True), ("0.18.2", True), ("0.19.1", False), ("0.15.2", False)])
def test_tl304_grpo_default_beta_keeps_a_reference_on_0_16_to_0_18(lint, trl, fires):
    """0.15 keeps the copy whatever beta is (no setting drops it: nothing to say); 0.19 defaults beta to 0.0."""
    found = only(lint(GRPO.format(extra=""), files=pins(trl)), "TL304")
    assert bool(found) is fires
    if fires:
        [(line, message)] = found
        assert line == 6
        # 494,032,768 parameters x 4 bytes (TRL loads a model id in fp32) = 1.84 GiB
        assert f"GRPOTrainer in TRL {trl} keeps a frozen copy of the policy as its reference model, ~1.8 GiB (fp32)" \
            in message
        assert "defaults to 0.04 in this version; beta=0.0 drops the reference model" in message


def test_tl304_written_beta_is_a_choice(lint):
    assert not only(lint(GRPO.format(extra=", beta=0.04"), files=pins("0.18.2")), "TL304")


@pytest.mark.parametrize("trl,fires", [("0.26.2", False), ("1.0.0", True), ("1.5.1", False)])
def test_tl304_dpo_precompute_still_loads_the_reference_on_0_29_to_1_4(lint, trl, fires):
    found = only(lint(DPO.format(extra=', precompute_ref_log_probs=True, model_init_kwargs={"dtype": "bfloat16"}'),
                      files=pins(trl)), "TL304")
    assert bool(found) is fires
    if fires:
        [(line, message)] = found
        assert line == 7  # the precompute_ref_log_probs keyword
        # Qwen2.5-7B: 7,615,616,512 parameters x 2 bytes = 14.2 GiB
        assert "precompute_ref_log_probs=True does not free the reference model in TRL 1.0.0" in message
        assert "~14.2 GiB (16-bit) resident for the whole run; upgrade TRL to >= 1.5" in message


@pytest.mark.parametrize("trl,fires", [("0.26.2", False), ("1.13.0", True), ("1.16.0", False)])
def test_tl304_dpo_reference_in_fp32_next_to_a_bf16_policy_on_0_29_to_1_15(lint, trl, fires):
    found = only(lint(DPO.format(extra=""), files=pins(trl)), "TL304")
    assert bool(found) is fires
    if fires:
        [(_, message)] = found
        assert "in fp32 unless they set dtype, while the policy is 16-bit: ~28.4 GiB resident, ~14.2 GiB more" \
            in message
        assert 'model_init_kwargs={"dtype": "bfloat16"}' in message
    assert not only(lint(DPO.format(extra=', model_init_kwargs={"dtype": "bfloat16"}'), files=pins(trl)), "TL304")


def test_tl304_silent_with_peft(lint):
    src = DPO.format(extra="").replace("train_dataset=ds)", "train_dataset=ds, peft_config=LoraConfig(r=16))")
    assert not only(lint(src, files=pins("1.13.0")), "TL304")


BIG_ROUND = '''
from trl import GRPOConfig, GRPOTrainer

args = GRPOConfig(output_dir="out", per_device_train_batch_size=16, gradient_accumulation_steps=16,
                  num_generations=16, max_completion_length=4096, gradient_checkpointing=True{extra})
trainer = GRPOTrainer(model="Qwen/Qwen2.5-1.5B-Instruct", reward_funcs=[accuracy_reward], args=args,
                      train_dataset=dataset)
'''


def test_tl303_kv_cache_of_a_whole_generation_round(lint):
    [(line, message)] = only(lint(BIG_ROUND.format(extra=""), files=pins("1.16.0")), "TL303")
    assert line == 6
    # 2 x 28 layers x 2 kv heads x 128 x 256 completions x 4,608 tokens x 2 bytes = 33.8e9 bytes = 31.5 GiB
    assert "HF generate's KV cache for 256 completions x 4,608 tokens is ~31.5 GiB" in message
    assert "the generation phase peaks at ~48.9 GiB, ~12.7 GiB above the training step (~36.2 GiB)" in message


def test_tl303_silent_with_fewer_steps_per_generation_or_a_vllm_server(lint):
    assert not only(lint(BIG_ROUND.format(extra=", steps_per_generation=2"), files=pins("1.16.0")), "TL303")
    assert not only(lint(BIG_ROUND.format(extra=', use_vllm=True, vllm_mode="server"'), files=pins("1.16.0")),
                    "TL303")


def test_tl303_round_grows_with_gradient_accumulation(lint):
    """A generation round is per_device_train_batch_size x steps_per_generation (= gradient_accumulation_steps by
    default, TRL >= 0.18): with no accumulation it is one micro-batch, 16 completions, and stays under training."""
    src = BIG_ROUND.format(extra="").replace("gradient_accumulation_steps=16", "gradient_accumulation_steps=1")
    assert not only(lint(src, files=pins("1.16.0")), "TL303")


@pytest.mark.parametrize("trl,share,fires", [("1.14.2", "", True), ("1.14.2", ", vllm_gpu_memory_utilization=0.1",
                                                                    False), ("0.29.1", "", False)])
def test_tl702_colocated_vllm_share_over_the_card(lint, trl, share, fires):
    """0.29: vllm_mode defaults to "server" (other GPUs): nothing shares the card."""
    found = only(lint(GRPO.format(extra=", use_vllm=True" + share), files=pins(trl), settings={"gpu": "24GB"}),
                 "TL702")
    assert bool(found) is fires
    if fires:
        [(_, message)] = found
        assert "colocated vLLM reserves vllm_gpu_memory_utilization=0.3 of the 24 GiB GPU, ~7.2 GiB" in message
        assert "set vllm_gpu_memory_utilization <= 0.14" in message


def test_rl_rules_say_nothing_and_do_not_fail_on_a_model_nobody_knows(lint):
    """A reference copy of a model the catalog cannot size (trl's own examples load tiny test checkpoints by name):
    TL304 has no figure to give, so it is silent, and nothing raises (was a TL004 crash on realrepos-dev)."""
    src = DPO.replace("Qwen/Qwen2.5-7B-Instruct", "my-org/tiny-random-model").format(extra="")
    found = lint(src, files=pins("1.14.2"))
    assert not [f for f in found if f[0] in ("TL004", "TL304")], found


def test_axolotl_dpo_reference_is_axolotls_own_load_not_trls_fp32_copy(tmp_path):
    """axolotl's `rl: dpo` without an adapter loads its own reference model (its loader, the policy's dtype) and
    passes it as ref_model: the Run's components take that from the framework's stage (frameworks/axolotl.py
    `_rl_models`), not TRL 1.8's fp32 create_model_from_path copy, so TL304 says nothing (tests/test_framework_rl.py
    covers the rest of the stages)."""
    import subprocess
    import sys

    (tmp_path / "dpo.yaml").write_text("base_model: Qwen/Qwen2.5-0.5B\nrl: dpo\nbf16: true\nsequence_len: 2048\n"
                                       "micro_batch_size: 2\ndatasets:\n  - path: org/prefs\n    type: chatml.intel\n")
    (tmp_path / "requirements.txt").write_text("axolotl==0.18.0\n")
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL303,TL304,TL702",
                        "dpo.yaml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "TL304" not in r.stdout, r.stdout + r.stderr


PPO_ROLLOUT = '''\
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification
from trl import PPOConfig, PPOTrainer

policy = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
ref_policy = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
value_model = AutoModelForSequenceClassification.from_pretrained("Qwen/Qwen2.5-0.5B", num_labels=1)
reward_model = AutoModelForSequenceClassification.from_pretrained("Qwen/Qwen2.5-0.5B", num_labels=1)
args = PPOConfig(output_dir="out", per_device_train_batch_size=2, gradient_accumulation_steps={accum},
                 response_length={length}, gradient_checkpointing=True, local_rollout_forward_batch_size=16)
trainer = PPOTrainer(args=args, processing_class=tok, model=policy, ref_model=ref_policy,
                     reward_model=reward_model, value_model=value_model, train_dataset=ds)
'''


def test_tl303_ppo_rollout_keeps_every_generated_tokens_logits(lint):
    found = only(lint(PPO_ROLLOUT.format(accum=32, length=1024), files=pins("0.19.1")), "TL303")
    assert len(found) == 1
    assert ("the rollout keeps every generated token's fp32 logits, [64 x 1,024 x 151,936] ~37.1 GiB, copied once "
            "more when batch_generation pads them") in found[0][1]
    # 4 rows of 256 tokens per rollout: ~0.6 GiB of logits, twice, stays within the training step
    assert not only(lint(PPO_ROLLOUT.format(accum=2, length=256), files=pins("0.19.1")), "TL303")


def test_tl202_ppo_ignores_gradient_checkpointing_in_its_config(lint):
    """PPOTrainer's own train() never enables checkpointing (Trainer.train() would): the flag does nothing, the
    activations are kept, and enabling it on the policy is what works."""
    source = PPO_ROLLOUT.format(accum=1, length=1024).replace("per_device_train_batch_size=2",
                                                               "per_device_train_batch_size=16")
    found = only(lint(source, files=pins("0.19.1"), settings={"gpu": "24GB"}), "TL202")
    assert len(found) == 1
    assert ("PPOTrainer in TRL 0.19.1 runs its own train(), which never enables checkpointing: "
            "gradient_checkpointing=True in its config does nothing") in found[0][1]
    assert "call gradient_checkpointing_enable() on the policy model before building the trainer" in found[0][1]
    enabled = source.replace("args = PPOConfig(", "policy.gradient_checkpointing_enable()\nargs = PPOConfig(")
    assert not only(lint(enabled, files=pins("0.19.1"), settings={"gpu": "24GB"}), "TL202")
