"""What a script trains, as a memory Plan: read from its Run (trainlint.run: model, dtype, quantization, LoRA,
checkpointing, attention, loss path, batch, sequence length, optimizer, sharding, eval phase). Every value the
script does not fix is listed as an assumption (the Run's notes, in this order); nothing is silently invented.
Command-line overrides (--batch, --seq, --world-size) apply on top of the Run."""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainlint.config import for_path
from trainlint.context import FileContext
from trainlint.facts import ModelLoad
from trainlint.memory.estimate import Plan, jsd_loss_tensors
from trainlint.run import PlanError, resolve
from trainlint.knowledge import trl_trainers as T
from trainlint.run.model import training_model
from trainlint.run.components import distillation_completion, distillation_logits_bytes, gkd_single_kl

__all__ = ["Overrides", "PlanError", "plan_for", "training_model"]


@dataclass(frozen=True)
class Overrides:
    batch: int | None = None
    seq: int | None = None
    world_size: int | None = None


def plan_for(ctx: FileContext, overrides: Overrides) -> tuple[Plan, ModelLoad, list[str], list[str]]:
    """(plan, model, assumptions, unknowns). unknowns name the consumers that rest on values not known."""
    run = resolve(ctx)
    trained = run.trained
    if trained is None:
        raise PlanError("no model load found (from_pretrained, from_config, a model class, or a TRL trainer's model=)")
    model = trained.load
    notes: list[str] = []
    geo = trained.geometry
    notes += geo.notes
    precision = trained.precision
    notes += precision.notes
    w, act = precision.value
    lora = run.lora
    notes += lora.notes
    w = _fsdp2_upcast(ctx, model, w, lora.value is not None, notes)
    attention = trained.kernel
    notes += attention.notes
    gc = run.checkpointing.on
    notes += gc.notes
    unknown: list[str] = []
    shape = run.batch
    batch = overrides.batch or shape.micro.value
    seq = overrides.seq or shape.seq_len.value
    if batch is None:
        unknown.append("batch")
    elif not overrides.batch and ctx.batch.via == "library default":
        notes.append(f"batch {batch}: the library default (per_device_train_batch_size)")
    images = run.images
    if images.value is not None and not overrides.seq:
        tokens = images.value.per_sample
        notes += images.notes
        if seq is None:  # TRL's vision advice is max_length=None: the sample is as long as its image makes it
            seq = tokens
            notes.append(f"sequence length not set: taken as the {tokens:,} image tokens of one sample (the text "
                         f"tokens are not counted); pass --seq")
        elif tokens > seq:  # max_length bounds text and image tokens together (trl 1.16.0 sft_trainer.py l.488-495)
            notes.append(f"max length {seq:,} is shorter than one image's {tokens:,} tokens: truncation cuts an "
                         f"image's tokens, which the model rejects (image features and image tokens do not match)")
    tower = run.tower
    notes += tower.notes
    if seq is None:
        unknown.append("sequence length")
    elif not overrides.seq and ctx.seq_len.via == "SFTConfig.max_length default":
        notes.append(f"sequence length {seq}: SFTConfig's default max_length")
    loss = run.loss
    trl_shape = loss.shape
    if trl_shape is not None and batch is not None:
        if trl_shape.rows > 1:
            batch *= trl_shape.rows
            notes.append(f"{trl_shape.trainer} runs chosen and rejected together: {trl_shape.rows} x the batch per "
                         f"forward")
        if trl_shape.reference is not None:
            notes.append(f"{trl_shape.trainer} builds the {trl_shape.reference} model's logits in the same step")
    jsd_positions = None
    jsd_trainer = trl_shape.trainer if trl_shape is not None and loss.path.value == "full" and (
        trl_shape.trainer == "GKDTrainer" or (trl_shape.trainer == "DistillationTrainer"
                                              and T.distillation_jsd(run.versions.trl))) else None
    if jsd_trainer is not None:
        # the generalized JSD's vocabulary-sized tensors (memory.estimate.jsd_loss_bytes) over every position from
        # TRL 1.8, over the completion before (knowledge/trl_trainers.py "GKD"); resolved below, once the completion
        # length (max_new_tokens) is known
        jsd_positions = -1
    elif batch is not None and run.components.trainer is not None:
        # a fused / chunked loss still runs chosen and rejected as one batch (knowledge/trl_trainers.py LOSS rows)
        row = T.loss_row(run.components.trainer, run.versions.trl)
        if row is not None and row.rows > 1 and loss.path.value != "full":
            batch *= row.rows
            notes.append(f"{run.components.trainer} runs chosen and rejected together: {row.rows} x the batch per "
                         f"forward")
    if loss.reference_copy is not None:
        notes.append(f"{loss.reference_copy} keeps a frozen copy of the model as its reference (no PEFT, no "
                     f"ref_model, no precompute_ref_log_probs)")
    models, reference_weights = _components(run, geo.value, w, loss.reference_copy is not None, notes)
    gen = run.generation
    notes += gen.notes
    generation = None
    logits_seq = None
    if gen.value is not None:
        g = gen.value
        generation = g.phase()
        if generation.teacher is not None:  # GKD's seq_kd: the teacher generates with its own model
            generation = replace(generation, teacher=_teacher_generation(run, geo.value, notes))
        if not overrides.seq and (seq is None or not shape.seq_len.certain or g.scores_prompt):
            # the training forward runs on prompt + completion (LLaMA-Factory's PPO: cutoff_len bounds the prompt,
            # max_new_tokens are generated after it)
            seq = g.prompt + g.completion
            unknown = [u for u in unknown if u != "sequence length"]
        # logits_to_keep: only the completion's logits (LLaMA-Factory's PPO: every position's, through the value head)
        # (GKD: the student's logits of every position: its forward has no logits_to_keep)
        logits_seq = None if g.scores_prompt or not g.completion_logits else min(g.completion, seq)
        # (GRPO 0.14 trains on prompts x num_generations; PPO's and old RLOO's micro-batch is the batch itself, the
        # rollout's rows are split into per_device_train_batch_size micro-batches: 0.19.1 ppo_trainer.py:542-549)
        if g.rows != (batch or g.rows) and not T.counts_completions(g.trainer, run.versions.trl) and batch \
                and not g.kept_logits:
            batch = batch * (g.rows // batch) if g.rows % batch == 0 else batch
    jsd_mask_copy = 0
    jsd_bytes = None
    single_kl = gkd_single_kl(ctx) if jsd_positions is not None else None
    if jsd_positions is not None:
        width = distillation_logits_bytes(ctx)
        jsd_bytes = width.value
        notes += [n for n in width.notes if n not in notes]
        if width.value == 4:
            notes.append(f"{jsd_trainer}'s logits and generalized JSD in fp32: {width.why}")
        if jsd_trainer == "GKDTrainer":
            full_seq = T.gkd_jsd_full_sequence(run.versions.trl)
            completion = gen.value.completion if gen.value is not None else None
            jsd_positions = (seq or 1) if full_seq or completion is None else min(completion, seq or completion)
            labelled = min(completion, jsd_positions) if completion is not None else jsd_positions
        else:  # DistillationTrainer 1.3-1.9: the completion's positions (knowledge/trl_trainers.py "Distillation")
            full_seq = False
            completion = distillation_completion(ctx)
            notes += completion.notes
            jsd_positions = labelled = min(completion.value, seq or completion.value)
        if single_kl.value == 1:
            # the reverse KL keeps exp(student) and (student - teacher) for backward, and `jsd[mask]` copies the
            # labelled positions while they are alive (memory.estimate jsd_loss_bytes)
            jsd_mask_copy = labelled
        notes.append(f"{jsd_trainer}'s generalized JSD over {'every position' if full_seq else 'the completion'} "
                     f"({jsd_positions:,} per row{'; ' + single_kl.why if single_kl.value is not None else ''}): "
                     f"~{jsd_loss_tensors(jsd_positions, seq or 1, single_kl.value is not None, jsd_mask_copy):.1f} "
                     f"vocabulary-sized tensors per row-token")
    sharding = run.sharding
    notes += sharding.notes
    world = overrides.world_size
    stated = for_path(ctx.settings.world_sizes, ctx.path, ctx.settings.root) if world is None else None
    if stated is not None:
        world = stated[1]
        notes.append(f"{world} processes ({ctx.settings.source} world-size.\"{stated[0]}\")")
    launched = ctx.launch.world_size
    if world is None and launched is not None and launched.known and isinstance(launched.value, int) and \
            not isinstance(launched.value, bool) and launched.value > 0:
        world = launched.value  # the launch's processes (torchrun / accelerate / deepspeed / Slurm), as `estimate`
        if sharding.value:
            notes.append(f"{sharding.value} over {world} processes ({launched.via})")
    world = world or 1
    if sharding.value and not overrides.world_size and stated is None and (launched is None or not launched.known):
        notes.append(f"{sharding.value} sharding found: assumed 1 GPU; pass --world-size")
    offloaded = run.offload
    notes += offloaded.notes
    optim = run.optimizer
    notes += optim.notes
    evaluation = run.evaluation
    notes += evaluation.notes
    plan = Plan(
        geometry=geo.value,
        batch=batch or 1,
        seq=seq or 1,
        dtype_bytes=w,
        act_bytes=act,
        quantization=model.quantization.value if model.quantization.known else None,
        lora_r=lora.value.rank if lora.value is not None else None,
        lora_targets=(lora.value.targets if lora.value is not None else ()) or ("q_proj", "v_proj"),
        lora_parameters=lora.value.parameters if lora.value is not None else (),
        checkpointing=bool(gc.value),
        vision=tower.value,
        attention=attention.value,
        loss=loss.path.value,
        loss_chunks=loss.chunks or 1,
        fused_head=loss.fused_head,
        reference_logits=trl_shape is not None and trl_shape.reference is not None,
        reference_weights=reference_weights,
        models=models,
        logits_seq=logits_seq,
        generation=generation,
        jsd_positions=jsd_positions,
        jsd_single_kl=single_kl is not None and single_kl.value is not None,
        jsd_mask_copy=jsd_mask_copy,
        jsd_bytes=jsd_bytes,
        vllm_share=gen.value.vllm_share if gen.value is not None and gen.value.vllm == "colocate" else 0.0,
        optimizer=optim.value,
        world_size=world,
        sharding=sharding.value,
        offload=offloaded.value,
        evaluation=evaluation.value,
        assumptions=tuple(notes),
    )
    return plan, model, notes, unknown


def _components(run, geometry, policy_bytes: int, copy: bool, notes: list[str]):
    """(Plan.models, Plan.reference_weights) from the Run's components: the DPO / KTO copy in the policy's dtype stays
    the weights' reference_weights (as before); every other resident model is a row of its own, in its dtype."""
    comps = run.components
    models: list[tuple[str, int]] = []
    reference_weights = False
    for c in comps.items:
        if c.role == "policy":
            continue
        notes += [n for n in c.resident.notes if n not in notes]
        if not c.resident.value:
            continue
        width = c.dtype_bytes.value or policy_bytes
        if c.role == "reference" and c.how == "copy" and copy and width == policy_bytes:
            reference_weights = True
            continue
        if c.model_id is not None:
            params = _named_params(run.ctx, c.model_id, geometry, c.role, notes)
        elif c.same_model or c.load is None:
            params = geometry.params
        else:
            other = run.model(c.load).geometry
            params = other.value.params if other.value is not None else geometry.params
        models.append((c.role, params * width))
        notes.append(f"{comps.trainer} keeps its {c.role} model resident ({c.how}, "
                     f"{ {2: '16-bit', 4: 'fp32', 1: '8-bit'}.get(width, f'{width} bytes') }; {c.resident.why})")
    return tuple(models), reference_weights


def _teacher_generation(run, geometry, notes: list[str]):
    """(the teacher's Geometry, its bytes per weight) for GKD's seq_kd generation (memory.estimate
    GenerationPhase.teacher): a model the script loads has its own geometry; one named by id takes the catalog's
    dimensions on the trained model's kind of decoder (its norms and attention flags); (None, ...) when it is the
    trained model's or not known."""
    from dataclasses import replace as dc_replace

    from trainlint.knowledge.models import lookup_model

    teacher = run.components.get("teacher")
    if teacher is None:
        return None, None
    width = teacher.dtype_bytes.value
    if teacher.load is not None:
        g = run.model(teacher.load).geometry
        return (g.value if g.value is not None else None), width
    if teacher.model_id is not None:
        ctx = run.ctx
        spec = lookup_model(teacher.model_id, ctx.path.parent, None, ctx.settings.models, ctx.settings.root)
        dims = None if spec is None else dict(vocab=spec.vocab_size, hidden=spec.hidden_size, layers=spec.num_layers,
                                              heads=spec.num_heads, kv_heads=spec.num_kv_heads,
                                              head_dim=spec.head_dim, intermediate=spec.intermediate_size)
        if dims is not None and all(v is not None for v in dims.values()):
            return dc_replace(geometry, **dims, params=_named_params(ctx, teacher.model_id, geometry, "teacher",
                                                                       notes), moe_experts=0, moe_top_k=0), width
        notes.append(f"the teacher's generation (seq_kd) counted at the trained model's geometry: "
                     f"{teacher.model_id!r} is not known")
    return None, width


def _named_params(ctx: FileContext, model_id: str, geometry, role: str, notes: list[str]) -> int:
    """The parameters of a model the trainer loads itself from `model_id` (a teacher or reward model by name:
    knowledge/models lookup_model, as for the script's own loads); the policy's when it is not known, said in
    `notes`."""
    from trainlint.knowledge.models import lookup_model
    from trainlint.run.model import llama_like_params

    spec = lookup_model(model_id, ctx.path.parent, None, ctx.settings.models, ctx.settings.root)
    if spec is not None and spec.num_parameters:
        return spec.num_parameters
    dims = None if spec is None else dict(vocab=spec.vocab_size, hidden=spec.hidden_size, layers=spec.num_layers,
                                          heads=spec.num_heads, kv_heads=spec.num_kv_heads, head_dim=spec.head_dim,
                                          intermediate=spec.intermediate_size)
    if dims is not None and all(v is not None for v in dims.values()):
        return llama_like_params(dims, bool(spec.tie_word_embeddings))
    notes.append(f"{role} model {model_id!r} unknown: counted at the trained model's size")
    return geometry.params


def _fsdp2_upcast(ctx: FileContext, model, w: int, lora: bool, notes: list[str]) -> int:
    """accelerate's FSDP2 path upcasts parameters to fp32 when mixed precision is on (the compute stays in the
    16-bit `MixedPrecisionPolicy.param_dtype`): the whole model in accelerate 1.6.0-1.12.x (1.6.0
    utils/fsdp_utils.py:562-565, 1.12.0 :709-712 `model = model.to(torch.float32)`; huggingface/accelerate#3844: a LoRA
    run's frozen base doubles), only the trainable parameters from 1.13.0 (:733-740 `if param.requires_grad`),
    and nothing for a 4-bit model (`model_has_params4bit`); 1.5.2 has no FSDP2 path. The weights' bytes for this
    run, with the reason in `notes`."""
    launched = ctx.launch.fsdp2_mixed
    if launched is None or not launched.is_(True) or w >= 4:
        return w
    if model.quantization.known and model.quantization.value:
        return w
    from trainlint.knowledge.versions import accelerate_release, parse_version

    release, why = accelerate_release(ctx.path.parent)
    v = parse_version(release)
    if v < (1, 6):
        return w
    if lora and v >= (1, 13):
        notes.append(f"accelerate {release} ({why}) FSDP2 upcasts only the trainable parameters (the LoRA adapters) "
                     f"to fp32")
        return w
    what = "the whole model, the frozen base included," if lora else "the trained parameters"
    notes.append(f"{launched.via}: accelerate {release} ({why}) upcasts {what} to fp32 (fsdp2_prepare_model); the "
                 f"compute stays 16-bit")
    return 4

