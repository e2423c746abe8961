"""The per-consumer estimate: weights, gradients, optimizer state, activations, logits/loss, attention
scores; the peak; the levers. Plain arithmetic over a Plan; each term cites its source.

Sources: L1/L2 (the lessons in ../shared/domain/), R (../shared/research/library-facts.md and
memory-estimators.md), M (bench/estimate_measurements.json: MemTracker on CPU, see bench/MEASURE.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from trainlint.memory import (GIB, attention_scores_per_layer, chunked_upcast_bytes_per_element, eager_backward_bytes_per_score, loss_peak_bytes,
                              math_scores_per_layer)
from trainlint.memory import vision

# Not counted in the consumers: the CUDA context and the caching allocator's slack of one process, what a GPU must
# hold besides the peak (`estimate`'s verdict, TL202, TL701). Measured on the H200 (../shared/gpu-truth/
# trl-sft-vs-trainer-h200.json `context_bytes_used_by_process_estimate`: the process's device memory in use beside
# torch.cuda.memory_allocated(), torch 2.11 / CUDA 13.0): 648,871,936 bytes. It varies with the driver, the CUDA
# version and the kernels loaded (cuBLAS workspaces, NCCL buffers under a distributed launch: not counted here).
CUDA_OVERHEAD = 648_871_936
CONSUMERS = ("weights", "gradients", "optimizer", "activations", "logits", "attention")

# L1 'Five consumers': NF4 with double quantization is about 0.52 bytes per parameter (3.9 GB for a 7B).
NF4_BYTES = 0.52
# TRL >= 1.15's fused LM head under no_grad (trl 1.16.0 kernels/chunked_logprob.py `ChunkedLogProbFunction.forward`,
# l.340-370): one [min(rows, TOKEN_CHUNK_SIZE) x chunk_size] tile in the compute dtype (`mm_buf`; TOKEN_CHUNK_SIZE 4,096
# l.31, chunk_size trainer/utils.py:1506 `_CHUNKED_LOGPROB_CHUNK_SIZE` 32,768) and per-row fp32 statistics. On CUDA the
# Triton kernel folds each tile in place; without Triton (CPU) `_forward_tile` (l.235-245) adds three fp32 copies of
# the tile (`tile.float()`, the transformed logits, `exp(z - m)`). `mm_buf` is allocated `chunk_size` wide whatever
# the vocabulary (l.347: `torch.empty((min(N, TOKEN_CHUNK_SIZE), chunk_size))`); the fp32 copies are as wide as the
# tile (`mm_buf[:n, :end - start]`, l.355), so below 32,768 they shrink with the vocabulary and the buffer does not.
# Measured under FakeTensorMode: 1,792 MiB at 4,096 rows and more in bf16 on CPU (4,096 x 32,768 x (2 + 12)),
# 896 MiB at 2,048 rows whatever the hidden size for vocabularies >= 32,768; 2,048 rows of a 4,096 vocabulary:
# 2,048 x (32,768 x 2 + 4,096 x 12) (tests/test_eval_phase.py).
FUSED_HEAD_ROWS, FUSED_HEAD_COLUMNS, FUSED_HEAD_CPU_EXTRA = 4096, 32768, 12

# TRL >= 1.15's fused LM head in the training step (trl 1.16.0 kernels/chunked_logprob.py `ChunkedLogProbFunction`).
# The forward (l.340-391) has the no-grad working set above and saves `hidden`, `weight`, `targets`, `log_z` and the
# entropy (l.386: per-row fp32 statistics); `hidden` is a copy of the scored hidden states (trainer/utils.py
# l.1618, l.1642-1646: `hidden_states[mask]` under Triton, else `hidden_states[:, :-1].reshape(-1, h)` of a
# non-contiguous slice), alive from the forward to the head's backward. The backward (l.394-465), the first thing backward runs (all
# checkpoints / activations still alive), allocates an fp32 `grad_hidden` [N x h] (l.406-408), an fp32 `grad_weight`
# [V x h] when the head is trainable (l.409-411), its own `mm_buf` (l.413) and the fp32 grad_logprobs (l.414); per tile
# on CUDA the Triton kernel turns the tile into its gradient in place and `_addmm_fp32` accumulates with
# `out_dtype=torch.float32` (l.52-62: no copies); without Triton (CPU, 1.16 only: 1.15.0 imports triton
# unconditionally) `_backward_tile` (l.257-296) holds FUSED_HEAD_CPU_BACKWARD bytes per tile element at once (seven
# fp32 tensors: `tile.float()`, z, log_p, p, grad, `is_target.float() - p` and its product with grad_logprobs, and the
# bool `is_target`), and after it `_addmm_fp32`'s `tile.float()` and `w_chunk.float()` ([32,768 x h]) for 16-bit
# inputs. Returning, it casts grad_hidden / grad_weight to the inputs' dtypes (l.455-457) while the fp32 ones and
# `mm_buf` are alive. Measured under FakeTensorMode (forward + backward, tests/test_eval_phase.py
# `_fused_head_train_peak`): 2,510.3 MiB for 2,048 rows, h 896, V 151,936 in bf16 with a trainable head, 1,991.0 MiB
# frozen, 783.3 MiB at 64 rows (the cast), 124.2 MiB at 64 rows frozen (the fp32 copies of the matmul), all to the MiB.
FUSED_HEAD_CPU_BACKWARD = 29

# R 3.1: TRL's chunked LM head (1.16, CPU torch path) measured flat at ~3.9-4.0 GiB excess for
# H4096/V128256 and H2560/V262144 from 4k to 16k tokens.
CHUNKED_LOSS_BYTES = 4.0 * GIB
# Issue #4 / Liger's docs: fused linear cross-entropy keeps about 54 KB per token at h=4096.
LIGER_BYTES_PER_TOKEN_PER_HIDDEN = 54_000 / 4096

# Bytes of optimizer state per trainable parameter, as a multiple of the parameter's own bytes (torch
# keeps AdamW's exp_avg and exp_avg_sq in the parameter's dtype) or absolute for 8-bit states.
OPTIMIZERS = {
    "adamw": ("relative", 2.0), "adam": ("relative", 2.0), "adamw_torch": ("relative", 2.0),
    "adamw_torch_fused": ("relative", 2.0), "adamw_hf": ("relative", 2.0),
    "adamw_8bit": ("absolute", 2.0), "adamw_bnb_8bit": ("absolute", 2.0), "paged_adamw_8bit": ("absolute", 2.0),
    "paged_adamw_32bit": ("absolute", 8.0), "adamw_torch_8bit": ("absolute", 2.0), "adamw_torch_4bit": ("absolute", 1.0),
    "sgd": ("relative", 0.0), "sgd_momentum": ("relative", 1.0), "adafactor": ("relative", 0.0),
    "lion_32bit": ("relative", 1.0), "lion_8bit": ("absolute", 1.0), "rmsprop": ("relative", 1.0),
}


@dataclass(frozen=True)
class Geometry:
    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    params: int
    tied: bool = False
    softcap: bool = False  # attention and final-logit softcapping (Gemma 2)
    head_width: int | None = None  # logits per row when the head is not the LM head (num_labels; 0: no head)
    head_per_token: bool = True  # a row per token (False: one per example, e.g. sequence classification)
    rms_norm: bool = True  # RMSNorm that upcasts to fp32 (Llama, Mistral, Qwen, Gemma); False: LayerNorm (GPT-2)
    # eager attention (memory.eager_bytes_per_score): the softmax upcast to fp32 (transformers' Llama-style
    # eager_attention_forward; False: GPT-2's softmax in the model dtype), and attention dropout in training (GPT-2)
    softmax_fp32: bool = True
    attention_dropout: bool = False
    sandwich_norms: bool = False  # four RMSNorms per block computing in fp32 (Gemma 2), not two (Llama)
    # an fp32 RMSNorm over q and k (Gemma 3, Qwen3, Qwen3-VL, OLMo2, OLMoE): the bytes per element a trained weight
    # keeps of its normalised output (4: an fp32 product, Gemma's or OLMo2's; 2: a Llama-style 16-bit one); 0: none
    # (qk_norm_bytes_per_token). qk_norm_per_head: over each head's head_dim (Gemma 3, Qwen3); False: over the whole
    # q and k projections, one row per token each (OLMo2, OLMoE)
    qk_norms: int = 0
    qk_norm_per_head: bool = True
    # Mixture of experts (knowledge/moe.py; 0 experts: dense). `params` counts every expert (all resident);
    # `intermediate` is then the dense layers' MLP width and `moe_intermediate` one expert's.
    moe_experts: int = 0  # routed experts per sparse layer
    moe_top_k: int = 0  # experts per token
    moe_intermediate: int = 0
    moe_layers: int = 0  # sparse layers; the other `layers - moe_layers` have a dense MLP
    moe_shared: int = 0  # shared expert(s)' width in each sparse layer
    # transformers >= 5: the experts are two 3D parameters run by grouped_mm (integrations/moe.py, 5.25.0 l.424),
    # which PEFT reaches only through `target_parameters`; 4.x: one nn.Linear MLP per expert in a loop
    # (4.57.1 models/olmoe/modeling_olmoe.py:583, :607), matched by target_modules like any Linear
    fused_experts: bool = True
    # axolotl's `llama4_linearized_experts`: one nn.Linear per expert and projection (experts.gate_projs.N, up_projs.N,
    # down_projs.N), so 4-/8-bit loading quantizes them; no bare MLP target name reaches them
    experts_linearized: bool = False
    router_logits: bool = False  # output_router_logits: every sparse layer's router logits kept for the aux loss
    # GPT-OSS on transformers 4.x runs every expert on every token outside training (4.55.0
    # models/gpt_oss/modeling_gpt_oss.py:115-125: `hidden_states.repeat(num_experts, 1)` and a bmm over all experts)
    moe_dense_eval: bool = False
    # Llama 4 runs every expert on every token, in training too (knowledge/moe.py DENSE_DISPATCH)
    moe_dense_train: bool = False
    peft_converts: bool = False  # PEFT maps 4.x expert/router module names onto the fused parameters (knowledge/moe.py)

    @property
    def dense_layers(self) -> int:
        return self.layers - self.moe_layers if self.moe_experts else self.layers

    @property
    def moe_experts_run(self) -> int:
        """Experts each token runs through in a training step: all of them under dense dispatch, else top-k."""
        return self.moe_experts if self.moe_dense_train else self.moe_top_k


@dataclass(frozen=True)
class EvalPhase:
    """The evaluation step: transformers 5.25.0 trainer.py `Trainer.evaluation_loop` (l.2948) and `prediction_step`
    (l.3237), run mid-training with the optimizer state still resident (gradients were freed by `model.zero_grad()`)."""

    batch: int  # per_device_eval_batch_size
    logits: bool = True  # prediction_step builds [batch x seq x vocab] logits (False: the training loss path runs)
    kept_bytes: int = 0  # bytes per logit `all_preds` keeps on the GPU between steps (0: nothing kept)
    kept_batches: int | None = None  # eval batches kept on the GPU at the last step (None: not known; 1 counted)
    reference_logits: bool = False  # a reference model's logits in the same eval step (TRL DPO's full-logits path)
    fused_head: bool = False  # TRL >= 1.15's fused LM head scores the eval batch (fused_head_nograd_bytes)
    per_example: int = 1  # rows per example (DPO: chosen + rejected), `batch` counting rows
    # GRPO (TRL >= 0.15) / RLOO (>= 0.22): each eval batch generates its own completions (no buffering) and scores
    # them under no_grad: a generation round at the eval batch (run/eval.py `_generating_eval`)
    generation: GenerationPhase | None = None
    # TRL GKDTrainer: the step is its compute_loss under no_grad (run/eval.py `_distillation_eval`): the student's and
    # the teacher's logits and the generalized JSD's no-grad tensors (jsd_loss_bytes(grad=False)) at the eval batch
    jsd: bool = False


@dataclass(frozen=True)
class GenerationPhase:
    """One generation round of GRPO / RLOO / Online DPO on one device (run/components.py `Generation`, facts in
    knowledge/trl_trainers.py): `rows` completions generated at once, each `prompt + completion` tokens;
    `logps_rows` rows per no-grad forward of the per-token log-probabilities (old policy / reference);
    `fused_logps`: TRL >= 1.15's fused LM head; `vllm`: None (HF `generate` on this GPU) | "colocate" | "server"."""

    rows: int
    prompt: int
    completion: int
    logps_rows: int
    fused_logps: bool = False
    vllm: str | None = None
    # PPO / old RLOO (knowledge/trl_trainers.py rollout_loop): every row's generated-token logits kept in fp32 through
    # the scoring loop, generated `logps_rows` rows at a time
    kept_logits: bool = False
    # LLaMA-Factory's PPO (run/components.py `_lf_ppo_rollout`): the no-grad scoring runs the value-head model over
    # prompt + completion: logits upcast to fp32 and a full fp32 log_softmax (value_head_logps_bytes)
    scores_prompt: bool = False
    # GKD under gradient checkpointing generates with use_cache=False: no KV cache, each decoding step a no-grad
    # forward over the whole prefix (the last one over prompt + completion)
    cache: bool = True
    # GKD's seq_kd: the teacher generates too (its own geometry and activation bytes; None geometry: the policy's),
    # before or instead of the student (`student`: whether the student generates at all); never at the same time,
    # so the phase holds the larger of the two (generation_parts)
    student: bool = True
    teacher: tuple[Geometry | None, int | None] | None = None


