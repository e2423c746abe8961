"""TRL trainers by version: whether the training loss builds the full [batch x seq x vocab] logits, which config
flag switches on a fused/chunked path, whether a reference or teacher model's logits are built while the policy's
graph is alive, and whether the trainer itself makes the inputs require grad for PEFT + reentrant checkpointing.

Every row was read from the released wheels (`pip download --no-deps trl==X`, unzipped; file paths are relative to the
wheel root), at these versions: 0.7.11, 0.8.6, 0.9.6, 0.10.1, 0.11.4, 0.12.2, 0.13.0, 0.14.0, 0.15.2, 0.16.1, 0.17.0,
0.18.2, 0.19.1, 0.20.0, 0.21.0, 0.22.2, 0.23.1, 0.24.0, 0.25.1, 0.26.2, 0.27.2, 0.28.0, 0.29.1, 1.0.0, 1.1.0, 1.2.0,
1.3.0, 1.4.0, 1.5.1, 1.6.0, 1.7.0, 1.8.0, 1.9.2, 1.10.0, 1.11.0, 1.12.0, 1.13.0, 1.14.0, 1.14.2, 1.15.0, 1.16.0.
A boundary between two read versions is placed at the first read version that shows the change; a release between
them that was not read is answered by the nearest row below it. See also ../shared/research/trl-chunked-loss-versions.md.
SFTTrainer's loss is decided by knowledge.libraries.sft_loss_is_chunked (loss_type history); RewardTrainer trains a
sequence-classification head (no vocabulary logits).

Loss paths (`flags`: config keywords that switch on the fused path; anything else computes `outputs.logits`):

| trainer | versions | full logits | fused path | reference/teacher logits in the same step | source |
|---|---|---|---|---|---|
| DPOTrainer | <= 0.18 | yes (chosen + rejected concatenated: 2 x batch rows) | none | ref model, unless `precompute_ref_log_probs` | 0.18.2 dpo_trainer.py `concatenated_forward`, `get_batch_loss_metrics` (policy, then `compute_ref_log_probs`) |
| DPOTrainer | 0.19-0.24 | yes | `use_liger_loss=True` (LigerFusedLinearDPOLoss) | same | 0.19.1 dpo_trainer.py:336, :1614 |
| DPOTrainer | 0.25-1.14 | yes | `use_liger_kernel=True` (`use_liger_loss` copied into it 0.25-0.27) | same | 0.25.1 dpo_config.py:541; 1.13.0 dpo_trainer.py:1765 `compute_loss`, :1382 `outputs.logits`, :1420 ref forward |
| DPOTrainer | >= 1.15 | never (`add_fused_lm_head` on policy and ref) | - | - | 1.15.0 dpo_trainer.py:930-938 |
| KTOTrainer | <= 0.16 | yes (the KL batch runs under no_grad: 0.19.1 kto_trainer.py:1192) | none | ref model, unless `precompute_ref_log_probs` | 0.16.1 kto_trainer.py |
| KTOTrainer | 0.17-0.24 | yes | `use_liger_loss=True` | same | 0.17.0 kto_trainer.py:787, :1375 |
| KTOTrainer | 0.25 | yes | `use_liger_kernel=True` | same | 0.25.1 kto_trainer.py |
| KTOTrainer | 0.26-1.7 (trl.experimental.kto) | yes | none (no Liger code in the trainer) | same | 0.26.2, 1.7.0 experimental/kto/kto_trainer.py |
| KTOTrainer | 1.8-1.14 | yes | `use_liger_kernel=True` | same | 1.8.0 trainer/kto_trainer.py; 1.13.0 :1762 |
| KTOTrainer | >= 1.15 | never | - | - | 1.15.0 kto_trainer.py:941-948 |
| ORPOTrainer, CPOTrainer | all (experimental from 0.26) | yes (2 x batch rows) | none (no Liger code in either trainer) | none | 0.8.6 orpo_trainer.py:662, cpo_trainer.py:501; 1.16.0 experimental/orpo, experimental/cpo |
| GRPOTrainer | 0.14-0.16 | yes (completion tokens, `logits_to_keep`) | none | ref logps in a separate no-grad pass (beta != 0; default 0.04 <= 0.18, 0.0 from 0.19) | 0.16.1 grpo_trainer.py; grpo_config.py `beta` |
| GRPOTrainer | 0.17-0.24 | yes | `use_liger_loss=True` | same | 0.17.0 grpo_trainer.py:543, :1183 |
| GRPOTrainer | 0.25-1.14 | yes | `use_liger_kernel=True` | same | 0.25.1 grpo_trainer.py; 1.14.2 :1382 |
| GRPOTrainer | >= 1.15 | never | - | - | 1.15.0 grpo_trainer.py:1040-1049 |
| RLOOTrainer | 0.9-1.14 | yes | none | ref logps in a separate no-grad pass | 0.19.1 rloo_trainer.py (`ref_policy`); 1.14.2 :1000 |
| RLOOTrainer | >= 1.15 | never | - | - | 1.15.0 rloo_trainer.py:686-694 |
| PPOTrainer | all (experimental from 0.26, gone from 1.13) | yes | none | ref logps in a separate no-grad pass | 0.19.1 ppo_trainer.py (`ref_model`); 1.10.0 experimental/ppo |
| GKDTrainer | 0.11-0.21 | yes (student, and the teacher in the same step) | none (0.11-0.15 `use_liger` only loads the models with Liger; the JSD still reads the full logits) | teacher | 0.11.4 gkd_trainer.py:75 |
| GKDTrainer | 0.22-1.13 | yes | `use_liger_kernel=True` (LigerFusedLinearJSDLoss) | teacher | 0.22.2 gkd_trainer.py:97-105 |
| GKDTrainer | >= 1.14 (trl.experimental.gkd) | yes | none | teacher | 1.14.2 experimental/gkd/gkd_trainer.py (no Liger) |
| DistillationTrainer | 1.3-1.9 (trl.experimental.distillation) | yes (student and teacher) | `use_liger_kernel=True` (fused JSD) | teacher | 1.9.2 experimental/distillation/distillation_trainer.py:444, :1057 |
| DistillationTrainer | >= 1.10 | never (`_chunked_divergence_loss`: "The full `lm_head` projections are never materialized") | - | - | 1.10.0 trainer/distillation_trainer.py:152, :1460 |

PEFT + gradient checkpointing (whether the trainer calls `enable_input_require_grads()` itself; "Trainer" means the
trainer leaves it to transformers' Trainer, whose behaviour per transformers version TL201 already knows):

| trainer | versions | hooks the inputs | source |
|---|---|---|---|
| SFTTrainer (and GKDTrainer, its subclass in every version: 0.11.4 gkd_trainer.py:40, 1.16.0 experimental/gkd/gkd_trainer.py:54) | <= 0.19 | only when given `peft_config` and a model that is not yet a PeftModel | 0.8.6 sft_trainer.py:184-220; 0.19.1 :565 (`if isinstance(model, PeftModel): return model`), :615-621 |
| SFTTrainer | >= 0.20 | `peft_config` or a PeftModel | 0.20.0 sft_trainer.py:433; 0.22.2 models/utils.py `prepare_peft_model` :546; 0.26.2 sft_trainer.py:707 |
| DPOTrainer, KTOTrainer, ORPOTrainer, CPOTrainer | DPO <= 0.28, KTO <= 1.3, ORPO and CPO every version | whenever checkpointing is on, PEFT or not | 0.8.6 dpo_trainer.py:239-263; 0.19.1 :589 `_prepare_gradient_checkpointing`; 1.3.0 experimental/kto/kto_trainer.py:332, :353; 1.16.0 experimental/orpo/orpo_trainer.py:236 (and cpo) |
| DPOTrainer, KTOTrainer | DPO >= 0.29, KTO >= 1.4 | a PeftModel (after `peft_config`) with checkpointing on | 0.29.1 dpo_trainer.py:561; 1.4.0 experimental/kto/kto_trainer.py:314 |
| GRPOTrainer | 0.14-0.15 | no: `get_peft_model` then transformers' Trainer | 0.15.2 grpo_trainer.py:246-252 |
| GRPOTrainer | >= 0.16 | any model, checkpointing on and reentrant | 0.16.1 grpo_trainer.py:311, :563-581; 0.22.2 `prepare_peft_model`; 0.26.2 :323 |
| RLOOTrainer | 0.22- | `peft_config` or a PeftModel | 0.22.2 rloo_trainer.py `prepare_peft_model`; 0.27.2 :322 |
| RewardTrainer | <= 0.21 | only quantized models (`prepare_model_for_kbit_training`); a plain LoRA model: Trainer | 0.19.1 reward_trainer.py:147-167 |
| RewardTrainer | >= 0.22 | `peft_config` or a PeftModel | 0.22.2 `prepare_peft_model`; 0.26.2 reward_trainer.py:358 |
| DistillationTrainer | 1.3-1.9 | no: `get_peft_model` then Trainer | 1.3.0 experimental/distillation/distillation_trainer.py:432 |
| DistillationTrainer | >= 1.10 | a PeftModel with checkpointing on | 1.10.0 trainer/distillation_trainer.py:527 |
| PPOTrainer, old RLOOTrainer (<= 0.21) | - | not modelled: their own training loop never calls `gradient_checkpointing_enable` (0.19.1 ppo_trainer.py, rloo_trainer.py have no `gradient_checkpointing`) | |
"""

