"""The memory arithmetic: one function per consumer, each citing where its formula comes from.

Every memory figure trainlint prints (rule messages, `estimate`, `verify`) is computed here and printed by
fmt_bytes, in GiB. Sources:
- L1 = ../shared/domain/where-the-memory-goes.md, L2 = ../shared/domain/why-fine-tuning-uses-more-memory.md
- R = ../shared/research/library-facts.md (measurements with MemTracker on CPU / FakeTensorMode)
"""

from __future__ import annotations

from trainlint.units import GIB, MIB, fmt_bytes  # noqa: F401  (re-exported: where every figure is printed from)

DTYPE_BYTES = {"float32": 4, "fp32": 4, "float": 4, "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
               "int8": 1, "8bit": 1}


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    if dtype is None:
        return default
    return DTYPE_BYTES.get(dtype.replace("torch.", "").lower(), default)


def eager_bytes_per_score(dtype_size: int, softcap: bool = False, softmax_fp32: bool = True,
                          dropout: bool = False) -> int:
    """Bytes eager attention keeps for backward per score element per layer, tensor by tensor (transformers 5.25.0;
    each counted with torch.autograd.graph.saved_tensors_hooks on a real model on CPU, bench/README.md
    'Eager attention, tensor by tensor'). The scaling (`* scaling`), the mask addition and the softcap's division and
    multiplication by a Python number save no score-sized tensor; what is saved:
    - the softmax's output, which its backward reads: fp32 where the model's eager_attention_forward upcasts
      (`softmax(attn_weights, dim=-1, dtype=torch.float32)`: models/llama/modeling_llama.py:197,
      models/gemma2/modeling_gemma2.py:203), else in the model dtype (`softmax(attn_weights, dim=-1)`,
      models/gpt2/modeling_gpt2.py:64: `softmax_fp32` False);
    - the probabilities the matmul with V saves (`matmul(attn_weights, value)`): with attention dropout in training
      (GPT2Config.attn_pdrop 0.1, modeling_gpt2.py:68) the dropout's output in the model dtype plus
      native_dropout's bool mask (1 byte, what CUDA runs); without it the `.to(query.dtype)` copy of an fp32
      softmax in a 16-bit model, or nothing more (the softmax's output itself: fp32 model, or GPT-2's softmax);
    - with a logit softcap (Gemma 2, modeling_gemma2.py:197 `torch.tanh(attn_weights)`) tanh's output in the model
      dtype, which tanh's backward reads.
    Measured per score: Llama bf16 6, fp32 4; GPT-2 bf16 5, fp32 9; Gemma-2 bf16 8."""
    softmax_out = 4 if softmax_fp32 else dtype_size
    if dropout:
        probabilities = dtype_size + 1  # native_dropout's output and bool mask
    elif softmax_fp32 and dtype_size >= 4:
        # An fp32 model saves no copy (`.to(query.dtype)` is a no-op), 4 bytes per score counted; but the peak
        # saving measured on a 2-layer model (tests/test_verify*.py: 7.6 B per score, eager vs SDPA, CPU) also holds
        # the backward's score-sized fp32 gradients of the layer being differentiated. Until that transient is its
        # own moment, an fp32 model keeps the figure verify confirms (dtype + 4, the formula before the count).
        probabilities = 4
    else:
        probabilities = dtype_size if softmax_fp32 and dtype_size < 4 else 0  # the .to(query.dtype) copy
    tanh_out = dtype_size if softcap else 0
    return softmax_out + probabilities + tanh_out


# transformers' eager_attention_forward computes `softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)`. In
# the backward of a layer that checkpointing recomputes, the scores are held about twice (the saved tensors and their
# gradient: 2 x eager_bytes_per_score, R 1.4 / bench/estimate_measurements.json llama3-1b eager 4k + checkpointing),
# and with 16-bit weights the fp32 softmax adds one more fp32 score-sized tensor: the gradient of its output, in fp32,
# while its backward runs. Measured on the H200 (bench/gpu_eager_gc_probe.py, bench/README.md): the fp32 softmax costs
# exactly 8.00 bytes per score of the recomputed layer at the peak (4,096 and 8,192 tokens), 4 of them the saved output
# that eager_bytes_per_score already counts. In an fp32 model the softmax's dtype is the model's: no extra copy.
SOFTMAX_FP32_GRAD_BYTES = 4


def eager_backward_bytes_per_score(dtype_size: int, softcap: bool = False, device: str = "cuda",
                                   softmax_fp32: bool = True, dropout: bool = False) -> int:
    """Bytes per score element while the recomputed layer's eager attention runs its backward (checkpointing):
    twice what the layer keeps (eager_bytes_per_score) plus, for 16-bit weights with an fp32 softmax on CUDA, the
    fp32 softmax's output gradient. On CPU the same step measured 2 x eager_bytes_per_score (MemTracker,
    bench/estimate_measurements.json llama3-1b eager 4k + checkpointing: 15,738 MB on CPU where the H200 measured
    18,652 MB)."""
    fp32_grad = SOFTMAX_FP32_GRAD_BYTES if dtype_size < 4 and softmax_fp32 and device == "cuda" else 0
    return 2 * eager_bytes_per_score(dtype_size, softcap, softmax_fp32, dropout) + fp32_grad