@dataclass(frozen=True)
class Plan:
    geometry: Geometry
    batch: int
    seq: int
    dtype_bytes: int = 2  # weights (bf16 2, fp32 4)
    act_bytes: int = 2  # activations and logits: 2 under bf16/fp16 autocast or 16-bit weights
    quantization: str | None = None  # "4bit" | "8bit"
    lora_r: int | None = None  # None: full fine-tuning
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    lora_parameters: tuple[str, ...] = ()  # PEFT target_parameters (the fused expert weights: "experts.gate_up_proj")
    checkpointing: bool = False
    attention: str = "sdpa"  # "eager" | "sdpa" | "sdpa-math" (SDPA on the math kernel: knowledge/sdpa.py)
    loss: str = "full"  # "full" | "chunked" | "liger" | "chunked-upcast"
    fused_head: bool = False  # "chunked" through TRL >= 1.15's fused LM head (fused_head_train_bytes), not a flat figure
    loss_chunks: int = 1  # "chunked-upcast": the chunks its fp32 upcast is split into (axolotl's default 8; reported)
    reference_logits: bool = False  # a reference / teacher model's logits are built in the same step (TRL DPO, KTO, GKD)
    reference_weights: bool = False  # a frozen copy of the weights kept as the reference (TRL DPO / KTO without PEFT)
    optimizer: str = "adamw"
    master_weights: bool = False  # fp32 master copy kept by the optimizer wrapper (DeepSpeed, apex)
    world_size: int = 1
    sharding: str | None = None  # None | "zero1" | "zero2" | "zero3"
    offload: tuple[str, ...] = ()  # kept on the CPU: "optimizer" | "params" | "gradients" (run/parallel.py offload)
    assumptions: tuple[str, ...] = ()
    evaluation: EvalPhase | None = None  # None: no evaluation phase (eval_strategy "no", no eval_dataset)
    models: tuple[tuple[str, int], ...] = ()  # other resident models (role, bytes): reference, reward, value, teacher
    logits_seq: int | None = None  # tokens per row that get logits (GRPO's logits_to_keep: the completion); None: seq
    generation: GenerationPhase | None = None  # None: no generation phase
    # GKD's generalized JSD (jsd_loss_bytes): the positions per row it reads (None: not a GKD loss)
    jsd_positions: int | None = None
    jsd_single_kl: bool = False  # GKD's beta 0 or 1: one kl_div (JSD_KL_TENSORS), not the mixture's two
    jsd_mask_copy: int = 0  # beta 1 (reverse KL): positions per row `jsd[mask]` copies at the peak (jsd_loss_bytes)
    jsd_bytes: int | None = None  # bytes per element of the logits the JSD reads (4: accelerate's fp32 outputs)
    vllm_share: float = 0.0  # colocated vLLM's vllm_gpu_memory_utilization (a fraction of the card, not of the peak)
    device: str = "cuda"  # whose kernels run the step: "cuda" (what estimate is for) | "cpu" (bench/'s CPU ground truth)
    vision: vision.VisionPlan | None = None  # a vision-language model's tower and the patches of one sample


