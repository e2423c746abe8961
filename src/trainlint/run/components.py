"""The models a run keeps on the GPU besides the policy (reference, reward, value, teacher) and the generation phase
of the RL trainers (GRPO, RLOO, Online DPO): per TRL trainer, version and setting.

Library facts: knowledge/trl_trainers.py ("Components" and "Generation", each row read from the released wheels and
cited there). Each component carries whether it is resident, its dtype, and whether that rests on a default the
caller could override (`Decided.certain`) with the setting that would drop it (`drop`).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.context import FileContext
from trainlint.diagnostics import Span
from trainlint.facts import TrainerCall
from trainlint.facts.model import FrameworkModel
from trainlint.facts.values import UNSET
from trainlint.knowledge import trl_trainers as T
from trainlint.run.decided import Decided
from trainlint.run.model import training_model
from trainlint.run.precision import byte_widths


@dataclass(frozen=True)
class Component:
    """One model of the run: `role` ("policy" | "reference" | "reward" | "value" | "teacher"), `how` (how it comes
    to be: "copy" of the policy, "loaded" by the script, "adapter disabled" (no second model), "judge", ...),
    `resident` (kept on the GPU through training), `dtype_bytes` (per parameter; None: the policy's), `same_model`
    (the policy's geometry; else `load` is the script's own model load), `drop` (a setting that would leave it out),
    `span` (where the deciding setting or model is written)."""

    role: str
    how: str
    resident: Decided[bool]
    dtype_bytes: Decided[int | None]
    same_model: bool = True
    load: object | None = None  # facts.ModelLoad
    drop: str | None = None
    span: Span | None = None
    # a model the trainer loads itself from this hub id or path (`teacher_model="Qwen/Qwen2.5-7B"`): its own geometry
    # (planning looks it up), not the policy's
    model_id: str | None = None


@dataclass(frozen=True)
class Components:
    trainer: str | None  # the TRL trainer deciding them (None: no TRL RL / preference trainer)
    items: tuple[Component, ...] = ()

    def resident(self, role: str | None = None) -> tuple[Component, ...]:
        return tuple(c for c in self.items if c.resident.value and (role is None or c.role == role))

    def get(self, role: str) -> Component | None:
        return next((c for c in self.items if c.role == role), None)


def rl_trainer(ctx: FileContext) -> TrainerCall | None:
    """The first TRL trainer that is not SFT (the one whose components and phases are modelled), or a framework
    config's trainer that subclasses one (`TrainerCall.trl_base`: LLaMA-Factory's CustomDPOTrainer)."""
    return next((t for t in ctx.facts.trainers if (t.library == "trl" and t.class_name != "SFTTrainer")
                 or (t.trl_base is not None and t.trl_base != "SFTTrainer")), None)


def trl_name(trainer: TrainerCall) -> str:
    """The TRL trainer whose components and phases apply: the framework class's TRL base, else the class."""
    return trainer.trl_base or trainer.class_name


def _framework_component(fm: FrameworkModel) -> Component:
    """A model the framework decides itself (frameworks/ reads it from its source): its dtype is the policy's (the
    framework loads the same model with the same arguments), a different model is sized as the policy's."""
    notes = (f"the {fm.role} model {fm.model_id}: sized as the policy's model",) if fm.model_id else ()
    return Component(fm.role, fm.how, Decided(fm.resident, fm.span, True, fm.why, notes), Decided(None),
                     drop=fm.drop, span=fm.span)


def _args_value(ctx: FileContext, trainer: TrainerCall, key: str):
    args = ctx.trainer_args(trainer)
    return args.get(key) if args is not None else UNSET


def _model_kw(ctx: FileContext, trainer: TrainerCall, key: str):
    """(the Value of keyword `key`, the script's model load it names or None)."""
    value = trainer.call.kw(key)
    name = dict(trainer.call.kw_names).get(key)
    named = [m for m in ctx.facts.models if name is not None and m.variable == name]
    return value, named[0] if len(named) == 1 else None


def _policy_is_peft(ctx: FileContext, trainer: TrainerCall) -> Decided[bool]:
    """The policy is (or becomes) a PeftModel: `peft_config=` given to the trainer or PEFT used in the script."""
    pc = trainer.call.kw("peft_config")
    if not (pc.unset or pc.is_(None)):
        return Decided(True, trainer.call.span, not pc.unknown, "peft_config passed to the trainer")
    return Decided(ctx.uses_peft, None, True, "PEFT in the script" if ctx.uses_peft else "no PEFT")


