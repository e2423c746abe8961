"""Which kernel PyTorch's `scaled_dot_product_attention` runs on a CUDA GPU, and what transformers' SDPA attention
passes it. Plain rules read from the sources (no torch import); the measurement wins where they disagree.

PyTorch, `aten/src/ATen/native/transformers/cuda/sdp_utils.cpp` (main, read 2026-12; torch 2.13 ships the same
checks in C++ only):
- `select_sdp_backend` takes the first kernel of `priority_order` whose `can_use_*` accepts the call. The default
  order (`aten/src/ATen/Context.h` `sdp_priority_order`) is flash, memory-efficient, math, cuDNN;
  `check_prefer_cudnn_attention` moves cuDNN to the front on sm 9.x / 10.x (H100, H200, B200) with cuDNN > 9.15.
- `can_use_flash_attention`: `check_dtypes_flash_attention` -> `check_dtypes_low_precision` (fp16/bf16 on sm80+,
  fp16 below), `check_for_attn_mask` (no mask), `check_head_dim_size_flash` (q, k, v the same head dim <= 256),
  `check_flash_attention_hardware_support` (sm80-sm121); GQA accepted (`backend_supports_grouped_query_attention`).
- `can_use_mem_efficient_attention`: fp16/fp32/bf16 on sm80+ (fp16/fp32 below), sm50-sm121, a mask is accepted;
  grouped-query heads only from pytorch/pytorch#191085 (2026-07, `supports_gqa = true` on CUDA). torch 2.13 does
  not have it: its `torch/_meta_registrations.py` `meta__scaled_dot_product_efficient_backward` still gives the key's
  gradient the query's head count (flash's `empty_like(key)`), and `F.scaled_dot_product_attention`'s docstring says
  GQA "works only for Flash_attention and math kernel on CUDA".
- `can_use_cudnn_attention`: `check_dtypes_low_precision` (fp16/bf16), sm80-sm121, a mask is accepted
  (`check_attn_mask_shape`), GQA accepted (`check_batch_size_and_num_heads_dense<true, ...>`); head dim <= 128 for
  training, 256 on sm 9.0 / 10.x with a recent cuDNN (`check_cudnn_tensor_shapes`, `check_cudnn_d256_bprop_head_dim`).
- math accepts everything; with fp16/bf16 inputs it keeps its intermediates in fp32 (the
  `F.scaled_dot_product_attention` docstring), so it materialises an fp32 score matrix whatever the input dtype.

Measured: ../shared/gpu-truth/sdpa-kernels-h200.json (H200, torch 2.11): fp32 + GQA is refused by flash,
memory-efficient and cuDNN (only math runs, 1,232 MiB for one forward against 16 MiB without GQA); bf16 + GQA + a
mask: flash and memory-efficient refuse, cuDNN accepts. tests/test_sdpa_dispatch.py checks every row.

transformers, `src/transformers/integrations/sdpa_attention.py` `sdpa_attention_forward`: a model with fewer K/V heads
than query heads gets `enable_gqa=True` when `use_gqa_in_sdpa` says so, else its K/V are repeated to every query head
(`repeat_kv`), and SDPA sees plain multi-head attention. On CUDA `use_gqa_in_sdpa` is `attention_mask is None`
(torch >= 2.5) from 4.54.0 (huggingface/transformers#39412; 4.53.3 always repeats), and also requires
`key.shape[-1] == value.shape[-1] <= 256` from 5.13.0 (huggingface/transformers#46960; 5.12.0 has no such check);
5.25.0 drops the torch check. The mask is None when the batch has no padding: `masking_utils._ignore_causal_mask_sdpa`
then leaves causality to SDPA's `is_causal`.
"""

from __future__ import annotations

from dataclasses import dataclass

FLASH, EFFICIENT, CUDNN, MATH = "flash", "efficient", "cudnn", "math"
DEFAULT_ORDER = (FLASH, EFFICIENT, MATH, CUDNN)  # Context.h sdp_priority_order
CUDNN_FIRST = (CUDNN, FLASH, EFFICIENT, MATH)  # sdp_utils.cpp priority_order on sm 9.x / 10.x
HALF = ("fp16", "bf16")