@dataclass(frozen=True)
class Lever:
    name: str
    saves: int
    cost: str
    code: str | None = None  # the finding whose fix this lever is (its saving is fix_saving's, as the finding's)


# Optimizers whose CUDA step (torch's default foreach implementation) holds one more trainable-parameter-sized
# temporary. The fused AdamW (`fused=True`, transformers' "adamw_torch_fused", its Trainer default from 4.54 with torch
# >= 2.8) updates in place in one kernel: no temporary (gpu_verify on the H200, bench/README.md: the Trainer's Liger
# run peaked at 10.66 GB, where weights + gradients + AdamW state are 9.88 GB).
FOREACH_STEP = ("adamw", "adam", "adamw_torch", "adamw_hf")

# What can be live at a moment of the step, in the order the estimate prints a moment's rows.
ROWS = {
    "weights": "Weights",
    "optimizer": "Optimizer state",
    "gradients": "Gradients",
    "activations": "Activations kept for backward",
    "checkpoints": "Checkpointed layer inputs",
    "attention": "Attention scores kept for backward",
    "logits": "Logits and loss (transient)",
    "recomputed": "Recomputed layer's activations (transient)",
    "recomputed_attention": "Recomputed layer's attention backward (transient)",
    "embedding_sum": "Tied embedding's gradient partials and sum (transient)",
    "step": "Optimizer step temporary (foreach)",
    "models": "Reference / reward / value / teacher models",
    "kv_cache": "KV cache of generate (transient)",
    "generate_step": "Decoding step (transient)",
    "logps": "Log-probabilities forward, no grad (transient)",
    "generation_logits": "Generated tokens' logits kept for scoring (fp32)",
}


@dataclass(frozen=True)
class Moment:
    """One moment of the training step and what is live at it: rows (ROWS key, bytes) that sum to its total."""

    name: str
    rows: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(b for _, b in self.rows)


@dataclass(frozen=True)
class Estimate:
    plan: Plan
    consumers: dict[str, int]  # each consumer at its largest (the lesson's five consumers; not all live at once)
    peak: int
    peak_phase: str
    trainable: int
    paged_optimizer: int = 0
    levers: tuple[Lever, ...] = ()
    notes: tuple[str, ...] = field(default=())
    moments: tuple[Moment, ...] = ()  # every moment considered; the peak is the largest

    @property
    def rows(self) -> tuple[tuple[str, int], ...]:
        """What is live at the peak moment: the rows sum to the peak."""
        return next((m.rows for m in self.moments if m.name == self.peak_phase), ())


def _lora_dims(g: Geometry, target: str) -> tuple[int, int] | None:
    q, kv = g.heads * g.head_dim, g.kv_heads * g.head_dim
    return {
        "q_proj": (g.hidden, q), "k_proj": (g.hidden, kv), "v_proj": (g.hidden, kv), "o_proj": (q, g.hidden),
        "gate_proj": (g.hidden, g.intermediate), "up_proj": (g.hidden, g.intermediate),
        "down_proj": (g.intermediate, g.hidden),
    }.get(target)


ALL_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP = ("gate_proj", "up_proj", "down_proj")
# Mixtral's expert Linear names in transformers 4.x (4.57.1 models/mixtral/modeling_mixtral.py MixtralBlockSparseTop2MLP:
# w1 gate, w3 up, w2 down); 5.x fuses them into experts.gate_up_proj / experts.down_proj like the other families
EXPERT_LINEAR = {"gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj", "w1": "gate_proj",
                 "w3": "up_proj", "w2": "down_proj"}


def _mlp_dims(name: str, hidden: int, width: int) -> tuple[int, int]:
    return (width, hidden) if name == "down_proj" else (hidden, width)


def _lora_module_params(g: Geometry, r: int, names: tuple[str, ...]) -> int:
    """Adapters PEFT's target_modules put on a mixture-of-experts model: attention in every layer; the dense layers'
    MLP; the shared expert(s) of each sparse layer (nn.Linear modules named gate_proj / up_proj / down_proj); and
    with transformers 4.x (fused_experts False) every routed expert's Linear too, r x (d_in + d_out) per expert."""
    total = 0
    for name in names:
        if name in ATTENTION:
            total += g.layers * r * sum(_lora_dims(g, name))
        if name in MLP:
            total += g.dense_layers * r * sum(_mlp_dims(name, g.hidden, g.intermediate))
            if g.moe_shared:
                total += g.moe_layers * r * sum(_mlp_dims(name, g.hidden, g.moe_shared))
        if name in EXPERT_LINEAR and not g.fused_experts and not g.experts_linearized:
            total += g.moe_layers * g.moe_experts * r * sum(_mlp_dims(EXPERT_LINEAR[name], g.hidden,
                                                                       g.moe_intermediate))
    return total


V4_EXPERT_NAMES = {"gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "down_proj": "down_proj",
                   "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj", "gate": "gate.weight"}


def peft_targets(g: Geometry, targets: tuple[str, ...], parameters: tuple[str, ...]) -> tuple[
        tuple[str, ...], dict[str, int]]:
    """(the module names PEFT adapts, {fused parameter: rank multiple}) on this model. On transformers 5's fused
    experts PEFT rewrites 4.x names for the families that had Linear experts (knowledge/moe.py PEFT_CONVERTS): gate +
    up (w1 + w3) become gate_up_proj at twice the rank (both named: peft 0.21.2 transformers_weight_conversion.py:466-
    476), down (w2) down_proj, the router `gate` its weight; "all-linear" is the attention plus all of these (l.362-
    367). The names it maps leave target_modules, so a dense layer's or a shared expert's MLP keeps no adapter."""
    names = ALL_LINEAR if targets == ("all-linear",) else targets
    params = {name.rsplit(".", 1)[-1] if not name.endswith("gate.weight") else "gate.weight": 1 for name in parameters}
    if not (g.moe_experts and g.fused_experts and g.peft_converts):
        return names, params
    mapped = set(V4_EXPERT_NAMES) if targets == ("all-linear",) else {n for n in names if n in V4_EXPERT_NAMES}
    for name in mapped:
        params.setdefault(V4_EXPERT_NAMES[name], 1)
    if {"gate_proj", "up_proj"} <= mapped or {"w1", "w3"} <= mapped:
        params["gate_up_proj"] = 2
    modules = ATTENTION if targets == ("all-linear",) else tuple(n for n in names if n not in mapped)
    return modules, params


def expert_lora_params(g: Geometry, r: int, params: dict[str, int]) -> int:
    """PEFT LoRA on the fused 3D expert weights (peft 0.21.2 tuners/lora/layer.py ParamWrapper, l.2455-2456: lora_A is
    in x (r * num_experts), lora_B (r * num_experts) x out): r x (d_in + d_out) per expert, gate_up_proj (hidden,
    2 x width) and down_proj (width, hidden), in every sparse layer; the router's 2D weight: r x (hidden + experts)."""
    if not g.moe_experts or not g.fused_experts:
        return 0
    total = 0
    for name, mult in params.items():
        if name.endswith("gate_up_proj"):
            total += mult * r * (g.hidden + 2 * g.moe_intermediate) * g.moe_experts
        elif name.endswith("down_proj"):
            total += mult * r * (g.moe_intermediate + g.hidden) * g.moe_experts
        elif name.endswith("gate.weight"):
            total += mult * r * (g.hidden + g.moe_experts)
    return total * g.moe_layers


