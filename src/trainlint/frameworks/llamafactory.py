"""A LLaMA-Factory config (`llamafactory-cli train config.yaml`) as the facts of the run it makes.

LLaMA-Factory parses the file with HfArgumentParser into its Model/Data/Finetuning/Generating arguments and its
subclass of HF Seq2SeqTrainingArguments (0.9.5 hparams/parser.py), so the batch, accumulation, precision,
DeepSpeed and `use_liger_kernel` keys are HF's own; the attention, sequence length, adapter, quantisation,
checkpointing and Liger keys are LLaMA-Factory's (knowledge/frameworks.py cites each).
"""

from __future__ import annotations

from pathlib import Path

from trainlint.diagnostics import Span
from trainlint.facts.model import ArgsObject, Evidence, FrameworkModel, ModelLoad, ScriptFacts, TrainerCall
from trainlint.facts.values import UNKNOWN, UNSET, Value
from trainlint.frameworks.axolotl import model_path_problem
from trainlint.knowledge import frameworks as K
from trainlint.knowledge.trl_trainers import FRAMEWORK_FULL_LOGITS
from trainlint.frameworks.synth import ORIGIN, Counter, Keys, Mapped, Problem, call, default, local_file


def _model_type(model_id: object, path: Path) -> str | None:
    from trainlint.knowledge.models import lookup_model

    if not isinstance(model_id, str):
        return None
    spec = lookup_model(model_id, path.parent, "AutoModelForCausalLM")
    return spec.model_type if spec is not None else None


def _attention(keys: Keys, release: str, model_type: str | None, problems: list[Problem]) -> Value:
    raw = keys.raw("flash_attn", K.LF_DEFAULTS["flash_attn"])
    if model_type == "gpt_oss":  # model/model_utils/attention.py: always a FlashAttention-3 hub kernel
        return Value("known", "kernels-community/vllm-flash-attn3", keys.top["flash_attn"].span if keys.has(
            "flash_attn") else None, "LLaMA-Factory: gpt-oss always uses a FlashAttention-3 kernel")
    if raw not in K.LF_ATTENTION or (raw == "fa3" and release == "0.9.2"):
        old = K.LF_OLD_ATTENTION.get(raw) if isinstance(raw, (str, bool)) else None
        problems.append(Problem("TL007", f"flash_attn: {raw!r} is not a value LLaMA-Factory {release} accepts "
                                         f"(auto, disabled, sdpa, fa2{', fa3' if release != '0.9.2' else ''}); "
                                         + (f"releases before 0.9 read it as {old}; " if old else "")
                                         + "the run stops at parsing its arguments", keys.key_span("flash_attn")))
        return UNKNOWN
    if model_type == "gemma2" and raw in ("auto", "fa2"):
        return UNKNOWN  # fa2 when flash-attn is installed, else eager: decided by the machine, not the config
    if model_type in ("youtu", "youtu_vl") and raw in ("auto", "sdpa"):
        return Value("known", "eager", keys.top["flash_attn"].span if keys.has("flash_attn") else None,
                     "LLaMA-Factory forces eager for Youtu models")
    impl = K.LF_ATTENTION[raw]
    if impl is None:
        return UNSET  # auto: nothing set, the transformers default applies
    return keys.value("flash_attn", lambda _: impl)


def _unknown_keys(keys: Keys, release: str, hf_fields: set[str] | None, problems: list[Problem]) -> None:
    if hf_fields is None:
        return  # the HF fields of that transformers release are not known: say nothing
    own = K.llamafactory_keys(release)
    for name, entry in keys.top.items():
        if name not in own and name not in hf_fields:
            problems.append(Problem("TL007", f"{name} is not a LLaMA-Factory {release} argument: HfArgumentParser "
                                             f"raises 'Some specified arguments are not used' (hparams/parser.py) "
                                             f"unless ALLOW_EXTRA_ARGS is set", entry.key_span))