from __future__ import annotations

from dataclasses import dataclass

from trainlint.knowledge.versions import LibraryVersion

V = tuple[int, ...]


@dataclass(frozen=True)
class LossRow:
    since: V
    until: V | None  # exclusive; None: still true in 1.16.0
    full_logits: bool
    flags: tuple[str, ...] = ()  # config keywords whose True switches on a fused path
    rows: int = 1  # logits rows per example (preference pairs: chosen + rejected)
    reference: str | None = None  # "ref" | "teacher": a second model's logits in the same step; None: none / separate


# (trainer) -> rows, oldest first; see the module docstring for the sources.
LOSS: dict[str, tuple[LossRow, ...]] = {
    "DPOTrainer": (
        LossRow((0,), (0, 19), True, (), 2, "ref"),
        LossRow((0, 19), (0, 25), True, ("use_liger_loss",), 2, "ref"),
        LossRow((0, 25), (1, 15), True, ("use_liger_kernel", "use_liger_loss"), 2, "ref"),
        LossRow((1, 15), None, False, (), 2),  # (still chosen + rejected in one forward: 1.16.0 :1299, "[chosen, rejected]")
    ),
    "KTOTrainer": (
        LossRow((0,), (0, 17), True, (), 1, "ref"),
        LossRow((0, 17), (0, 25), True, ("use_liger_loss",), 1, "ref"),
        LossRow((0, 25), (0, 26), True, ("use_liger_kernel", "use_liger_loss"), 1, "ref"),
        LossRow((0, 26), (1, 8), True, (), 1, "ref"),
        LossRow((1, 8), (1, 15), True, ("use_liger_kernel",), 1, "ref"),
        LossRow((1, 15), None, False),
    ),
    "ORPOTrainer": (LossRow((0,), None, True, (), 2),),
    "CPOTrainer": (LossRow((0,), None, True, (), 2),),
    "GRPOTrainer": (
        LossRow((0, 14), (0, 17), True),
        LossRow((0, 17), (0, 25), True, ("use_liger_loss",)),
        LossRow((0, 25), (1, 15), True, ("use_liger_kernel", "use_liger_loss")),
        LossRow((1, 15), None, False),
    ),
    "RLOOTrainer": (LossRow((0, 9), (1, 15), True), LossRow((1, 15), None, False)),
    "PPOTrainer": (LossRow((0,), None, True),),
    "GKDTrainer": (
        LossRow((0, 11), (0, 22), True, (), 1, "teacher"),
        LossRow((0, 22), (1, 14), True, ("use_liger_kernel",), 1, "teacher"),
        LossRow((1, 14), None, True, (), 1, "teacher"),
    ),
    "DistillationTrainer": (
        LossRow((1, 3), (1, 10), True, ("use_liger_kernel",), 1, "teacher"),
        LossRow((1, 10), None, False),
    ),
}
# The trainers whose training loss runs TRL's fused LM head (`add_fused_lm_head`, trainer/utils.py, whose forward calls
# kernels/chunked_logprob.py `ChunkedLogProbFunction`) from 1.15: 1.16.0 sft_trainer.py:1144, dpo_trainer.py:960,
# kto_trainer.py:967, grpo_trainer.py:1068, rloo_trainer.py:716; 1.15.0 sft_trainer.py:1137, dpo_trainer.py:936.
# DistillationTrainer's chunked divergence (>= 1.10) and SFT's `chunked_nll` (1.4-1.14) are other code paths.
FUSED_LM_HEAD = frozenset({"SFTTrainer", "DPOTrainer", "KTOTrainer", "GRPOTrainer", "RLOOTrainer"})