def lora_params(g: Geometry, r: int, targets: tuple[str, ...], parameters: tuple[str, ...] = ()) -> int:
    """PEFT LoRA adds A (r x d_in) and B (d_out x r) per targeted module per layer: r x (d_in + d_out)."""
    names = ALL_LINEAR if targets == ("all-linear",) else targets
    if g.moe_experts:
        modules, params = peft_targets(g, targets, parameters)
        return _lora_module_params(g, r, modules) + expert_lora_params(g, r, params)
    total = 0
    for name in names:
        dims = _lora_dims(g, name)
        if dims is not None:
            total += r * (dims[0] + dims[1])
    return total * g.layers


def embedding_params(g: Geometry) -> int:
    return g.vocab * g.hidden * (1 if g.tied else 2)


def weights_bytes(p: Plan) -> int:
    """L1 consumer 1: parameters x bytes. Under QLoRA the embeddings and lm_head stay 16-bit (R, L1)."""
    g = p.geometry
    base = g.params * p.dtype_bytes
    # transformers 5.x keeps the fused experts as 3D nn.Parameters, and bitsandbytes replaces only nn.Linear / Conv1D
    # modules (5.25.0 integrations/bitsandbytes.py:189 replace_with_bnb_linear) and quantizes only their weights
    # (quantizers/quantizer_bnb_4bit.py:83-87 param_needs_quantization): the experts stay 16-bit under QLoRA
    kept = g.moe_layers * g.moe_experts * 3 * g.hidden * g.moe_intermediate if g.fused_experts else 0
    if p.quantization == "4bit":
        emb = embedding_params(g) + kept
        base = int((g.params - emb) * NF4_BYTES + emb * 2)
    elif p.quantization == "8bit":
        emb = embedding_params(g) + kept
        base = int((g.params - emb) * 1 + emb * 2)
    adapters = lora_params(g, p.lora_r, p.lora_targets, p.lora_parameters) * 4 if p.lora_r else 0  # PEFT keeps adapters in fp32
    # knowledge/trl_trainers.py REFERENCE_COPY: the reference is the same model loaded again, frozen (no grads)
    reference = base if p.reference_weights and not p.lora_r else 0  # (with PEFT the reference is the base model)
    return base + adapters + reference + vision.weights_bytes(p.vision, p.dtype_bytes, p.lora_r)


def trainable(p: Plan) -> tuple[int, int]:
    """(trainable parameters, bytes per trainable parameter)."""
    tower = vision.trainable_params(p.vision, p.lora_r)
    if p.lora_r:
        return lora_params(p.geometry, p.lora_r, p.lora_targets, p.lora_parameters) + tower, 4
    return p.geometry.params + tower, p.dtype_bytes


def gradients_bytes(p: Plan) -> int:
    """L1 consumer 2: the trainable weights in the gradient dtype (the parameter's dtype in torch)."""
    n, b = trainable(p)
    return n * b


def optimizer_bytes(p: Plan) -> tuple[int, int]:
    """(device bytes, paged bytes). L2: AdamW's two states, 8 bytes per parameter in fp32; torch keeps
    them in the parameter's dtype. 8-bit: about 2 bytes. Paged optimizers live in managed memory that
    allocated-memory counters do not see: reported separately. +4 bytes per parameter for fp32 master
    weights when an optimizer wrapper keeps them (DeepSpeed/apex mixed precision)."""
    n, b = trainable(p)
    kind, factor = OPTIMIZERS.get(p.optimizer, ("relative", 2.0))
    master = n * 4 if p.master_weights and b < 4 else 0
    state_dtype = 4 if master else b  # with master weights the states belong to the fp32 copy (L2 table)
    state = int(n * (factor * state_dtype if kind == "relative" else factor))
    if p.optimizer.startswith("paged_"):
        return master, state
    return state + master, 0


def activation_bytes_per_layer(p: Plan, tokens: int, sparse: bool | None = None) -> int:
    """Saved-for-backward tensors of one Llama-style block, bf16 (issue #4 formula, after Korthikanti et al.):
    `s*b*h*(22 + 4*g/a) + 8*s*b*f` bytes at 2 bytes per element, scaled to the dtype. Frozen base layers
    (LoRA) do not keep their linear inputs. For a mixture of experts, `sparse` picks a routed layer (None: the
    larger of a routed and a dense layer, what a recomputed layer holds): moe_layer_extra."""
    g = p.geometry
    if sparse is None:
        kinds = ([True] if g.moe_experts and g.moe_layers else []) + ([False] if g.dense_layers else [])
        return max((activation_bytes_per_layer(p, tokens, k) for k in kinds), default=0)
    scale = p.act_bytes / 2
    mlp_width = g.moe_experts_run * g.moe_intermediate + g.moe_shared if sparse else g.intermediate
    per_token = g.hidden * (22 + 4 * g.kv_heads / g.heads) + 8 * mlp_width
    if p.lora_r:
        # the linear inputs of frozen projections are not saved (q/k/v input, o_proj input, gate/up input,
        # down_proj input: 2h + 2h + 2h + 2f bytes at 16 bit, scaled to the dtype).
        per_token -= 6 * g.hidden + 2 * mlp_width
    lora = 0
    if p.lora_r:
        # Each adapted module keeps, whatever the model's dtype (PEFT's adapters are fp32): its dropout
        # output in fp32 (4 bytes per input element; lora_A's input), the dropout's bool mask (1 byte;
        # native_dropout, what CUDA runs) and lora_A's fp32 output (4 bytes per rank). Not scaled by the
        # activation dtype: scaling them made LoRA on all linear layers in fp32 ~34% too high (issue 14;
        # bench/estimate_measurements.json smollm2-360m, bench/live_measurements.json deep-mini).
        names = ALL_LINEAR if p.lora_targets == ("all-linear",) else p.lora_targets
        if g.moe_experts:
            names = peft_targets(g, p.lora_targets, p.lora_parameters)[0]
        for name in names:
            if g.moe_experts and name not in ATTENTION:
                lora += _moe_lora_activations(g, p.lora_r, name, sparse)
                continue
            dims = _lora_dims(g, name)
            if dims:
                lora += 5 * dims[0] + 4 * p.lora_r
    per_token = per_token * scale
    if p.act_bytes == 4 and g.rms_norm:
        # In an fp32 model the RMSNorms' round trips (`.to(float32)`, `.to(input_dtype)`) are no-ops, so the
        # doubled 16-bit count overshoots: measured ~10 bytes x hidden per token per layer for full
        # fine-tuning and ~16 with LoRA (fitted on bench/estimate_measurements.json llama3-1b/qwen2.5 fp32 and
        # smollm2-360m LoRA-all fp32, bench/live_measurements.json deep-mini and smol-mini fp32; issue 14).
        per_token -= (16 if p.lora_r else 10) * g.hidden
    frozen_norms = bool(p.lora_r)  # PEFT freezes the norms' weights with the base model
    if frozen_norms and g.rms_norm and p.act_bytes == 2:
        # A frozen RMSNorm weight needs no gradient, so `self.weight * hidden_states.to(input_dtype)`
        # (models/llama/modeling_llama.py:67) keeps no 16-bit normalised output: 2 norms x 2 bytes per hidden element
        # less than the count above (saved_tensors_hooks, Llama-3.2-1B LoRA q/v bf16: 47.1 B per token x hidden
        # counted, 51.1 billed before; bench/README.md 'Eager attention, tensor by tensor'). In fp32 the fitted
        # correction above already covers it.
        per_token -= 2 * NORM_OUTPUT_16BIT_BYTES * g.hidden
    if g.sandwich_norms:
        per_token += sandwich_norm_bytes_per_token(g, frozen_norms)
    per_token += qk_norm_bytes_per_token(g, frozen_norms, p.act_bytes)
    extra_token, extra_layer = moe_layer_extra(p) if sparse else (0, 0)
    return int(tokens * (per_token + lora + extra_token)) + extra_layer


