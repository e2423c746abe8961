"""TL301: unfused cross-entropy on a large vocabulary, per trainer and TRL version."""

from conftest import codes

TRAINER = '''
from transformers import AutoModelForCausalLM, TrainingArguments, Trainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", dtype="bfloat16")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True)
enc = tokenizer(texts, max_length=4096, truncation=True)
trainer = Trainer(model=model, args=args, train_dataset=ds)
'''


def test_trainer_on_llama3_vocab_is_flagged_with_logits_bytes(lint):
    found = lint(TRAINER)
    assert [(c, line) for c, line, _ in found] == [("TL301", 7)]
    message = found[0][2]
    assert "128,256-token vocabulary" in message
    # 8 x 4096 x 128256 = 4.2e9 logits: 7.8 GiB bf16, 15.7 GiB fp32 copy; with a trainable head (full
    # fine-tuning) 12 B/element at peak = 47.0 GiB (memory.loss_bytes_per_element)
    assert "[8 x 4,096 x 128,256] logits are ~7.8 GiB in bf16 plus ~15.7 GiB for the fp32 copy" in message
    assert "~47.0 GiB at peak" in message
    assert "use_liger_kernel=True" in message


def test_liger_kernel_silences_it(lint):
    assert lint(TRAINER.replace("bf16=True", "bf16=True, use_liger_kernel=True")) == []


def test_apply_liger_kernel_call_silences_it(lint):
    src = TRAINER + "\nfrom liger_kernel.transformers import apply_liger_kernel_to_llama\napply_liger_kernel_to_llama()\n"
    assert lint(src) == []


def test_liger_without_fused_linear_cross_entropy_still_fires(lint):
    src = TRAINER + ("\nfrom liger_kernel.transformers import apply_liger_kernel_to_llama\n"
                     "apply_liger_kernel_to_llama(fused_linear_cross_entropy=False)\n")
    assert codes(lint(src)) == ["TL301"]


def test_small_vocabulary_is_quiet(lint):
    assert lint(TRAINER.replace("meta-llama/Llama-3.1-8B", "meta-llama/Llama-2-7b-hf")) == []


def test_large_vocab_threshold_is_configurable(lint):
    src = TRAINER.replace("meta-llama/Llama-3.1-8B", "meta-llama/Llama-2-7b-hf")
    assert codes(lint(src, settings={"large-vocab": 32000})) == ["TL301"]


def test_unknown_model_is_quiet(lint):
    assert lint(TRAINER.replace("meta-llama/Llama-3.1-8B", "my-org/secret")) == []


def test_unknown_sequence_length_gives_the_per_token_cost(lint):
    found = lint(TRAINER.replace("enc = tokenizer(texts, max_length=4096, truncation=True)\n", ""))
    assert codes(found) == ["TL301"]
    assert "~1.5 MiB per token at peak (128,256 x 12 bytes)" in found[0][2]


PARSED = '''
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
(training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")
Trainer(model=model, args=training_args).train()
'''


def test_command_line_arguments_take_the_library_defaults_when_no_launch_sets_them(lint):
    # no launcher anywhere: the run is TrainingArguments' defaults, use_liger_kernel=False (issue 10, item 5)
    assert codes(lint(PARSED)) == ["TL301"]


def test_a_launcher_that_turns_on_liger_silences_it(lint):
    launcher = "python train.py --output_dir out --use_liger_kernel True\n"
    assert lint(PARSED, files={"run.sh": launcher}) == []
    assert codes(lint(PARSED, files={"run.sh": "python train.py --use_liger_kernel False\n"})) == ["TL301"]


SFT = '''
from trl import SFTConfig, SFTTrainer
trainer = SFTTrainer(model="Qwen/Qwen2.5-7B", args=SFTConfig(output_dir="o", max_length=4096{extra}))
'''


def test_sft_trainer_on_current_trl_uses_the_chunked_loss(lint):
    assert lint(SFT.format(extra="")) == []


def test_sft_trainer_on_trl_1_3_pinned_in_requirements_is_flagged(lint):
    found = lint(SFT.format(extra=""), files={"requirements.txt": "trl==1.3.0\n"})
    assert codes(found) == ["TL301"]
    assert "SFTTrainer in TRL 1.3.0" in found[0][2] and "152,064-token vocabulary" in found[0][2]
    assert "upgrade TRL" not in found[0][2] or "chunked" in found[0][2]


def test_sft_trainer_on_trl_1_10_default_is_chunked(lint):
    assert lint(SFT.format(extra=""), files={"requirements.txt": "trl==1.10.0\n"}) == []


def test_sft_trainer_on_trl_1_10_with_plain_nll_is_flagged(lint):
    found = lint(SFT.format(extra=', loss_type="nll"'), files={"requirements.txt": "trl==1.10.0\n"})
    assert codes(found) == ["TL301"]
    assert 'loss_type="chunked_nll"' in found[0][2]


def test_sft_trainer_on_trl_1_5_needs_the_opt_in(lint):
    assert codes(lint(SFT.format(extra=""), files={"requirements.txt": "trl==1.5.0\n"})) == ["TL301"]
    assert lint(SFT.format(extra=', loss_type="chunked_nll"'), files={"requirements.txt": "trl==1.5.0\n"}) == []