def map_llamafactory(keys: Keys, path: Path, display: str, release: str, note: str,
                     hf_fields: set[str] | None) -> Mapped:
    problems: list[Problem] = []
    n = Counter()
    _unknown_keys(keys, release, hf_fields, problems)
    missing = model_path_problem(keys, "model_name_or_path", path, "LLaMA-Factory")
    if missing is not None:
        problems.append(missing)
    model_type = _model_type(keys.raw("model_name_or_path"), path) if missing is None else None
    attention = _attention(keys, release, model_type, problems)
    unsloth = keys.raw("use_unsloth") is True
    if unsloth:
        attention = UNKNOWN  # Unsloth's loader picks attention, loss and checkpointing by its own version
    here = keys.line_span("model_name_or_path") or Span.point(1)
    anchor = keys.line_span("flash_attn") or here
    stage = keys.raw("stage", K.LF_DEFAULTS["stage"])
    finetuning = keys.raw("finetuning_type", K.LF_DEFAULTS["finetuning_type"])
    bits = keys.raw("quantization_bit")
    quant = "4bit" if bits in (2, 3, 4) else "8bit" if bits == 8 else None
    dtype = UNSET
    for key, name in (("bf16", "bfloat16"), ("pure_bf16", "bfloat16"), ("fp16", "float16")):
        if keys.raw(key) is True:
            dtype = Value("known", name, keys.top[key].span, ORIGIN)
            break
    load_kwargs = {"attn_implementation": (attention, keys.line_span("flash_attn")), "dtype": (dtype, None),
                   "trust_remote_code": (keys.value("trust_remote_code") if keys.raw("trust_remote_code") is True
                                         else UNSET, keys.line_span("trust_remote_code"))}
    class_name = "AutoModelForCausalLM"
    load = call(f"transformers.{class_name}.from_pretrained", load_kwargs, here, n, target="model")
    model = ModelLoad(load, "from_pretrained", class_name,
                      keys.value("model_name_or_path") if missing is None else UNKNOWN, attention, UNSET, UNSET,
                      dtype, Value("known", quant, None, ORIGIN), (), None, "model", anchor)
    calls = [load]
    if model_type in K.LF_QWEN_VL_TYPES:
        # data/mm_plugin.py `_preprocess_image` (0.9.5 l.218-230): every image is resized to at most image_max_pixels
        # (and at least image_min_pixels) before the processor's own smart_resize: the processor's max_pixels in effect
        pixels = {}
        for key, kw in (("image_max_pixels", "max_pixels"), ("image_min_pixels", "min_pixels")):
            value = keys.value(key)
            pixels[kw] = (value if not value.unset else default(K.LF_DEFAULTS[key], f"LLaMA-Factory default {key}"),
                          keys.line_span(key))
        calls.append(call("transformers.AutoProcessor.from_pretrained", pixels, here, n, target="processor",
                          receiver="AutoProcessor"))
    liger = keys.raw("enable_liger_kernel") is True
    if liger and stage in ("pt", "sft") and (model_type is None or model_type in K.LF_LIGER_TYPES) and not unsloth:
        # model/model_utils/liger_kernel.py: apply_liger_kernel_to_<type>() with liger's default FLCE for pt/sft
        calls.append(call("liger_kernel.transformers.apply_liger_kernel_to_model", {},
                          keys.line_span("enable_liger_kernel") or here, n))
    if finetuning in ("lora", "oft"):
        gc_on = keys.raw("disable_gradient_checkpointing") is not True
        if gc_on:
            calls.append(call("llamafactory.model.model_utils.checkpointing.enable_input_require_grads", {}, here, n,
                              receiver="model"))
        target = keys.raw("lora_target", K.LF_DEFAULTS["lora_target"])
        # hparams/finetuning_args.py: a comma-separated string ("all": every linear layer); a YAML list is read as is
        names = target if isinstance(target, list) else [t.strip() for t in str(target).split(",")]
        targets = Value("known", "all-linear" if names == ["all"] else [str(t) for t in names],
                        keys.top["lora_target"].span if keys.has("lora_target") else None, ORIGIN)
        rank = keys.value("lora_rank")
        if rank.unset:
            rank = default(K.LF_DEFAULTS["lora_rank"], "LLaMA-Factory default lora_rank")
        # model/adapter.py (0.9.5 l.206-213): find_all_linear_modules and patch_target_modules leave out the vision
        # tower's modules while freeze_vision_tower is on (hparams/finetuning_args.py l.527: default True)
        frozen = keys.raw("freeze_vision_tower", K.LF_DEFAULTS["freeze_vision_tower"]) is not False
        # the projector (Qwen-VL's visual.merger) is left out of "all" in any case (model_utils/misc.py
        # find_all_linear_modules, 0.9.5: projector_keys among the forbidden modules)
        exclude = Value("known", K.LF_VISION_EXCLUDE if frozen else K.LF_MERGER_EXCLUDE,
                        keys.line_span("freeze_vision_tower"), ORIGIN) if model_type in K.LF_QWEN_VL_TYPES else UNSET
        if finetuning == "lora":
            calls.append(call("peft.LoraConfig", {"r": (rank, keys.line_span("lora_rank")),
                                                  "target_modules": (targets, None),
                                                  "exclude_modules": (exclude, None)}, here, n, target="lora_config"))
        calls.append(call("peft.get_peft_model", {}, here, n, target="model"))

    args = _training_args(keys, here, n, unsloth, path)
    calls.append(args.call)
    trainer_name, library = K.LF_TRAINERS.get(stage, (f"{stage}Trainer", "llamafactory"))
    trainer_call = call(f"{library}.{trainer_name}", {}, here, n, target="trainer")
    calls.append(trainer_call)
    full = FRAMEWORK_FULL_LOGITS.get((library, trainer_name))
    stage_span = keys.line_span("stage") or here
    base = K.LF_TRL_BASE.get(stage) if isinstance(stage, str) else None
    trainer = TrainerCall(trainer_call, trainer_name, library, "training_args", "model", "trainer",
                          subclass=trainer_name if full else None,
                          loss_override=("full", full[0], stage_span) if full else None,
                          trl_base=base, stage_span=stage_span if keys.has("stage") else None,
                          framework_models=_models(keys, stage, finetuning) if base else ())
    seq = keys.value("cutoff_len")
    if seq.unset:
        seq = default(K.LF_DEFAULTS["cutoff_len"], "LLaMA-Factory default cutoff_len")
    facts = ScriptFacts(path=display, imports=(), calls=tuple(calls), models=(model,), args_objects=(args,),
                        trainers=(trainer,),
                        seq_evidence=(Evidence(seq, "cutoff_len", keys.line_span("cutoff_len") or Span.point(1)),),
                        batch_evidence=(), accum_evidence=(), pip_pins=(), logits_accessed=False)
    return Mapped(K.LLAMAFACTORY, release, note, facts, keys, problems, {}, "flash_attn")