def _moe_lora_activations(g: Geometry, r: int, name: str, sparse: bool) -> int:
    """Per token: what LoRA on an MLP module name keeps in a mixture-of-experts layer: the dense layers' MLP; a
    routed layer's shared expert (every token) and, with transformers 4.x's per-expert Linear modules, the expert
    each of the token's top-k slots runs (5 bytes per input element + 4 per rank, as for any adapted Linear)."""
    if name not in EXPERT_LINEAR:
        return 0
    kind = EXPERT_LINEAR[name]
    if not sparse:
        return 5 * _mlp_dims(kind, g.hidden, g.intermediate)[0] + 4 * r if name in MLP else 0
    out = 0
    if g.moe_shared and name in MLP:
        out += 5 * _mlp_dims(kind, g.hidden, g.moe_shared)[0] + 4 * r
    if not g.fused_experts and not g.experts_linearized:
        out += g.moe_top_k * (5 * _mlp_dims(kind, g.hidden, g.moe_intermediate)[0] + 4 * r)
    return out


def moe_layer_extra(p: Plan) -> tuple[int, int]:
    """(bytes per token, bytes per layer) a routed layer keeps beyond its top-k experts' MLP tensors (counted as an
    MLP of width top_k x expert width in activation_bytes_per_layer). Read from what autograd saves in
    transformers 5.25.0's grouped_mm path (integrations/moe.py grouped_mm_experts_forward l.424-530; the CPU and
    the CUDA path both run torch's grouped_mm with torch >= 2.10) and the router (models/olmoe/modeling_olmoe.py
    OlmoeTopKRouter l.327-336); the 4.x loop over experts (4.57.1 modeling_olmoe.py:607-620) saves the same
    per routed token. No capacity padding in either: dropless routing, exactly top_k rows per token.
    - each of the token's top_k expert outputs (hidden wide, 16-bit units) kept for the routing-weight product;
    - the router's fp32 softmax (4 bytes x experts) and int64 indices (top-k, the sort's gather and its inverse,
      the token gather: 4 x 8 bytes per slot);
    - trained experts (full fine-tuning): the gathered inputs of the up projection (hidden wide per slot);
    - PEFT target_parameters on the fused weights (peft 0.21.2 ParamWrapper._activate_lora, tuners/lora/layer.py
      l.2575-2600: the weight is re-parametrized as W + B A for the forward): each targeted weight's merged copy,
      the whole expert stack, is saved for backward in every routed layer, plus the inputs of both projections.
    - output_router_logits: the router logits and the aux loss's softmax of them (load_balancing_loss_func,
      5.25.0 modeling_olmoe.py:500; 4.57.1 concatenates all layers first, l.77-83), experts wide per token."""
    g = p.geometry
    scale = p.act_bytes / 2
    k = g.moe_top_k
    if g.moe_dense_train:
        # Llama 4 (knowledge/moe.py DENSE_DISPATCH; transformers 5.25.0 llama4/modeling_llama4.py:145-177): per expert
        # and token, the repeated input kept for the routing-score product (and, when the experts train, the product
        # itself, the bmm's input) and the score in fp32 (sigmoid's output) and in the model dtype; per token, topk's
        # int64 indices. Counted with saved_tensors_hooks on a Llama4ForCausalLM transformers builds
        # (tests/test_moe.py test_llama4_runs_every_expert_on_every_token).
        trained = not p.lora_r
        per_expert = (4 if trained else 2) * g.hidden * scale + 4 + (p.act_bytes if p.act_bytes != 4 else 0)
        per_token = g.moe_experts * per_expert + 8 * k
        k = g.moe_experts  # the expert rows below (LoRA on the fused experts) are every expert's
    else:
        per_token = 2 * k * g.hidden * scale + 4 * g.moe_experts + 32 * k
    per_layer = 0
    params = peft_targets(g, p.lora_targets, p.lora_parameters)[1] if p.lora_r else {}
    experts = {n: m for n, m in params.items() if n.endswith(("gate_up_proj", "down_proj"))}
    if not p.lora_r:
        per_token += 0 if g.moe_dense_train else 2 * k * g.hidden * scale
    elif experts and g.fused_experts:
        per_token += 2 * k * (g.hidden + g.moe_intermediate) * scale
        for name in experts:
            width = 2 * g.moe_intermediate if name.endswith("gate_up_proj") else g.moe_intermediate
            per_layer += g.moe_experts * g.hidden * width * p.dtype_bytes
    if g.router_logits:
        per_token += 2 * g.moe_experts * p.act_bytes
    return int(per_token), per_layer


# What an RMSNorm saves for backward, per hidden element (saved_tensors_hooks count, bench/README.md 'Eager attention,
# tensor by tensor'). Llama (models/llama/modeling_llama.py:64-67): its fp32 input (read by `pow` and the multiply by
# `rsqrt`) and, for the weight's gradient, the 16-bit normalised output (read by `self.weight * ...`): 4 + 2, the count
# activation_bytes_per_layer's 16-bit block formula includes twice. Gemma 2 (models/gemma2/modeling_gemma2.py:56-62):
# `x.float()` and, for the weight's gradient, the fp32 normalised output (read by `output * (1.0 +
# self.weight.float())`), whatever the model's dtype: 4 + 4.
NORM_INPUT_FP32_BYTES = 4
NORM_OUTPUT_16BIT_BYTES = 2
GEMMA2_NORM_OUTPUT_BYTES = 4


def sandwich_norm_bytes_per_token(g: Geometry, frozen: bool = False) -> int:
    """Gemma 2's block normalises four times (input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
    post_feedforward_layernorm: modeling_gemma2.py:291-295) where the Llama count has two: the difference per token.
    A frozen weight (LoRA) keeps no normalised output in either (the Llama one is subtracted by the caller)."""
    gemma = NORM_INPUT_FP32_BYTES + (0 if frozen else GEMMA2_NORM_OUTPUT_BYTES)
    llama = NORM_INPUT_FP32_BYTES + (0 if frozen else NORM_OUTPUT_16BIT_BYTES)
    return (4 * gemma - 2 * llama) * g.hidden


def qk_norm_bytes_per_token(g: Geometry, frozen: bool = False, act_bytes: int = 2) -> int:
    """q_norm and k_norm (Gemma 3: transformers 5.25.0 gemma3/modeling_gemma3.py l.310-311, l.329-330, Gemma3RMSNorm
    l.119-133; Qwen3-VL's text: qwen3_vl/modeling_qwen3_vl.py l.495-513; Qwen3: qwen3/modeling_qwen3.py l.229-230,
    applied l.245-246 to `q_proj(x).view(..., -1, head_dim)`, Qwen3RMSNorm l.50-64; Qwen3-MoE the same,
    qwen3_moe/modeling_qwen3_moe.py l.147-148, l.163-164, Qwen3MoeRMSNorm l.286; OLMo2: olmo2/modeling_olmo2.py
    l.209-210, l.224-225, over the whole q_proj / k_proj output, Olmo2RMSNorm l.49-63; OLMoE: olmoe/modeling_olmoe.py
    l.222-225, l.239-240, OlmoeRMSNorm l.44-58), computing in fp32. Each keeps its fp32 input (`hidden_states.to(torch.float32)`, saved by
    `pow(2)` and the product with the rsqrt: 4 bytes per element) and the rsqrt (4 bytes per normalised row) and, for
    a trained weight (`self.weight * ...` saves the other factor), the normalised output: g.qk_norms bytes per
    element (2: Qwen3's `hidden_states.to(input_dtype)`, the model dtype's, so 4 in an fp32 model; 4: Gemma 3's and
    OLMo2's fp32 product). Per token over the heads' queries and the KV heads' keys; a row per head
    (g.qk_norm_per_head) or one per projection. A frozen weight (LoRA) saves the weight, not the output. Counted with
    saved_tensors_hooks on Gemma 3, Qwen3, OLMo2 and OLMoE layers (tests/test_estimate.py); bench/README.md
    Gemma-3-4B-it, Qwen3-VL-8B and Qwen3-8B / Qwen3-4B: the rows without checkpointing were 4-6% short without it."""
    if not g.qk_norms:
        return 0
    rows = g.heads + g.kv_heads if g.qk_norm_per_head else 2
    out = max(g.qk_norms, act_bytes)
    return (g.heads + g.kv_heads) * g.head_dim * (NORM_INPUT_FP32_BYTES + (0 if frozen else out)) + 4 * rows


