"""TL204: checkpointing set on the model and in the Trainer's arguments, one overriding the other (issue 28 item 4)."""

from __future__ import annotations

SCRIPT = '''
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model.gradient_checkpointing_enable({call})
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, {args})
Trainer(model=model, args=args, train_dataset=ds).train()
'''
NON_REENTRANT = 'gradient_checkpointing_kwargs={"use_reentrant": False}'


def tl204(found):
    return [f for f in found if f[0] == "TL204"]


def test_4x_trainer_replaces_the_models_non_reentrant_kwargs(lint):
    src = SCRIPT.format(call=NON_REENTRANT, args="gradient_checkpointing=True")
    found = tl204(lint(src, files={"requirements.txt": "transformers==4.46.3\n"}))
    assert len(found) == 1 and found[0][1] == 8
    assert found[0][2].startswith("the non-reentrant checkpointing gradient_checkpointing_enable() at line 6 asks for "
                                  "is replaced: the Trainer calls gradient_checkpointing_enable() again at train() with "
                                  "the arguments' gradient_checkpointing_kwargs (unset), so the run checkpoints "
                                  "reentrant (transformers 4.46.3)")
    assert "gives them no gradient (TL201)" in found[0][2]
    assert found[0][2].endswith('set gradient_checkpointing_kwargs={"use_reentrant": False} in the arguments too, '
                                "or drop one of the two")


def test_same_kwargs_in_both_places_is_quiet(lint):
    src = SCRIPT.format(call=NON_REENTRANT, args="gradient_checkpointing=True, " + NON_REENTRANT)
    assert not tl204(lint(src, files={"requirements.txt": "transformers==4.46.3\n"}))


def test_5x_default_is_non_reentrant_so_a_reentrant_request_is_replaced(lint):
    src = SCRIPT.format(call='gradient_checkpointing_kwargs={"use_reentrant": True}', args="gradient_checkpointing=True")
    found = tl204(lint(src, files={"requirements.txt": "transformers==5.25.0\n"}))
    assert len(found) == 1 and "the run checkpoints non-reentrant (transformers 5.25.0)" in found[0][2]
    assert "TL201" not in found[0][2]
    # on 5.x the non-reentrant request and the Trainer's default agree
    assert not tl204(lint(SCRIPT.format(call=NON_REENTRANT, args="gradient_checkpointing=True"),
                          files={"requirements.txt": "transformers==5.25.0\n"}))


def test_false_in_the_arguments_does_not_turn_it_off(lint):
    src = SCRIPT.format(call="", args="gradient_checkpointing=False")
    found = tl204(lint(src, files={"requirements.txt": "transformers==4.46.3\n"}))
    assert len(found) == 1 and found[0][1] == 8
    assert found[0][2].startswith("gradient_checkpointing=False does not turn gradient checkpointing off: "
                                  "gradient_checkpointing_enable() at line 6 turned it on")


def test_only_one_place_is_quiet(lint):
    reqs = {"requirements.txt": "transformers==4.46.3\n"}
    assert not tl204(lint(SCRIPT.format(call=NON_REENTRANT, args="bf16=True"), files=reqs))
    no_call = SCRIPT.replace("model.gradient_checkpointing_enable({call})\n", "")
    assert not tl204(lint(no_call.format(args="gradient_checkpointing=True"), files=reqs))
