"""The phases besides the training step: the evaluation step (eval_peak, eval_logits_bytes, TRL's fused LM head
under no_grad) and generation (HF `generate`'s KV cache, the no-grad log-probability forwards, PPO's value-head
scoring, vLLM's share), and phase_peaks, the per-phase figure `estimate` reports and `verify` compares. Plain
arithmetic over the same Plan as memory.estimate (the training step), each term citing its source.
"""

from __future__ import annotations

from dataclasses import replace

from trainlint.memory.estimate import (FUSED_HEAD_COLUMNS, FUSED_HEAD_CPU_EXTRA, FUSED_HEAD_ROWS, Geometry, Plan, _core,
                                       activation_bytes_per_layer, jsd_loss_bytes, logits_bytes, models_bytes,
                                       optimizer_bytes, shard, weights_bytes)


# Bytes per logit of one eval step's forward with labels under no_grad (LM head output + ForCausalLMLoss's fp32 upcast +
# cross_entropy), measured by verify's live-bytes tracker on CPU (tests/test_eval_phase.py, a real Trainer.evaluate()
# of a tiny Llama, the slope over vocabularies 4,096 and 16,384): 10.0 for fp32 weights, 11.0 for bf16 weights.
EVAL_STEP_BYTES = {4: 10, 2: 11}

# TRL >= 1.15's fused LM head under no_grad: memory.estimate FUSED_HEAD_ROWS, FUSED_HEAD_COLUMNS, FUSED_HEAD_CPU_EXTRA.


def fused_head_nograd_bytes(p: Plan, tokens: int) -> int:
    """The fused LM head's working set over `tokens` scored positions under no_grad (FUSED_HEAD_ROWS): the
    32,768-column tile buffer, plus on CPU the fp32 copies of each tile (as wide as the vocabulary's chunk)."""
    rows = min(tokens, FUSED_HEAD_ROWS)
    extra = FUSED_HEAD_CPU_EXTRA * min(FUSED_HEAD_COLUMNS, p.geometry.vocab) if p.device == "cpu" else 0
    return rows * (FUSED_HEAD_COLUMNS * p.act_bytes + extra)


def eval_logits_bytes(p: Plan) -> int:
    """The logits part of the evaluation step's peak. With logits: the step's forward and loss, plus the eval
    batches `all_preds` keeps on the GPU; its `torch.cat` (trainer_pt_utils.py `EvalLoopContainer.add`,
    `torch_pad_and_concatenate`) holds the old and the new container at once, so the last step peaks at 2 x the kept
    batches. Without logits (Liger's `skip_logits`, TRL's fused LM head): the training loss path at the eval batch."""
    e = p.evaluation
    if e is None:
        return 0
    g = p.geometry
    if e.jsd:  # GKD: the two models' logits and the no-grad JSD; the eval loop may keep the student's logits
        step = jsd_loss_bytes(replace(p, batch=e.batch), grad=False)
        if not e.kept_bytes:
            return step
        kept, n = e.batch * p.seq * g.vocab * e.kept_bytes, max(e.kept_batches or 1, 1)
        return max(step + (n - 1) * kept, 2 * n * kept)
    if not e.logits:
        # (the training step's fused-head figure bills its backward; under no_grad the loss path's flat figure stays)
        return logits_bytes(replace(p, batch=e.batch, reference_logits=False, fused_head=False))
    if g.head_width is not None:  # a classifier's num_labels-wide logits (knowledge/heads.py)
        return loss_peak_bytes(e.batch, p.seq if g.head_per_token else 1, g.head_width, p.act_bytes) if g.head_width \
            else 0
    elements = e.batch * p.seq * g.vocab
    step = elements * EVAL_STEP_BYTES.get(p.dtype_bytes, 11)
    if e.reference_logits:  # the reference's logits, alive with the policy's (as logits_bytes bills in training)
        step += elements * p.act_bytes
    if not e.kept_bytes:
        return step
    kept, n = elements * e.kept_bytes, max(e.kept_batches or 1, 1)
    return max(step + (n - 1) * kept, 2 * n * kept)