def checkpoint_inputs_bytes(p: Plan) -> int:
    """With checkpointing each layer keeps only its input: 2*s*b*h bytes in bf16 (issue #4)."""
    g = p.geometry
    return g.layers * p.batch * p.seq * g.hidden * p.act_bytes + vision.checkpoint_bytes(p.vision, p.batch, p.act_bytes,
                                                                                         p.lora_r)


def activations_bytes(p: Plan) -> int:
    """L1 consumer 4. Without checkpointing every layer keeps its tensors; with it, each layer keeps its
    input and one layer is recomputed at a time during backward (L1 'Gradient checkpointing')."""
    g = p.geometry
    tokens = p.batch * p.seq
    per_layer = activation_bytes_per_layer(p, tokens)
    if p.checkpointing:
        return checkpoint_inputs_bytes(p) + per_layer
    tower = vision.activation_bytes(p.vision, p.batch, p.act_bytes, p.lora_r)
    if g.moe_experts:
        return (g.moe_layers * activation_bytes_per_layer(p, tokens, True) +
                g.dense_layers * activation_bytes_per_layer(p, tokens, False)) + tower
    return g.layers * per_layer + tower


def attention_bytes(p: Plan) -> int:
    """L1 consumer 5 / R 1.4: eager keeps batch x heads x seq^2 scores (+ the fp32 softmax) per layer; SDPA on the
    math kernel keeps them in fp32 (memory.MATH_BYTES_PER_SCORE; no dense mask: transformers passes none when it
    lets SDPA take grouped-query heads, knowledge/sdpa.py); zero with a fused SDPA kernel / flash. Under
    checkpointing only the layer being recomputed holds them."""
    g = p.geometry
    if p.attention == "sdpa-math":
        per_layer = math_scores_per_layer(p.batch, g.heads, p.seq)
        return per_layer if p.checkpointing else per_layer * g.layers
    if p.attention != "eager":
        return 0
    per_layer = attention_scores_per_layer(p.batch, g.heads, p.seq, p.act_bytes, g.softcap, g.softmax_fp32,
                                           g.attention_dropout)
    mask = p.batch * p.seq * p.seq * p.act_bytes  # eager's dense float mask, one for all layers (R 1.4)
    return (per_layer if p.checkpointing else per_layer * g.layers) + mask


# TRL GKDTrainer.generalized_jsd_loss (beta strictly between 0 and 1; trl 0.13.0 gkd_trainer.py:161-216, 1.16.0
# experimental/gkd/gkd_trainer.py:238-322), every tensor in the logits' dtype over the positions it reads (the slice
# of the logits is a view), N = [rows x positions x vocab]. Line by line, with what autograd saves (torch 2.13
# derivatives.yaml; the saved tensors listed off the graph's `_saved_*` attributes):
#   l.271-272 `student_logits / temperature`, `teacher_logits / temperature`: 2 N, alive as the locals they rebind
#   l.275-276 the two log_softmax: 2 N (the student's is also LogSoftmaxBackward's saved result)
#   l.286-289 the two `+ log(beta)` sums are temporaries of `torch.stack` (gone once it returns); the stacked pair
#             (2 N) is saved by LogsumexpBackward (`self`), as is its result, the mixture (1 N): 3 N
#   l.293 kl_teacher = kl_div(mixture, teacher, log_target=True) = `exp(target) * (target - input)` (ATen kl_div,
#             CompositeImplicitAutograd): exp(teacher) has no grad, (teacher - mixture) has, so MulBackward saves
#             only exp(teacher), the operand the other's gradient needs; the difference is freed when kl_div returns:
#             exp(teacher) + the product = 2 N
#   l.294 kl_student: exp(student) (ExpBackward's result), (student - mixture) and the product: both operands need
#             a gradient, so both are saved: 3 N
#   l.297 beta * kl_teacher, (1 - beta) * kl_student and their sum (0-dim beta: nothing N-sized saved): 3 N
# 2 + 2 + 3 + 2 + 3 + 3 = 15 at the last add (the peak), beside the two models' own [rows x seq x vocab] logits. The
# teacher's (target - input) is the one a plain count of kl_div's three tensors (16) gets wrong. Under no_grad
# (the evaluation step) nothing is saved: the stacked pair is freed by logsumexp's return, each kl_div's exp and
# difference by its own, which leaves 2 + 2 + 1 (mixture) + 2 (the two kl_div) + 3 = 10 at the last add
# (JSD_NOGRAD_TENSORS). Measured under FakeTensorMode + StepMemTracker on TRL's loss alone (bench/rl_measurements.json
# "jsd_probe", verify/measure_rl.py `jsd_tensor_counts`): 15.000 N with grad (the backward peaks lower, 12.000) and
# 10.000 N under no_grad at [2 x 1,024 x 151,936], [3 x 700 x 128,256] and [5 x 333 x 32,000] bf16; and in the full
# GKD steps, fp32 logits under the scripts' bf16 mixed precision (Plan.jsd_bytes): the Qwen2.5-0.5B step the
# constants were first read off (training 15.08 N above weights, teacher, optimizer state and both logits, the
# checkpoints included; its evaluation step at batch 8, 10.00 N) and the held-out Llama-3.2-1B step at 3 x 700
# tokens, another vocabulary, batch, length and token count (15.16 N; evaluation at batch 5, 10.00 N;
# bench/rl_accuracy.py: training -0.0 %, evaluation +0.1 %).
JSD_TENSORS = 15
JSD_NOGRAD_TENSORS = 10
# beta 0 or 1 (l.278-281): one kl_div, forward or reverse KL: the two scaled logits, the two log_softmax, exp(target),
# (target - input) and the product; with grad both the exp and the difference are saved (one operand of each
# product needs a gradient), under no_grad they are alive at the product anyway: 7 either way (jsd_probe, beta 0 / 1)
JSD_KL_TENSORS = 7
# ... and with beta 1 (the reverse KL, DistillationConfig's default) and grad, exp(student) and (student - teacher)
# stay saved after the product, so the labels' `jsd[mask]` (1.16.0 l.300-302; Distillation `_reduce_divergence_loss`)
# copies the labelled positions beside all 7: 7 N + the labelled share of N (measured on real CPU tensors, 48 of 64
# labelled: 7.75 N, tests/test_gkd_phases.py; beta 0 saves only exp(teacher), so its copy fits in the freed
# difference: 7 N;
# Plan.jsd_mask_copy)


def jsd_loss_tensors(positions: int, seq: int, single_kl: bool = False, mask_copy: int = 0) -> float:
    """Vocabulary-sized tensors per row-token of the sequence (for the estimate's note)."""
    return (2 * seq + (JSD_KL_TENSORS if single_kl else JSD_TENSORS) * positions + mask_copy) / max(seq, 1)


def jsd_loss_bytes(p: Plan, grad: bool = True) -> int:
    """GKD's loss step (Plan.jsd_positions): the student's and the teacher's [batch x seq x vocab] logits and the
    JSD_TENSORS (training) / JSD_NOGRAD_TENSORS (under no_grad: the evaluation step) vocabulary-sized tensors over the
    positions it reads, in the logits' dtype (Plan.jsd_bytes: fp32 under accelerate's mixed precision, else the
    activation dtype)."""
    g = p.geometry
    tensors = JSD_KL_TENSORS if p.jsd_single_kl else JSD_TENSORS if grad else JSD_NOGRAD_TENSORS
    copy = p.jsd_mask_copy if grad and p.jsd_single_kl else 0
    width = p.jsd_bytes or p.act_bytes
    return p.batch * g.vocab * width * (2 * p.seq + tensors * (p.jsd_positions or p.seq) + copy)


