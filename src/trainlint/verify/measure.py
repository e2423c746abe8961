#!/usr/bin/env python3
"""Measured side of trainlint's memory-estimate accuracy benchmark (CPU only, no downloads).

For each configuration this builds a real transformers architecture from a config (never from the
hub), runs two training steps exactly as an HF Trainer loop would:

    model.train()
    loss = model(input_ids=ids, labels=ids).loss      # transformers' own ForCausalLMLoss
    loss.backward(); optimizer.step(); optimizer.zero_grad(set_to_none=True)

and tracks model + optimizer + batch with torch's MemTracker
(torch.distributed._tools.mem_tracker), calling mt.reset_mod_stats() between the steps.
Large configurations run under FakeTensorMode (CPU device): no memory, no compute, same bytes.

This module is part of trainlint (`trainlint verify --simulate` uses measure()); bench/measure_memory.py
is the command that regenerates the benchmark's measurements with it.

Usage:
    .venv/bin/python bench/measure_memory.py [--only NAME_SUBSTRING] [--out bench/estimate_measurements.json]
    .venv/bin/python bench/measure_memory.py --check-fake     # fake == real check on small configs
    .venv/bin/python bench/measure_memory.py --list

The peak is comparable to torch.cuda.max_memory_allocated() minus allocator rounding/fragmentation,
CUDA context and kernel workspaces (see bench/MEASURE.md). Categories are MemTracker's:
PARAM, BUFFER, GRAD, ACT (made in forward / checkpoint recompute), TEMP (made in backward),
OPT (optimizer state + optimizer.step temporaries), OTH (the input batch).

Changes to MemTracker / libraries (all applied identically to real and fake runs unless noted):
  * parameters with requires_grad=False get no grad hooks (upstream raises on frozen LoRA bases);
  * ModTracker registers no multi-grad autograd hooks (they only feed per-module backward
    snapshots, which are not used, and they keep hidden-state tensors alive across steps);
  * only the global / per-step / per-phase peaks are maintained (no per-module peak walk);
  * training-mode dropout with 0<p<1 runs torch.native_dropout (bool mask, what CUDA runs)
    instead of the CPU x*bernoulli path (mask in the input dtype);
  * fake mode only: nn.Module._apply replaces FakeTensor parameters instead of swap_tensors
    (so PEFT's adapter .to(dtype) works), and transformers' find_packed_sequence_indices returns
    None (what it returns on real unpacked batches; on FakeTensors it cannot see the values).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import gc
import json
import platform
import sys
import time
import traceback
import warnings
import weakref
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker, _MemRefType, _TOTAL_KEY
from torch.distributed._tools.mod_tracker import ModTracker

warnings.filterwarnings("ignore")

import transformers  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402
import transformers.masking_utils as _masking_utils  # noqa: E402

transformers.logging.set_verbosity_error()

BENCH = Path.cwd() / "bench"  # `python bench/measure_memory.py` runs from the repository root
CATS = ["PARAM", "BUFFER", "GRAD", "ACT", "TEMP", "OPT", "OTH", "Total"]
_REF2CAT = {
    _MemRefType.PARAM: "PARAM",
    _MemRefType.BUFFER: "BUFFER",
    _MemRefType.GRAD: "GRAD",
    _MemRefType.ACT: "ACT",
    _MemRefType.TEMP: "TEMP",
    _MemRefType.OPT: "OPT",
    _MemRefType.OTH: "OTH",
    _TOTAL_KEY: "Total",
}
PHASES = ["forward", "backward", "optimizer_step", "zero_grad"]


# ----------------------------------------------------------------------------------------------
# Patches
# ----------------------------------------------------------------------------------------------

_orig_dropout = F.dropout


def _native_dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002 (torch's name)
    """Training dropout as CUDA runs it: native_dropout, which saves a bool mask."""
    if training and 0.0 < p < 1.0:
        return torch.native_dropout(input, p, True)[0]
    return _orig_dropout(input, p, training, inplace)


F.dropout = _native_dropout  # nn.Dropout and transformers call F.dropout at call time

_orig_module_apply = nn.Module._apply


def _fake_safe_apply(self, fn, recurse=True):
    """nn.Module._apply that replaces FakeTensor params instead of swap_tensors (fails on fakes)."""
    if not any(isinstance(p, FakeTensor) for p in self._parameters.values() if p is not None):
        return _orig_module_apply(self, fn, recurse)
    if recurse:
        for module in self.children():
            module._apply(fn)
    for key, param in self._parameters.items():
        if param is None:
            continue
        with torch.no_grad():
            applied = fn(param)
        if applied is param:
            continue
        grad = param.grad
        new = nn.Parameter(applied, requires_grad=param.requires_grad)
        if grad is not None:
            with torch.no_grad():
                new.grad = fn(grad)
        self._parameters[key] = new
    for key, buf in self._buffers.items():
        if buf is not None:
            self._buffers[key] = fn(buf)
    return self


_orig_find_packed = _masking_utils.find_packed_sequence_indices


def _find_packed_fake_aware(position_ids):
    if isinstance(position_ids, FakeTensor):
        # Our batches are never packed: every row is arange(seq). The real check returns None.
        return None
    return _orig_find_packed(position_ids)


_masking_utils.find_packed_sequence_indices = _find_packed_fake_aware


class _QuietModTracker(ModTracker):
    """ModTracker without multi-grad hooks (forward hierarchy tracking only)."""

    def _fw_pre_hook(self, mod, input):
        name = self._get_mod_name(mod)
        self._get_append_fn(weakref.ref(mod), name, False)()
        if self._user_pre_fw_hook is not None:
            self._user_pre_fw_hook(mod, input)

    def _fw_post_hook(self, mod, input, output):
        name = self._get_mod_name(mod)
        if self._user_post_fw_hook is not None:
            self._user_post_fw_hook(mod, input, output)
        self._get_pop_fn(weakref.ref(mod), name, False)()


class StepMemTracker(MemTracker):
    """MemTracker keeping global, per-step and per-phase peaks only."""

    def __init__(self):
        super().__init__()
        self._mod_tracker = _QuietModTracker()
        self.step = 0
        self.phase = "setup"
        self.peaks = {}  # key -> (total, snapshot dict)

    def set_phase(self, step, phase):
        self.step, self.phase = step, phase

    def _track_module_params_and_buffers(self, module, install_grad_hooks=True):
        def _grad_hook(grad):
            self._update_and_maybe_create_winfos(grad, _MemRefType.GRAD)

        param_memory = 0
        for param in module.parameters():
            winfos = self._update_and_maybe_create_winfos(param, _MemRefType.PARAM)
            param_memory += sum(w.mem_consumed for w in winfos)
            if param.grad is not None:
                self._update_and_maybe_create_winfos(param.grad, _MemRefType.GRAD)
            if (
                install_grad_hooks
                and param.requires_grad
                and self._param_to_grad_hook_handles.get(param, None) is None
            ):
                h1 = param.register_hook(_grad_hook)
                h2 = param.register_post_accumulate_grad_hook(lambda p: _grad_hook(p.grad))
                self._param_to_grad_hook_handles[param] = (h1, h2)
        buffer_memory = 0
        for buffer in module.buffers():
            winfos = self._update_and_maybe_create_winfos(buffer, _MemRefType.BUFFER)
            buffer_memory += sum(w.mem_consumed for w in winfos)
        return param_memory, buffer_memory

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._op = func
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _update_peak_stats(self, peak_state):
        for dev, snap in self._curr_mem_snap.items():
            tot = snap[_TOTAL_KEY]
            keys = [f"step{self.step}", f"step{self.step}/{self.phase}"]
            if self.step in (1, 2):
                keys.append("all")
            for key in keys:
                cur = self.peaks.get(key)
                if cur is None or tot > cur[0]:
                    rec = {_REF2CAT[k]: v for k, v in snap.items()}
                    rec["_step"], rec["_phase"] = self.step, self.phase
                    rec["_op"] = str(getattr(self, "_op", None))
                    self.peaks[key] = (tot, rec)


# ----------------------------------------------------------------------------------------------
# Configurations
# ----------------------------------------------------------------------------------------------

LLAMA3_1B = dict(
    model_type="llama", vocab_size=128256, hidden_size=2048, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, head_dim=64, intermediate_size=8192,
    tie_word_embeddings=True, max_position_embeddings=131072, rms_norm_eps=1e-5,
    rope_theta=500000.0,
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
)
QWEN25_05B = dict(
    model_type="qwen2", vocab_size=151936, hidden_size=896, num_hidden_layers=24,
    num_attention_heads=14, num_key_value_heads=2, intermediate_size=4864,
    tie_word_embeddings=True, max_position_embeddings=32768, rms_norm_eps=1e-6,
    rope_theta=1000000.0, use_sliding_window=False,
)
SMOLLM2_360M = dict(  # HuggingFaceTB/SmolLM2-360M (knowledge/models.json)
    model_type="llama", vocab_size=49152, hidden_size=960, num_hidden_layers=32,
    num_attention_heads=15, num_key_value_heads=5, head_dim=64, intermediate_size=2560,
    tie_word_embeddings=True, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
)
MISTRAL_7B = dict(  # Mistral-7B-v0.3-like (no sliding window), 32,000 vocab (v0.1/v0.2 size)
    model_type="mistral", vocab_size=32000, hidden_size=4096, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=14336,
    tie_word_embeddings=False, max_position_embeddings=32768, rms_norm_eps=1e-5,
    rope_theta=1000000.0, sliding_window=None,
)
LLAMA2_7B = dict(
    model_type="llama", vocab_size=32000, hidden_size=4096, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=32, head_dim=128, intermediate_size=11008,
    tie_word_embeddings=False, max_position_embeddings=4096, rms_norm_eps=1e-5,
)
GPT2 = dict(  # gpt2 (124M); dropout 0.1 everywhere as in the public config
    model_type="gpt2", vocab_size=50257, n_embd=768, n_layer=12, n_head=12, n_positions=1024,
    n_inner=None, activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1,
    attn_pdrop=0.1, layer_norm_epsilon=1e-5, tie_word_embeddings=True,
)
GEMMA2_2B = dict(
    model_type="gemma2", vocab_size=256000, hidden_size=2304, num_hidden_layers=26,
    num_attention_heads=8, num_key_value_heads=4, head_dim=256, intermediate_size=9216,
    tie_word_embeddings=True, max_position_embeddings=8192, rms_norm_eps=1e-6,
    query_pre_attn_scalar=256, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
    sliding_window=4096, hidden_activation="gelu_pytorch_tanh",
)
# Small geometries used for the fake == real verification (and cheap real-tensor runs).
TINY_LLAMA = dict(
    model_type="llama", vocab_size=32000, hidden_size=256, num_hidden_layers=2,
    num_attention_heads=8, num_key_value_heads=2, head_dim=32, intermediate_size=688,
    tie_word_embeddings=False, max_position_embeddings=4096,
)
TINY_GPT2 = dict(GPT2, n_embd=128, n_layer=2, n_head=4)
TINY_GEMMA2 = dict(GEMMA2_2B, vocab_size=32000, hidden_size=256, num_hidden_layers=2,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                   intermediate_size=512)

# allenai/OLMoE-1B-7B-0924's config.json (the fields transformers' OlmoeConfig reads; a stored copy is file id
# 71007947258 of the search corpus): 64 experts, 8 per token, expert width 1,024, every layer sparse.
OLMOE_1B_7B = dict(
    model_type="olmoe", vocab_size=50304, hidden_size=2048, num_hidden_layers=16, num_attention_heads=16,
    num_key_value_heads=16, intermediate_size=1024, num_experts=64, num_experts_per_tok=8, norm_topk_prob=False,
    tie_word_embeddings=False, max_position_embeddings=4096, rope_theta=10000.0, clip_qkv=None,
)
# The same layout scaled down for real-tensor runs (routing is data-dependent there: random ids, seed 0).
TINY_OLMOE = dict(OLMOE_1B_7B, vocab_size=8192, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=4, intermediate_size=128, num_experts=8, num_experts_per_tok=2)

ATTN_PROJ = ["q_proj", "k_proj", "v_proj", "o_proj"]
ALL_LINEAR = ATTN_PROJ + ["gate_proj", "up_proj", "down_proj"]


def C(name, model, *, seq, batch=1, dtype="bf16", attn="sdpa", gc=False, training="full",
      lora_targets=None, r=16, optimizer="adamw", layers=None, fake=True, note="", lora_parameters=None):
    return dict(name=name, model=model, seq=seq, batch=batch, dtype=dtype, attn=attn, gc=gc,
                training=training, lora_targets=lora_targets, r=r, optimizer=optimizer,
                layers=layers, fake=fake, note=note, lora_parameters=lora_parameters)


CONFIGS = [
    # --- Llama-3.2-1B geometry, 128,256 vocab --------------------------------------------------
    C("llama3-1b_sdpa_s2048_b1_full_adamw_bf16", LLAMA3_1B, seq=2048),
    C("llama3-1b_eager_s2048_b1_full_adamw_bf16", LLAMA3_1B, seq=2048, attn="eager"),
    C("llama3-1b_sdpa_s512_b8_full_adamw_bf16", LLAMA3_1B, seq=512, batch=8),
    C("llama3-1b_sdpa_s2048_b4_full_adamw_bf16", LLAMA3_1B, seq=2048, batch=4),
    C("llama3-1b_sdpa_s8192_b1_full_adamw_bf16", LLAMA3_1B, seq=8192),
    C("llama3-1b_sdpa_s8192_b1_full_adamw_bf16_gc", LLAMA3_1B, seq=8192, gc=True),
    C("llama3-1b_eager_s4096_b1_full_adamw_bf16_gc", LLAMA3_1B, seq=4096, attn="eager", gc=True),
    C("llama3-1b_sdpa_s2048_b1_full_sgd_bf16", LLAMA3_1B, seq=2048, optimizer="sgd"),
    C("llama3-1b_sdpa_s2048_b1_full_sgdm_bf16", LLAMA3_1B, seq=2048, optimizer="sgd_momentum"),
    C("llama3-1b_sdpa_s1024_b2_full_adamw_fp32", LLAMA3_1B, seq=1024, batch=2, dtype="fp32"),
    C("llama3-1b_sdpa_s2048_b1_lora16attn_adamw_bf16", LLAMA3_1B, seq=2048, training="lora",
      lora_targets=ATTN_PROJ),
    C("llama3-1b_sdpa_s2048_b1_lora16attn_adamw_bf16_gc", LLAMA3_1B, seq=2048, training="lora",
      lora_targets=ATTN_PROJ, gc=True),
    C("llama3-1b_eager_s1024_b4_lora16all_adamw_bf16", LLAMA3_1B, seq=1024, batch=4,
      attn="eager", training="lora", lora_targets=ALL_LINEAR),
    # --- Qwen2.5-0.5B geometry, 151,936 vocab --------------------------------------------------
    C("qwen2.5-0.5b_sdpa_s2048_b1_full_adamw_bf16", QWEN25_05B, seq=2048),
    C("qwen2.5-0.5b_eager_s1024_b8_full_adamw_bf16", QWEN25_05B, seq=1024, batch=8, attn="eager"),
    C("qwen2.5-0.5b_sdpa_s4096_b2_full_adamw_bf16_gc", QWEN25_05B, seq=4096, batch=2, gc=True),
    C("qwen2.5-0.5b_sdpa_s2048_b1_full_adamw_fp32", QWEN25_05B, seq=2048, dtype="fp32"),
    C("qwen2.5-0.5b_sdpa_s512_b8_lora16attn_adamw_bf16", QWEN25_05B, seq=512, batch=8,
      training="lora", lora_targets=ATTN_PROJ),
    C("qwen2.5-0.5b_sdpa_s4096_b1_full_sgd_fp32_gc", QWEN25_05B, seq=4096, dtype="fp32",
      optimizer="sgd", gc=True),
    # --- Mistral-7B / Llama-2-7B geometry, 32,000 vocab ----------------------------------------
    C("mistral-7b_sdpa_s2048_b1_lora16attn_adamw_bf16_gc", MISTRAL_7B, seq=2048, training="lora",
      lora_targets=ATTN_PROJ, gc=True),
    C("mistral-7b_sdpa_s4096_b2_lora16all_adamw_bf16_gc", MISTRAL_7B, seq=4096, batch=2,
      training="lora", lora_targets=ALL_LINEAR, gc=True),
    C("mistral-7b_sdpa_s1024_b1_full_adamw_bf16", MISTRAL_7B, seq=1024),
    C("llama2-7b_sdpa_s4096_b1_lora16attn_adamw_bf16", LLAMA2_7B, seq=4096, training="lora",
      lora_targets=ATTN_PROJ),
    C("llama2-7b_eager_s2048_b1_lora16attn_adamw_bf16_gc", LLAMA2_7B, seq=2048, attn="eager",
      training="lora", lora_targets=ATTN_PROJ, gc=True),
    # --- GPT-2 (124M), 50,257 vocab, fp32, dropout 0.1 -----------------------------------------
    C("gpt2_eager_s1024_b8_full_adamw_fp32", GPT2, seq=1024, batch=8, dtype="fp32", attn="eager"),
    C("gpt2_eager_s512_b4_full_sgd_fp32", GPT2, seq=512, batch=4, dtype="fp32", attn="eager",
      optimizer="sgd"),
    C("gpt2_eager_s1024_b4_full_adamw_fp32_gc", GPT2, seq=1024, batch=4, dtype="fp32",
      attn="eager", gc=True),
    C("gpt2_eager_s1024_b4_lora16cattn_adamw_fp32", GPT2, seq=1024, batch=4, dtype="fp32",
      attn="eager", training="lora", lora_targets=["c_attn"]),
    C("gpt2_eager_s1024_b2_full_adamw_bf16", GPT2, seq=1024, batch=2, attn="eager"),
    # --- Gemma-2-2b geometry, 256,000 vocab, softcapping, eager (sdpa unsupported) -------------
    C("gemma2-2b_eager_s2048_b1_full_adamw_bf16", GEMMA2_2B, seq=2048, attn="eager"),
    C("gemma2-2b_eager_s4096_b1_lora16attn_adamw_bf16_gc", GEMMA2_2B, seq=4096, attn="eager",
      training="lora", lora_targets=ATTN_PROJ, gc=True),
    C("gemma2-2b_eager_s1024_b2_full_sgdm_bf16_gc", GEMMA2_2B, seq=1024, batch=2, attn="eager",
      optimizer="sgd_momentum", gc=True),
    # --- SmolLM2-360M geometry: the configurations issue 14 found mis-estimated -------------------
    C("smollm2-360m_sdpa_s1024_b4_lora16all_adamw_fp32", SMOLLM2_360M, seq=1024, batch=4, dtype="fp32",
      training="lora", lora_targets=ALL_LINEAR),
    C("smollm2-360m_sdpa_s1024_b4_lora16all_adamw_bf16", SMOLLM2_360M, seq=1024, batch=4,
      training="lora", lora_targets=ALL_LINEAR),
    C("smollm2-360m_sdpa_s2048_b2_full_sgd_fp32_gc", SMOLLM2_360M, seq=2048, batch=2, dtype="fp32",
      optimizer="sgd", gc=True),
    # --- small real-tensor configs (also in the fake == real check) ----------------------------
    C("tiny-llama_sdpa_s512_b2_full_adamw_fp32_real", TINY_LLAMA, seq=512, batch=2, dtype="fp32",
      fake=False, note="small geometry, real CPU tensors"),
    C("tiny-llama_eager_s512_b2_lora16attn_adamw_bf16_gc_real", TINY_LLAMA, seq=512, batch=2,
      attn="eager", training="lora", lora_targets=ATTN_PROJ, gc=True, fake=False,
      note="small geometry, real CPU tensors"),
    # --- mixture-of-experts (issue 28): OLMoE-1B-7B, all 64 experts resident, 8 active per token ------------
    C("olmoe-1b-7b_sdpa_s2048_b1_lora16attn_adamw_bf16_gc", OLMOE_1B_7B, seq=2048, training="lora",
      lora_targets=ATTN_PROJ, gc=True),
    C("olmoe-1b-7b_sdpa_s1024_b2_lora16attn_adamw_bf16", OLMOE_1B_7B, seq=1024, batch=2, training="lora",
      lora_targets=ATTN_PROJ),
    C("olmoe-1b-7b_sdpa_s1024_b1_lora16experts_adamw_bf16", OLMOE_1B_7B, seq=1024, training="lora",
      lora_targets=ATTN_PROJ, lora_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"],
      note="LoRA on the fused expert weights (peft target_parameters)"),
    C("olmoe-1b-7b_sdpa_s2048_b1_lora16experts_adamw_bf16_gc", OLMOE_1B_7B, seq=2048, training="lora",
      lora_targets=ATTN_PROJ, lora_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"], gc=True,
      note="LoRA on the fused expert weights (peft target_parameters)"),
    C("tiny-olmoe_sdpa_s512_b2_lora16attn_adamw_fp32_real", TINY_OLMOE, seq=512, batch=2, dtype="fp32",
      training="lora", lora_targets=ATTN_PROJ, fake=False, note="small geometry, real CPU tensors"),
    C("tiny-olmoe_sdpa_s1024_b2_lora16attn_adamw_bf16_routerlogits_real",
      dict(TINY_OLMOE, num_experts=64, num_experts_per_tok=8, output_router_logits=True), seq=1024, batch=2,
      training="lora", lora_targets=ATTN_PROJ, fake=False,
      note="small geometry, real CPU tensors; output_router_logits=True (the aux loss in the loss)"),
    C("tiny-olmoe_sdpa_s512_b2_lora16experts_adamw_bf16_real", TINY_OLMOE, seq=512, batch=2, training="lora",
      lora_targets=ATTN_PROJ, lora_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"], fake=False,
      note="small geometry, real CPU tensors; LoRA on the fused expert weights (peft target_parameters)"),
]

# Fake == real verification set (each run twice: real tensors, then FakeTensorMode).
CHECK_CONFIGS = [
    C("check_tiny-llama_sdpa_s512_b2_full_adamw_bf16", TINY_LLAMA, seq=512, batch=2),
    C("check_tiny-llama_eager_s256_b2_full_sgdm_fp32", TINY_LLAMA, seq=256, batch=2, attn="eager",
      dtype="fp32", optimizer="sgd_momentum"),
    C("check_tiny-llama_sdpa_s512_b2_lora16all_adamw_bf16_gc", TINY_LLAMA, seq=512, batch=2,
      training="lora", lora_targets=ALL_LINEAR, gc=True),
    C("check_tiny-gpt2_eager_s256_b2_full_adamw_fp32", TINY_GPT2, seq=256, batch=2, attn="eager",
      dtype="fp32"),
    C("check_tiny-gemma2_eager_s256_b1_lora16attn_adamw_bf16", TINY_GEMMA2, seq=256,
      attn="eager", training="lora", lora_targets=ATTN_PROJ),
    C("check_qwen2.5-0.5b-2layers_sdpa_s256_b1_full_adamw_bf16", QWEN25_05B, seq=256, layers=2,
      note="real hidden size/vocab, 2 layers"),
]

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


# ----------------------------------------------------------------------------------------------
# Measurement
# ----------------------------------------------------------------------------------------------

def _layer_key(model_type):
    return "n_layer" if model_type == "gpt2" else "num_hidden_layers"


def _model_record(spec, model, layers_built):
    m = dict(spec["model"])
    rec = {"model_type": m["model_type"]}
    if m["model_type"] == "gpt2":
        rec.update(vocab_size=m["vocab_size"], hidden_size=m["n_embd"],
                   num_hidden_layers=m["n_layer"], num_attention_heads=m["n_head"],
                   num_key_value_heads=m["n_head"], head_dim=m["n_embd"] // m["n_head"],
                   intermediate_size=4 * m["n_embd"], tie_word_embeddings=True,
                   n_positions=m["n_positions"],
                   dropout={"resid": m["resid_pdrop"], "embd": m["embd_pdrop"],
                            "attn": m["attn_pdrop"]})
    else:
        for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "intermediate_size", "tie_word_embeddings"):
            if k in m:
                rec[k] = m[k]
        if "head_dim" not in rec:
            rec["head_dim"] = m["hidden_size"] // m["num_attention_heads"]
        for k in ("attn_logit_softcapping", "final_logit_softcapping", "sliding_window"):
            if m.get(k) is not None:
                rec[k] = m[k]
        for k in ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
                  "output_router_logits", "router_aux_loss_coef"):
            if m.get(k) is not None:
                rec[k] = m[k]
        if m["model_type"] == "qwen2":
            rec["attention_bias"] = True  # qkv bias, as in Qwen2
    # parameters of the built base model (LoRA adapter weights excluded; they are in "lora")
    rec["num_parameters"] = sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)
    return rec


# The phases of one measured training step, in order (StepMemTracker records "step<N>/<phase>").
STEP_PHASES = ("forward", "backward", "optimizer_step", "zero_grad")


def measured_step(mt, step: int, forward, opt) -> None:
    """One training step under `mt` (a StepMemTracker), each part its own phase (STEP_PHASES): `forward()` returns
    the loss (what else it makes dies with its frame, as in Trainer.compute_loss), then backward, the optimizer step
    and zero_grad(set_to_none=True), the Trainer's."""
    forward_, backward, optimizer_step, zero_grad = STEP_PHASES
    mt.set_phase(step, forward_)
    loss = forward()
    mt.set_phase(step, backward)
    loss.backward()
    del loss
    mt.set_phase(step, optimizer_step)
    opt.step()
    mt.set_phase(step, zero_grad)
    opt.zero_grad(set_to_none=True)


