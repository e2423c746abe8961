"""An axolotl config (`axolotl train config.yml`) as the facts of the run axolotl makes from it.

Semantics from axolotl's source (knowledge/frameworks.py cites each): the attention key or legacy flag that wins,
the model class, 4/8-bit loading, the adapter (and the input-grad hook axolotl always installs for one), the loss
plugins, the micro-batch / accumulation / sequence keys and their defaults, DeepSpeed / FSDP.
"""

from __future__ import annotations

from pathlib import Path

from trainlint.diagnostics import Span
from trainlint.facts.model import ArgsObject, Evidence, FrameworkModel, ModelLoad, ScriptFacts, TrainerCall
from trainlint.facts.values import UNKNOWN, UNSET, Value
from trainlint.frameworks.synth import ORIGIN, Counter, Keys, Mapped, Problem, call, default, local_file
from trainlint.knowledge import frameworks as K
from trainlint.knowledge.libraries import CHUNKED_UPCAST_CHUNKS, CHUNKED_UPCAST_PATCH
from trainlint.knowledge.moe import LLAMA4_LINEARIZED
from trainlint.knowledge.versions import parse_version

# axolotl 0.19.0 utils/schemas/enums.py RLType -> the TRL trainer core/builders/rl.py builds for it.
# (gdpo: 0.18.0 enums.py RLType.GDPO, built by GRPOStrategy like grpo: builders/rl.py `_get_trainer_cls`)
_RL_TRAINERS = {"dpo": "DPOTrainer", "ipo": "DPOTrainer", "orpo": "ORPOTrainer", "kto": "KTOTrainer",
                "simpo": "CPOTrainer", "grpo": "GRPOTrainer", "gdpo": "GRPOTrainer"}
_GRPO = ("grpo", "gdpo")
_LOCAL = ("/", "./", "../", "~")


def _truthy(v: object) -> bool:
    return bool(v) and v != "false"


def _placeholder(v: object) -> bool:
    """`${S2_ATTENTION}`: a template's slot that something else fills before the run (axolotl 0.18.0
    cli/config.py load_cfg reads the YAML with yaml.safe_load, no interpolation), so its value is not known here."""
    return isinstance(v, str) and v.startswith("${") and v.endswith("}")


def _attention(keys: Keys, release: str, problems: list[Problem]) -> tuple[Value, str | None]:
    """(attention in effect as a Value, the key that decides it)."""
    since_normalised = parse_version(release) >= K.AXOLOTL_NORMALISED_SINCE
    flags = [(name, impl) for name, impl in (K.AXOLOTL_LEGACY_ATTENTION if since_normalised
                                             else K.AXOLOTL_LEGACY_ATTENTION_0_12) if _truthy(keys.raw(name))]
    impl = keys.raw("attn_implementation")
    if isinstance(impl, str) and impl:
        if flags and since_normalised:
            problems.append(Problem("TL007", f"axolotl {release} refuses this config: attn_implementation cannot be "
                                             f"combined with the legacy flag {flags[0][0]} (utils/schemas/config.py "
                                             f"normalize_attn_implementation); keep only attn_implementation",
                                    keys.key_span(flags[0][0])))
        return keys.value("attn_implementation", lambda v: K.AXOLOTL_LOAD_TIME.get(v, v)), "attn_implementation"
    if keys.has("attn_implementation") and keys.raw("attn_implementation") is not None:
        return UNKNOWN, "attn_implementation"
    if flags:
        name, chosen = flags[0]
        return keys.value(name, lambda _: chosen), name
    if keys.raw("rl") == "ebft":  # core/trainers/ebft/strided.py sets _attn_implementation itself
        return UNKNOWN, None
    return UNSET, None