def fused_lm_head(trainer: str, trl: LibraryVersion) -> bool:
    """Whether `trainer`'s training loss at this TRL version is the fused LM head (FUSED_LM_HEAD)."""
    return trainer in FUSED_LM_HEAD and trl.at_least(1, 15)


# DPO / KTO keep a frozen copy of the policy as the reference model when none is passed, unless the model is a
# PeftModel (the reference is the model with its adapters disabled) or `precompute_ref_log_probs=True`:
# 0.8.6 dpo_trainer.py:291-295, 0.19.1 :323-327 and kto_trainer.py:472-476 (`create_reference_model(model)`);
# 1.13.0 dpo_trainer.py:919-934, kto_trainer.py:927-942 (`create_model_from_path`, the same model id and kwargs).
REFERENCE_COPY = frozenset({"DPOTrainer", "KTOTrainer"})
# A DPO / KTO script that precomputes the reference log-probabilities runs no reference forward in the step.
NO_REFERENCE_FLAGS = ("precompute_ref_log_probs",)
# Trainers whose model has no vocabulary head (RewardTrainer: AutoModelForSequenceClassification).
NO_VOCAB_LOGITS = frozenset({"RewardTrainer", "PRMTrainer"})


def _cmp(a: V, b: V) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def loss_row(trainer: str, trl: LibraryVersion) -> LossRow | None:
    """The loss-path row for a TRL trainer at a version; None for SFT (see libraries), unknown trainers and versions
    before the trainer existed."""
    for row in LOSS.get(trainer, ()):
        if _cmp(trl.tuple, row.since) >= 0 and (row.until is None or _cmp(trl.tuple, row.until) < 0):
            return row
    return None


@dataclass(frozen=True)
class HookRow:
    since: V
    until: V | None
    hooks: str  # "peft_config" | "peft" (peft_config or a PeftModel) | "always" | "trainer" | "skip"


HOOKS: dict[str, tuple[HookRow, ...]] = {
    "SFTTrainer": (HookRow((0,), (0, 20), "peft_config"), HookRow((0, 20), None, "peft")),
    "GKDTrainer": (HookRow((0,), (0, 20), "peft_config"), HookRow((0, 20), None, "peft")),
    "DPOTrainer": (HookRow((0,), (0, 29), "always"), HookRow((0, 29), None, "peft")),
    "KTOTrainer": (HookRow((0,), (1, 4), "always"), HookRow((1, 4), None, "peft")),
    "ORPOTrainer": (HookRow((0,), None, "always"),),
    "CPOTrainer": (HookRow((0,), None, "always"),),
    "GRPOTrainer": (HookRow((0,), (0, 16), "trainer"), HookRow((0, 16), None, "peft")),
    "RLOOTrainer": (HookRow((0,), (0, 22), "skip"), HookRow((0, 22), None, "peft")),
    "RewardTrainer": (HookRow((0,), (0, 22), "trainer"), HookRow((0, 22), None, "peft")),
    "DistillationTrainer": (HookRow((0,), (1, 10), "trainer"), HookRow((1, 10), None, "peft")),
    "PPOTrainer": (HookRow((0,), None, "skip"),),
}


def input_hook(trainer: str, trl: LibraryVersion) -> str | None:
    """How a TRL trainer hooks the inputs for PEFT + checkpointing at a version (HOOKS); None when not read."""
    for row in HOOKS.get(trainer, ()):
        if _cmp(trl.tuple, row.since) >= 0 and (row.until is None or _cmp(trl.tuple, row.until) < 0):
            return row.hooks
    return None