def test_trl_version_from_pip_install_line_in_the_script(lint):
    assert codes(lint("# !pip install -q trl==0.19.1 peft\n" + SFT.format(extra=""))) == ["TL301"]


def test_project_pin_beats_the_script_pip_line(lint):
    src = "# pip install trl==0.19.1\n" + SFT.format(extra="")
    assert lint(src, files={"pyproject.toml": '[project]\ndependencies = ["trl>=1.15"]\n'}) == []


def test_compute_loss_func_brings_the_full_logits_back(lint):
    src = SFT.format(extra="").replace("max_length=4096))", "max_length=4096), compute_loss_func=my_loss)")
    found = lint(src)
    assert codes(found) == ["TL301"] and "compute_loss_func" in found[0][2]


def test_dpo_by_model_id_on_old_trl_is_flagged(lint):
    src = '''
    from trl import DPOConfig, DPOTrainer
    DPOTrainer(model="Qwen/Qwen2.5-7B", args=DPOConfig(output_dir="o", max_length=4096))
    '''
    found = lint(src, files={"requirements.txt": "trl==0.19.1\n"})
    assert codes(found) == ["TL301"] and "DPOTrainer in TRL 0.19.1" in found[0][2]  # tests/test_tl301_trl_trainers.py


MANUAL = '''
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16)
loader = torch.utils.data.DataLoader(ds, batch_size=4)
for batch in loader:
    out = model(input_ids=batch["input_ids"])
    loss = F.cross_entropy(out.logits.view(-1, out.logits.size(-1)), batch["labels"].view(-1))
    loss.backward()
'''


def test_manual_loop_cross_entropy_on_logits_is_flagged(lint):
    found = lint(MANUAL.replace("for batch", "SEQ_LEN = 2048\nfor batch"))
    assert [(c, line) for c, line, _ in found] == [("TL301", 11)]
    # 4 x 2048 x 128256 = 1.05e9 logits: 1.96 GiB in bf16 (the lesson's "1 billion values: 2 GB in bf16")
    assert "[4 x 2,048 x 128,256] logits are ~2.0 GiB in bf16 plus ~3.9 GiB" in found[0][2]


def test_manual_loop_with_labels_passed_to_the_model_is_flagged(lint):
    src = MANUAL.replace('out = model(input_ids=batch["input_ids"])', 'out = model(input_ids=batch["input_ids"], labels=batch["labels"])')
    src = src.replace("    loss = F.cross_entropy(out.logits.view(-1, out.logits.size(-1)), batch[\"labels\"].view(-1))\n", "    loss = out.loss\n")
    assert codes(lint(src)) == ["TL301"]


def test_manual_loop_with_cut_cross_entropy_is_quiet(lint):
    src = MANUAL.replace("import torch\n", "import torch\nfrom cut_cross_entropy import linear_cross_entropy\n").replace(
        'loss = F.cross_entropy(out.logits.view(-1, out.logits.size(-1)), batch["labels"].view(-1))',
        "loss = linear_cross_entropy(out.hidden_states[-1], model.lm_head.weight, batch['labels'])")
    assert lint(src) == []


# The labels inside the batch dict (a collator adds them): the forward's `.loss` is the model's own cross-entropy on
# the full logits (transformers LlamaForCausalLM.forward + ForCausalLMLoss); a loss read is the evidence of labels.
BATCH_LOOP = '''
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype=torch.bfloat16)
loader = torch.utils.data.DataLoader(ds, batch_size=4)
SEQ_LEN = 2048
for batch in loader:
    {body}
    loss.backward()
'''


def test_loss_read_from_a_forward_on_the_batch_dict_is_flagged(lint):
    found = lint(BATCH_LOOP.format(body="loss = model(**batch).loss"))
    assert [(c, line) for c, line, _ in found] == [("TL301", 9)]
    assert "`model(...)` returns `.loss`, so the batch carries labels" in found[0][2]
    assert "[4 x 2,048 x 128,256] logits are ~2.0 GiB in bf16" in found[0][2]


def test_loss_read_through_the_output_variable_is_flagged_at_the_forward(lint):
    found = lint(BATCH_LOOP.format(body="outputs = model(**batch)\n    loss = outputs.loss"))
    assert [(c, line) for c, line, _ in found] == [("TL301", 9)]
    found = lint(BATCH_LOOP.format(body='outputs = model(**batch)\n    loss = outputs["loss"]'))
    assert [(c, line) for c, line, _ in found] == [("TL301", 9)]


def test_loss_of_a_peft_wrapped_model_is_flagged(lint):
    src = BATCH_LOOP.replace("SEQ_LEN", "from peft import LoraConfig, get_peft_model\n"
                             "peft_model = get_peft_model(model, LoraConfig(r=8))\nSEQ_LEN")
    assert codes(lint(src.format(body="loss = peft_model(**batch).loss"))) == ["TL301"]


def test_loss_of_something_that_is_not_the_model_is_quiet(lint):
    assert lint(BATCH_LOOP.format(body="loss = compute(batch).loss")) == []
    # a loss read with the Liger patch applied: the fused path computes it
    src = BATCH_LOOP.replace("import torch\n", "import torch\nfrom liger_kernel.transformers import "
                             "apply_liger_kernel_to_llama\napply_liger_kernel_to_llama()\n")
    assert lint(src.format(body="loss = model(**batch).loss")) == []