def _key_problems(keys: Keys, release: str, plugins: list[str], problems: list[Problem]) -> None:
    core, deprecated, by_plugin = K.axolotl_keys(release)
    listed = {prefix for prefix in by_plugin if any(p.startswith(prefix) for p in plugins)}
    for name, entry in keys.top.items():
        if name in K.AXOLOTL_REMOVED and _truthy(entry.value) and not _placeholder(entry.value):
            problems.append(Problem("TL007", f"axolotl {release} refuses this config: {K.AXOLOTL_REMOVED[name]} "
                                             f"(utils/schemas/deprecated.py)", entry.key_span))
        if name in core or name in deprecated:
            continue
        owners = [prefix for prefix, names in by_plugin.items() if name in names]
        if owners and not set(owners) & listed:
            plugin = owners[0].rstrip(".")
            problems.append(Problem("TL007", f"{name} has no effect: it belongs to the {plugin} plugin, which is not "
                                             f"listed in plugins: (axolotl {release} merges a plugin's keys only for "
                                             f"listed plugins, and drops unknown keys silently)", entry.key_span))
        elif not owners:
            problems.append(Problem("TL007", f"{name} is not an axolotl {release} config key: axolotl drops unknown "
                                             f"keys silently (pydantic extra='ignore'), so it has no effect",
                                    entry.key_span))


def model_path_problem(keys: Keys, key: str, path: Path, framework: str) -> Problem | None:
    """A model given as a local path (absolute, ./, ../, ~) that does not exist beside the config or in the
    working directory: the framework would stop at loading it."""
    value = keys.raw(key)
    if not isinstance(value, str) or not value.startswith(_LOCAL):
        return None
    candidate = Path(value).expanduser()
    bases = [Path()] if candidate.is_absolute() else [path.parent, Path.cwd()]
    if any((b / candidate).exists() for b in bases):
        return None
    return Problem("TL008", f"{key} {value!r} is a local path that does not exist (looked beside the config and in "
                            f"the working directory): {framework} cannot load the model; the model is unknown here",
                   keys.key_span(key))


def _image_pixels(keys: Keys) -> dict:
    """`image_size` as the processor's max_pixels: axolotl resizes every image before the processor, an int to a
    padded square of that side, a pair to (width, height) (processing_strategies.py l.283-300, 067b021; one image per
    sample from the `images` column, l.271-279). Unset: the processor's own size (loaders/processor.py l.68-90)."""
    size = keys.raw("image_size")
    if isinstance(size, bool) or not (isinstance(size, int) and size > 0 or isinstance(size, list) and len(size) == 2
                                      and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in size)):
        return {}
    pixels = size * size if isinstance(size, int) else size[0] * size[1]
    return {"max_pixels": (Value("known", pixels, keys.top["image_size"].span, ORIGIN), keys.line_span("image_size"))}


