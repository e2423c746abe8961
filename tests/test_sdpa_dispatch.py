"""The SDPA kernel-dispatch model (trainlint.knowledge.sdpa) against its two truths: the kernels an H200 accepted
(../shared/gpu-truth/sdpa-kernels-h200.json, measured with gpu_probe.py; skipped where that folder is absent) and
the installed transformers' own `use_gqa_in_sdpa` (run on real CPU tensors)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trainlint.knowledge import sdpa
from trainlint.knowledge.versions import parse_version

TRUTH = Path(os.environ.get("TRAINLINT_GPU_TRUTH", "/work/shared/gpu-truth"))
KERNELS = {"FLASH_ATTENTION": sdpa.FLASH, "EFFICIENT_ATTENTION": sdpa.EFFICIENT, "CUDNN_ATTENTION": sdpa.CUDNN,
           "MATH": sdpa.MATH}
# gpu_probe.py's shapes: batch 2, 16 query heads (4 K/V heads with GQA), 2,048 tokens, head dim 64; an H200 is sm 9.0
BATCH, HEADS, SEQ, HEAD_DIM, H200 = 2, 16, 2048, 64, (9, 0)


def _rows():
    path = TRUTH / "sdpa-kernels-h200.json"
    if not path.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"GPU ground truth not on this machine ({path})"))]
    return [pytest.param(row, id=f"{row['dtype']}-gqa{row['gqa']}-mask{row['mask']}")
            for row in json.loads(path.read_text())]


def _call(row) -> sdpa.Call:
    torch_version = json.loads((TRUTH / "peaks-h200.json").read_text())["info"]["torch"]  # the probe's machine
    dtype = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}[row["dtype"]]
    return sdpa.Call(dtype, row["gqa"], row["mask"], HEAD_DIM, H200, parse_version(torch_version)[:2])


@pytest.mark.parametrize("row", _rows())
def test_each_kernel_accepts_what_the_h200_accepted(row):
    call = _call(row)
    for name, kernel in KERNELS.items():
        assert (sdpa.refusal(kernel, call) is None) is (row[name] == "ok"), (name, sdpa.refusal(kernel, call))


@pytest.mark.parametrize("row", _rows())
def test_the_default_choice_is_math_exactly_where_one_forward_materialised_the_scores(row):
    # the math kernel keeps an fp32 score matrix (batch x heads x seq^2 x 4 B); a fused one a few MiB
    scores_mib = BATCH * HEADS * SEQ * SEQ * 4 / 2**20
    materialised = row["default_fwd_extra_MiB"] >= scores_mib
    assert (sdpa.kernel(_call(row)) == sdpa.MATH) is materialised, (sdpa.kernel(_call(row)), row)


def test_fp32_with_grouped_query_attention_runs_math_and_bf16_a_fused_kernel():
    fp32 = sdpa.transformers_call("fp32", heads=32, kv_heads=8, head_dim=64, transformers=(5, 25))
    assert fp32.gqa and sdpa.kernel(fp32) == sdpa.MATH
    assert sdpa.kernel(sdpa.transformers_call("bf16", 32, 8, 64, (5, 25))) != sdpa.MATH
    assert sdpa.kernel(sdpa.transformers_call("fp32", 12, 12, 64, (5, 25))) == sdpa.EFFICIENT  # GPT-2: no GQA
    # a padding mask: transformers repeats K/V, and the memory-efficient kernel takes fp32 with a mask
    assert sdpa.kernel(sdpa.transformers_call("fp32", 32, 8, 64, (5, 25), mask=True)) == sdpa.EFFICIENT
    # before 4.54 transformers always repeated K/V: no GQA constraint
    assert sdpa.kernel(sdpa.transformers_call("fp32", 32, 8, 64, (4, 53))) == sdpa.EFFICIENT
    # a T4 (sm 7.5): no flash or cuDNN there, so fp16 with enable_gqa is math too (huggingface/transformers#48633)
    assert sdpa.kernel(sdpa.transformers_call("fp16", 32, 8, 64, (5, 25), sm=(7, 5))) == sdpa.MATH


@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("head_dim", [64, 256, 512])
def test_passes_enable_gqa_as_the_installed_transformers_decides(mask, head_dim):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from transformers.integrations import sdpa_attention

    if sdpa_attention._is_torch_xpu_available or sdpa_attention._is_torch_mps_available:
        pytest.skip("the CUDA rule is the one modelled")
    key = torch.zeros(1, 2, 4, head_dim)
    attention_mask = torch.ones(1, 1, 4, 4, dtype=torch.bool) if mask else None
    expected = sdpa_attention.use_gqa_in_sdpa(attention_mask, key, key)
    version = parse_version(transformers.__version__)
    torch_version = parse_version(torch.__version__)[:2]
    assert sdpa.passes_enable_gqa(version, mask, head_dim, torch_version) is expected
