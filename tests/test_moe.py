"""Mixture of experts (issue 28): the catalog's MoE geometry and parameter counts, the estimate's rows for an MoE
LoRA run (all experts resident, top-k activations, LoRA on experts), TL701's verdict for Qwen3-30B-A3B LoRA."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import pinned_installed
from trainlint.knowledge.models import lookup_model
from trainlint.knowledge.moe import moe_from_config, moe_params
from trainlint.memory.estimate import (Geometry, Plan, activation_bytes_per_layer, estimate, lora_params,
                                       moe_layer_extra, weights_bytes)

ROOT = Path(__file__).resolve().parents[1]

# (catalog id, experts, top-k, expert width, routed layers, shared width, all parameters, per token, published total
# and active in billions as the model cards print them, active counted with (True) or without the embeddings)
MOE = [
    ("Qwen/Qwen3-30B-A3B", 128, 8, 768, 48, 0, 30_532_122_624, 3_353_032_704, 30.5, 3.3),
    ("Qwen/Qwen1.5-MoE-A2.7B", 60, 4, 1408, 24, 5632, 14_315_784_192, 2_689_173_504, 14.3, 2.7),
    ("allenai/OLMoE-1B-7B-0924", 64, 8, 1024, 16, 0, 6_919_161_856, 1_282_017_280, 6.9, 1.3),
    ("deepseek-ai/DeepSeek-V2-Lite", 64, 6, 1408, 26, 2816, 15_706_484_224, 2_661_150_208, 15.7, 2.4),
    ("mistralai/Mixtral-8x7B-v0.1", 8, 2, 14336, 32, 0, 46_702_792_704, 12_879_925_248, 46.7, 12.9),
    ("openai/gpt-oss-20b", 32, 4, 2880, 24, 0, 20_914_757_184, 4_187_440_704, 20.9, 3.6),
]


def _entry(ident: str) -> dict:
    data = json.loads((ROOT / "src" / "trainlint" / "knowledge" / "models.json").read_text())
    return next(e for e in data["models"] if ident in (e["id"], *e["aliases"]))


@pytest.mark.parametrize("ident,experts,top_k,width,sparse,shared,total,active,pub_total,pub_active", MOE)
def test_catalog_moe_geometry_and_counts(ident, experts, top_k, width, sparse, shared, total, active, pub_total,
                                         pub_active):
    spec = lookup_model(ident, Path("."))
    moe = spec.moe
    assert (moe.experts, moe.top_k, moe.expert_intermediate, moe.sparse_layers, moe.shared_intermediate) == (
        experts, top_k, width, sparse, shared)
    assert spec.num_parameters == total and spec.moe_parameters == (total, active)
    assert round(total / 1e9, 1) == pub_total
    # the cards' active counts: Qwen, OLMoE, Mixtral count the embeddings; DeepSeek leaves the input embedding out,
    # gpt-oss the unembedding (both one vocab x hidden matrix)
    one_embedding = spec.vocab_size * spec.hidden_size
    assert min(abs(active / 1e9 - pub_active), abs((active - one_embedding) / 1e9 - pub_active)) < 0.06


def test_dense_model_has_no_moe():
    spec = lookup_model("meta-llama/Llama-3.1-8B", Path("."))
    assert spec.moe is None and spec.moe_parameters is None


def test_dense_layers_are_read_per_family():
    # DeepSeek: first_k_dense_replace; Qwen2/3-MoE: mlp_only_layers and decoder_sparse_step
    assert moe_from_config({"n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                            "intermediate_size": 64, "first_k_dense_replace": 3}, 10).sparse_layers == 7
    qwen = {"model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
            "intermediate_size": 64}
    assert moe_from_config({**qwen, "mlp_only_layers": [0, 5]}, 10).sparse_layers == 8
    assert moe_from_config({**qwen, "decoder_sparse_step": 2}, 10).sparse_layers == 5
    assert moe_from_config({**qwen, "decoder_sparse_step": 2}, 10).dense_intermediate == 64
    assert moe_from_config({"model_type": "llama", "intermediate_size": 64}, 10) is None


@pytest.mark.skipif(not pinned_installed("torch", "transformers"), reason="needs the test extra's torch/transformers")
@pytest.mark.parametrize("ident", [row[0] for row in MOE])
def test_parameter_count_is_what_transformers_builds(ident):
    """Ground truth: the model transformers builds from the catalog entry's config, on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    entry = _entry(ident)
    keys = {k: v for k, v in entry.items() if k not in (
        "id", "aliases", "architecture", "num_parameters", "main_input_name", "attn_logit_softcapping", "source", "note",
        "torch_dtype", "experts_per_token") and (v is not None or k == "q_lora_rank")}  # None: no q compression
    if keys["model_type"] != "mixtral" and keys["model_type"] != "gpt_oss":
        keys.pop("num_local_experts", None)
    if keys.get("kv_lora_rank"):
        keys.pop("head_dim", None)
    model_type = keys.pop("model_type")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **keys))
    assert sum(p.numel() for p in model.parameters()) == entry["num_parameters"] == moe_params(
        entry, entry["tie_word_embeddings"])