def _models(keys: Keys, stage: str, finetuning: object) -> tuple[FrameworkModel, ...]:
    """The reference (and PPO's reward) model LLaMA-Factory makes beside the policy (frameworks/knowledge.py
    "RL / preference stages": its trainers bypass TRL's __init__, so this is the whole decision)."""
    out: list[FrameworkModel] = []
    loss = keys.raw("pref_loss", K.LF_PREF_DEFAULTS["pref_loss"])
    ref = keys.raw("ref_model")
    at = keys.line_span("finetuning_type") or keys.line_span("stage")
    if stage == "dpo" and loss in K.LF_REFERENCE_FREE:
        out.append(FrameworkModel("reference", f"none (pref_loss {loss})", False,
                                  f"pref_loss {loss} is reference-free: use_ref_model is False "
                                  f"(hparams/finetuning_args.py 0.9.5:574)", keys.line_span("pref_loss")))
    elif isinstance(ref, str) and ref:
        quant = keys.raw("ref_model_quantization_bit")
        out.append(FrameworkModel("reference", "loaded" + (f" ({quant}-bit)" if quant in (4, 8) else ""), True,
                                  K.LF_REF_SOURCE + "ref_model is loaded, frozen, for the whole run",
                                  keys.line_span("ref_model"),
                                  model_id=ref if ref != keys.raw("model_name_or_path") else None))
    elif finetuning == "lora":
        out.append(FrameworkModel("reference", "adapter disabled", False,
                                  K.LF_REF_SOURCE + "finetuning_type lora and no ref_model: the policy with its "
                                  "adapters disabled is the reference", at))
    else:
        out.append(FrameworkModel("reference", "copy", True,
                                  K.LF_REF_SOURCE + f"finetuning_type {finetuning}: the model is loaded a second "
                                  f"time, frozen, for the whole run", at, drop="finetuning_type: lora"))
    if stage == "ppo":
        kind = keys.raw("reward_model_type", K.LF_PREF_DEFAULTS["reward_model_type"])
        reward = keys.raw("reward_model")
        if kind == "full" and isinstance(reward, str) and reward:
            out.append(FrameworkModel("reward", "loaded", True, "LLaMA-Factory create_reward_model: "
                                      "reward_model_type full loads reward_model", keys.line_span("reward_model"),
                                      model_id=reward))
        else:
            how = "api" if kind == "api" else "adapter on the policy"
            out.append(FrameworkModel("reward", how, False, f"LLaMA-Factory create_reward_model: reward_model_type "
                                      f"{kind} (no second model on the GPU)", keys.line_span("reward_model_type")))
    return tuple(out)