def _beta(ctx: FileContext, trainer: TrainerCall) -> Decided[float]:
    v = _args_value(ctx, trainer, "beta")
    trl = ctx.versions.trl
    default = T.grpo_beta_default(trl) if trainer.class_name == "GRPOTrainer" else T.RLOO_BETA_DEFAULT
    if v.known and isinstance(v.value, (int, float)) and not isinstance(v.value, bool):
        sure = v.via not in ("library default",) and not v.via.endswith(" default") and not v.assumed
        note = () if sure else (f"beta {v.value}: {trainer.class_name}'s default in TRL {trl.version}",)
        return Decided(float(v.value), v.origin, sure, v.via, note)
    if v.unknown:
        return Decided(default, None, False, "beta not known", (f"beta assumed {default}",))
    return Decided(default, None, False, "library default",
                   (f"beta {default}: {trainer.class_name}'s default in TRL {trl.version}",))


def _reference(ctx: FileContext, trainer: TrainerCall, policy_bytes: int) -> Component | None:
    name, trl = trainer.class_name, ctx.versions.trl
    if name in T.NO_REFERENCE or name not in T.COPIES_POLICY:
        return None
    key = "ref_policy" if name == "RLOOTrainer" and not T.at(trl, (0, 22)) else "ref_model"
    ref, load = _model_kw(ctx, trainer, key)
    peft = _policy_is_peft(ctx, trainer)
    if not (ref.unset or ref.is_(None)):
        # the script's own reference (DPO with PEFT needs force_use_ref_model=True to keep it: 0.19.1 :548)
        dtype = Decided(byte_widths(ctx, load).value[0], None, True) if load is not None else Decided(None, None, False)
        if load is None and ref.known and isinstance(ref.value, str) and name == "DPOTrainer" \
                and not T.at(trl, (0, 29)):
            dtype = _ref_init_kwargs_dtype(ctx, trainer)
        return Component("reference", "loaded", Decided(True, trainer.call.span, True, f"{key}= passed"),
                         dtype, same_model=load is None, load=load, span=trainer.call.span)
    if peft.value:
        return Component("reference", "adapter disabled", Decided(False, peft.span, peft.certain,
                         "the PEFT policy with its adapters disabled is the reference"), Decided(None))
    if name in ("GRPOTrainer", "RLOOTrainer"):
        beta = _beta(ctx, trainer)
        if beta.value == 0.0 and T.beta_zero_drops_reference(name, trl):
            return Component("reference", "none (beta=0.0)", Decided(False, beta.span, beta.certain, "beta=0.0",
                             beta.notes), Decided(None))
        drop = "beta=0.0" if T.beta_zero_drops_reference(name, trl) else None
        sync = _args_value(ctx, trainer, "sync_ref_model")
        why = f"beta={beta.value:g}" + (" and sync_ref_model=True" if sync.is_(True) else "")
        return Component("reference", "copy", Decided(True, beta.span, beta.certain, why, beta.notes),
                         Decided(policy_bytes), drop=drop, span=beta.span)
    if name in ("DPOTrainer", "KTOTrainer"):
        pre = _args_value(ctx, trainer, "precompute_ref_log_probs")
        dropped = pre.is_(True) and T.precompute_drops_reference(name, trl)
        if dropped:
            return Component("reference", "none (precompute_ref_log_probs)", Decided(False, pre.origin, True,
                             "precompute_ref_log_probs=True"), Decided(None))
        dtype = Decided(policy_bytes)
        if T.reference_dtype_source(name, trl) == "model_init_kwargs":
            dtype = _init_kwargs_dtype(ctx, trainer, policy_bytes)
        if pre.is_(True):
            why = (f"DPOTrainer in TRL {trl.version} loads the reference model even with precompute_ref_log_probs="
                   f"True (0.29-1.4: trl dpo_trainer.py 0.29.1:701-713)")
            return Component("reference", "copy", Decided(True, pre.origin, True, why), dtype,
                             drop="upgrade TRL to >= 1.5", span=pre.origin)
        return Component("reference", "copy", Decided(True, None, pre.known or pre.unset, "no ref_model, no PEFT"),
                         dtype, drop="precompute_ref_log_probs=True" if T.precompute_drops_reference(name, trl)
                         else None, span=trainer.call.span)
    # PPO, Online DPO: a copy unless PEFT
    return Component("reference", "copy", Decided(True, None, True, "no ref_model, no PEFT"), Decided(policy_bytes))