def _olmoe_tiny_geometry(fused: bool = True) -> Geometry:
    return Geometry(vocab=1024, hidden=256, layers=2, heads=4, kv_heads=4, head_dim=64, intermediate=128,
                    params=0, moe_experts=8, moe_top_k=2, moe_intermediate=128, moe_layers=2, fused_experts=fused,
                    peft_converts=True)


@pytest.mark.skipif(not pinned_installed("torch", "transformers", "peft"), reason="needs the test extra")
def test_lora_on_fused_experts_counts_what_peft_adds():
    """PEFT target_parameters on transformers 5's 3D expert weights: r x (in + out) per expert. PEFT rewrites 4.x
    names onto them: "all-linear" and gate_proj + up_proj + down_proj reach the fused experts (gate_up at twice the
    rank) and all-linear the router's weight too."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("olmoe", vocab_size=1024, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=4, intermediate_size=128, num_experts=8, num_experts_per_tok=2,
                               tie_word_embeddings=False)
    g = _olmoe_tiny_geometry()

    def trainable(**kw) -> int:
        torch.manual_seed(0)
        model = get_peft_model(AutoModelForCausalLM.from_config(cfg), LoraConfig(r=4, lora_dropout=0.0, **kw))
        return sum(p.numel() for p in model.parameters() if p.requires_grad)

    experts = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
    assert trainable(target_modules=["q_proj"], target_parameters=list(experts)) == lora_params(
        g, 4, ("q_proj",), experts) == 2 * (4 * (256 + 256) + 8 * 4 * (256 + 256) + 8 * 4 * (128 + 256))
    attention = 2 * 4 * 4 * (256 + 256)
    gate_up, down, router = 2 * 8 * 8 * (256 + 256), 2 * 8 * 4 * (128 + 256), 2 * 4 * (256 + 8)
    assert trainable(target_modules="all-linear") == lora_params(g, 4, ("all-linear",)) == (
        attention + gate_up + down + router)
    mlp = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert trainable(target_modules=mlp) == lora_params(g, 4, tuple(mlp)) == attention + gate_up + down


def test_lora_on_per_expert_linear_modules_in_transformers_4():
    # 4.x builds one nn.Linear MLP per expert (4.57.1 modeling_olmoe.py:583): gate_proj matches every expert's
    g4 = _olmoe_tiny_geometry(fused=False)
    assert lora_params(g4, 4, ("gate_proj",)) == 2 * 8 * 4 * (256 + 128)
    # 5.x without PEFT's renaming (GPT-OSS, fused from the start): no Linear named gate_proj in a routed layer
    assert lora_params(Geometry(**{**_olmoe_tiny_geometry().__dict__, "peft_converts": False}), 4, ("gate_proj",)) == 0
    # Mixtral 4.x names its experts' projections w1 / w2 / w3
    assert lora_params(g4, 4, ("w1", "w2", "w3")) == lora_params(g4, 4, ("gate_proj", "down_proj", "up_proj"))


def test_routed_layer_keeps_the_top_k_experts_not_all():
    g = _olmoe_tiny_geometry()
    plan = Plan(geometry=g, batch=1, seq=4096, lora_r=16, lora_targets=("q_proj",))
    routed = activation_bytes_per_layer(plan, 4096, True)
    more_experts = Plan(geometry=Geometry(**{**g.__dict__, "moe_experts": 64}), batch=1, seq=4096, lora_r=16,
                        lora_targets=("q_proj",))
    more_active = Plan(geometry=Geometry(**{**g.__dict__, "moe_top_k": 4}), batch=1, seq=4096, lora_r=16,
                       lora_targets=("q_proj",))
    # resident experts add only the router's fp32 softmax (4 bytes per expert per token); active ones their tensors
    assert activation_bytes_per_layer(more_experts, 4096, True) - routed == 4096 * 4 * (64 - 8)
    assert activation_bytes_per_layer(more_active, 4096, True) - routed == 4096 * 2 * (6 * 128 + 2 * 256 + 32)


def test_lora_on_fused_experts_keeps_a_merged_copy_of_each_layers_experts():
    g = _olmoe_tiny_geometry()
    attn_only = Plan(geometry=g, batch=1, seq=512, lora_r=16, lora_targets=("q_proj",))
    experts = Plan(geometry=g, batch=1, seq=512, lora_r=16, lora_targets=("q_proj",),
                   lora_parameters=("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))
    assert moe_layer_extra(attn_only)[1] == 0
    assert moe_layer_extra(experts)[1] == 8 * 3 * 256 * 128 * 2  # the whole stack, bf16, per routed layer


def test_fused_experts_stay_16_bit_under_4bit_quantization():
    g5, g4 = _olmoe_tiny_geometry(), _olmoe_tiny_geometry(fused=False)
    g5, g4 = (Geometry(**{**x.__dict__, "params": 10_000_000}) for x in (g5, g4))
    experts = 2 * 8 * 3 * 256 * 128
    q5 = weights_bytes(Plan(geometry=g5, batch=1, seq=1, quantization="4bit"))
    q4 = weights_bytes(Plan(geometry=g4, batch=1, seq=1, quantization="4bit"))
    assert q5 - q4 == int(experts * (2 - 0.52)) or abs(q5 - q4 - experts * (2 - 0.52)) <= 1


QWEN3_MOE_LORA = '''\
import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM
from trl import SFTConfig, SFTTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-30B-A3B", dtype=torch.bfloat16)
peft_config = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                         target_parameters=["mlp.experts.gate_up_proj", "mlp.experts.down_proj"], lora_dropout=0.0)
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=2048, gradient_checkpointing=True,
                 bf16=True)
trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset("trl-lib/Capybara", split="train"),
                     peft_config=peft_config)
trainer.train()
'''


def test_estimate_rows_for_an_moe_lora_script(tmp_path):
    from click.testing import CliRunner

    from trainlint.cli import main

    (tmp_path / "train.py").write_text(QWEN3_MOE_LORA)
    out = CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), "--format", "json"])
    data = json.loads(out.output)
    rows = {r["label"]: r["bytes"] for r in data["rows"]}
    attention = 48 * 16 * (2 * (2048 + 4096) + 2 * (2048 + 512))  # q, o: 2048 <-> 4096; k, v: 2048 -> 512
    experts = 48 * 128 * 16 * ((2048 + 2 * 768) + (768 + 2048))
    adapters = attention + experts
    assert data["consumers"]["weights"] == rows["Weights"] == 30_532_122_624 * 2 + adapters * 4  # all experts, bf16
    assert data["consumers"]["gradients"] == adapters * 4  # fp32 adapters
    assert data["consumers"]["optimizer"] == adapters * 8  # AdamW's two fp32 states
    # the recomputed layer holds the merged gate_up / down copies of its 128 experts (bf16) beside its tokens' tensors
    merged = 128 * 2048 * 3 * 768 * 2
    assert merged < rows["Recomputed layer's activations (transient)"] < merged + 2048 * 256 * 1024
    assert "128 experts, top-8, 3.35 B per token" in data["model"]


def test_tl701_qwen3_30b_a3b_lora_fits_80gb_not_24gb(lint):
    small = lint(QWEN3_MOE_LORA, settings={"gpu": "24GB"})
    assert [c for c, _, _ in small] == ["TL701"]
    assert "weights 59.3 GiB" in small[0][2]
    assert lint(QWEN3_MOE_LORA, settings={"gpu": "A100-80GB"}) == []


def test_gpt_oss_on_transformers_4_evaluates_every_expert():
    from dataclasses import replace

    from trainlint.memory.estimate import EvalPhase
    from trainlint.memory.phases import eval_peak

    g = Geometry(vocab=1024, hidden=256, layers=2, heads=4, kv_heads=4, head_dim=64, intermediate=128, params=10**6,
                 moe_experts=32, moe_top_k=4, moe_intermediate=128, moe_layers=2)
    plan = Plan(geometry=g, batch=1, seq=1024, evaluation=EvalPhase(batch=4))
    dense = replace(plan, geometry=replace(g, moe_dense_eval=True))
    # 28 more experts' MLP tensors (gate/up/act/mul: 8 bytes per width) and outputs, per token of the eval batch
    assert eval_peak(dense) - eval_peak(plan) == 4 * 1024 * 28 * (8 * 128 + 4 * 256 + 32)


AXOLOTL_TAIL = """\
micro_batch_size: 1
bf16: true
gradient_checkpointing: true
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
"""

AXOLOTL_OLMOE = """\
base_model: allenai/OLMoE-1B-7B-0924
adapter: lora
lora_r: 16
lora_alpha: 32
lora_dropout: 0.0
lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
lora_target_parameters: [mlp.experts.gate_up_proj, mlp.experts.down_proj]
sequence_len: 2048
""" + AXOLOTL_TAIL


def test_axolotl_lora_target_parameters_reach_the_experts(tmp_path):
    from click.testing import CliRunner

    from trainlint.cli import main

    (tmp_path / "olmoe.yaml").write_text(AXOLOTL_OLMOE)
    data = json.loads(CliRunner().invoke(main, ["estimate", str(tmp_path / "olmoe.yaml"), "--format", "json"]).output)
    attention = 16 * 16 * 4 * (2048 + 2048)
    experts = 16 * 64 * 16 * ((2048 + 2 * 1024) + (1024 + 2048))
    assert data["consumers"]["gradients"] == 4 * (attention + experts)
    # measured (bench/estimate_measurements.json olmoe-1b-7b_sdpa_s2048_b1_lora16experts_adamw_bf16_gc, fake tensors):
    # 16,529 MiB at the peak; the estimate, with its unfused loss, is within 10%
    assert abs(data["peak"] / 2**20 - 16_529) / 16_529 < 0.10


# Llama 4 Scout: the text decoder transformers builds (AutoModelForCausalLM -> Llama4ForCausalLM), all layers routed,
# one shared expert per layer, and every expert run on every token (knowledge/moe.py DENSE_DISPATCH).
SCOUT_TEXT = dict(vocab_size=202048, hidden_size=5120, num_hidden_layers=48, num_attention_heads=40,
                  num_key_value_heads=8, head_dim=128, intermediate_size=8192, intermediate_size_mlp=16384,
                  num_local_experts=16, num_experts_per_tok=1, interleave_moe_layer_step=1, tie_word_embeddings=False)


def test_llama4_scout_catalog_geometry():
    spec = lookup_model("meta-llama/Llama-4-Scout-17B-16E-Instruct", Path("."))
    moe = spec.moe
    assert (moe.experts, moe.top_k, moe.expert_intermediate, moe.sparse_layers, moe.shared_intermediate) == (
        16, 1, 8192, 48, 8192)
    assert moe.dense_dispatch and moe.experts_run == 16
    assert spec.moe_parameters == (107_769_861_120, 17_172_894_720)
    assert round(spec.moe_parameters[1] / 1e9) == 17  # the card's "17B active"; its 109B total adds the vision tower
    # Maverick-style interleaving: every second layer routed, the others dense MLPs of intermediate_size_mlp
    maverick = moe_from_config({**SCOUT_TEXT, "model_type": "llama4_text", "interleave_moe_layer_step": 2}, 48)
    assert (maverick.sparse_layers, maverick.dense_intermediate) == (24, 16384)
    assert moe_from_config({**SCOUT_TEXT, "model_type": "llama4_text", "moe_layers": [3, 7]}, 48).sparse_layers == 2


@pytest.mark.skipif(not pinned_installed("torch", "transformers"), reason="needs the test extra's torch/transformers")
def test_llama4_scout_parameter_count_is_what_transformers_builds():
    import torch
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    with torch.device("meta"):
        model = Llama4ForCausalLM(Llama4TextConfig(**SCOUT_TEXT))
    entry = _entry("meta-llama/Llama-4-Scout-17B-16E")
    assert sum(p.numel() for p in model.parameters()) == entry["num_parameters"] == moe_params(
        {**SCOUT_TEXT, "model_type": "llama4"}, False)


def _llama4_moe_saved_bytes(experts: int, intermediate: int, hidden: int, tokens: int, trained: bool) -> int:
    """Bytes autograd saves for backward in one Llama4TextMoe block that transformers builds (bf16), counted once per
    storage with saved_tensors_hooks; parameters left out (they are the weights, not activations)."""
    import torch
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    torch.manual_seed(0)
    cfg = Llama4TextConfig(vocab_size=64, hidden_size=hidden, intermediate_size=intermediate,
                           intermediate_size_mlp=2 * intermediate, num_hidden_layers=1, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=16, num_local_experts=experts, num_experts_per_tok=1)
    block = Llama4ForCausalLM(cfg).to(torch.bfloat16).model.layers[0].feed_forward
    block.requires_grad_(trained)  # LoRA on attention only: the routed block is frozen, its input needs grad
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out, _ = block(x)
    assert out.shape == (tokens, hidden)
    return sum(seen.values())


@pytest.mark.skipif(not pinned_installed("torch", "transformers"), reason="needs the test extra's torch/transformers")
@pytest.mark.parametrize("trained", [True, False], ids=["full", "lora-attention"])
def test_llama4_runs_every_expert_on_every_token(trained):
    """Ground truth for DENSE_DISPATCH: what 4 more experts add per token in a routed layer, measured on the block
    transformers builds, is what the estimate adds; a top-1 router (the grouped_mm families) would add only the
    router's softmax."""
    hidden, width, tokens = 64, 32, 128
    measured = (_llama4_moe_saved_bytes(8, width, hidden, tokens, trained)
                - _llama4_moe_saved_bytes(4, width, hidden, tokens, trained))
    lora = {} if trained else {"lora_r": 8, "lora_targets": ("q_proj",)}

    def estimated(experts: int, dense: bool) -> int:
        g = Geometry(vocab=64, hidden=hidden, layers=1, heads=4, kv_heads=2, head_dim=16, intermediate=2 * width,
                     params=0, moe_experts=experts, moe_top_k=1, moe_intermediate=width, moe_layers=1,
                     moe_shared=width, moe_dense_train=dense)
        return activation_bytes_per_layer(Plan(geometry=g, batch=1, seq=tokens, **lora), tokens, True)

    assert measured == estimated(8, True) - estimated(4, True)
    assert measured == tokens * 4 * ((8 if trained else 6) * width + (4 if trained else 2) * hidden + 6)
    assert estimated(8, False) - estimated(4, False) == tokens * 4 * 4  # what top-k routing would have billed