# Frameworks' own preference trainers, whose loss reads the model's full logits in fp32 (there is no fused path:
# LLaMA-Factory applies Liger with fused_linear_cross_entropy=False for every stage but pt/sft,
# model/loader.py:133 `require_logits=(finetuning_args.stage not in ["pt", "sft"])`, liger_kernel.py:97-99).
# (library, trainer) -> (the method, rows per example, the reference's logits in the same step unless the named
# setting takes one of the values listed, source)
FRAMEWORK_FULL_LOGITS = {
    ("llamafactory", "CustomDPOTrainer"): (
        "concatenated_forward", 2, ("reference", "pref_loss", ("orpo", "simpo")),
        "LLaMA-Factory 0.9.2 src/llamafactory/train/dpo/trainer.py:198 `model(**batch).logits.to(torch.float32)` on "
        "chosen + rejected; compute_reference_log_probs :214-231 (the adapter disabled, or ref_model) under no_grad; "
        "use_ref_model unless pref_loss is orpo / simpo (hparams/finetuning_args.py:462)"),
    ("llamafactory", "CustomKTOTrainer"): (
        "forward", 1, ("reference", None, ()),
        "LLaMA-Factory 0.9.2 src/llamafactory/train/kto/trainer.py:168 `model(**model_inputs).logits.to(torch.float32)`"),
}



# --- Components: which models are resident, per trainer, version and setting ------------------------------------
# Read from the wheels in /tmp/whl-rl (trl 0.8.6, 0.11.4, 0.14.0, 0.15.2, 0.16.1, 0.17.0, 0.18.2, 0.19.1, 0.20.0,
# 0.23.1, 0.26.2, 0.29.1, 1.0.0, 1.5.1, 1.8.0, 1.10.0, 1.13.0 and the installed 1.16.0). A boundary between two read
# versions is placed at the first read version that shows the change (as above).
#
# | trainer | versions | reference model | other models | source |
# |---|---|---|---|---|
# | DPOTrainer | <= 0.28 | `ref_model` passed: resident; else none with a PeftModel (adapter disabled) or `precompute_ref_log_probs=True`; else `create_reference_model(model)`: a deep copy, the policy's dtype | - | 0.8.6 dpo_trainer.py:289-295; 0.19.1 :321-327 |
# | DPOTrainer | 0.29-1.4 | none with a PeftModel; else `create_model_from_path(model id, **model_init_kwargs)`, loaded even with `precompute_ref_log_probs=True`; its dtype is model_init_kwargs' `dtype`, else float32 (`create_model_from_path`'s default) | - | 0.29.1 dpo_trainer.py:701-713, trainer/utils.py:1053; 1.0.0 dpo_trainer.py:749 |
# | DPOTrainer | 1.5-1.15 | as 0.29, but `precompute_ref_log_probs=True` drops it again | - | 1.5.1 dpo_trainer.py:758; 1.13.0 :920-934, utils.py:1175 |
# | DPOTrainer | >= 1.16 | as 1.5, not under FSDP; the dtype defaults to the policy's (`setdefault("dtype", self.model.dtype)`) | - | 1.16.0 dpo_trainer.py:909-927 |
# | DPOTrainer | <= 0.28 | a `ref_model` given by name: `_create_model_from_path(ref_model, is_ref=True)` with `ref_model_init_kwargs` (its `torch_dtype`, else from_pretrained's default) | - | 0.19.1 dpo_trainer.py:297-303, :504-530 |
# | DPOTrainer | all | `force_use_ref_model=True` keeps a passed `ref_model` next to a PEFT policy (without it, passing both raises) | - | 0.8.6 dpo_trainer.py:219; 0.19.1 :548 |
# | KTOTrainer | all read | none with PEFT or `precompute_ref_log_probs=True` (every version); else a deep copy <= 1.0 | - | 0.19.1 kto_trainer.py:472-476; 1.0.0 experimental/kto/kto_trainer.py:445-449 |
# | KTOTrainer | 1.5-1.15 | `create_model_from_path(model id, **model_init_kwargs)`: float32 unless they set dtype; >= 1.16 the policy's dtype | - | 1.5.1 experimental/kto/kto_trainer.py:400-411; 1.13.0 trainer/kto_trainer.py:928-942; 1.16.0 :935 |
# | ORPOTrainer, CPOTrainer | all | none (reference-free losses) | - | 0.8.6 orpo_trainer.py, cpo_trainer.py (no ref_model) |
# | GRPOTrainer | 0.14-0.15 | a copy (`create_reference_model`) unless PEFT, whatever `beta` | reward functions that are models (`AutoModelForSequenceClassification`) | 0.14.0 grpo_trainer.py:205-209; 0.15.2 :252-258 |
# | GRPOTrainer | >= 0.16 | none when `beta == 0.0`; none with PEFT; else a copy / `create_model_from_path(model_init_kwargs)` | same | 0.16.1 grpo_trainer.py:316-327; 1.16.0 :984-990 |
# | GRPOTrainer | beta default | 0.04 in 0.14-0.18; 0.0 from 0.19 | | 0.18.2 grpo_config.py:391; 0.19.1 :413 |
# | GRPOTrainer | `sync_ref_model` | keeps the reference resident (and rejected with beta=0.0 or PEFT from 0.29) | | 0.15.2 grpo_trainer.py:448; 0.29.1 :779-792 |
# | RLOOTrainer | <= 0.21 | `ref_policy` passed by the caller: resident | `reward_model` | 0.19.1 rloo_trainer.py:112, :229-234 |
# | RLOOTrainer | >= 0.22 (GRPO-shaped) | none when `beta == 0.0` (default 0.05), none with PEFT, else a copy | reward functions | 0.23.1 rloo_trainer.py:467-473, rloo_config.py:423; 1.16.0 :670-676 |
# | PPOTrainer | all | `ref_model` or a copy (`create_reference_model`), none with PEFT | `reward_model`, `value_model` (both full models) | 0.19.1 ppo_trainer.py:175-184 |
# | OnlineDPOTrainer | all read | a copy unless PEFT | `reward_model` (or `reward_funcs` 0.26+), or a `judge` (no model on the GPU) | 0.19.1 online_dpo_trainer.py:163-221; 0.26.2 :203-341 |
# | GKDTrainer, DistillationTrainer | all | - | `teacher_model`, resident for the whole run | 0.11.4 gkd_trainer.py; 1.16.0 trainer/distillation_trainer.py |
# | RewardTrainer, PRMTrainer | all | - | (the policy is a sequence classifier: no vocabulary logits) | 0.19.1 reward_trainer.py |
GRPO_BETA_DEFAULT = ((0, 14), 0.04, (0, 19), 0.0)  # (since, default, since, default)
RLOO_BETA_DEFAULT = 0.05  # rloo_config.py `beta` 0.23.1:423, 1.16.0:503 (the GRPO-shaped RLOO, >= 0.22)