def logits_bytes(p: Plan) -> int:
    """L1 'The logits, again' / R 3.1: transformers' head + ForCausalLMLoss (loss_bytes_per_element);
    TRL's chunked loss is nearly constant; Liger's fused kernel keeps ~54 KB per token at h=4096."""
    g = p.geometry
    seq = p.logits_seq or p.seq  # (GRPO keeps the completion's logits only: logits_to_keep)
    tokens = p.batch * seq
    if g.head_width is not None:  # a classifier's num_labels-wide logits (knowledge/heads.py)
        return loss_peak_bytes(p.batch, p.seq if g.head_per_token else 1, g.head_width, p.act_bytes,
                               trainable_head=True, softcap=False) if g.head_width else 0
    full = loss_peak_bytes(p.batch, seq, g.vocab, p.act_bytes, trainable_head=not p.lora_r, softcap=g.softcap)
    if p.loss == "chunked" and p.fused_head:
        return fused_head_train_bytes(p)
    if p.loss == "chunked":
        return int(min(CHUNKED_LOSS_BYTES, full))
    if p.loss == "liger":
        return int(tokens * g.hidden * LIGER_BYTES_PER_TOKEN_PER_HIDDEN)
    if p.loss == "chunked-upcast":
        return chunked_upcast_bytes(p)
    if p.jsd_positions is not None:
        return jsd_loss_bytes(p)
    if p.reference_logits:
        # knowledge/trl_trainers.py: the reference forward runs under no_grad while the policy's loss graph is
        # alive; its logits are at least one more [batch x seq x vocab] tensor in the activation dtype
        full += tokens * g.vocab * p.act_bytes
    return full


def fused_head_tokens(p: Plan) -> int:
    """The positions TRL's fused LM head scores in one training forward: on CUDA (Triton) the labelled ones only
    (trl 1.16.0 trainer/utils.py l.1642-1646, `compact`; 1.15.0 l.1638-1642 always), which the plan knows for GRPO /
    RLOO (the completion, Plan.logits_seq) and bounds by every shifted position otherwise (DPO / KTO / SFT: the
    prompt's share is not known); on CPU every shifted position (`hidden_states[:, :-1]`)."""
    if p.device == "cuda" and p.logits_seq:
        return p.batch * p.logits_seq
    return p.batch * max(p.seq - 1, 1)


def fused_head_backward_bytes(p: Plan, tokens: int) -> int:
    """The fused LM head's working set in its backward over `tokens` scored positions (FUSED_HEAD_CPU_BACKWARD): the
    fp32 grad_hidden, the fp32 grad_weight of a trainable head (full fine-tuning: `not p.lora_r`), the 32,768-column
    tile buffer, and the largest of: on CPU the fold's fp32 copies of a tile and the 16-bit matmul's fp32 copies, and
    the casts of the fp32 gradients back to the inputs' dtypes."""
    g = p.geometry
    rows, cols = min(tokens, FUSED_HEAD_ROWS), min(g.vocab, FUSED_HEAD_COLUMNS)
    head = not p.lora_r
    base = tokens * g.hidden * 4 + (g.vocab * g.hidden * 4 if head else 0) + rows * FUSED_HEAD_COLUMNS * p.act_bytes
    cast = (tokens * g.hidden * p.act_bytes if p.act_bytes < 4 else 0) + \
        (g.vocab * g.hidden * p.dtype_bytes if head and p.dtype_bytes < 4 else 0)
    if p.device != "cpu":
        return base + cast
    fold = FUSED_HEAD_CPU_BACKWARD * rows * cols
    matmul = 4 * cols * (rows + g.hidden) if p.act_bytes < 4 else 0
    return base + max(fold, matmul, cast)


def fused_head_train_bytes(p: Plan) -> int:
    """The logits consumer with TRL's fused LM head (Plan.fused_head): the saved copy of the scored hidden states and
    the head's backward working set, both at the start of backward (fused_head_backward_bytes)."""
    tokens = fused_head_tokens(p)
    return tokens * p.geometry.hidden * p.act_bytes + fused_head_backward_bytes(p, tokens)


def chunked_upcast_bytes(p: Plan) -> int:
    """axolotl's chunked_cross_entropy: memory.chunked_upcast_bytes_per_element per logit."""
    return p.batch * p.seq * p.geometry.vocab * chunked_upcast_bytes_per_element(p.act_bytes)