ENABLE_GQA_TORCH_SINCE = (2, 5)  # torch.nn.functional.scaled_dot_product_attention's enable_gqa
ENABLE_GQA_TRANSFORMERS_SINCE = (4, 54)  # huggingface/transformers#39412
GQA_HEAD_DIM_CHECK_SINCE = (5, 13)  # huggingface/transformers#46960
# The first torch release whose CUDA memory-efficient kernel takes GQA (pytorch/pytorch#191085); None: no release
# known to trainlint ships it (the newest it knows is NEWEST_TORCH).
EFFICIENT_GQA_TORCH_SINCE: tuple[int, int] | None = None
NEWEST_TORCH = (2, 13)
H100 = (9, 0)


@dataclass(frozen=True)
class Call:
    """One `scaled_dot_product_attention` call on a CUDA GPU, as far as the kernel choice depends on it."""

    dtype: str  # of q, k, v as SDPA receives them (after autocast): "fp32" | "bf16" | "fp16"
    gqa: bool  # enable_gqa=True with fewer K/V heads than query heads
    mask: bool  # an attn_mask is passed (else is_causal or no masking)
    head_dim: int = 64
    sm: tuple[int, int] = H100  # the GPU's compute capability
    torch: tuple[int, ...] | None = None  # None: NEWEST_TORCH


def refusal(kernel: str, call: Call) -> str | None:
    """Why `kernel` refuses `call` (sdp_utils.cpp can_use_<kernel>), or None when it accepts it."""
    sm80 = call.sm >= (8, 0)
    torch = call.torch or NEWEST_TORCH
    if kernel == FLASH:
        if call.dtype not in (HALF if sm80 else ("fp16",)):
            return f"flash: {'fp16/bf16' if sm80 else 'fp16'} only"
        if call.mask:
            return "flash: no mask"
        if call.head_dim > 256 or not (8, 0) <= call.sm <= (12, 1):
            return "flash: head dim <= 256 on sm80-sm121"
        return None
    if kernel == EFFICIENT:
        if call.dtype == "bf16" and not sm80:
            return "memory-efficient: bf16 only on sm80+"
        if call.gqa and (EFFICIENT_GQA_TORCH_SINCE is None or torch < EFFICIENT_GQA_TORCH_SINCE):
            return "memory-efficient: no grouped-query heads"
        if not (5, 0) <= call.sm <= (12, 1):
            return "memory-efficient: sm50-sm121"
        return None
    if kernel == CUDNN:
        if call.dtype not in HALF:
            return "cuDNN: fp16/bf16 only"
        if not (8, 0) <= call.sm <= (12, 1):
            return "cuDNN: sm80-sm121"
        d256 = call.sm == (9, 0) or call.sm[0] == 10
        if not (call.head_dim <= 128 or (d256 and call.head_dim == 256)):
            return "cuDNN: head dim <= 128 for training (256 on sm 9.0 / 10.x)"
        return None
    return None  # math takes everything


def kernel(call: Call) -> str:
    """The kernel `select_sdp_backend` picks: the first one of the priority order that accepts the call (cuDNN first on
    sm 9.x / 10.x assumes the wheel's cuDNN is newer than 9.15; either way only math materialises the scores)."""
    order = CUDNN_FIRST if call.sm[0] in (9, 10) else DEFAULT_ORDER
    return next(k for k in order if refusal(k, call) is None)


def passes_enable_gqa(transformers: tuple[int, ...], mask: bool, head_dim: int,
                      torch: tuple[int, ...] | None = None) -> bool:
    """Whether transformers' `sdpa_attention_forward` passes `enable_gqa=True` on CUDA for a grouped-query model
    (`use_gqa_in_sdpa`), rather than repeating K/V to every query head."""
    if tuple(transformers) < ENABLE_GQA_TRANSFORMERS_SINCE or (torch or NEWEST_TORCH) < ENABLE_GQA_TORCH_SINCE:
        return False
    if mask:
        return False
    return head_dim <= 256 or tuple(transformers) < GQA_HEAD_DIM_CHECK_SINCE


def transformers_call(dtype: str, heads: int, kv_heads: int, head_dim: int, transformers: tuple[int, ...],
                      mask: bool = False, sm: tuple[int, int] = H100, torch: tuple[int, ...] | None = None) -> Call:
    """The SDPA call transformers makes for one attention layer of a model with `heads` query and `kv_heads` K/V
    heads, its inputs in `dtype`."""
    gqa = kv_heads < heads and passes_enable_gqa(transformers, mask, head_dim, torch)
    return Call(dtype, gqa, mask, head_dim, sm, torch)