def attention_scores_per_layer(batch: int, heads: int, seq: int, dtype_size: int = 2, softcap: bool = False,
                               softmax_fp32: bool = True, dropout: bool = False) -> int:
    """L1 consumer 5: `batch x heads x seq^2` score elements per layer, at eager_bytes_per_score each."""
    return batch * heads * seq * seq * eager_bytes_per_score(dtype_size, softcap, softmax_fp32, dropout)


# PyTorch's math SDPA kernel (aten/src/ATen/native/transformers/attention.cpp `_scaled_dot_product_attention_math`:
# scores = q @ k^T, softmax, then softmax @ v) keeps one score-sized tensor per call for backward, the softmax output
# that both the softmax's and the matmul's backward read, and keeps it in fp32 whatever the input dtype ("For math
# backend, all intermediates are kept in torch.float if inputs are in torch.half or torch.bfloat16",
# F.scaled_dot_product_attention's docstring, torch 2.13). Measured on the H200 (../shared/gpu-truth/peaks-h200.json,
# fp32 + GQA without checkpointing): the peak minus trainlint's estimate without it is 4.05 (SmolLM2-360M), 4.15
# (Llama-3.2-1B) and 4.17 (Qwen2.5-0.5B) bytes per score element per layer.
MATH_BYTES_PER_SCORE = 4


def math_scores_per_layer(batch: int, heads: int, seq: int) -> int:
    """SDPA on the math kernel: `batch x heads x seq^2` fp32 scores kept per layer (MATH_BYTES_PER_SCORE)."""
    return batch * heads * seq * seq * MATH_BYTES_PER_SCORE


def logits_elements(batch: int, seq: int, vocab: int) -> int:
    """L1 'The logits, again': batch x seq x vocab."""
    return batch * seq * vocab


def logits_bytes(batch: int, seq: int, vocab: int, dtype_size: int) -> int:
    return logits_elements(batch, seq, vocab) * dtype_size


def loss_bytes_per_element(dtype_size: int = 2, trainable_head: bool = False, softcap: bool = False) -> int:
    """Peak bytes per logit of transformers' LM head + ForCausalLMLoss, at the instant
    `_log_softmax_backward_data` returns (where 30 of the 34 MemTracker configurations peak): the fp32
    log-softmax output kept for backward (4), the fp32 gradient from nll_loss_backward (4) and the fp32
    result of the log-softmax backward (4) = 12, whether the logits are 16-bit or fp32 and whether the head
    trains (the 16-bit logits and their fp32 copy are no longer alive then). Measured: TEMP is exactly
    8 bytes per logit and the log-softmax output 4 (bench/MEASURE.md); 14 for a frozen 16-bit head and 11 for
    fp32 overshot LoRA by ~1/8 on tiny models and undershot fp32 full fine-tuning (issue 14,
    bench/live_measurements.json). A final logit softcap (Gemma 2: logits / cap -> tanh -> x cap,
    models/gemma2/modeling_gemma2.py:520-523) keeps one more logit-sized tensor in the model dtype, tanh's output,
    which its backward reads; the division and multiplication by the cap save nothing, and a trained head saves its
    input, not its logits (saved_tensors_hooks count, bench/README.md 'Eager attention, tensor by tensor';
    MemTracker, gemma2-2b full + checkpointing: 14.1 bytes per logit at the peak, as with LoRA). `trainable_head`
    does not change the count; it is kept for the callers that state it."""
    return 12 + (dtype_size if softcap else 0)


def loss_peak_bytes(batch: int, seq: int, vocab: int, dtype_size: int = 2, trainable_head: bool = False,
                    softcap: bool = False) -> int:
    """L1 'The logits, again' priced at loss_bytes_per_element."""
    return logits_elements(batch, seq, vocab) * loss_bytes_per_element(dtype_size, trainable_head, softcap)


def chunked_upcast_bytes_per_element(dtype_size: int = 2) -> int:
    """axolotl's chunked_cross_entropy (knowledge/libraries.py CHUNKED_UPCAST_PATCH): the logits in the compute dtype,
    a second logits-sized tensor in that dtype, and every chunk's fp32 log-softmax kept for backward (the fp32 copy
    itself is one chunk at a time). M: bench/measure_chunked_upcast.py (MemTracker, CPU, axolotl 0.19.0's patch,
    a tiny Llama with the 128,256-token vocabulary, batch 2 x 1,024, bf16): the step peaks at 9.1 bytes per logit
    with the parameters and the other activations (0.5 + ~0.6), against 12.6 for transformers' own loss; 2 x 2 + 4
    = 8 here. The number of chunks does not change it (the saved log-softmax covers every chunk). axolotl
    torch.compiles the per-chunk loss; under MemTracker it ran eagerly (the same peak with and without), and what
    inductor keeps on a GPU was not measured."""
    return 2 * dtype_size + 4