# Trainers (and the first version) where beta == 0.0 drops the reference model
BETA_ZERO_DROPS_REF = {"GRPOTrainer": (0, 16), "RLOOTrainer": (0, 22)}
# Trainers whose policy is copied as the reference when no ref_model is given and the model is not a PeftModel
COPIES_POLICY = frozenset({"DPOTrainer", "KTOTrainer", "GRPOTrainer", "RLOOTrainer", "PPOTrainer",
                           "OnlineDPOTrainer"})
NO_REFERENCE = frozenset({"ORPOTrainer", "CPOTrainer", "SFTTrainer", "RewardTrainer", "PRMTrainer", "GKDTrainer",
                          "DistillationTrainer"})
# Keywords of the trainer's call that hold another model: (keyword, role)
MODEL_KEYWORDS = (("ref_model", "reference"), ("ref_policy", "reference"), ("reward_model", "reward"),
                  ("value_model", "value"), ("teacher_model", "teacher"), ("reward_funcs", "reward"))


def _at(trl: LibraryVersion, since: V, until: V | None = None) -> bool:
    return _cmp(trl.tuple, since) >= 0 and (until is None or _cmp(trl.tuple, until) < 0)


at = _at  # (public name for the Run)


def grpo_beta_default(trl: LibraryVersion) -> float:
    """GRPOConfig.beta's default: 0.04 before 0.19, 0.0 from 0.19 (grpo_config.py 0.18.2:391, 0.19.1:413)."""
    return 0.04 if _cmp(trl.tuple, (0, 19)) < 0 else 0.0


def beta_zero_drops_reference(trainer: str, trl: LibraryVersion) -> bool:
    since = BETA_ZERO_DROPS_REF.get(trainer)
    return since is not None and _at(trl, since)


def precompute_drops_reference(trainer: str, trl: LibraryVersion) -> bool:
    """`precompute_ref_log_probs=True` leaves no reference model resident: DPO <= 0.28 and >= 1.5 (0.29-1.4 load it
    anyway: 0.29.1 dpo_trainer.py:701-713, 1.0.0 :749); KTO in every version read."""
    if trainer == "DPOTrainer":
        return not _at(trl, (0, 29), (1, 5))
    return trainer == "KTOTrainer"


def reference_dtype_source(trainer: str, trl: LibraryVersion) -> str:
    """Where a DPO reference built by the trainer takes its dtype: "policy" (a deep copy <= 0.28; `setdefault(
    "dtype", self.model.dtype)` >= 1.16) or "model_init_kwargs" (0.29-1.15: create_model_from_path, float32 unless
    model_init_kwargs say otherwise; utils.py 0.29.1:1053, 1.13.0:1175)."""
    if trainer == "DPOTrainer" and _at(trl, (0, 29), (1, 16)):
        return "model_init_kwargs"
    if trainer == "KTOTrainer" and _at(trl, (1, 5), (1, 16)):  # 1.0.0 experimental/kto :449 still deep-copies
        return "model_init_kwargs"
    return "policy"


