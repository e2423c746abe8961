"""TL101: eager attention at long context, with the library-version subtleties."""

from pathlib import Path

from conftest import codes
from trainlint.knowledge.versions import decide_versions

LLAMA_EAGER_8K = '''
from transformers import AutoModelForCausalLM, TrainingArguments, Trainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, use_liger_kernel=True)
enc = tokenizer(texts, max_length=8192, truncation=True)
Trainer(model=model, args=args, train_dataset=ds).train()
'''


def test_eager_attention_at_8k_on_llama3_is_flagged_with_its_cost(lint):
    found = lint(LLAMA_EAGER_8K)
    assert [(c, line) for c, line, _ in found] == [("TL101", 4)]
    message = found[0][2]
    # 4 x 32 heads x 8192^2 x 6 bytes = 48 GiB per layer; 32 layers without checkpointing
    assert "batch 4 x 32 heads x 8,192^2" in message
    assert "~48.0 GiB per layer" in message
    assert "~1,536.0 GiB over 32 layers" in message
    assert 'set attn_implementation="sdpa" or "flash_attention_2"' in message


def test_sdpa_flash_and_flex_are_quiet(lint):
    for impl in ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention", "kernels-community/flash-attn2"):
        assert lint(LLAMA_EAGER_8K.replace('"eager"', f'"{impl}"')) == [], impl


def test_default_attention_on_transformers_5_llama_is_quiet(lint):
    assert lint(LLAMA_EAGER_8K.replace(', attn_implementation="eager"', "")) == []


def test_short_context_is_quiet(lint):
    assert lint(LLAMA_EAGER_8K.replace("8192", "1024")) == []


def test_long_context_threshold_is_configurable(lint):
    src = LLAMA_EAGER_8K.replace("8192", "1024")
    assert codes(lint(src, settings={"long-context": 1024})) == ["TL101"]


def test_output_attentions_at_load_time_selects_eager(lint):
    src = LLAMA_EAGER_8K.replace('attn_implementation="eager"', "output_attentions=True")
    found = lint(src)
    assert codes(found) == ["TL101"]
    assert "output_attentions=True selects eager" in found[0][2]


def test_gemma2_falls_back_to_eager_on_transformers_5_and_suggests_flash_not_sdpa(lint):
    src = '''
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    model = AutoModelForCausalLM.from_pretrained("google/gemma-2-9b")
    trainer = SFTTrainer(model=model, args=SFTConfig(output_dir="o", max_length=4096, per_device_train_batch_size=1))
    '''
    found = lint(src)
    assert codes(found) == ["TL101"]
    # no pin: the version is the one the resolver picks for this file (the installed one where it is installed)
    version = decide_versions(Path("train.py"), (), {}).transformers.version
    assert version.startswith("5.")
    assert f"gemma2 falls back to eager in transformers {version}" in found[0][2]
    assert "flex_attention" in found[0][2] and '"sdpa"' not in found[0][2]


def test_gemma2_with_flash_attention_is_quiet(lint):
    src = '''
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    model = AutoModelForCausalLM.from_pretrained("google/gemma-2-9b", attn_implementation="flash_attention_2")
    trainer = SFTTrainer(model=model, args=SFTConfig(output_dir="o", max_length=4096))
    '''
    assert lint(src) == []


def test_old_transformers_pinned_in_requirements_defaults_to_eager(lint):
    src = LLAMA_EAGER_8K.replace(', attn_implementation="eager"', "")
    # (the script also sets use_liger_kernel, which 4.34 lacks: TL009, tested in test_api_versions.py)
    found = lint(src, files={"requirements.txt": "torch==2.1.0\ntransformers==4.34.0\n"}, settings={"ignore": ["TL009"]})
    assert codes(found) == ["TL101"]
    assert "transformers 4.34.0 (< 4.36)" in found[0][2]


def test_old_transformers_with_flash_attention_2_flag_is_quiet(lint):
    src = LLAMA_EAGER_8K.replace('attn_implementation="eager"', "use_flash_attention_2=True")
    assert lint(src, files={"requirements.txt": "transformers==4.34.0\n"}, settings={"ignore": ["TL009"]}) == []


def test_transformers_4_57_without_choice_stays_quiet(lint):
    src = LLAMA_EAGER_8K.replace(', attn_implementation="eager"', "")
    # SDPA, not eager; but 4.x loads fp32 without a dtype and nothing autocasts, so its SDPA is TL102's math kernel
    assert codes(lint(src, files={"requirements.txt": "transformers>=4.40,<5\n"})) == ["TL102"]