def map_axolotl(keys: Keys, path: Path, display: str, release: str, note: str) -> Mapped:
    problems: list[Problem] = []
    n = Counter()
    plugins = [p for p in (keys.raw("plugins") or []) if isinstance(p, str)] if isinstance(keys.raw("plugins"), list) \
        else []
    _key_problems(keys, release, plugins, problems)
    missing = model_path_problem(keys, "base_model", path, "axolotl")
    if missing is not None:
        problems.append(missing)
    attention, attn_key = _attention(keys, release, problems)
    if attention.is_("eager") and keys.raw("use_dsv4_kernels") is True and \
            any(p.startswith(K.KERNELS_PLUGIN_PREFIX) for p in plugins):
        # integrations/kernels/adapters/dsv4.py DSV4Adapter.pre_model_load -> patch_deepseek_v4_kernels(): the eager
        # kernel is replaced by fused Triton ones that "never materialize the score matrix" (libs/dsv4/attention.py)
        attention = Value("known", "deepseek_v4 fused kernels", attention.origin, "axolotl KernelsPlugin")
    anchor_key = attn_key if attn_key and keys.has(attn_key) else "base_model"
    anchor = keys.line_span(anchor_key) or Span.point(1)
    here = keys.line_span("base_model") or Span.point(1)

    reward = _truthy(keys.raw("reward_model"))
    model_type = keys.raw("model_type")
    # a vision-language config: axolotl decides it from the model config's type (utils/config/__init__.py l.275-286,
    # 067b021), loads the model with AutoModelForImageTextToText (loaders/model.py `_set_auto_model_loader` l.559-573)
    # and a processor (loaders/processor.py); the config alone says it by naming `processor_type`, as every VLM example
    # under examples/ does (llava/lora-7b.yaml, qwen2_5-vl/lora-7b.yaml, llama-3-vision/lora-11b.yaml, ...)
    multimodal = isinstance(keys.raw("processor_type"), str) and bool(keys.raw("processor_type"))
    class_name = model_type if isinstance(model_type, str) and model_type else (
        "AutoModelForSequenceClassification" if reward else
        "AutoModelForImageTextToText" if multimodal else "AutoModelForCausalLM")
    quant = "4bit" if _truthy(keys.raw("load_in_4bit")) else "8bit" if _truthy(keys.raw("load_in_8bit")) else None
    bf16, fp16 = keys.raw("bf16"), keys.raw("fp16")
    dtype = Value("known", "bfloat16", keys.top["bf16"].span, ORIGIN) if bf16 in (True, "auto") else \
        Value("known", "float16", keys.top["fp16"].span, ORIGIN) if fp16 is True else UNSET
    load_kwargs = {"attn_implementation": (attention, keys.line_span(attn_key) if attn_key else None),
                   "dtype": (dtype, None),
                   "trust_remote_code": (keys.value("trust_remote_code") if keys.raw("trust_remote_code") is True
                                         else UNSET, keys.line_span("trust_remote_code"))}
    load = call(f"transformers.{class_name}.from_pretrained", load_kwargs, here, n, target="model")
    # loaders/utils.py load_model_config: `cfg.base_model_config or cfg.base_model` names the config read
    config_key = "base_model_config" if isinstance(keys.raw("base_model_config"), str) else "base_model"
    model = ModelLoad(load, "from_pretrained", class_name, keys.value(config_key) if missing is None else UNKNOWN,
                      attention, UNSET, UNSET, dtype,
                      Value("known", quant, None, ORIGIN), (), None, "model", anchor)
    calls = [load]
    if multimodal:
        calls.append(call("transformers.AutoProcessor.from_pretrained", _image_pixels(keys),
                          keys.line_span("processor_type") or here, n, target="processor", receiver="AutoProcessor"))
    if keys.raw("llama4_linearized_experts") is True:  # knowledge/moe.py LLAMA4_LINEARIZED
        calls.append(call(LLAMA4_LINEARIZED, {}, keys.line_span("llama4_linearized_experts") or here, n))

    adapter = keys.raw("adapter")
    if isinstance(adapter, str) and adapter:
        calls.append(call("axolotl.loaders.adapter.enable_input_require_grads", {}, here, n, receiver="model"))
        if adapter in ("lora", "qlora"):
            targets = keys.value("lora_target_modules")
            if _truthy(keys.raw("lora_target_linear")):
                targets = Value("known", "all-linear", keys.top["lora_target_linear"].span, ORIGIN)
            lora_kwargs = {"r": (keys.value("lora_r"), keys.line_span("lora_r")), "target_modules": (targets, None)}
            if keys.raw("freeze_mm_modules") is True:
                lora_kwargs["exclude_modules"] = (Value("known", K.AXOLOTL_MM_EXCLUDE, keys.top["freeze_mm_modules"].span,
                                                        ORIGIN), keys.line_span("freeze_mm_modules"))
            if keys.has("lora_target_parameters"):  # the fused MoE experts: axolotl 067b021 schemas/peft.py:57, passed
                # as LoraConfig(target_parameters=...) in loaders/adapter.py:172-191
                lora_kwargs["target_parameters"] = (keys.value("lora_target_parameters"), None)
            calls.append(call("peft.LoraConfig", lora_kwargs, here, n, target="lora_config"))
        calls.append(call("peft.get_peft_model", {}, here, n, target="model"))

    if any(p.startswith(K.CCE_PLUGIN.rsplit(".", 1)[0] + ".") for p in plugins) and \
            keys.raw("cut_cross_entropy", True) is not False:
        calls.append(call("cut_cross_entropy.transformers.cce_patch", {}, keys.line_span("plugins") or here, n))
    if any(p.startswith(K.LIGER_PLUGIN.rsplit(".", 1)[0] + ".") for p in plugins) and \
            keys.raw("liger_fused_linear_cross_entropy") is True:
        flce = keys.value("liger_fused_linear_cross_entropy")
        calls.append(call("liger_kernel.transformers.apply_liger_kernel_to_model",
                          {"fused_linear_cross_entropy": (flce, None)}, keys.line_span("plugins") or here, n))
    if _truthy(keys.raw("chunked_cross_entropy")):
        # loaders/patch_manager.py `if self.cfg.chunked_cross_entropy:` (knowledge/libraries.py CHUNKED_UPCAST_PATCH)
        chunks = keys.value("chunked_cross_entropy_num_chunks") if _truthy(keys.raw("chunked_cross_entropy_num_chunks")) \
            else default(CHUNKED_UPCAST_CHUNKS, "axolotl default (monkeypatch/loss/chunked.py)")
        calls.append(call(CHUNKED_UPCAST_PATCH, {"num_output_chunks": (chunks, keys.line_span(
            "chunked_cross_entropy_num_chunks"))}, keys.line_span("chunked_cross_entropy") or here, n))

    args = _training_args(keys, here, n, adapter, path, release)
    calls.append(args.call)
    rl = keys.raw("rl")
    trainer_name, library = ("Trainer", "transformers")
    if reward:
        trainer_name, library = ("RewardTrainer", "trl")
    elif _truthy(keys.raw("process_reward_model")):
        trainer_name, library = ("PRMTrainer", "trl")
    elif isinstance(rl, str) and rl:
        trainer_name, library = (_RL_TRAINERS.get(rl, f"{rl}Trainer"), "trl")
    models: tuple[FrameworkModel, ...] = ()
    trainer_kwargs: dict = {}
    stage_span = None
    if library == "trl" and isinstance(rl, str) and rl in _RL_TRAINERS and not reward:
        stage_span = keys.line_span("rl")
        models = _rl_models(keys, rl, adapter, stage_span)
        if any(m.passed and m.role == "reference" for m in models):
            # the reference axolotl passes (TRL's `ref_model`): not a copy TRL builds itself (run/loss.py)
            trainer_kwargs["ref_model"] = (Value("known", "model_ref", stage_span, "axolotl setup_reference_model"),
                                           stage_span)
    trainer_call = call(f"{library}.{trainer_name}", trainer_kwargs, here, n, target="trainer")
    calls.append(trainer_call)
    trainer = TrainerCall(trainer_call, trainer_name, library, "training_args", "model", "trainer",
                          stage_span=stage_span, framework_models=models)

    seq = keys.value("sequence_len")
    seq_span = keys.line_span("sequence_len") or Span.point(1)
    if seq.unset:
        seq = default(K.AXOLOTL_DEFAULTS["sequence_len"], "axolotl default sequence_len")
    facts = ScriptFacts(path=display, imports=(), calls=tuple(calls), models=(model,), args_objects=(args,),
                        trainers=(trainer,), seq_evidence=(Evidence(seq, "sequence_len", seq_span),),
                        batch_evidence=(), accum_evidence=(), pip_pins=(), logits_accessed=False)
    spelled = {"per_device_train_batch_size": "micro_batch_size"}
    if library == "trl" and isinstance(rl, str) and rl in _GRPO:
        # the TRL arguments axolotl reads from its `trl:` / `vllm:` sections (_rl_args), as the user writes them
        spelled.update({"vllm_gpu_memory_utilization": "vllm.gpu_memory_utilization",
                        **{k: f"trl.{k}" for k in ("vllm_mode", "vllm_enable_sleep_mode", "num_generations",
                                                   "max_completion_length", "generation_batch_size", "beta",
                                                   "use_vllm", "sync_ref_model")}})
    return Mapped(K.AXOLOTL, release, note, facts, keys, problems, spelled, "attn_implementation")