def _ref_init_kwargs_dtype(ctx: FileContext, trainer: TrainerCall) -> Decided[int]:
    """DPO <= 0.28 loads a `ref_model` given by name with `ref_model_init_kwargs` (0.19.1 dpo_trainer.py:297-303,
    `_create_model_from_path` :504-530: `torch_dtype` passed through, None leaves transformers' from_pretrained
    default: fp32 before transformers 5, the checkpoint's dtype ("auto") from 5.0)."""
    kw = _args_value(ctx, trainer, "ref_model_init_kwargs")
    if kw.known and isinstance(kw.value, dict) and (kw.value.get("torch_dtype") or kw.value.get("dtype")):
        d = str(kw.value.get("torch_dtype") or kw.value.get("dtype")).split(".")[-1].strip("'\"")
        width = {"bfloat16": 2, "float16": 2, "float32": 4}.get(d)
        if width is not None:
            return Decided(width, kw.origin, True, f"ref_model_init_kwargs dtype {d}")
    if ctx.versions.transformers.at_least(5):
        return Decided(None, None, False, "from_pretrained's dtype='auto' (transformers 5)",
                       ("the reference model in its checkpoint's dtype (transformers 5's from_pretrained default)",))
    return Decided(4, None, kw.known or kw.unset, "ref_model_init_kwargs without torch_dtype: from_pretrained loads "
                   "fp32 (transformers 4)")


def _init_kwargs_dtype(ctx: FileContext, trainer: TrainerCall, policy_bytes: int) -> Decided[int]:
    """DPO 0.29-1.15 loads its reference with `create_model_from_path(model_id, **model_init_kwargs)`, whose dtype
    defaults to float32 (trl utils.py 0.29.1:1053, 1.13.0:1175); when the policy was loaded from the same
    model_init_kwargs (a model id string) the two agree."""
    if any(m.kind == "trainer_string" and m is training_model(ctx) for m in ctx.facts.models):
        return Decided(policy_bytes, None, True, "model_init_kwargs load both")
    kw = _args_value(ctx, trainer, "model_init_kwargs")
    if kw.known and isinstance(kw.value, dict):
        d = str(kw.value.get("dtype", kw.value.get("torch_dtype", "float32"))).split(".")[-1]
        width = {"bfloat16": 2, "float16": 2, "float32": 4, "auto": policy_bytes}.get(d.strip("'\""), 4)
        return Decided(width, kw.origin, True, f"model_init_kwargs dtype {d}")
    if kw.unknown:
        return Decided(4, None, False, "model_init_kwargs not known",
                       ("the reference model in float32: create_model_from_path's default",))
    return Decided(4, None, True, "model_init_kwargs without dtype: create_model_from_path loads float32")


def _teacher_init_kwargs_dtype(ctx: FileContext, trainer: TrainerCall) -> Decided[int | None]:
    """GKDTrainer loads a teacher given by name with `teacher_model_init_kwargs` (knowledge/trl_trainers.py "GKD":
    0.13.0 gkd_trainer.py:109-127, 1.16.0 experimental/gkd/gkd_trainer.py:159-175): its `torch_dtype` (before 1.0) /
    `dtype` (1.x); without one, from_pretrained's default: fp32 with transformers 4, the checkpoint's dtype with 5."""
    trl = ctx.versions.trl
    key = T.teacher_dtype_key(trl)
    kw = _args_value(ctx, trainer, "teacher_model_init_kwargs")
    if kw.known and isinstance(kw.value, dict) and kw.value.get(key) not in (None, "auto"):
        d = str(kw.value.get(key)).split(".")[-1].strip("'\"")
        width = {"bfloat16": 2, "float16": 2, "float32": 4}.get(d)
        if width is not None:
            return Decided(width, kw.origin, True, f"teacher_model_init_kwargs {key} {d}")
    if kw.known and isinstance(kw.value, dict) and kw.value.get(key) == "auto" or \
            ctx.versions.transformers.at_least(5):
        return Decided(None, kw.origin, False, "the teacher in its checkpoint's dtype",
                       ("the teacher model in its checkpoint's dtype (from_pretrained's dtype='auto')",))
    return Decided(4, kw.origin, kw.known or kw.unset,
                   f"teacher_model_init_kwargs without {key}: from_pretrained loads fp32 (transformers 4)",
                   () if kw.known or kw.unset else ("the teacher model in fp32 (from_pretrained's default)",))