def test_sft_default_max_length_is_1024_so_quiet(lint):
    src = '''
    from trl import SFTConfig, SFTTrainer
    trainer = SFTTrainer(model="meta-llama/Llama-3.1-8B",
                         args=SFTConfig(output_dir="o", model_init_kwargs={"attn_implementation": "eager"}))
    '''
    assert lint(src) == []


def test_string_model_with_eager_in_model_init_kwargs_is_flagged(lint):
    src = '''
    import trl
    cfg = trl.SFTConfig(output_dir="o", max_length=4096, per_device_train_batch_size=2,
                        model_init_kwargs={"attn_implementation": "eager"})
    trainer = trl.SFTTrainer(model="Qwen/Qwen2.5-7B", args=cfg)
    '''
    found = lint(src)
    assert codes(found) == ["TL101"]
    assert "batch 2 x 28 heads x 4,096^2" in found[0][2]


def test_attention_from_argparse_default_is_resolved(lint):
    src = '''
    import argparse
    from transformers import AutoModelForCausalLM as AM
    p = argparse.ArgumentParser()
    p.add_argument("--attn-impl", default="eager")
    p.add_argument("--max_seq_length", type=int, default=4096)
    args = p.parse_args()
    model = AM.from_pretrained("meta-llama/Llama-3.2-1B", attn_implementation=args.attn_impl)
    '''
    found = lint(src)
    assert codes(found) == ["TL101"]
    assert "sequence length 4,096" in found[0][2]


def test_unresolvable_attention_says_nothing(lint):
    src = '''
    from transformers import AutoModelForCausalLM
    def load(impl):
        return AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation=impl)
    MAX_LEN = 8192
    '''
    assert lint(src) == []


def test_unknown_model_still_flags_but_without_a_number(lint):
    src = LLAMA_EAGER_8K.replace("meta-llama/Llama-3.1-8B", "my-org/private-model")
    found = lint(src)
    assert codes(found) == ["TL101"]
    assert "model size unknown" in found[0][2] and "GB" not in found[0][2]


def test_local_model_directory_config_json_is_read(lint):
    src = LLAMA_EAGER_8K.replace("meta-llama/Llama-3.1-8B", "./ckpt")
    config = '{"model_type": "llama", "num_attention_heads": 16, "hidden_size": 2048, "num_hidden_layers": 4, "vocab_size": 32000}'
    found = lint(src, files={"ckpt/config.json": config})
    assert "batch 4 x 16 heads" in found[0][2] and "over 4 layers" in found[0][2]


def test_gradient_checkpointing_reports_per_layer_only(lint):
    src = LLAMA_EAGER_8K.replace("use_liger_kernel=True", "use_liger_kernel=True, gradient_checkpointing=True")
    message = lint(src)[0][2]
    assert "per layer" in message and "over 32 layers" not in message


def test_noqa_and_trainlint_ignore_suppress(lint):
    line = 'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")'
    for comment in ("  # noqa: TL101", "  # noqa", "  # trainlint: ignore[TL101]", "  # noqa: E501, TL101"):
        assert lint(LLAMA_EAGER_8K.replace(line, line + comment)) == [], comment
    assert codes(lint(LLAMA_EAGER_8K.replace(line, line + "  # noqa: TL301"))) == ["TL101"]
    assert codes(lint(LLAMA_EAGER_8K.replace(line, line + "  # noqa: E501"))) == ["TL101"]


MPT_REMOTE = '''
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("mosaicml/mpt-7b", trust_remote_code=True)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=1, bf16=True)
enc = tokenizer(texts, max_length=2048, truncation=True)
Trainer(model=model, args=args, train_dataset=ds).train()
'''


def test_remote_code_whose_config_names_its_torch_attention_is_eager(lint):
    """MPT's own code (trust_remote_code) runs attn_config.attn_impl "torch" from its config.json: q.matmul(k) and
    a softmax over the whole score matrix (knowledge/models.py _remote_attention)."""
    found = lint(MPT_REMOTE)
    assert [(c, line) for c, line, _ in found] == [("TL101", 4)]
    assert 'attn_config.attn_impl "torch"' in found[0][2]
    assert 'attn_config={"attn_impl": "flash"}' in found[0][2]  # the checkpoint's own switch, not attn_implementation
    assert "no fix offered" in found[0][2]


def test_remote_code_without_a_known_attention_says_nothing(lint):
    # a remote-code checkpoint the catalog knows only by geometry: its code may do anything
    src = MPT_REMOTE.replace("mosaicml/mpt-7b", "Qwen/Qwen-7B")
    assert "TL101" not in codes(lint(src))