def _rl_models(keys: Keys, rl: str, adapter: object, span: Span | None) -> tuple[FrameworkModel, ...]:
    """The reference model axolotl itself loads for an `rl:` run (frameworks/knowledge.py "RL / preference stages":
    train.py setup_reference_model, builders/rl.py). With an adapter it loads none and TRL decides (the adapters
    disabled), so nothing is declared."""
    if rl in K.AXOLOTL_NO_REF_LOAD or (isinstance(adapter, str) and adapter):
        return ()
    if rl in K.AXOLOTL_REF_PASSED:
        pre = keys.raw("precompute_ref_log_probs") is True
        why = (f"{K.AXOLOTL_REF_SOURCE}: no adapter, so axolotl loads the model a second time and passes it as "
               f"DPOTrainer's ref_model" + (" (precompute_ref_log_probs does not drop a ref_model that is passed)"
                                             if pre else ""))
        return (FrameworkModel("reference", "loaded", True, why,
                               keys.line_span("precompute_ref_log_probs") if pre else span, drop="adapter: lora"),)
    return (FrameworkModel("reference", "loaded by axolotl, not passed to the trainer", False,
                           f"{K.AXOLOTL_REF_SOURCE}: no adapter, so axolotl loads the model a second time, but only "
                           f"dpo / ipo receive it; it is freed when setup_model_and_trainer returns (two copies of the "
                           f"weights while loading)", span, passed=False),)