def _make_optimizer(name, params):
    if name == "adamw":
        return torch.optim.AdamW(params, lr=2e-5, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0.0, foreach=None)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.0, foreach=None)
    if name == "sgd_momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=None)
    raise ValueError(name)


def measure(spec, fake=None):
    """Run one configuration; return the JSON record (raises on failure)."""
    fake = spec["fake"] if fake is None else fake
    t0 = time.perf_counter()
    dtype = DTYPES[spec["dtype"]]
    mcfg = dict(spec["model"])
    model_type = mcfg.pop("model_type")
    full_layers = mcfg[_layer_key(model_type)]
    layers_built = spec["layers"] or full_layers
    mcfg[_layer_key(model_type)] = layers_built
    cfg = AutoConfig.for_model(model_type, **mcfg)
    cfg.use_cache = True  # default of every public config
    torch.manual_seed(0)

    prev_default = torch.get_default_dtype()
    fake_mode = FakeTensorMode(allow_non_fake_inputs=False) if fake else None
    nn.Module._apply = _fake_safe_apply if fake else _orig_module_apply
    try:
        if fake_mode is not None:
            fake_mode.__enter__()
        torch.set_default_dtype(dtype)
        try:
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation=spec["attn"])
        finally:
            torch.set_default_dtype(prev_default)
        assert next(model.parameters()).dtype == dtype, next(model.parameters()).dtype
        lora_rec = None
        if spec["training"] == "lora":
            from peft import LoraConfig, get_peft_model

            # peft 0.21.2 tuners/lora/layer.py:2366 (ParamWrapper): target_parameters need lora_dropout=0
            dropout = 0.0 if spec.get("lora_parameters") else 0.05
            lcfg = LoraConfig(r=spec["r"], lora_alpha=2 * spec["r"], lora_dropout=dropout,
                              target_modules=spec["lora_targets"], bias="none",
                              target_parameters=spec.get("lora_parameters"),
                              task_type="CAUSAL_LM",
                              fan_in_fan_out=(model_type == "gpt2"))
            model = get_peft_model(model, lcfg)
            trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
            ad = {str(p.dtype).replace("torch.", "") for n, p in model.named_parameters()
                  if "lora_" in n}
            lora_rec = {"r": spec["r"], "lora_alpha": 2 * spec["r"], "lora_dropout": dropout,
                        "target_modules": spec["lora_targets"], "trainable_params": trainable,
                        "target_parameters": spec.get("lora_parameters"),
                        "num_parameters_with_adapters": sum(p.numel() for p in model.parameters()),
                        "adapter_dtype": sorted(ad)[0] if len(ad) == 1 else sorted(ad)}
        if spec["gc"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        base = model.get_base_model() if spec["training"] == "lora" else model
        model_rec = _model_record(spec, base, layers_built)
        trainable = [p for p in model.parameters() if p.requires_grad]
        opt = _make_optimizer(spec["optimizer"], trainable)
        ids = torch.randint(0, cfg.vocab_size, (spec["batch"], spec["seq"]), dtype=torch.long)

        mt = StepMemTracker()
        mt.track_external(model, opt, ids)

        def fwd():  # outputs (logits, cache) die here, as in Trainer.compute_loss
            return model(input_ids=ids, labels=ids).loss

        with mt:
            for step in (1, 2):
                if step == 2:
                    mt.reset_mod_stats()
                measured_step(mt, step, fwd, opt)
            # Extra (not part of the 2-step peak): the optimizer step as CUDA's default
            # (foreach=True for optim="adamw_torch") would run it, on the same params and state,
            # with grads present and activations gone (the state at the start of a real step).
            mt.set_phase(3, "grads")
            for p in trainable:
                p.grad = torch.zeros_like(p)
                mt._update_and_maybe_create_winfos(p.grad, _MemRefType.GRAD)
            for g in opt.param_groups:
                g["foreach"] = True
            mt.set_phase(3, "optimizer_step_foreach")
            opt.step()
            mt.set_phase(3, "zero_grad")
            opt.zero_grad(set_to_none=True)
            mt.set_phase(4, "end")
        peaks = mt.peaks
        top = peaks["all"][1]

        def cats(rec):
            return {c: int(rec.get(c, 0)) for c in CATS}

        out = {
            "name": spec["name"],
            "model": model_rec,
            "layers_built": layers_built,
            "batch": spec["batch"], "seq": spec["seq"], "dtype": spec["dtype"],
            "attn": spec["attn"],
            "gradient_checkpointing": spec["gc"],
            "use_reentrant": False,  # the kwarg passed when gradient_checkpointing is on
            "training": spec["training"],
            "lora": lora_rec,
            "optimizer": spec["optimizer"],
            "measured": cats(top),
            "peak_step": top["_step"],
            "peak_phase": top["_phase"],
            "peak_op": top["_op"],  # the aten op whose output set the peak
            "measured_step1_total": int(peaks["step1"][0]),
            "measured_step2_total": int(peaks["step2"][0]),
            "measured_step1": cats(peaks["step1"][1]),
            "measured_step2": cats(peaks["step2"][1]),
            "phases": {f"step{s}/{ph}": cats(peaks[f"step{s}/{ph}"][1])
                       for s in (1, 2) for ph in PHASES if f"step{s}/{ph}" in peaks},
            "cuda_foreach_optimizer_step": cats(peaks["step3/optimizer_step_foreach"][1]),
            "seconds": None,
            "fake": fake,
            "note": spec["note"],
        }
        if layers_built != full_layers:
            out["note"] = (out["note"] + "; " if out["note"] else "") + (
                f"built {layers_built} of {full_layers} layers")
        del mt, opt, model, ids, trainable, base
    finally:
        nn.Module._apply = _orig_module_apply
        if fake_mode is not None:
            fake_mode.__exit__(None, None, None)
        gc.collect()
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


# ----------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------

def _gib(b):
    return f"{b / 2**30:8.3f}"


HDR = (f"{'name':58s} {'fake':>4s} {'Total':>8s} {'PARAM':>8s} {'GRAD':>8s} {'ACT':>8s} "
       f"{'TEMP':>8s} {'OPT':>8s} {'OTH':>8s} {'step':>4s} {'phase':>14s} {'s1':>8s} {'s2':>8s} "
       f"{'sec':>6s}  peak_op   (GiB)")


def _row(r):
    if "error" in r:
        return f"{r['name']:58s} ERROR: {' '.join(r['error'].split())[:140]}"
    m = r["measured"]
    return (f"{r['name']:58s} {'y' if r['fake'] else 'n':>4s} {_gib(m['Total'])} {_gib(m['PARAM'])} "
            f"{_gib(m['GRAD'])} {_gib(m['ACT'])} {_gib(m['TEMP'])} {_gib(m['OPT'])} "
            f"{_gib(m['OTH'])} {r['peak_step']:>4d} {r['peak_phase']:>14s} "
            f"{_gib(r['measured_step1_total'])} {_gib(r['measured_step2_total'])} "
            f"{r['seconds']:6.1f}  {r['peak_op'].replace('aten.', '').replace('.default', '')}")


def run_check():
    """Fake-mode numbers must equal real-tensor numbers to the byte."""
    results = []
    print(f"{'check config':58s} {'real Total':>14s} {'fake Total':>14s}  identical(all cats, both steps, all phases)")
    for spec in CHECK_CONFIGS:
        real = measure(spec, fake=False)
        fakeres = measure(spec, fake=True)
        keys = ("measured", "measured_step1", "measured_step2", "phases", "peak_step",
                "peak_phase", "peak_op", "cuda_foreach_optimizer_step", "model", "lora")
        same = all(real[k] == fakeres[k] for k in keys)
        diffs = {k: (real[k], fakeres[k]) for k in keys if real[k] != fakeres[k]}
        print(f"{spec['name']:58s} {real['measured']['Total']:14d} {fakeres['measured']['Total']:14d}  {same}"
              f"   real {real['seconds']:.1f}s fake {fakeres['seconds']:.1f}s")
        if not same:
            print("   DIFF:", json.dumps(diffs)[:2000])
        results.append({"name": spec["name"], "identical": same,
                        "real": real, "fake": fakeres})
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=None, help="run configs whose name contains this substring")
    ap.add_argument("--out", default=str(BENCH / "estimate_measurements.json"))
    ap.add_argument("--check-fake", action="store_true",
                    help="run the fake==real verification configs instead")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

    if args.list:
        for s in CONFIGS:
            print(s["name"], "(fake)" if s["fake"] else "(real)")
        return 0
    if args.check_fake:
        res = run_check()
        out = Path(args.out if args.out != str(BENCH / "estimate_measurements.json")
                   else "/tmp/trainlint_fake_check.json")
        out.write_text(json.dumps(res, indent=1))
        print("wrote", out)
        return 0 if all(r["identical"] for r in res) else 1

    specs = [s for s in CONFIGS if args.only is None or args.only in s["name"]]
    out_path = Path(args.out)
    existing = {}
    if args.only is not None and out_path.exists():
        # --only updates the matching records of an existing file and keeps the others
        try:
            for r in json.loads(out_path.read_text())["configs"]:
                existing[r["name"]] = r
        except Exception:
            existing = {}
    t_all = time.perf_counter()
    print(HDR)
    results = []
    for spec in specs:
        try:
            r = measure(spec)
        except Exception as e:  # never crash on one config
            r = {"name": spec["name"], "error": f"{type(e).__name__}: {e}",
                 "traceback": traceback.format_exc()[-3000:]}
        results.append(r)
        print(_row(r), flush=True)
    names = [s["name"] for s in CONFIGS]
    for r in results:
        existing[r["name"]] = r
    ordered = sorted(existing.values(),
                     key=lambda r: names.index(r["name"]) if r["name"] in names else 10**6)
    doc = {
        "generated_by": "bench/measure_memory.py",
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "transformers": transformers.__version__,
                     "peft": __import__("peft").__version__},
        "units": "bytes",
        "method": ("MemTracker peak over 2 training steps (forward with labels -> ForCausalLMLoss, "
                   "backward, optimizer.step, zero_grad(set_to_none=True)); pure dtype weights, "
                   "no autocast; no attention_mask; use_cache config default (True); LoRA via "
                   "peft.get_peft_model (adapters fp32 by default, lora_dropout 0.05); AdamW "
                   "for-loop (foreach=None on CPU/fake), SGD lr only or momentum 0.9; dropout as "
                   "native_dropout. See bench/MEASURE.md."),
        "last_run_seconds": round(time.perf_counter() - t_all, 1),
        "configs": ordered,
    }
    out_path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out_path} ({len(ordered)} configs) in {doc['last_run_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