def _others(ctx: FileContext, trainer: TrainerCall) -> list[Component]:
    out = []
    for key, role in T.MODEL_KEYWORDS:
        if role == "reference":
            continue
        value, load = _model_kw(ctx, trainer, key)
        if value.unset or value.is_(None):
            continue
        if key == "reward_funcs" and load is None:
            # functions, or model ids TRL loads itself (AutoModelForSequenceClassification): only a model id string
            # or a model load the script names is counted
            if not (value.known and isinstance(value.value, str)):
                continue
        dtype = byte_widths(ctx, load).value[0] if load is not None else None
        width = Decided(dtype, None, load is not None)
        if key == "teacher_model" and load is None and value.known and isinstance(value.value, str) \
                and trainer.class_name == "GKDTrainer":
            width = _teacher_init_kwargs_dtype(ctx, trainer)
        named = value.value if load is None and value.known and isinstance(value.value, str) else None
        policy = training_model(ctx)
        own = policy.model_id.value if policy is not None and policy.model_id.known else None
        out.append(Component(role, "loaded", Decided(True, trainer.call.span, True, f"{key}= passed"),
                             width, same_model=load is None and named in (None, own), load=load,
                             span=trainer.call.span, model_id=named if named != own else None))
    if trainer.class_name == "OnlineDPOTrainer" and not trainer.call.kw("judge").unset:
        out.append(Component("reward", "judge", Decided(False, None, True, "a judge runs outside the GPU's models"),
                             Decided(None)))
    return out


def resolve_components(ctx: FileContext) -> Components:
    trainer = rl_trainer(ctx)
    if trainer is None:
        return Components(None)
    load = training_model(ctx)
    policy_bytes = byte_widths(ctx, load).value[0] if load is not None else 2
    items = [Component("policy", "trained", Decided(True), Decided(policy_bytes))]
    decided = {fm.role for fm in trainer.framework_models if fm.passed}
    # the framework's own decision for a role replaces TRL's (it passes the model, or bypasses TRL's __init__)
    items += [_framework_component(fm) for fm in trainer.framework_models if fm.passed]
    if "reference" not in decided:
        ref = _reference(ctx, trainer, policy_bytes)
        if ref is not None:
            items.append(ref)
    items += [c for c in _others(ctx, trainer) if c.role not in decided]
    # models the framework loads and holds beside the trainer (axolotl's model_ref for KTO / GRPO / SimPO)
    items += [_framework_component(fm) for fm in trainer.framework_models if not fm.passed]
    return Components(trl_name(trainer), tuple(items))


# --- the generation phase ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Generation:
    """One generation round of GRPO / RLOO / Online DPO on one device. `rows`: completions generated at once;
    `prompt`, `completion`: token lengths; `logps_rows`: rows per forward of the per-token log-probabilities;
    `fused_logps`: TRL >= 1.15's fused LM head (no [rows x completion x vocab] logits); `vllm`: None (HF
    `generate` on the training GPU) | "colocate" | "server"; `vllm_share`: vllm_gpu_memory_utilization."""

    trainer: str
    rows: int
    prompt: int
    completion: int
    logps_rows: int
    fused_logps: bool
    vllm: str | None
    vllm_share: float
    span: Span | None = None
    kept_logits: bool = False  # PPO / old RLOO keep every generated token's fp32 logits (T.rollout_loop)
    # LLaMA-Factory's PPO: the scoring and training forwards take the logits of prompt + completion, upcast to fp32 by
    # the value head, and a full log_softmax (knowledge/frameworks.py "PPO's rollout")
    scores_prompt: bool = False
    cache: bool = True  # generate keeps a KV cache (GKD under gradient checkpointing: use_cache=False)
    completion_logits: bool = True  # the training step keeps the completion's logits only (logits_to_keep)
    # GKD: whether the student generates (lmbda > 0) and whether the teacher does (seq_kd=True), each with its own
    # model: one after the other in a step (<= 1.0) or in different steps (>= 1.8), so the phase is the larger
    student_generates: bool = True
    teacher_generates: bool = False

    def phase(self, rows: int | None = None):
        """The estimate's GenerationPhase for this round; `rows`: the round at another batch (the eval step's
        per_device_eval_batch_size generates and scores that many rows at once)."""
        from trainlint.memory.estimate import GenerationPhase

        n = self.rows if rows is None else rows
        return GenerationPhase(n, self.prompt, self.completion, self.logps_rows if rows is None else n,
                               self.fused_logps, self.vllm, kept_logits=self.kept_logits,
                               scores_prompt=self.scores_prompt, cache=self.cache, student=self.student_generates,
                               teacher=(None, None) if self.teacher_generates else None)