# --- Generation (GRPO, RLOO >= 0.22, Online DPO) ------------------------------------------------------------------
# | fact | versions | source |
# |---|---|---|
# | `per_device_train_batch_size` counts prompts; each is generated `num_generations` times | GRPO 0.14 | 0.14.0 grpo_trainer.py:417 `repeat_interleave(..., self.num_generations)`, :469 |
# | `per_device_train_batch_size` counts completions (the global batch must divide by `num_generations`) | GRPO >= 0.15 | 0.15.2 grpo_trainer.py:343-344 |
# | one generation covers `per_device_train_batch_size x steps_per_generation` completions per device; `steps_per_generation` defaults to `gradient_accumulation_steps`; `generation_batch_size` sets it instead | GRPO >= 0.18 | 0.18.2 grpo_config.py:517-529; 1.16.0 :1098-1112 |
# | HF path: one `unwrapped_model.generate(...)` over the whole generation batch of the device (not chunked), under no_grad, every `steps_per_generation x num_iterations` steps | GRPO | 1.16.0 grpo_trainer.py:1538-1545 (`_prepare_inputs`), :1861-1875 |
# | the per-token log-probabilities: one forward over the whole batch, `selective_log_softmax` on [rows x completion x vocab] logits | GRPO 0.15-0.16 | 0.15.2 grpo_trainer.py:478-487; 0.16.1 :587-599 |
# | the same, chunked by `batch_size` (per_device_train_batch_size) rows | GRPO 0.17-1.14 | 0.17.0 grpo_trainer.py:814-833; 0.23.1 :782-844 (also `entropy_from_logits` with `compute_entropy`) |
# | entropy (`compute_entropy=True` in the training step): `entropy_from_logits` under no_grad, in chunks of 128 flattened rows: [128 x vocab] temporaries, not counted | GRPO 0.2x-1.14 | 0.23.1 grpo_trainer.py:838-840, trainer/utils.py:1480 |
# | per-token log-probabilities from the fused LM head (`fused_lm_head=True`: no [rows x completion x vocab] logits) | GRPO >= 1.15 | 1.16.0 grpo_trainer.py:1419-1506 |
# | `num_generations` 8; `max_completion_length` 256 (512 from 1.10); `max_prompt_length` 512 (gone in 1.0) | | 0.14.0 grpo_config.py:103-117; 1.0.0 :385-399; 1.8.0 :486; 1.10.0 :492; 1.16.0 :481-495 |
# | vLLM: `vllm_device` (another GPU, default "auto") | 0.14-0.16 | 0.14.0 grpo_config.py:130 |
# | vLLM: `vllm_mode` "server" (other GPUs) or "colocate" (the training GPU); default "server" | 0.18-0.29 | 0.18.2 grpo_config.py:332-333; 0.29.1 :474 |
# | vLLM: `vllm_mode` default "colocate" | >= 1.0 | 1.0.0 grpo_config.py:502-503; 1.16.0 :594-595 |
# | `vllm_gpu_memory_utilization` default 0.9 (then vLLM had its own GPU) | 0.14-0.17 | 0.14.0 grpo_config.py:138-139; 0.15.2 :180-181 |
# | `vllm_gpu_memory_utilization` default 0.3 ("only applies to colocation mode") | >= 0.18 | 0.18.2 grpo_config.py:365-366, grpo_trainer.py:503; 1.16.0 :656-657 |
GENERATING = frozenset({"GRPOTrainer", "RLOOTrainer", "OnlineDPOTrainer", "PPOTrainer"})


def rollout_loop(trainer: str, trl: LibraryVersion) -> bool:
    """PPO (0.12-1.12, trl.experimental.ppo from 0.26) and RLOO before 0.22 run their own rollout loop: the policy
    generates `per_device_train_batch_size x gradient_accumulation_steps` rows (RLOO: prompts repeated `rloo_k` times)
    in chunks of `local_rollout_forward_batch_size` (default 64) with `output_scores=True`, and `batch_generation`
    keeps every generated token's logits of every row until the scoring loop ends: fp32 (transformers' `_sample` casts
    them, 4.57.6 generation/utils.py:2802), `torch.stack`ed per chunk then `pad`ded into one tensor (a second copy).
    The scoring loop then runs the reference, value and reward forwards per chunk. Read in trl 0.14.0
    trainer/ppo_trainer.py:426-440 and utils.py:1353 `batch_generation`, 0.19.1 ppo_trainer.py:427-440,
    utils.py:1418-1447 (stack in `generate` :1413, `output_scores=True` :1411), rloo_trainer.py:308, :321; 0.11.4
    rloo_trainer.py:296; 0.26.2 experimental/ppo/ppo_trainer.py:511; 1.10.0 experimental/ppo/ppo_trainer.py:690.
    Defaults (OnPolicyConfig: 0.19.1 utils.py:1102-1125; 1.10.0 experimental/ppo/ppo_config.py:133-154):
    response_length 53, local_rollout_forward_batch_size 64; RLOOConfig rloo_k 2 (0.19.1 rloo_config.py:87)."""
    if trainer == "PPOTrainer":
        return _at(trl, (0, 12), (1, 13))
    return trainer == "RLOOTrainer" and _at(trl, (0, 9), (0, 22))


def counts_completions(trainer: str, trl: LibraryVersion) -> bool:
    """per_device_train_batch_size counts completions (GRPO >= 0.15, RLOO >= 0.22), not prompts."""
    if trainer == "GRPOTrainer":
        return _at(trl, (0, 15))
    return trainer == "RLOOTrainer" and _at(trl, (0, 22))


# The version from which a preference trainer's `prediction_step` returns the vocabulary logits to the eval loop
# when `prediction_loss_only` is off (compute_metrics): DPO 0.29.1 dpo_trainer.py:1468-1474 (0.26.2 :1887-1888
# returned scalar metrics from `get_batch_loss_metrics`); KTO 1.7.0 experimental/kto/kto_trainer.py:1516-1525,
# 1.8.0 and 1.16.0 trainer/kto_trainer.py:1663-1672 (0.19.1-1.4.0 scalar metrics; 1.5.1 :1161-1171 a dummy
# 1-element tensor). Both run their training loss under no_grad at the eval batch in every version.
EVAL_RETURNS_LOGITS: dict[str, V] = {"DPOTrainer": (0, 29), "KTOTrainer": (1, 7)}


def eval_returns_logits(trainer: str, trl: LibraryVersion) -> bool:
    since = EVAL_RETURNS_LOGITS.get(trainer)
    return since is not None and _at(trl, since)