AXOLOTL_SCOUT_QLORA = """\
base_model: meta-llama/Llama-4-Scout-17B-16E-Instruct
model_type: Llama4ForConditionalGeneration
llama4_linearized_experts: true
load_in_4bit: true
adapter: qlora
lora_r: 16
lora_target_modules: [q_proj, k_proj, v_proj, o_proj]
sequence_len: 4096
""" + AXOLOTL_TAIL


def test_axolotl_linearized_llama4_experts_are_quantized_with_the_base(tmp_path):
    """axolotl's llama4_linearized_experts makes every expert an nn.Linear, which load_in_4bit quantizes; without it
    transformers' 3D expert parameters stay 16-bit (bitsandbytes replaces Linear modules only)."""
    from click.testing import CliRunner

    from trainlint.cli import main

    def weights(text: str, name: str) -> int:
        (tmp_path / name).write_text(text)
        out = CliRunner().invoke(main, ["estimate", str(tmp_path / name), "--format", "json"]).output
        return json.loads(out)["consumers"]["weights"]

    linear = weights(AXOLOTL_SCOUT_QLORA, "linear.yaml")
    fused = weights(AXOLOTL_SCOUT_QLORA.replace("llama4_linearized_experts: true\n", ""), "fused.yaml")
    experts = 48 * 16 * 3 * 5120 * 8192
    # the experts at 2 bytes instead of NF4's 0.52 per parameter
    assert abs((fused - linear) - experts * (2 - 0.52)) < 0.01 * experts
    assert 50 * 2**30 < linear < 60 * 2**30 < 180 * 2**30 < fused
