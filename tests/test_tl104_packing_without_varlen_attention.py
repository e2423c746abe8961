"""TL104: padding-free (flattened) batches with an attention that does not read the sequence boundaries as varlen (a
lever that does nothing, issue 28 item 4). One test per version behaviour (knowledge/packing.py), with the versions
pinned in the repository's requirements file; then a tiny Llama on CPU showing what transformers does with a flattened
row (the installed transformers 5.25 / trl 1.16)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SFT = '''
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16"{attention})
args = SFTConfig(output_dir="out", per_device_train_batch_size=8, max_length=2048, bf16=True,
                 gradient_checkpointing=True, {packing})
trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset("trl-lib/Capybara", split="train"))
trainer.train()
'''

_repos = iter(range(10_000))


def tl104(lint, source, pins, name="train.py"):
    root = f"repo{next(_repos)}"
    files = {f"{root}/.git/HEAD": "ref: refs/heads/main\n", f"{root}/requirements.txt": pins}
    return [f for f in lint(source, files=files, name=f"{root}/{name}") if f[0] == "TL104"]


def sft(attention="", packing="packing=True"):
    return SFT.format(attention=f', attn_implementation="{attention}"' if attention else "", packing=packing)


def test_trl_0_24_default_bfd_packing_with_eager_on_4_56_costs_batch_times_the_attention(lint):
    found = tl104(lint, sft("eager"), "trl==0.24.0\ntransformers==4.56.2\n")
    assert len(found) == 1 and found[0][1] == 8
    m = found[0][2]
    assert m.startswith('packing=True with packing_strategy="bfd" (the default) flattens each micro-batch into one '
                        'row of up to 8 x 2,048 = 16,384 tokens: its collator gives the row position_ids restarting '
                        'per sequence and no attention_mask')
    assert 'with attn_implementation="eager", transformers 4.56.2 keeps the sequences apart with a dense ' \
           'same-sequence mask built from the position_ids' in m
    assert "(masking_utils.find_packed_sequence_indices, with torch >= 2.6; trl 0.24.0's SFTTrainer.compute_loss " \
           "passes use_cache=False)" in m
    # Qwen2.5-0.5B, 14 heads, bf16, checkpointing: one layer's scores + fp32 softmax + the float mask, as attention_bytes
    # prices them: 8 rows of 2,048 vs one row of 16,384
    assert "eager keeps ~21.5 GiB of scores and mask for that row, 8x the ~2.7 GiB of 8 padded rows of 2,048" in m
    assert m.endswith('set attn_implementation="flash_attention_2" (its varlen kernel reads the boundaries), or train '
                      'without padding-free batches')


def test_trl_0_24_with_sdpa_on_4_56_is_quiet_the_mask_keeps_the_sequences_apart(lint):
    assert not tl104(lint, sft("sdpa"), "trl==0.24.0\ntransformers==4.56.2\n")


def test_flash_attention_and_wrapped_packing_are_quiet(lint):
    pins = "trl==0.24.0\ntransformers==4.56.2\nflash-attn\n"
    assert not tl104(lint, sft("flash_attention_2"), pins)
    assert not tl104(lint, sft("eager", 'packing=True, packing_strategy="wrapped"'), pins)
    assert not tl104(lint, sft("eager", "packing=False"), pins)


def test_trl_0_20_drops_position_ids_for_sdpa_so_the_row_is_one_sequence(lint):
    found = tl104(lint, sft("sdpa"), "trl==0.20.0\ntransformers==4.56.2\n")
    assert len(found) == 1
    m = found[0][2]
    assert "its collator is built with return_position_ids only for flash_attention_2" in m
    assert "transformers 4.56.2 runs the row as ONE causal sequence (no position_ids reach it" in m
    assert "each sequence attends to the ones packed before it (cross-contamination)" in m
    assert "SDPA's fused kernel keeps memory linear" in m


def test_trl_0_19_default_ffd_packing_flattens_and_its_wrapped_does_not(lint):
    pins = "trl==0.19.1\ntransformers==4.52.4\n"
    found = tl104(lint, sft("sdpa"), pins)
    assert len(found) == 1 and 'packing_strategy="ffd" (the default)' in found[0][2]
    # "bfd" is 0.20's; in 0.19 only "ffd" flattens
    assert not tl104(lint, sft("sdpa", 'packing=True, packing_strategy="bfd"'), pins)


def test_trl_0_16_padding_free_uses_the_flattening_collator_and_4_48_ignores_the_boundaries(lint):
    pins = "trl==0.16.1\ntransformers==4.48.3\n"
    found = tl104(lint, sft("sdpa", "padding_free=True"), pins)
    assert len(found) == 1
    m = found[0][2]
    assert m.startswith("padding_free=True flattens each micro-batch into one row of up to 8 x 2,048 = 16,384 tokens: "
                        "trl 0.16 passes transformers' DataCollatorWithFlattening")
    assert "reads the position_ids for the rotary positions only and masks the row causally as one sequence" in m
    # 0.16's packing=True alone packs wrapped blocks: not padding-free
    assert not tl104(lint, sft("sdpa"), pins)


def test_trl_before_0_16_packing_is_constant_length_blocks(lint):
    assert not tl104(lint, sft("eager"), "trl==0.12.2\ntransformers==4.46.3\n")
    assert not tl104(lint, sft("eager"), "trl==0.9.6\ntransformers==4.44.2\n")


def test_trl_1_16_padding_free_with_eager_on_5_25_has_no_torch_condition(lint):
    found = tl104(lint, sft("eager", "padding_free=True"), "trl==1.16.0\ntransformers==5.25.0\n")
    assert len(found) == 1 and found[0][1] == 8
    m = found[0][2]
    assert "transformers 5.25.0 keeps the sequences apart with a dense same-sequence mask" in m
    assert "torch >= 2.6" not in m
    assert "8x the" in m
    # one sequence per micro-batch: the row is as long as a padded one, and the mask keeps it apart
    one = sft("eager", "padding_free=True").replace("per_device_train_batch_size=8", "per_device_train_batch_size=1")
    assert not tl104(lint, one, "trl==1.16.0\ntransformers==5.25.0\n")


def test_default_attention_is_said_to_be_an_assumption(lint):
    found = tl104(lint, sft(""), "trl==0.20.0\ntransformers==4.56.2\n")
    assert len(found) == 1
    assert found[0][2].endswith("(assuming the attention is sdpa, transformers 4.56.2 default: a default the load "
                                "could override)")


FLATTEN = '''
from transformers import AutoModelForCausalLM, DataCollatorWithFlattening, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16", attn_implementation="{attention}")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
enc = tokenizer(texts, max_length=4096, truncation=True)
Trainer(model=model, args=args, train_dataset=ds, data_collator=DataCollatorWithFlattening({kw})).train()
'''


def test_flattening_collator_in_a_plain_trainer_before_4_53_ignores_the_boundaries(lint):
    found = tl104(lint, FLATTEN.format(attention="sdpa", kw=""), "transformers==4.48.3\n")
    assert len(found) == 1 and found[0][1] == 7
    m = found[0][2]
    assert m.startswith("DataCollatorWithFlattening() flattens each micro-batch into one row of up to "
                        "4 x 4,096 = 16,384 tokens: it concatenates the micro-batch into one row with position_ids")
    assert "transformers 4.48.3 reads the position_ids for the rotary positions only" in m


def test_flattening_collator_on_4_56_needs_the_cache_off_which_the_trainer_leaves_on(lint):
    found = tl104(lint, FLATTEN.format(attention="sdpa", kw=""), "transformers==4.56.2\n")
    assert len(found) == 1
    m = found[0][2]
    assert "looks for packed sequences in the position_ids only when the forward has no cache" in m
    assert m.endswith("(assuming the model's config keeps use_cache=True, its default: nothing in the script turns "
                      "it off)")
    off = FLATTEN.format(attention="sdpa", kw="").replace("Trainer(model", "model.config.use_cache = False\nTrainer(model")
    assert not tl104(lint, off, "transformers==4.56.2\n")
    # from 5.0 the Trainer sets the config's use_cache from TrainingArguments.use_cache (False by default)
    assert not tl104(lint, FLATTEN.format(attention="sdpa", kw=""), "transformers==5.25.0\n")


def test_flattening_collator_without_position_ids_or_with_eager(lint):
    found = tl104(lint, FLATTEN.format(attention="sdpa", kw="return_position_ids=False"), "transformers==5.25.0\n")
    assert len(found) == 1 and "runs the row as ONE causal sequence" in found[0][2]
    found = tl104(lint, FLATTEN.format(attention="eager", kw=""), "transformers==5.25.0\n")
    assert len(found) == 1 and "4x the" in found[0][2] and "keeps the sequences apart" in found[0][2]
    assert not tl104(lint, FLATTEN.format(attention="flash_attention_2", kw=""), "transformers==5.25.0\n")


# -- what the installed transformers does with a flattened row: a tiny Llama on CPU ----------------------------------
KERNEL = r'''
import json
import torch
from transformers import DataCollatorWithFlattening, LlamaConfig, LlamaForCausalLM
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=64)
a, b = torch.randint(0, 100, (5,)), torch.randint(0, 100, (7,))
row = torch.cat([a, b])[None]
positions = torch.cat([torch.arange(5), torch.arange(7)])[None]
out = {"config_use_cache": cfg.use_cache}
for impl in ("eager", "sdpa"):
    cfg._attn_implementation = impl
    model = LlamaForCausalLM(cfg).train()  # a training forward (no dropout in this config)
    with torch.no_grad():
        alone = model(b[None], use_cache=False).logits[0]
        apart = model(row, position_ids=positions, use_cache=False).logits[0, 5:]
        cached = model(row, position_ids=positions).logits[0, 5:]  # the config's use_cache=True
        # trl 0.19-0.22's row for a non-flash attention: all-ones mask, no position_ids
        one_seq = model(row, attention_mask=torch.ones_like(row), use_cache=False).logits[0, 5:]
        if impl == "eager":
            att = model(row, position_ids=positions, use_cache=False, output_attentions=True).attentions[0]
            out["eager_scores_shape"] = list(att.shape)
            out["eager_cross_weight"] = float(att[0, :, 5:, :5].abs().max())
    out[impl] = {"no_cache": bool(torch.allclose(apart, alone, atol=1e-5)),
                 "config_cache": bool(torch.allclose(cached, alone, atol=1e-5)),
                 "no_positions": bool(torch.allclose(one_seq, alone, atol=1e-5))}
trl_batch = DataCollatorForLanguageModeling(pad_token_id=0, padding_free=True)(
    [{"input_ids": a.tolist()}, {"input_ids": b.tolist()}])
hf_batch = DataCollatorWithFlattening()([{"input_ids": a.tolist()}, {"input_ids": b.tolist()}])
out["trl_keys"] = sorted(trl_batch)
out["trl_positions"] = trl_batch["position_ids"][0].tolist()
out["hf_keys"] = sorted(hf_batch)
print(json.dumps(out))
'''


def test_installed_transformers_keeps_flattened_sequences_apart_only_with_positions_and_no_cache(tmp_path):
    """transformers 5.25 (torch 2.13), a training forward of a flattened row of 5 + 7 tokens: with restarting
    position_ids, no mask and use_cache=False, eager and SDPA give the second sequence exactly its own logits
    (masking_utils' same-sequence mask), and eager's weights are one [heads x 12 x 12] matrix, zero across the
    boundary. With the config's use_cache=True (the default) the model builds a cache, the packed format is not
    looked for, and the second sequence's logits change; so they do with trl 0.19-0.22's all-ones mask and no
    position_ids. trl 1.16's and transformers' collators give one row, position_ids, no attention_mask."""
    pytest.importorskip("torch")
    pytest.importorskip("trl")
    done = subprocess.run([sys.executable, "-c", KERNEL], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["config_use_cache"] is True
    for impl in ("eager", "sdpa"):
        assert out[impl] == {"no_cache": True, "config_cache": False, "no_positions": False}, out
    assert out["eager_scores_shape"] == [1, 4, 12, 12]
    assert out["eager_cross_weight"] == 0.0
    assert "attention_mask" not in out["trl_keys"] and "position_ids" in out["trl_keys"]
    assert out["trl_positions"] == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6]
    assert "attention_mask" not in out["hf_keys"] and "position_ids" in out["hf_keys"]


def test_trl_0_18_padding_free_on_4_56_keeps_the_cache_so_the_boundaries_go(lint):
    """trl 0.18 passes DataCollatorWithFlattening (position_ids) but not use_cache=False (from 0.22): transformers
    4.56 builds a cache in the training forward and does not look for the packed format."""
    found = tl104(lint, sft("sdpa", "padding_free=True"), "trl==0.18.2\ntransformers==4.56.2\n")
    assert len(found) == 1 and "only when the forward has no cache" in found[0][2]
    # trl 0.22 turns the cache off itself, and its position_ids reach SDPA from 0.23
    assert not tl104(lint, sft("sdpa", "padding_free=True"), "trl==0.23.1\ntransformers==4.56.2\n")