def evaluates_by_generating(trainer: str, trl: LibraryVersion) -> bool:
    """The evaluation step generates: `prediction_step` calls `_prepare_inputs`, which in eval mode generates the
    eval batch's completions without buffering, then runs `compute_loss` under no_grad; per_device_eval_batch_size
    counts completions (the eval sampler repeats each prompt num_generations times; the global eval batch must be
    divisible by num_generations). Read in GRPO 0.15.2 grpo_trainer.py:724 `prediction_step`, :520
    `_prepare_inputs` (generates on every call); 0.16.0 :643-655 and :946 ("In evaluation, we don't reuse
    completions"); 0.19.1 :969-996, :1208 (the logps batch is per_device_eval_batch_size in eval), :1439; 1.16.0
    :1522-1554, :2505, :3294; RLOO 1.16.0 rloo_trainer.py:1091, :1530, :1865 (the GRPO-shaped RLOO, >= 0.22).
    GRPO 0.14.0 has no `prediction_step` of its own (not modelled)."""
    return counts_completions(trainer, trl)


def has_steps_per_generation(trainer: str, trl: LibraryVersion) -> bool:
    return trainer in ("GRPOTrainer", "RLOOTrainer") and _at(trl, (0, 18) if trainer == "GRPOTrainer" else (0, 22))


def logps_chunked(trainer: str, trl: LibraryVersion) -> bool:
    """The per-token log-probabilities are computed per `batch_size` rows (GRPO >= 0.17), not in one forward."""
    return trainer != "GRPOTrainer" or _at(trl, (0, 17))


def max_completion_default(trl: LibraryVersion) -> int:
    return 512 if _at(trl, (1, 10)) else 256  # 1.8.0 grpo_config.py:486 256; 1.10.0 :492 512


def vllm_mode_default(trl: LibraryVersion) -> str | None:
    """None: before vllm_mode existed (vLLM on its own device or a server); else "server" / "colocate"."""
    if _at(trl, (1, 0)):
        return "colocate"
    return "server" if _at(trl, (0, 18)) else None


def vllm_share_default(trl: LibraryVersion) -> float:
    return 0.3 if _at(trl, (0, 18)) else 0.9


# --- GKD (GKDTrainer: trl 0.11-0.29 top level, trl.experimental.gkd from 0.29; read in 0.13.0, 0.19.1, 0.22.2, 1.0.0,
# 1.8.0, 1.13.0 and the installed 1.16.0) ---------------------------------------------------------------------------
# | fact | versions | source |
# |---|---|---|
# | GKDConfig defaults: lmbda 0.5, beta 0.5, temperature 0.9, max_new_tokens 128, seq_kd False | all read | 0.13.0 gkd_config.py:50-57; 0.19.1 :57-99; 1.16.0 experimental/gkd/gkd_config.py:55-96 |
# | with probability `lmbda` the student generates the batch's completions (HF `generate` on `inputs["prompts"]`, `max_new_tokens`) and trains on them | all read | 0.13.0 gkd_trainer.py:295-303; 1.16.0 :416-430 |
# | `seq_kd=True`: the teacher generates first, and the student may regenerate after it (`if seq_kd` then `if random() <= lmbda`) | <= 1.0 | 0.13.0 gkd_trainer.py:287-303; 1.0.0 experimental/gkd/gkd_trainer.py:426-440 |
# | `seq_kd=True` only when the student did not generate (`if random() <= lmbda: ... elif seq_kd:`) | >= 1.8 | 1.8.0 experimental/gkd/gkd_trainer.py:484-498; 1.16.0 :416-431 |
# | generation runs with `use_cache=False` when gradient_checkpointing is on (every decoding step a forward over the whole prefix), else with the KV cache | all read | 0.13.0 gkd_trainer.py:147; 0.22.2 :158; 1.16.0 :221 |
# | the JSD reads the completion's logits only (`logits[:, prompt_lengths - 1 : -1, :]`) | <= 1.0 | 0.13.0 gkd_trainer.py:235-238; 0.22.2 :317-320; 1.0.0 :375-376 |
# | the JSD reads every position's logits (`logits[:, :-1, :]`, the prompt masked by labels only) | >= 1.8 | 1.8.0 :414-415; 1.16.0 :344-345 |
# | `beta` 0 / 1: one kl_div (forward / reverse KL), not the mixture's two (memory.estimate JSD_KL_TENSORS) | >= 0.16 | 0.16.0 gkd_trainer.py:190; 1.16.0 :278-281; 0.13.0-0.15.2 have no such branch |
# | the loss: student and teacher logits (the teacher's under no_grad) divided by the temperature, two log_softmax, the stacked mixture's logsumexp, two kl_div, their weighted sum, then `jsd[mask]`: all [rows x positions x vocab] in the logits' dtype (memory.estimate JSD_TENSORS) | all read | 0.13.0 gkd_trainer.py:161-216; 1.16.0 :238-322 |
# | a teacher given by name is loaded with `teacher_model_init_kwargs` (`torch_dtype` <= 0.2x, `dtype` in 1.x; unset: from_pretrained's default, fp32 with transformers 4, the checkpoint's dtype with 5) | all read | 0.13.0 gkd_trainer.py:109-127; 1.16.0 :159-175 |
# | the evaluation step: Trainer's / SFTTrainer's prediction_step calls compute_loss under no_grad: the student's and the teacher's logits and the JSD at per_device_eval_batch_size | all read | 0.13.0 (no prediction_step in gkd_trainer.py); 1.16.0 trainer/sft_trainer.py:1679 |
GKD_DEFAULTS = {"lmbda": 0.5, "beta": 0.5, "temperature": 0.9, "max_new_tokens": 128, "seq_kd": False}


