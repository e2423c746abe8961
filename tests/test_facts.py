"""The facts pass: calls matched through imports and aliases, values resolved statically or unknown."""

import textwrap
from pathlib import Path

import libcst as cst

from trainlint.facts import extract_facts
from trainlint.resolve import resolve_facts
from trainlint.knowledge.versions import decide_versions
from trainlint.launch.model import Launch


def raw_facts_of(src: str):
    """The facts pass alone: command-line parameters stay symbolic (facts.Param)."""
    src = textwrap.dedent(src)
    return extract_facts(cst.parse_module(src), "t.py", src)


def facts_of(src: str):
    """The facts as rules read them: resolved under the script's defaults (no launch)."""
    return resolve_facts(raw_facts_of(src), Launch.defaults(), decide_versions(Path("t.py"), (), {}))


def test_aliases_and_module_imports_match_the_same_classes():
    f = facts_of('''
    import trl
    import transformers as tf
    from transformers import TrainingArguments as TA
    a = TA(output_dir="a")
    b = trl.SFTConfig(output_dir="b")
    c = tf.Seq2SeqTrainingArguments(output_dir="c")
    ''')
    assert [(a.class_name, a.library, a.variable) for a in f.args_objects] == [
        ("TrainingArguments", "transformers", "a"), ("SFTConfig", "trl", "b"),
        ("Seq2SeqTrainingArguments", "transformers", "c")]


def test_a_local_class_with_a_library_name_is_not_the_library_class():
    f = facts_of('''
    class TrainingArguments:
        pass
    a = TrainingArguments(output_dir="a")
    ''')
    assert f.args_objects == ()


def test_any_for_class_from_pretrained_is_a_model_load():
    f = facts_of('''
    from transformers import AutoModelForSequenceClassification, LlamaForCausalLM, AutoTokenizer
    m1 = AutoModelForSequenceClassification.from_pretrained("roberta-base", num_labels=2)
    m2 = LlamaForCausalLM.from_pretrained(pretrained_model_name_or_path="meta-llama/Llama-3.2-1B")
    tok = AutoTokenizer.from_pretrained("roberta-base")
    ''')
    assert [(m.class_name, m.model_id.value, m.variable) for m in f.models] == [
        ("AutoModelForSequenceClassification", "roberta-base", "m1"),
        ("LlamaForCausalLM", "meta-llama/Llama-3.2-1B", "m2")]


def test_values_resolve_through_constants_arithmetic_and_dict_unpacking():
    f = facts_of('''
    from transformers import TrainingArguments
    BS = 4
    GA = 32 // BS
    common = dict(per_device_train_batch_size=BS, logging_steps=10)
    extra = {"gradient_accumulation_steps": GA, **{"bf16": True}}
    args = TrainingArguments(output_dir="o", **common, **extra)
    ''')
    args = f.args_objects[0]
    assert args.get("per_device_train_batch_size").value == 4
    assert args.get("gradient_accumulation_steps").value == 8
    assert args.get("bf16").value is True
    assert args.get("gradient_checkpointing").unset


def test_names_bound_twice_or_from_calls_are_unknown_never_guessed():
    f = facts_of('''
    import os
    from transformers import TrainingArguments
    bs = 4
    if os.environ.get("BIG"):
        bs = 16
    ga = int(os.environ.get("GA", 1))
    args = TrainingArguments(output_dir="o", per_device_train_batch_size=bs, gradient_accumulation_steps=ga,
                             **load_overrides())
    ''')
    args = f.args_objects[0]
    assert args.get("per_device_train_batch_size").unknown
    assert args.get("gradient_accumulation_steps").unknown
    assert args.call.opaque_kwargs


def test_function_scope_shadows_module_scope():
    f = facts_of('''
    from transformers import TrainingArguments
    BS = 2
    def main():
        BS = 16
        return TrainingArguments(output_dir="o", per_device_train_batch_size=BS)
    ''')
    assert f.args_objects[0].get("per_device_train_batch_size").value == 16


def test_argparse_defaults_and_dataclass_fields_are_read_back():
    f = facts_of('''
    import argparse
    from dataclasses import dataclass, field
    from transformers import TrainingArguments

    @dataclass
    class ScriptArguments:
        max_seq_length: int = field(default=4096, metadata={"help": "..."})
        lora_r: int = 16

    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--use_cache", action="store_true")
    p.add_argument("--lr", type=float, required=True)
    args = p.parse_args()
    targs = TrainingArguments(output_dir="o", per_device_train_batch_size=args.batch_size,
                              learning_rate=args.lr, remove_unused_columns=args.use_cache)
    ''')
    targs = f.args_objects[0]
    assert targs.get("per_device_train_batch_size").value == 2
    assert targs.get("per_device_train_batch_size").via == "argparse default"
    assert targs.get("learning_rate").unknown
    assert targs.get("remove_unused_columns").value is False
    assert [e.value.value for e in f.seq_evidence] == [4096]


def test_sequence_length_sources():
    f = facts_of('''
    from trl import SFTConfig
    block_size = 2048
    enc = tokenizer(batch["text"], max_length=1024, truncation=True)
    out = model.generate(ids, max_length=50)
    cfg = SFTConfig(output_dir="o", max_length=3000)
    ''')
    assert sorted((e.source, e.value.value) for e in f.seq_evidence) == [
        ("SFTConfig(max_length=)", 3000), ("block_size =", 2048), ("tokenizer(max_length=)", 1024)]


def test_trainer_links_model_and_args_variables_positionally_and_by_keyword():
    f = facts_of('''
    from transformers import Trainer, TrainingArguments
    from trl import SFTTrainer
    t1 = Trainer(model, targs)
    t2 = SFTTrainer(model=peft_model, args=cfg)
    ''')
    assert [(t.class_name, t.model_variable, t.args_variable) for t in f.trainers] == [
        ("Trainer", "model", "targs"), ("SFTTrainer", "peft_model", "cfg")]


def test_quantization_config_is_read():
    f = facts_of('''
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")
    m = AutoModelForCausalLM.from_pretrained("x/y", quantization_config=bnb)
    ''')
    assert f.models[0].quantization.value == "4bit"


def test_inline_config_geometry_is_captured():
    f = facts_of('''
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=128256, hidden_size=64, num_attention_heads=4)
    model = LlamaForCausalLM(cfg)
    ''')
    m = f.models[0]
    assert m.kind == "constructor" and m.config_class == "LlamaConfig"
    assert m.inline("vocab_size").value == 128256


def test_pip_install_lines_become_pins():
    f = facts_of('''
    # !pip install -q "transformers==4.34.0" trl>=0.7,<0.8 peft
    import os
    os.system("pip install accelerate==0.25.0")
    ''')
    assert f.pip_pins == (("transformers", "==4.34.0"), ("trl", ">=0.7,<0.8"), ("accelerate", "==0.25.0"))


def test_slicing_token_ids_to_a_constant_sets_the_sequence_length():
    f = facts_of('''
    CTX = 2048
    batch = input_ids[:, :CTX * 2]
    other = rows[:10]
    ''')
    assert [(e.source, e.value.value) for e in f.seq_evidence] == [("slice to a constant", 4096)]


def test_a_library_default_that_is_not_a_literal_is_unknown_not_a_value():
    from trainlint.resolve import library_field_default

    versions = decide_versions(Path("t.py"), (), {})
    # TrainingArguments.optim depends on the installed torch (knowledge.arguments EnvDependent): unknown, never
    # the marker object presented as a value
    assert library_field_default("TrainingArguments", "optim", versions).unknown
    assert library_field_default("TrainingArguments", "per_device_train_batch_size", versions).value == 8