def shard(p: Plan, weights: int, grads: int, optim: int) -> tuple[int, int, int]:
    """R B6: ZeRO-1 shards optimizer state, ZeRO-2 also gradients, ZeRO-3 / FSDP full shard also weights,
    each over the data-parallel world size. Activations are never sharded by data parallelism."""
    n = max(p.world_size, 1)
    if p.sharding in ("zero1", "zero2", "zero3"):
        optim //= n
    if p.sharding in ("zero2", "zero3"):
        grads //= n
    if p.sharding == "zero3":
        weights //= n
    # offloaded to the CPU (DeepSpeed offload_optimizer / offload_param, FSDP CPUOffload): the optimizer steps there;
    # parameters are gathered to the GPU a layer at a time (the layer computing and the one prefetched)
    if "optimizer" in p.offload:
        optim = 0
    if "gradients" in p.offload:
        grads = 0
    if "params" in p.offload and p.geometry.layers:
        weights = min(weights, 2 * weights_bytes(p) // p.geometry.layers)
    return weights, grads, optim


def models_bytes(p: Plan) -> int:
    """The other resident models (Plan.models: reference, reward, value, teacher; frozen, no gradients or optimizer
    state), sharded like the weights under ZeRO-3 (TRL prepares them with `prepare_deepspeed`: 0.19.1
    dpo_trainer.py:487, grpo_trainer.py)."""
    total = sum(b for _, b in p.models)
    return total // max(p.world_size, 1) if p.sharding == "zero3" else total


def recomputed_attention_bytes(p: Plan) -> int:
    """Under checkpointing: what the recomputed layer's attention holds while its backward runs. Eager: the
    scores at eager_backward_bytes_per_score (the saved tensors, their gradient, and the fp32 softmax's output
    gradient with 16-bit weights; measured on CUDA, bench/README.md) and the dense mask with its gradient; SDPA on
    the math kernel: its fp32 scores and their gradient; 0 for a fused kernel."""
    g = p.geometry
    if p.attention == "sdpa-math":
        return 2 * math_scores_per_layer(p.batch, g.heads, p.seq)
    if p.attention != "eager":
        return 0
    scores = p.batch * g.heads * p.seq * p.seq * eager_backward_bytes_per_score(
        p.act_bytes, g.softcap, p.device, g.softmax_fp32, g.attention_dropout)
    return scores + 2 * p.batch * p.seq * p.seq * p.act_bytes


def tied_embedding_sum_bytes(p: Plan) -> int:
    """End of backward with a tied, trainable embedding: the LM head's gradient of the shared weight is already
    accumulated when the embedding's backward produces its own dense [vocab x hidden] gradient, and autograd's
    accumulation holds both partials and their sum at once: two embedding-sized gradients beyond the gradients."""
    g = p.geometry
    if not g.tied or p.lora_r or g.head_width is not None:
        return 0
    return 2 * g.vocab * g.hidden * p.dtype_bytes


def moments(p: Plan, w: int, gr: int, opt: int, consumers: dict[str, int]) -> tuple[Moment, ...]:
    """The moments of one training step where the peak can fall, each with what is live (issue #4, L1): the start of
    backward (weights + optimizer state from the previous step + saved activations + the loss's temporaries;
    gradients were freed by zero_grad(set_to_none=True)); under checkpointing, the backward of a recomputed layer
    (the loss temporaries are gone; one layer is recomputed at a time while gradients accumulate: the peak is at
    the last one, with nearly all gradients); the end of backward with a tied embedding (tied_embedding_sum_bytes);
    the optimizer step (weights + gradients + optimizer state + CUDA's default foreach AdamW's temporary of one
    trainable-parameter size: bench/estimate_measurements.json cuda_foreach_optimizer_step, Mistral-7B full
    54.4 -> 67.4 GiB)."""
    models = models_bytes(p)
    base = (("weights", w), ("models", models), ("optimizer", opt))
    out = []
    if p.checkpointing:
        ck = checkpoint_inputs_bytes(p)
        out.append(Moment("start of backward", base + (("checkpoints", ck), ("logits", consumers["logits"]))))
        out.append(Moment("backward of a recomputed layer", base + (
            ("checkpoints", ck), ("gradients", gr), ("recomputed", consumers["activations"] - ck),
            ("recomputed_attention", recomputed_attention_bytes(p)))))
        if (tower := vision.recomputed_bytes(p.vision, p.batch, p.act_bytes, p.lora_r)):
            # the tower's backward runs last: the text layers' checkpoints are freed, its own are not
            out.append(Moment("backward of a recomputed vision block", base + (
                ("checkpoints", vision.checkpoint_bytes(p.vision, p.batch, p.act_bytes, p.lora_r)),
                ("gradients", gr), ("recomputed", tower))))
    else:
        out.append(Moment("start of backward", base + (
            ("activations", consumers["activations"]), ("attention", consumers["attention"]),
            ("logits", consumers["logits"]))))
    if (tied := tied_embedding_sum_bytes(p)):
        out.append(Moment("end of backward", base + (("gradients", gr), ("embedding_sum", tied))))
    n, b = trainable(p)
    foreach = n * b if p.optimizer in FOREACH_STEP else 0
    out.append(Moment("optimizer step", (("weights", w), ("models", models), ("gradients", gr), ("optimizer", opt),
                                         ("step", shard(p, 0, 0, foreach)[2]))))
    return tuple(Moment(m.name, tuple(r for r in m.rows if r[1])) for m in out)


def _core(p: Plan) -> Estimate:
    w, gr, (opt, paged) = weights_bytes(p), gradients_bytes(p), optimizer_bytes(p)
    w, gr, opt = shard(p, w, gr, opt)
    consumers = {"weights": w, "gradients": gr, "optimizer": opt, "activations": activations_bytes(p),
                 "logits": logits_bytes(p), "attention": attention_bytes(p)}
    ms = moments(p, w, gr, opt, consumers)
    top = max(ms, key=lambda m: m.total)  # the first of equals: the earlier moment
    n, _ = trainable(p)
    return Estimate(p, consumers, top.total, top.name, n, paged, moments=ms)


# The change each finding's fix makes to the run: (Plan field, its value when the finding applies, the value after).
FIXES = {"TL101": ("attention", "eager", "sdpa"),  # attn_implementation="sdpa"
         "TL102": ("attention", "sdpa-math", "sdpa"),  # bf16 weights or autocast: a fused SDPA kernel takes them
         "TL301": ("loss", ("full", "chunked-upcast"), "liger")}  # use_liger_kernel=True / cut-cross-entropy


def fix_saving(p: Plan, code: str) -> int:
    """What fixing finding `code` takes off this run's peak: the peak minus the peak of the same run with the fix's
    change (FIXES); 0 when the finding does not apply to the plan or the fix does not lower the peak. The one figure
    for a saving: the rule's message, estimate's lever, and verify's prediction (with and without --simulate)."""
    field_name, before, after = FIXES[code]
    if getattr(p, field_name) not in (before if isinstance(before, tuple) else (before,)):
        return 0
    return max(0, _core(p).peak - _core(replace(p, **{field_name: after})).peak)


def saving_of(p: Plan, code: str) -> int | None:
    """fix_saving for a finding whose fix the estimate prices (FIXES); None for one it does not: verify then has
    the runs' difference only."""
    return fix_saving(p, code) if code in FIXES else None


def estimate(p: Plan) -> Estimate:
    est = _core(p)
    return replace(est, levers=tuple(levers(p, est)))


def levers(p: Plan, est: Estimate):
    """The lesson's levers table, each priced for this plan: what the peak would be with it."""
    out = []

    def try_(name: str, cost: str, **changes):
        other = _core(replace(p, **changes))
        saves = est.peak - other.peak
        if saves > 0:
            out.append(Lever(name, saves, cost))

    def fix(code: str, name: str, cost: str):
        if (saves := fix_saving(p, code)) > 0:
            out.append(Lever(name, saves, cost, code))

    fix("TL101", "SDPA / flash attention", "none at this scale; flash_attention_2 needs flash-attn and a CUDA GPU")
    fix("TL102", "a fused SDPA kernel instead of the math one: bf16 autocast (bf16=True) or bf16 weights",
        "none on an Ampere or newer GPU (bf16 numerics)")
    if p.jsd_positions is not None:  # GKD (TL301's GKD advice: a fused JSD per TRL version, or DistillationTrainer)
        fix("TL301", "a fused or chunked JSD (use_liger_kernel on TRL 0.22-1.13, or DistillationTrainer)",
            "another trainer on TRL >= 1.14")
    else:
        fix("TL301", "fused or chunked cross-entropy (Liger, TRL chunked loss)", "liger-kernel needs a CUDA GPU")
    if not p.checkpointing:
        try_("gradient checkpointing", "about one extra forward pass per step (~30% slower)", checkpointing=True)
    if p.batch > 1:
        half = max(1, p.batch // 2)
        try_(f"micro-batch {half} + twice the gradient accumulation", "more steps per update, same effective batch",
             batch=half)
    if p.optimizer in ("adamw", "adam", "adamw_torch", "adamw_torch_fused", "adamw_hf") and est.trainable:
        try_("8-bit or paged optimizer", "tiny quality risk (bitsandbytes)", optimizer="adamw_8bit")
    if not p.lora_r:
        try_("LoRA (r=16, all linear layers)", "slight quality risk", lora_r=16, lora_targets=("all-linear",))
        if p.quantization is None:
            try_("QLoRA (4-bit base + LoRA)", "slight quality risk, slower steps", lora_r=16,
                 lora_targets=("all-linear",), quantization="4bit")
    elif p.quantization is None:
        # the frozen base in NF4 (bitsandbytes, load_in_4bit): QLoRA with the script's own adapters
        try_("4-bit base weights (QLoRA: load_in_4bit)", "slight quality risk, slower steps (bitsandbytes, CUDA)",
             quantization="4bit")
    if p.batch == 1 and p.seq >= 1024:  # at batch 1 the micro-batch cannot shrink: the sequence can
        try_(f"sequences of {p.seq // 2:,} tokens instead of {p.seq:,}", "the model sees less context per example",
             seq=p.seq // 2)
    if p.sharding != "zero3":
        n = max(p.world_size, 8) if p.world_size <= 1 else p.world_size
        try_(f"FSDP / ZeRO-3 over {n} GPUs", "communication between GPUs", sharding="zero3", world_size=n)
    if est.consumers["optimizer"] and not p.optimizer.startswith("paged_"):
        # optimizer state is resident in both phases of the peak, so offloading it saves all of it
        out.append(Lever("CPU offload of optimizer state", est.consumers["optimizer"], "much slower steps"))
    return sorted(out, key=lambda lever: -lever.saves)


def graph_bytes(p: Plan) -> int:
    """What one forward's autograd graph keeps until a backward frees it (TL203: a graph nothing frees): the
    saved activations of every layer (checkpointing applies only in training mode, so not counted), eager
    attention's scores, and the fp32 log-softmax output the cross-entropy saves (4 bytes per logit)."""
    full = replace(p, checkpointing=False)
    g = p.geometry
    return activations_bytes(full) + attention_bytes(full) + 4 * p.batch * p.seq * g.vocab