def _rl_args(keys: Keys, rl: object) -> dict:
    """The TRL config keys axolotl sets for an `rl:` run (builders/rl.py `_build_training_arguments`,
    core/trainers/grpo/__init__.py set_training_args_kwargs, core/trainers/dpo/__init__.py), with the config's spans."""
    out: dict = {}
    for key in ("trl.beta", "rl_beta", "orpo_alpha"):
        v = keys.nested(key) if "." in key else keys.value(key)
        if v.known and v.value is not None:
            out["beta"] = (v, keys.nested_line(key) if "." in key else keys.line_span(key))
            break
    if rl in ("dpo", "ipo") and keys.has("precompute_ref_log_probs"):
        out["precompute_ref_log_probs"] = (keys.value("precompute_ref_log_probs"),
                                           keys.line_span("precompute_ref_log_probs"))
    if rl not in _GRPO:
        return out
    for key in ("num_generations", "generation_batch_size", "max_completion_length", "sync_ref_model",
                "vllm_enable_sleep_mode"):
        v = keys.nested(f"trl.{key}")
        if v.known:
            out[key] = (v, keys.nested_line(f"trl.{key}"))
    use = keys.nested("trl.use_vllm")
    if use.is_(True):
        out["use_vllm"] = (use, keys.nested_line("trl.use_vllm"))
        mode = keys.nested("trl.vllm_mode")
        if mode.known:
            out["vllm_mode"] = (mode, keys.nested_line("trl.vllm_mode"))
        if mode.is_("colocate"):
            share = keys.nested("vllm.gpu_memory_utilization")
            if share.unset:
                share = default(K.AXOLOTL_VLLM_SHARE_DEFAULT,
                                "axolotl default vllm.gpu_memory_utilization (utils/schemas/vllm.py)")
            out["vllm_gpu_memory_utilization"] = (share, keys.nested_line("vllm.gpu_memory_utilization"))
    return out


def dpo_liger_key(keys: Keys, release: str) -> str | None:
    """The key that sets DPOConfig's use_liger_kernel: `dpo_use_liger_kernel` (axolotl 0.18.0 and 0.19.0
    utils/schemas/config.py; 0.19.0 core/trainers/dpo/__init__.py l.41-42 passes it as use_liger_kernel; not in
    0.12.0) for rl dpo / ipo; None otherwise."""
    if keys.raw("rl") in ("dpo", "ipo") and parse_version(release) >= parse_version("0.18.0"):
        return "dpo_use_liger_kernel"
    return None