def gkd_jsd_full_sequence(trl: LibraryVersion) -> bool:
    """The JSD reads every position's logits (>= 1.8), not only the completion's (<= 1.0)."""
    return _at(trl, (1, 8))


def gkd_seq_kd_exclusive(trl: LibraryVersion) -> bool:
    """seq_kd's teacher generation runs only when the student does not generate (>= 1.8; before, both can run)."""
    return _at(trl, (1, 8))


# --- DistillationTrainer 1.3-1.9 (trl.experimental.distillation; read in 1.3.0, 1.5.1, 1.8.0, 1.9.0) ---------------
# | fact | versions | source |
# |---|---|---|
# | DistillationConfig defaults: beta 1.0 (reverse KL), temperature 1.0, max_length 1024, max_completion_length 512 | 1.3-1.9 | 1.3.0 distillation_config.py:158-199; 1.9.0 :146-172 |
# | the loss: GKD's generalized JSD (`_jsd_divergence`, F.kl_div), on the completion's positions only (`logits[:, prompt_length - 1 : -1, :]`), labels masked in `_reduce_divergence_loss` | 1.3-1.9 | 1.3.0 experimental/distillation/distillation_trainer.py:119-160, :1044, :1458-1459; 1.9.0 :105-146, :991-1023, :1057-1058 |
# | `use_liger_kernel=True`: liger-kernel's LigerFusedLinearJSDLoss | 1.3-1.9 | 1.9.0 :52-53, :443-453 |
# | no `prediction_step` of its own (`_BaseTrainer`, a Trainer): the evaluation step is compute_loss under no_grad | 1.3-1.9 | 1.3.0 :356, 1.9.0 :317 |
# | on-policy generation: gradient_accumulation_steps slices of per_device_train_batch_size rows, one HF `generate` each (max_completion_length new tokens, default cache), or vLLM (`use_vllm`, mode "colocate", share 0.3 by default); on-policy with probability `lmbda` (default 1.0) in 1.3-1.8, always in 1.9 | 1.3-1.9 | 1.3.0 :779-790, distillation_config.py:292, :316; 1.9.0 :537-546, :709-760, :797-812 (run/components.py `_distillation_generation`) |
DISTILLATION_DEFAULTS = {"beta": 1.0, "temperature": 1.0, "max_completion_length": 512}


def distillation_jsd(trl: LibraryVersion) -> bool:
    """DistillationTrainer computes GKD's generalized JSD on the full logits (1.3-1.9; from 1.10 the chunked
    divergence loss)."""
    return _at(trl, (1, 3)) and not _at(trl, DISTILLATION_CHUNKED_SINCE)


def config_bf16_default(trl: LibraryVersion) -> bool:
    """GKDConfig (an SFTConfig) and DistillationConfig (a _BaseConfig) turn `bf16` on when neither bf16 nor fp16 is
    given (`self.bf16 = not (self.fp16) if self.bf16 is None`): SFTConfig from 0.19 (0.19.1 sft_config.py:252; 0.18.2
    and 0.13.0 have no such line: TrainingArguments' False), _BaseConfig in 1.x (1.3.0 and 1.9.0
    trainer/base_config.py:105)."""
    return _at(trl, (0, 19))


def gkd_fused_jsd(trl: LibraryVersion) -> str | None:
    """What `use_liger_kernel=True` fuses GKD's JSD with: "liger" (liger-kernel's LigerFusedLinearJSDLoss,
    `from liger_kernel.chunked_loss import`: 0.22.2 gkd_trainer.py:58-59, :97-105; 1.8.0-1.12.0
    experimental/gkd/gkd_trainer.py:46-48, :146-153), "trl" (TRL's own PyTorch port, `from ...losses import
    FusedLinearJSDLoss` with compiled=False, no extra package: 1.13.0 experimental/gkd/gkd_trainer.py:39, :146-157),
    or None: no fused path (0.11-0.21: `use_liger` only loads the models with Liger, 0.13.0 gkd_trainer.py:124;
    from 1.14: no Liger in gkd_trainer.py, 1.14.0 / 1.16.0)."""
    if _at(trl, (1, 14)) or not _at(trl, (0, 22)):
        return None
    return "trl" if _at(trl, (1, 13)) else "liger"


# DistillationTrainer from 1.10 (top-level `trl`): `_chunked_divergence_loss` projects only the completion's
# positions, on tiles ("The full `lm_head` projections are never materialized": 1.10.0 trainer/distillation_trainer.py
# :152; 1.16.0 :101-121): GKD's loss without the vocabulary-sized tensors.
DISTILLATION_CHUNKED_SINCE = (1, 10)


def gkd_single_kl_at_beta_endpoints(trl: LibraryVersion) -> bool:
    """beta 0 / 1 take one kl_div (forward / reverse KL) in generalized_jsd_loss from 0.16 (0.16.0
    gkd_trainer.py:190, 1.16.0 experimental/gkd/gkd_trainer.py:278-281); 0.13.0-0.15.2 always build the mixture
    (0.13.0 gkd_trainer.py:189-201, no branch on beta)."""
    return _at(trl, (0, 16))


def teacher_dtype_key(trl: LibraryVersion) -> str:
    """The dtype key of teacher_model_init_kwargs: `torch_dtype` before 1.0 (0.19.1 gkd_trainer.py:117), `dtype` in
    1.x (1.16.0 experimental/gkd/gkd_trainer.py:167)."""
    return "dtype" if _at(trl, (1, 0)) else "torch_dtype"
