"""TL201 per library version: TRL trainers given `peft_config` or a PeftModel (knowledge/trl_trainers.py HOOKS),
transformers' add_adapter hook (4.34.0) and the 5.0 pre-releases (knowledge/libraries.py), one side of each boundary
flagged and the other not."""

import pytest
from conftest import codes


@pytest.fixture
def lint(lint):
    return lambda src, files=None: lint(src, files=files, settings={"select": ["TL201"]})


def pins(transformers: str, trl: str = "0.19.1") -> dict[str, str]:
    return {"requirements.txt": f"transformers=={transformers}\ntrl=={trl}\npeft==0.17.1\n"}


TRL = '''
from peft import LoraConfig
from transformers import AutoModelForCausalLM
from trl import {cfg}, {trainer}

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
args = {cfg}(output_dir="o", gradient_checkpointing=True)
trainer = {trainer}(model=model, args=args, train_dataset=ds, peft_config=LoraConfig(r=8){extra})
'''


def trl_script(name: str, extra: str = "") -> str:
    return TRL.format(cfg=f"{name}Config", trainer=f"{name}Trainer", extra=extra)


@pytest.mark.parametrize("trl,flagged", [("0.15.2", True), ("0.16.1", False)])
def test_grpo_hooks_the_inputs_from_0_16(lint, trl, flagged):
    found = lint(trl_script("GRPO", ", reward_funcs=reward"), files=pins("4.48.3", trl))
    assert codes(found) == (["TL201"] if flagged else [])
    if flagged:
        assert [line for _, line, _ in found] == [8]
        assert "GRPOTrainer in TRL 0.15.2 wraps the model with get_peft_model and leaves checkpointing to " \
               "transformers' Trainer" in found[0][2]


def test_grpo_0_15_on_transformers_5_is_hooked_by_transformers(lint):
    assert lint(trl_script("GRPO", ", reward_funcs=reward"), files=pins("5.2.0", "0.15.2")) == []


@pytest.mark.parametrize("trl,flagged", [("0.21.0", True), ("0.22.2", False)])
def test_reward_trainer_hooks_from_0_22(lint, trl, flagged):
    src = trl_script("Reward").replace("AutoModelForCausalLM", "AutoModelForSequenceClassification")
    found = lint(src, files=pins("4.48.3", trl))
    assert codes(found) == (["TL201"] if flagged else [])


@pytest.mark.parametrize("trl,flagged", [("1.9.2", True), ("1.10.0", False)])
def test_distillation_hooks_from_1_10(lint, trl, flagged):
    found = lint(trl_script("Distillation"), files=pins("4.57.6", trl))
    assert codes(found) == (["TL201"] if flagged else [])


@pytest.mark.parametrize("name", ["DPO", "KTO", "ORPO", "CPO"])
def test_preference_trainers_always_hook(lint, name):
    for trl in ("0.15.2", "0.28.0", "1.3.0", "1.16.0"):
        assert lint(trl_script(name), files=pins("4.48.3", trl)) == [], (name, trl)


PREWRAPPED = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from trl import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model = get_peft_model(model, LoraConfig(r=8))
trainer = GKDTrainer(model=model, teacher_model="t", args=GKDConfig(output_dir="o", gradient_checkpointing=True))
'''


@pytest.mark.parametrize("trl,flagged", [("0.19.1", True), ("0.20.0", False)])
def test_gkd_follows_sft_for_prewrapped_models(lint, trl, flagged):
    assert codes(lint(PREWRAPPED, files=pins("4.48.3", trl))) == (["TL201"] if flagged else [])


RELOADED_AFTER = '''
from peft import AutoPeftModelForCausalLM, LoraConfig
from transformers import AutoModelForCausalLM, TrainingArguments
from trl import SFTTrainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
args = TrainingArguments(output_dir="o", gradient_checkpointing=True, bf16=True)
trainer = SFTTrainer(model=model, args=args, train_dataset=ds, peft_config=LoraConfig(r=8), max_seq_length=1024)
trainer.train()
model = AutoPeftModelForCausalLM.from_pretrained("o")
'''


def test_an_adapter_reloaded_into_the_same_name_after_training_is_not_the_trainer_s_model(lint):
    """A notebook's inference cells reload the trained adapter into `model`: SFTTrainer got the plain model and
    peft_config, and wraps and hooks it itself (trl 0.12.2); a pre-wrapped model is still flagged."""
    assert "TL201" not in codes(lint(RELOADED_AFTER, files=pins("4.46.3", "0.12.2")))
    before = RELOADED_AFTER.replace('trainer.train()\nmodel = AutoPeftModelForCausalLM.from_pretrained("o")\n', "")
    before = before.replace("args = TrainingArguments(", 'model = AutoPeftModelForCausalLM.from_pretrained("a")\n'
                                                         "args = TrainingArguments(")
    assert "TL201" in codes(lint(before, files=pins("4.46.3", "0.12.2")))


ADAPTER = '''
from peft import LoraConfig
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")
model.add_adapter(LoraConfig(r=8))
trainer = Trainer(model=model, args=TrainingArguments(output_dir="o", gradient_checkpointing=True))
'''


def test_add_adapter_is_hooked_from_4_34_not_before(lint):
    # 4.34.0 modeling_utils.py l.1830 gradient_checkpointing_enable: `if getattr(self, "_hf_peft_config_loaded"...)`;
    # 4.33.3 has add_adapter (integrations/peft.py) but no such hook
    assert lint(ADAPTER, files=pins("4.34.0")) == []
    found = lint(ADAPTER, files=pins("4.33.3"))
    assert [(c, line) for c, line, _ in found] == [("TL201", 7)]
    assert "transformers 4.33.3" in found[0][2]


MANUAL = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model = get_peft_model(model, LoraConfig(r=8))
model.gradient_checkpointing_enable()
'''


@pytest.mark.parametrize("version,flagged", [
    ("5.0.0rc1", True),    # still reentrant by default and no input_ids hook
    ("5.0.0rc2", False),   # the input_ids hook arrived in rc2 (modeling_utils.py l.3100)
    ("5.0.0.dev0", False),  # any commit of 5.0's development: not known, nothing claimed
    ("5.0.0", False),
])
def test_transformers_5_pre_releases(lint, version, flagged):
    found = lint(MANUAL, files={"requirements.txt": f"transformers=={version}\npeft==0.17.1\n"})
    assert codes(found) == (["TL201"] if flagged else [])
    if flagged:
        assert f"transformers {version} defaults to reentrant checkpointing" in found[0][2]