def _training_args(keys: Keys, here: Span, n: Counter, adapter: object, path: Path, release: str) -> ArgsObject:
    """The HF TrainingArguments axolotl builds (core/builders/causal.py), with the config's spans."""
    micro = keys.value("micro_batch_size")
    if micro.unset:
        micro = default(K.AXOLOTL_DEFAULTS["micro_batch_size"], "axolotl default micro_batch_size")
    accum = keys.value("gradient_accumulation_steps")
    total = keys.raw("batch_size")
    if accum.unset and isinstance(total, int) and isinstance(micro.value, int) and micro.value > 0:
        # utils/config/__init__.py normalize_config: gas = gas or batch_size // micro_batch_size
        accum = Value("known", max(total // micro.value, 1), keys.top["batch_size"].span,
                      "axolotl: batch_size // micro_batch_size")
    elif accum.unset:
        accum = default(K.AXOLOTL_DEFAULTS["gradient_accumulation_steps"], "axolotl default")
    gc_raw = keys.raw("gradient_checkpointing", False)
    gc = keys.value("gradient_checkpointing", lambda v: v not in (False, None)) if keys.has("gradient_checkpointing") \
        else default(False, "axolotl default")
    gc_kwargs = keys.value("gradient_checkpointing_kwargs")
    if gc_kwargs.unset and gc_raw not in (False, None) and keys.raw("unfrozen_parameters") is None \
            and not keys.raw("rl"):
        gc_kwargs = default({"use_reentrant": True}, "axolotl default (utils/config/__init__.py)")
    fsdp = UNSET
    fsdp_config = keys.raw("fsdp_config")
    if isinstance(fsdp_config, dict):
        strategy = str(fsdp_config.get("fsdp_sharding_strategy", fsdp_config.get("sharding_strategy", ""))).lower()
        reshard = fsdp_config.get("fsdp_reshard_after_forward", fsdp_config.get("reshard_after_forward"))
        if "full_shard" in strategy or reshard is True:
            fsdp = Value("known", "full_shard", keys.top["fsdp_config"].span, ORIGIN)
        elif "shard_grad_op" in strategy or reshard is False:
            fsdp = Value("known", "shard_grad_op", keys.top["fsdp_config"].span, ORIGIN)
    bf16 = keys.value("bf16", lambda v: v in (True, "auto"))
    kwargs = {
        "per_device_train_batch_size": (micro, keys.line_span("micro_batch_size")),
        "gradient_accumulation_steps": (accum, keys.line_span("gradient_accumulation_steps")
                                        or keys.line_span("batch_size")),
        "gradient_checkpointing": (gc, keys.line_span("gradient_checkpointing")),
        "gradient_checkpointing_kwargs": (gc_kwargs, keys.line_span("gradient_checkpointing_kwargs")),
        "auto_find_batch_size": (keys.value("auto_find_batch_size"), keys.line_span("auto_find_batch_size")),
        "bf16": (bf16, keys.line_span("bf16")),
        "fp16": (keys.value("fp16"), keys.line_span("fp16")),
        "optim": (keys.value("optimizer"), keys.line_span("optimizer")),
        "deepspeed": (local_file(keys.value("deepspeed"), path), keys.line_span("deepspeed")),
        "fsdp": (fsdp, keys.line_span("fsdp_config")),
        "max_steps": (keys.value("max_steps"), keys.line_span("max_steps")),
    }
    if keys.raw("rl"):
        kwargs.update(_rl_args(keys, keys.raw("rl")))
    own = dpo_liger_key(keys, release)
    if own is not None:
        kwargs["use_liger_kernel"] = (keys.value(own), keys.line_span(own))
    return ArgsObject(call("transformers.TrainingArguments", kwargs, here, n, target="training_args"),
                      "TrainingArguments", "transformers", "training_args")