def eval_peak(p: Plan) -> int:
    """The evaluation step's peak: weights and optimizer state (resident; sharded as in training), one layer's
    working set at the eval batch (no_grad: each layer's tensors are freed after it), and eval_logits_bytes."""
    e = p.evaluation
    if e is None:
        return 0
    if e.generation is not None:  # a generation round at the eval batch; its no-grad loss is the round's scoring
        return generation_peak(replace(p, generation=e.generation))
    w, _, opt = shard(p, weights_bytes(p), 0, optimizer_bytes(p)[0])
    g = p.geometry
    evaluated = replace(p, batch=e.batch, lora_r=None)
    if g.moe_dense_eval or g.moe_dense_train:  # every expert's tensors for every token (transient under no_grad)
        evaluated = replace(evaluated, geometry=replace(g, moe_top_k=g.moe_experts))
    layer = activation_bytes_per_layer(evaluated, e.batch * p.seq)
    if e.jsd:
        # the loss runs after both forwards' layers are freed (no_grad): the larger of one layer's working set and
        # the loss (bench/rl_measurements.json, GKD's evaluation step: the loss alone above the resident state)
        return w + models_bytes(p) + opt + max(layer, eval_logits_bytes(p))
    if e.fused_head and not e.logits:
        # no logits-sized tensor: the head runs after the last layer's tensors are freed, so the step peaks at the
        # larger of one layer's working set and the head's (bench/measure_rl.py, DPO's eval step)
        return w + models_bytes(p) + opt + max(layer, fused_head_nograd_bytes(p, e.batch * p.seq))
    return w + models_bytes(p) + opt + layer + eval_logits_bytes(p)


def kv_cache_bytes(g: Geometry, rows: int, tokens: int, act_bytes: int) -> int:
    """HF `generate`'s DynamicCache: keys and values of every layer, [rows x kv_heads x tokens x head_dim] each, in
    the activation dtype (transformers cache_utils.py DynamicLayer.update: torch.cat of the new keys/values)."""
    return 2 * g.layers * g.kv_heads * g.head_dim * rows * tokens * act_bytes


def logps_forward_bytes(p: Plan, rows: int, completion: int) -> int:
    """One no-grad forward of the per-token log-probabilities over `rows` completions: the [rows x completion x
    vocab] logits (TRL keeps `logits[:, -logits_to_keep:]`), their copy divided by the temperature
    (`logits / self.temperature`: 0.17.0 grpo_trainer.py:830, 1.14.2 the same), and selective_log_softmax's
    temporary (fp32/fp64: `torch.logsumexp`, one more full-size tensor; 16-bit: a per-row log_softmax loop, one row:
    trl/trainer/utils.py `selective_log_softmax`). With the fused LM head (TRL >= 1.15) its no-grad working set
    (fused_head_nograd_bytes): CUDA scores the labelled positions only (trl 1.16.0 trainer/utils.py:1640-1646,
    `compact` under Triton), the CPU path every position of prompt + completion."""
    g = p.geometry
    elements = rows * completion * g.vocab
    if p.generation is not None and p.generation.fused_logps:
        scored = completion if p.device == "cuda" else p.generation.prompt + p.generation.completion
        return fused_head_nograd_bytes(p, rows * scored)
    temp = elements * p.act_bytes if p.act_bytes >= 4 else completion * g.vocab * 4
    return 2 * elements * p.act_bytes + temp


def value_head_logps_bytes(p: Plan, rows: int, tokens: int) -> int:
    """trl <= 0.9.6's value-head scoring forward under no_grad (LLaMA-Factory's PPO `batched_forward_pass`): the
    [rows x tokens x vocab] logits in the activation dtype, their fp32 upcast (trl 0.9.6
    models/modeling_value_head.py:189-190 `lm_logits.float()`; the 16-bit ones are freed only when the model's output
    is, after the upcast) and `logprobs_from_logits`' full fp32 log_softmax before its gather (trl 0.9.6
    core.py:131-140)."""
    elements = rows * tokens * p.geometry.vocab
    upcast = 0 if p.act_bytes >= 4 else 4 * elements
    return elements * p.act_bytes + upcast + 4 * elements


