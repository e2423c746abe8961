"""TL201 for transformers 4.x (4.35-4.57), checked statically against versions pinned in the project:
the installed libraries are 5.x, so these rows cannot be run here (see rules/TL201.md for the sources)."""

import pytest

from conftest import codes


@pytest.fixture
def lint(lint):
    """Only TL201: the other rules have their own tests."""
    return lambda src, files=None: lint(src, files=files, settings={"select": ["TL201"]})

PINS = {"requirements.txt": "transformers==4.57.6\npeft==0.17.1\ntrl==0.19.1\n"}

MANUAL = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
{before}model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]{lora}))
{after}'''


def manual(before="", after="model.gradient_checkpointing_enable()\n", lora=""):
    return MANUAL.format(before=before, after=after, lora=lora)


def test_peft_then_checkpointing_on_4x_is_a_crash(lint):
    found = lint(manual(), files=PINS)
    assert [(c, line) for c, line, _ in found] == [("TL201", 7)]
    assert "transformers 4.57.6 defaults to reentrant checkpointing" in found[0][2]
    assert "element 0 of tensors does not require grad" in found[0][2]


def test_same_script_on_5x_is_fine(lint):
    assert lint(manual()) == []


def test_trainable_head_makes_it_silent(lint):
    found = lint(manual(lora=', modules_to_save=["lm_head"]'), files=PINS)
    assert codes(found) == ["TL201"] and "silent" in found[0][2]
    found = lint(manual(lora=', task_type=TaskType.SEQ_CLS').replace(
        "from peft import LoraConfig", "from peft import LoraConfig, TaskType"), files=PINS)
    assert "silent" in found[0][2]


def test_checkpointing_before_get_peft_model_is_hooked_by_peft(lint):
    assert lint(manual(before="model.gradient_checkpointing_enable()\n", after=""), files=PINS) == []


def test_non_reentrant_explicit_hook_and_native_adapters_are_quiet(lint):
    assert lint(manual(after='model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})\n'),
                files=PINS) == []
    assert lint(manual(after="model.enable_input_require_grads()\nmodel.gradient_checkpointing_enable()\n"),
                files=PINS) == []
    src = ('from peft import LoraConfig\nfrom transformers import AutoModelForCausalLM\n'
           'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n'
           'model.add_adapter(LoraConfig(r=8))\nmodel.gradient_checkpointing_enable()\n')
    assert lint(src, files=PINS) == []


def test_empty_kwargs_dict_is_reentrant(lint):
    assert codes(lint(manual(after="model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={})\n"),
                      files=PINS)) == ["TL201"]


def test_unresolvable_kwargs_say_nothing(lint):
    assert lint(manual(after="model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=load_kwargs())\n"),
                files=PINS) == []


TRAINER = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

base = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model = get_peft_model(base, LoraConfig(r=8))
args = TrainingArguments(output_dir="o", gradient_checkpointing=True{kwargs})
trainer = Trainer(model=model, args=args, train_dataset=ds)
trainer.train()
'''


def test_trainer_on_a_peft_model_on_4x(lint):
    found = lint(TRAINER.format(kwargs=""), files=PINS)
    assert [(c, line) for c, line, _ in found] == [("TL201", 8)]
    assert lint(TRAINER.format(kwargs=', gradient_checkpointing_kwargs={"use_reentrant": False}'), files=PINS) == []
    assert codes(lint(TRAINER.format(kwargs=', gradient_checkpointing_kwargs={"use_reentrant": True}'),
                      files=PINS)) == ["TL201"]
    assert lint(TRAINER.format(kwargs=""), files={"requirements.txt": "transformers==5.2.0\n"}) == []


SFT = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
{wrap}trainer = SFTTrainer(model=model, args=SFTConfig(output_dir="o", gradient_checkpointing=True){peft})
'''


def test_trl_hooks_peft_config_and_since_0_20_prewrapped_models(lint):
    assert lint(SFT.format(wrap="", peft=", peft_config=LoraConfig(r=8)"), files=PINS) == []
    prewrapped = SFT.format(wrap="model = get_peft_model(model, LoraConfig(r=8))\n", peft="")
    found = lint(prewrapped, files=PINS)
    assert codes(found) == ["TL201"] and "TRL 0.19.1 returns early" in found[0][2]
    assert lint(prewrapped, files={"requirements.txt": "transformers==4.57.6\ntrl==0.20.0\n"}) == []


def test_kbit_preparation_hooks_quantized_models(lint):
    src = manual(before="").replace(
        'from_pretrained("meta-llama/Llama-3.2-1B")',
        'from_pretrained("meta-llama/Llama-3.2-1B", quantization_config=BitsAndBytesConfig(load_in_4bit=True))\n'
        'model = prepare_model_for_kbit_training(model)').replace(
        "from peft import LoraConfig", "from peft import LoraConfig, prepare_model_for_kbit_training").replace(
        "from transformers import AutoModelForCausalLM", "from transformers import AutoModelForCausalLM, BitsAndBytesConfig")
    assert lint(src, files=PINS) == []


def test_hand_rolled_reentrant_checkpoint_is_a_trap_on_every_version(lint):
    src = '''
from peft import LoraConfig, get_peft_model
from torch.utils.checkpoint import checkpoint
from transformers import AutoModelForCausalLM

model = get_peft_model(AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B"), LoraConfig(r=8))
def forward(hidden):
    for layer in model.base_model.model.model.layers:
        hidden = checkpoint(layer, hidden{flag})
    return hidden
'''
    assert codes(lint(src.format(flag=""))) == ["TL201"]
    assert codes(lint(src.format(flag=", use_reentrant=True"), files=PINS)) == ["TL201"]
    assert lint(src.format(flag=", use_reentrant=False")) == []


def test_vision_model_is_a_silent_trap_on_5x_too(lint):
    src = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForImageClassification
model = AutoModelForImageClassification.from_pretrained("google/vit-base-patch16-224")
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], modules_to_save=["classifier"]))
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
'''
    found = lint(src)
    assert codes(found) == ["TL201"]
    assert "main input is not input_ids" in found[0][2] and "silent" in found[0][2]
    assert lint(src.replace("True}", "False}")) == []


BRANCHES = '''
import argparse
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def main(args):
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    if args.use_lora:
        model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    if args.gradient_checkpointing:
        if {condition}:
            model.gradient_checkpointing_enable()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--use_lora", action="store_true")
    parser.add_argument("--use_oft", action="store_true")
    parser.add_argument("--full_model", action="store_true")
    parser.add_argument("--gradient_checkpointing", action="store_true")
    main(parser.parse_args())
'''


@pytest.mark.parametrize("condition,fires", [
    # the script enables checkpointing only when the model is not adapted (diffusion LoRA/OFT examples' shape)
    ("not (args.use_lora or args.use_oft)", False),
    ("args.full_model and not args.use_lora", False),
    ("not args.use_lora", False),
    # both can run: still the crash
    ("args.use_lora", True),
    ("args.full_model", True),
    ("not args.use_oft", True),
    ("not (args.use_lora and args.use_oft)", True),  # a false `and` says nothing about use_lora alone
])
def test_checkpointing_in_a_branch_that_excludes_the_adapter_is_silent(lint, condition, fires):
    found = lint(BRANCHES.format(condition=condition), files=PINS)
    assert codes(found) == (["TL201"] if fires else [])