def _training_args(keys: Keys, here: Span, n: Counter, unsloth: bool, path: Path) -> ArgsObject:
    gc = Value("known", keys.raw("disable_gradient_checkpointing") is not True,
               keys.top["disable_gradient_checkpointing"].span if keys.has("disable_gradient_checkpointing") else None,
               ORIGIN if keys.has("disable_gradient_checkpointing") else "LLaMA-Factory default (checkpointing on)")
    reentrant = keys.raw("use_reentrant_gc", True)
    names = ("per_device_train_batch_size", "gradient_accumulation_steps", "auto_find_batch_size", "bf16", "fp16",
             "optim", "deepspeed", "fsdp", "max_steps", "use_liger_kernel", "pref_loss")
    kwargs = {name: (keys.value(name), keys.line_span(name)) for name in names}
    if keys.raw("stage") == "ppo":
        # GeneratingArguments / FinetuningArguments the rollout reads (knowledge/frameworks.py LF_PPO_DEFAULTS)
        for name, value in K.LF_PPO_DEFAULTS.items():
            v = keys.value(name)
            kwargs[name] = (v if not v.unset else default(value, f"LLaMA-Factory default {name}"), keys.line_span(name))
        cut = keys.value("cutoff_len")
        kwargs["cutoff_len"] = (cut if not cut.unset else default(K.LF_DEFAULTS["cutoff_len"],
                                                                  "LLaMA-Factory default cutoff_len"),
                                keys.line_span("cutoff_len"))
    kwargs["deepspeed"] = (local_file(keys.value("deepspeed"), path), keys.line_span("deepspeed"))
    if unsloth:
        kwargs["use_liger_kernel"] = (UNKNOWN, None)
    kwargs["gradient_checkpointing"] = (gc, keys.line_span("disable_gradient_checkpointing"))
    kwargs["gradient_checkpointing_kwargs"] = (default({"use_reentrant": reentrant is not False},
                                                       "LLaMA-Factory use_reentrant_gc"), None)
    return ArgsObject(call("transformers.Seq2SeqTrainingArguments", kwargs, here, n, target="training_args"),
                      "Seq2SeqTrainingArguments", "transformers", "training_args")