def generation_parts(p: Plan) -> tuple[tuple[str, int], ...]:
    """generation_parts_of the generating model; with GKD's seq_kd the teacher's generation (its geometry and
    activation width) too, and the larger of the two (they never overlap: the teacher's KV cache is freed when its
    `generate` returns, before the student's starts)."""
    gen = p.generation
    if gen is None or (gen.teacher is None and gen.student):
        return generation_parts_of(p)
    own = generation_parts_of(p) if gen.student else ()
    geometry, width = gen.teacher if gen.teacher is not None else (None, None)
    teacher = generation_parts_of(replace(p, geometry=geometry or p.geometry, act_bytes=width or p.act_bytes,
                                          generation=replace(gen, teacher=None, student=True)))
    return max(own, teacher, key=lambda parts: sum(b for _, b in parts))


def generation_parts_of(p: Plan) -> tuple[tuple[str, int], ...]:
    """What the generation phase holds besides the resident weights, models and optimizer state (gradients were
    freed by zero_grad): HF `generate` (the KV cache for rows x (prompt + completion), one layer's working set for
    one token per row, the last position's fp32 logits for sampling), or, with vLLM, nothing of the generation on this
    process (colocated vLLM's share is the card's, Plan.vllm_share); then the no-grad log-probabilities forward
    (old policy / reference: logps_forward_bytes) at `logps_rows`, with one layer's working set. The larger is the
    phase's peak."""
    gen = p.generation
    if gen is None:
        return ()
    g = p.geometry
    tokens = gen.prompt + gen.completion
    layer = activation_bytes_per_layer(replace(p, lora_r=None), gen.logps_rows * tokens)
    head = value_head_logps_bytes(p, gen.logps_rows, tokens) if gen.scores_prompt else \
        logps_forward_bytes(p, gen.logps_rows, gen.completion) if gen.logps_rows else 0
    # the fused head runs after the last layer's tensors are freed (no logits-sized tensor outlives it)
    scoring = max(layer, head) if gen.fused_logps else head + layer
    if gen.vllm is not None:
        return (("logps", scoring),)
    if gen.kept_logits:
        # batch_generation: each chunk of logps_rows rows generates with its own cache while the logits of the rows
        # before it are kept (fp32); `pad` copies them all at the end (2 x); the scoring loop holds them while each
        # chunk's reference forward builds its logits (`scoring`). The phase peaks at the largest of the three.
        kept = gen.rows * gen.completion * g.vocab * 4
        kv = kv_cache_bytes(g, gen.logps_rows, tokens, p.act_bytes)
        step = activation_bytes_per_layer(replace(p, lora_r=None), gen.logps_rows) + gen.logps_rows * g.vocab * 4
        moments = ((("generation_logits", 2 * kept),),
                   (("generation_logits", kept), ("kv_cache", kv), ("generate_step", step)),
                   (("generation_logits", kept), ("logps", scoring)))
        return max(moments, key=lambda parts: sum(b for _, b in parts))
    if not gen.cache:  # the last decoding step: one layer's no-grad working set over every row's whole prefix
        step = activation_bytes_per_layer(replace(p, lora_r=None), gen.rows * tokens) + gen.rows * g.vocab * 4
        return (("generate_step", step),) if step >= scoring else (("logps", scoring),)
    kv = kv_cache_bytes(g, gen.rows, tokens, p.act_bytes)
    step = activation_bytes_per_layer(replace(p, lora_r=None), gen.rows) + gen.rows * g.vocab * 4
    return (("kv_cache", kv), ("generate_step", step)) if kv + step >= scoring else (("logps", scoring),)


def generation_peak(p: Plan) -> int:
    """The generation phase's peak (0: none): resident weights, other models, optimizer state, generation_parts."""
    if p.generation is None:
        return 0
    w, _, opt = shard(p, weights_bytes(p), 0, optimizer_bytes(p)[0])
    return w + models_bytes(p) + opt + sum(b for _, b in generation_parts(p))


def phase_peaks(p: Plan) -> dict[str, int]:
    """The peak of each phase the plan has: "train" (the training step: estimate's peak), "generation"
    (generation_peak) and "eval" (eval_peak) where it has them. The one per-phase figure `verify` puts beside what
    it measures, with and without --simulate."""
    out = {"train": _core(p).peak}
    if p.generation is not None:
        out["generation"] = generation_peak(p)
    if p.evaluation is not None:
        out["eval"] = eval_peak(p)
    return out