def _int(v, default: int) -> tuple[int, bool]:
    if v.known and isinstance(v.value, int) and not isinstance(v.value, bool) and v.value > 0:
        return v.value, not (v.via == "library default" or v.via.endswith(" default") or v.assumed)
    return default, False


def generation_phase(ctx: FileContext) -> Decided[Generation | None]:
    trainer = rl_trainer(ctx)
    if trainer is not None and trainer.library == "trl" and trainer.class_name == "GKDTrainer":
        return _gkd_generation(ctx, trainer)
    if trainer is not None and trainer.library == "trl" and trainer.class_name == "DistillationTrainer":
        return _distillation_generation(ctx, trainer)
    if trainer is None or trl_name(trainer) not in T.GENERATING:
        return Decided(None, None, True, "no generating trainer")
    get = lambda key: _args_value(ctx, trainer, key)  # noqa: E731
    if trainer.library == "llamafactory" and trainer.class_name == "CustomPPOTrainer":
        return _lf_ppo_rollout(trainer, get)
    if trainer.library != "trl":
        return Decided(None, None, False, f"{trainer.class_name}'s own rollout loop is not modelled")
    name, trl = trainer.class_name, ctx.versions.trl
    if T.rollout_loop(name, trl):
        return _rollout(trainer, get, trl)
    if name == "PPOTrainer":
        return Decided(None, None, True, f"PPOTrainer in TRL {trl.version}: no rollout loop of its own modelled")
    notes: list[str] = []
    batch, sure_b = _int(get("per_device_train_batch_size"), 8)
    gens, sure_g = _int(get("num_generations"), 2 if name in ("RLOOTrainer", "OnlineDPOTrainer") else 8)
    completion, sure_c = _int(get("max_completion_length"), T.max_completion_default(trl))
    prompt, sure_p = _int(get("max_prompt_length"), 512)
    if not sure_b:
        notes.append(f"per_device_train_batch_size {batch}: the default")
    if not sure_c:
        notes.append(f"max_completion_length {completion}: {name}'s default in TRL {trl.version}")
    if not sure_p:
        notes.append(f"prompts of {prompt} tokens assumed (max_prompt_length)")
    if name == "OnlineDPOTrainer":
        rows = batch * 2  # two completions per prompt: 0.19.1 online_dpo_trainer.py:479-480 `repeat(2, 1)`, :259 `n=2`
    elif T.counts_completions(name, trl):
        rows = batch
    else:
        rows = batch * gens  # GRPO 0.14: prompts x num_generations
        if not sure_g:
            notes.append(f"num_generations {gens}: the default")
    logps_rows = batch if T.logps_chunked(name, trl) else rows
    if T.has_steps_per_generation(name, trl):
        spg, sure_s = _int(get("steps_per_generation"), 0)
        gbs, _ = _int(get("generation_batch_size"), 0)
        if not spg:
            if gbs:
                spg = max(1, gbs // batch)  # (per process; a launch's world size divides it further)
            else:
                spg, sure_s = _int(get("gradient_accumulation_steps"), 1)
                if spg > 1:
                    notes.append(f"steps_per_generation = gradient_accumulation_steps ({spg})")
        rows = batch * spg
    row = T.loss_row(name, trl)
    fused = row is not None and not row.full_logits
    use = get("use_vllm")
    vllm = None
    share = T.vllm_share_default(trl)
    if use.is_(True):
        mode = get("vllm_mode")
        vllm = str(mode.value) if mode.known and mode.value else (T.vllm_mode_default(trl) or "server")
        if not mode.known or mode.via.endswith("default"):
            notes.append(f"vllm_mode {vllm}: the default in TRL {trl.version}")
        s = get("vllm_gpu_memory_utilization")
        if s.known and isinstance(s.value, (int, float)):
            share = float(s.value)
            if s.origin is None and vllm == "colocate":  # a framework's own default (axolotl's 0.9), not written
                notes.append(f"vllm_gpu_memory_utilization {share:g}: {s.via}")
        elif vllm == "colocate":
            notes.append(f"vllm_gpu_memory_utilization {share}: the default in TRL {trl.version}")
    where = trainer.stage_span or trainer.call.span  # a framework config: its `rl:` key chose the phase
    gen = Generation(name, rows, prompt, completion, logps_rows, fused, vllm, share, where)
    return Decided(gen, where, not notes, "generation", tuple(notes))


def _rollout(trainer, get, trl) -> Decided[Generation | None]:
    """PPO's / old RLOO's rollout (knowledge/trl_trainers.py rollout_loop): all the rows' generation logits kept."""
    name = trainer.class_name
    notes: list[str] = []
    batch, sure_b = _int(get("per_device_train_batch_size"), 8)
    accum, _ = _int(get("gradient_accumulation_steps"), 1)
    completion, sure_c = _int(get("response_length"), 53)
    chunk, _ = _int(get("local_rollout_forward_batch_size"), 64)
    prompt, sure_p = _int(get("max_prompt_length"), 512)
    if not sure_b:
        notes.append(f"per_device_train_batch_size {batch}: the default")
    if not sure_c:
        notes.append(f"response_length {completion}: {name}'s default in TRL {trl.version}")
    if not sure_p:
        notes.append(f"prompts of {prompt} tokens assumed (the dataset's, not a config field)")
    rows = batch * accum
    gen = Generation(name, rows, prompt, completion, min(chunk, rows), False, None, 0.0, trainer.call.span,
                     kept_logits=True)
    return Decided(gen, trainer.call.span, not notes, "rollout", tuple(notes))


def _lf_ppo_rollout(trainer, get) -> Decided[Generation | None]:
    """LLaMA-Factory's PPO round (knowledge/frameworks.py "PPO's rollout", LF_PPO_SOURCE): HF `generate` with its KV
    cache, `per_device_train_batch_size` prompts at a time (LF's PPOConfig mini_batch_size), `max_new_tokens` each;
    the responses leave the GPU after each mini-batch, so `gradient_accumulation_steps x ppo_buffer_size` only repeat
    the round. Its no-grad scoring (policy and reference through the value head) runs the same mini-batches over
    prompt + completion in fp32 (`scores_prompt`)."""
    from trainlint.knowledge import frameworks as K

    notes: list[str] = []
    batch, sure_b = _int(get("per_device_train_batch_size"), 8)
    written = get("max_new_tokens")
    completion, sure_c = _int(written, K.LF_PPO_DEFAULTS["max_new_tokens"])
    sure_c = sure_c and written.origin is not None  # (a framework default is known but has no origin)
    prompt, _ = _int(get("cutoff_len"), K.LF_DEFAULTS["cutoff_len"])
    if not sure_b:
        notes.append(f"per_device_train_batch_size {batch}: the default")
    if not sure_c:
        notes.append(f"max_new_tokens {completion}: LLaMA-Factory's default (GeneratingArguments)")
    notes.append(f"prompts of up to cutoff_len = {prompt} tokens (each round generates {completion} more)")
    where = trainer.stage_span or trainer.call.span
    gen = Generation("PPOTrainer", batch, prompt, completion, batch, False, None, 0.0, where, scores_prompt=True)
    return Decided(gen, where, sure_b and sure_c, f"{K.LF_PPO_SOURCE}", tuple(notes))


def _gkd_generation(ctx: FileContext, trainer: TrainerCall) -> Decided[Generation | None]:
    """GKD's on-policy round (knowledge/trl_trainers.py "GKD"): with probability `lmbda` (default 0.5) the student
    generates `max_new_tokens` (default 128) for the batch's prompts, and with `seq_kd=True` the teacher does; without
    a cache under gradient checkpointing (use_cache=False: each step a forward over the whole prefix). No scoring
    forward of its own (the loss's two forwards are the training step). The prompts are assumed to fill the rest of
    the run's sequence length."""
    trl = ctx.versions.trl
    get = lambda key: _args_value(ctx, trainer, key)  # noqa: E731
    lmbda, seq_kd = get("lmbda"), get("seq_kd")
    student = not (lmbda.known and isinstance(lmbda.value, (int, float)) and lmbda.value == 0)
    teacher = seq_kd.is_(True)
    if not (student or teacher):
        return Decided(None, lmbda.origin, True, "lmbda=0.0 and seq_kd off: GKDTrainer never generates")
    notes: list[str] = []
    if student and lmbda.unset:
        notes.append(f"lmbda {T.GKD_DEFAULTS['lmbda']}: GKDConfig's default (the student generates that share of "
                     f"the steps)")
    batch, sure_b = _int(get("per_device_train_batch_size"), 8)
    completion, sure_c = _int(get("max_new_tokens"), T.GKD_DEFAULTS["max_new_tokens"])
    length = get("max_length")
    if length.unset or not length.known:
        length = get("max_seq_length")
    total, _ = _int(length, 1024)
    prompt = max(total - completion, 1)
    if not sure_b:
        notes.append(f"per_device_train_batch_size {batch}: the default")
    if not sure_c:
        notes.append(f"max_new_tokens {completion}: GKDConfig's default in TRL {trl.version}")
    notes.append(f"prompts of {prompt} tokens assumed (the sequence length less max_new_tokens)")
    # GKDTrainer reads `args.gradient_checkpointing` (use_cache=False when on: 0.13.0 gkd_trainer.py:147, 1.16.0
    # experimental/gkd/gkd_trainer.py:221), whose default is True from TRL 0.22 (FileContext.checkpointing)
    args = ctx.trainer_args(trainer)
    cache = (ctx.checkpointing(args)[0] if args is not None else None) is not True
    who = "the student" + (" and the teacher (seq_kd)" if student and teacher else "") if student else \
        "the teacher (seq_kd)"
    gen = Generation("GKDTrainer", batch, prompt, completion, 0, False, None, 0.0, trainer.call.span,
                     cache=cache, completion_logits=False, student_generates=student, teacher_generates=teacher)
    return Decided(gen, lmbda.origin or trainer.call.span, sure_b and sure_c, f"{who} generates", tuple(notes))


def gkd_single_kl(ctx: FileContext) -> Decided[int | None]:
    """The distillation loss's `beta` when it is 0 or 1 (one kl_div, forward or reverse KL, instead of the mixture's
    two: memory.estimate JSD_KL_TENSORS), else None. GKDTrainer from TRL 0.16 (0.16.0 gkd_trainer.py:190, 1.16.0
    experimental/gkd/gkd_trainer.py:278-281; before, the mixture whatever beta), GKDConfig's default 0.5;
    DistillationTrainer 1.3-1.9 (`_jsd_divergence`: 1.3.0 experimental/distillation/distillation_trainer.py:119-160),
    DistillationConfig's default 1.0 (1.3.0 distillation_config.py:183-184, 1.9.0 :164-165): the reverse KL."""
    trainer = rl_trainer(ctx)
    name = trainer.class_name if trainer is not None else None
    if name not in ("GKDTrainer", "DistillationTrainer"):
        return Decided(None, None, True, "not a distillation trainer")
    if name == "GKDTrainer" and not T.gkd_single_kl_at_beta_endpoints(ctx.versions.trl):
        return Decided(None, None, True, f"TRL {ctx.versions.trl.version} builds the mixture whatever beta")
    default = T.GKD_DEFAULTS["beta"] if name == "GKDTrainer" else T.DISTILLATION_DEFAULTS["beta"]
    beta = _args_value(ctx, trainer, "beta")
    if beta.known and isinstance(beta.value, (int, float)) and not isinstance(beta.value, bool):
        value = beta.value
        why = f"beta={value:g}"
    elif beta.unset:
        value = default
        why = f"beta {default:g}: {name.replace('Trainer', 'Config')}'s default"
    else:
        return Decided(None, beta.origin, False, "beta not known: the mixture's two kl_div counted")
    one = int(value) if value in (0, 1) else None
    return Decided(one, beta.origin, not beta.unset, why + (": one kl_div" if one is not None else ""))


def distillation_completion(ctx: FileContext) -> Decided[int]:
    """DistillationTrainer 1.3-1.9's completion length: the JSD reads `logits[:, prompt_length - 1 : -1, :]` (1.9.0
    experimental/distillation/distillation_trainer.py:1057-1058), `max_completion_length` tokens (default 512)."""
    trainer = rl_trainer(ctx)
    value = _args_value(ctx, trainer, "max_completion_length") if trainer is not None else UNSET
    n, sure = _int(value, T.DISTILLATION_DEFAULTS["max_completion_length"])
    return Decided(n, value.origin if value.known else None, sure, "max_completion_length",
                   () if sure else (f"max_completion_length {n}: DistillationConfig's default",))


def distillation_logits_bytes(ctx: FileContext) -> Decided[int | None]:
    """Bytes per element of the logits GKD's / Distillation's JSD reads: 4 under bf16 / fp16 mixed precision (written,
    or the config's default bf16 from TRL 0.19: knowledge/trl_trainers.py `config_bf16_default`) unless DeepSpeed runs
    the model: the
    Trainer's `accelerator.prepare` wraps the student's forward, and GKDTrainer's `prepare_model(teacher,
    evaluation_mode=True)` the teacher's, in `convert_outputs_to_fp32` when `native_amp` (accelerate 1.15.0
    accelerator.py:535-573, :1790-1801; DeepSpeed leaves native_amp off), so every JSD tensor is fp32 (trl 1.16.0
    experimental/gkd/gkd_trainer.py:194; 0.13.0 gkd_trainer.py `prepare_model`). None: the activation dtype."""
    trainer = rl_trainer(ctx)
    args = ctx.trainer_args(trainer) if trainer is not None else None
    if args is None:
        return Decided(None, None, False, "the trainer's arguments are not read")
    bf16, fp16 = args.get("bf16"), args.get("fp16")
    mixed = bf16.is_(True) or fp16.is_(True) or (bf16.unset and fp16.unset
                                                  and T.config_bf16_default(ctx.versions.trl))
    if not mixed:
        return Decided(None, None, True, "no mixed precision: the logits in the model's dtype")
    ds = args.get("deepspeed")
    launched = ctx.launch.sharding
    if (ds.known and ds.value) or (launched is not None and launched.known and "DeepSpeed" in str(launched.via)):
        return Decided(None, None, True, "DeepSpeed: accelerate does not wrap the forward (native_amp off)")
    written = bf16 if bf16.is_(True) else fp16 if fp16.is_(True) else None
    return Decided(4, written.origin if written is not None else None, written is not None,
                   "mixed precision: accelerate's convert_outputs_to_fp32 hands TRL fp32 logits",
                   () if written is not None else (f"bf16 mixed precision: the config's default in TRL "
                                                   f"{ctx.versions.trl.version}",))


def _distillation_generation(ctx: FileContext, trainer: TrainerCall) -> Decided[Generation | None]:
    """DistillationTrainer 1.3-1.9's on-policy generation (knowledge/trl_trainers.py "DistillationTrainer"): the
    generation batch is split into gradient_accumulation_steps slices of per_device_train_batch_size rows, and each
    on-policy slice is generated by its own HF `generate` call (1.9.0 experimental/distillation/distillation_trainer.py
    :709-760 `_prepare_inputs` / `_fill_buffer`, :797-812 `_generate_with_model`), `max_completion_length` new tokens
    with the default cache (the GenerationConfig sets no use_cache: :537-546), or by vLLM (`use_vllm`; `vllm_mode`
    default "colocate", `vllm_gpu_memory_utilization` 0.3: 1.3.0 distillation_config.py:292, :316). A slice is on-policy
    with probability `lmbda` (default 1.0) in 1.3-1.8 (1.3.0 :784), always in 1.9. No scoring pass: the teacher's
    logits are the loss's. From 1.10 (trl.trainer) not modelled."""
    trl = ctx.versions.trl
    if not T.distillation_jsd(trl):
        return Decided(None, trainer.call.span, False, f"DistillationTrainer in TRL {trl.version}: its generation is "
                                                       f"not modelled")
    get = lambda key: _args_value(ctx, trainer, key)  # noqa: E731
    lmbda = get("lmbda")
    if lmbda.known and isinstance(lmbda.value, (int, float)) and lmbda.value == 0 and not _at_least(trl, 1, 9):
        return Decided(None, lmbda.origin, True, "lmbda=0.0: DistillationTrainer never generates")
    notes: list[str] = []
    batch, sure_b = _int(get("per_device_train_batch_size"), 8)
    completion, sure_c = _int(get("max_completion_length"), T.DISTILLATION_DEFAULTS["max_completion_length"])
    prompt, sure_p = _int(get("max_prompt_length"), 0)
    if not sure_p:
        total, _ = _int(get("max_length"), 1024)
        prompt = max(total - completion, 1)
        notes.append(f"prompts of {prompt} tokens assumed (max_prompt_length: max_length - max_completion_length)")
    if not sure_b:
        notes.append(f"per_device_train_batch_size {batch}: the default")
    if not sure_c:
        notes.append(f"max_completion_length {completion}: DistillationConfig's default")
    vllm, share = None, 0.3
    if get("use_vllm").is_(True):
        mode = get("vllm_mode")
        vllm = str(mode.value) if mode.known and mode.value else "colocate"
        s = get("vllm_gpu_memory_utilization")
        share = float(s.value) if s.known and isinstance(s.value, (int, float)) else 0.3
        if not (mode.known and mode.value):
            notes.append("vllm_mode colocate: DistillationConfig's default")
    gen = Generation("DistillationTrainer", batch, prompt, completion, 0, False, vllm, share, trainer.call.span,
                     completion_logits=False)
    return Decided(gen, trainer.call.span, sure_b and sure_c, "the student generates", tuple(notes))


def _at_least(version, major: int, minor: int) -> bool:
    return version.at_least(major, minor)
