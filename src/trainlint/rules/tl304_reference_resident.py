"""TL304 reference-model-resident: a TRL trainer keeps a reference model on the GPU that a setting of the
targeted version would drop, or keeps it wider than the policy.

Docs: rules/TL304.md. The components are the Run's (run/components.py); the per-version facts are in
knowledge/trl_trainers.py ("Components"): GRPO drops the reference when beta == 0.0 from 0.16 (0.16.1
grpo_trainer.py:316-327) and beta's default is 0.04 until 0.18, 0.0 from 0.19 (grpo_config.py 0.18.2:391,
0.19.1:413); RLOO >= 0.22 the same with a default of 0.05 (rloo_config.py 0.23.1:423); DPO loads its reference even
with precompute_ref_log_probs=True in 0.29-1.4 (0.29.1 dpo_trainer.py:701-713, 1.0.0 :749; dropped again from
1.5.1 :758) and loads it with create_model_from_path, float32 unless model_init_kwargs say otherwise, in 0.29-1.15
(0.29.1 utils.py:1053; 1.16.0 dpo_trainer.py:924 defaults it to the policy's dtype).
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule
from trainlint.run import PlanError, resolve
from trainlint.run.components import rl_trainer


def _policy(ctx: FileContext):
    run = resolve(ctx)
    trained = run.trained
    if trained is None:
        return None, None
    try:
        geometry = trained.geometry  # raises PlanError when the model or its size is not known
    except PlanError:
        return None, None
    if geometry.value is None:
        return None, None
    return geometry.value.params, trained.precision.value[0]


@rule("TL304", "reference-model-resident", consumer="weights and precision",
      summary="A TRL trainer keeps a reference model on the GPU that a setting of the targeted version would drop, "
              "or loads it wider than the policy.",
      fix_hint="`beta=0.0` (GRPO >= 0.16, RLOO >= 0.22) where no KL term is wanted; `precompute_ref_log_probs` "
               "on TRL >= 1.5; `model_init_kwargs={\"dtype\": \"bfloat16\"}` for DPO 0.29-1.15")
def check(self: Rule, ctx: FileContext):
    run = resolve(ctx)
    comps = run.components
    ref = comps.get("reference")
    if ref is None or not ref.resident.value:
        return
    trainer = rl_trainer(ctx)
    if ref.how == "loaded" and ctx.framework_config and trainer is not None:
        yield from _framework_precompute(self, ctx, trainer, ref)
        return
    if ref.how != "copy":
        return
    params, policy_bytes = _policy(ctx)
    if params is None:
        return
    trl = ctx.versions.trl.version
    width = ref.dtype_bytes.value or policy_bytes
    size = fmt_bytes(params * width)
    name = {2: "16-bit", 4: "fp32"}.get(width, f"{width}-byte")
    if comps.trainer == "GRPOTrainer" and ref.drop == "beta=0.0" and not ref.resident.certain:
        # (GRPO 0.16-0.18 only: its default became 0.0 in 0.19; RLOO's 0.05 is the algorithm's own default)
        yield self.diagnostic(ctx, trainer.call.span, (
            f"{comps.trainer} in TRL {trl} keeps a frozen copy of the policy as its reference model, ~{size} "
            f"({name}), because beta is not set and defaults to {ref.resident.why.split('=')[1]} in this version; "
            f"beta=0.0 drops the reference model and its no-grad forward (TRL >= 0.19 defaults to it), or set beta "
            f"explicitly to keep the KL term"))
        return
    if ref.drop == "upgrade TRL to >= 1.5":
        yield self.diagnostic(ctx, ref.span or trainer.call.span, (
            f"precompute_ref_log_probs=True does not free the reference model in TRL {trl}: DPOTrainer 0.29-1.4 "
            f"loads it anyway, ~{size} ({name}) resident for the whole run; upgrade TRL to >= 1.5, or pass a PEFT "
            f"model (its adapters are disabled for the reference)"))
        return
    if width > policy_bytes:
        config = comps.trainer.replace('Trainer', 'Config')
        # a framework config has no key for the TRL config's model_init_kwargs (axolotl builds KTOConfig itself:
        # core/builders/rl.py `_build_training_arguments`)
        lever = (f"{ctx.spelling.trainer(comps.trainer)} has no key for {config}'s model_init_kwargs: an adapter "
                 f"(its adapters disabled are the reference) or TRL >= 1.16 (the reference follows the policy's dtype)"
                 if ctx.framework_config else
                 f"set model_init_kwargs={{\"dtype\": \"bfloat16\"}} in {config} (TRL >= 1.16 follows the "
                 f"policy's dtype)")
        yield self.diagnostic(ctx, trainer.stage_span or trainer.call.span, (
            f"{comps.trainer} in TRL {trl} loads its reference model with model_init_kwargs, in fp32 unless they set "
            f"dtype, while the policy is {policy_bytes * 8}-bit: ~{size} resident, ~{fmt_bytes(params * (width - policy_bytes))} "
            f"more than a reference in the policy's dtype; {lever}"))


def _framework_precompute(self: Rule, ctx: FileContext, trainer, ref):
    """A framework that passes its own reference model (axolotl's model_ref for rl dpo / ipo without an adapter)
    keeps it resident even with precompute_ref_log_probs: true, which only drops a reference TRL would build
    (trl 1.9.0 dpo_trainer.py:893-910; 0.19.1 :321-327 the same for a passed ref_model)."""
    args = ctx.trainer_args(trainer)
    pre = args.get("precompute_ref_log_probs") if args is not None else None
    if pre is None or not pre.is_(True):
        return
    params, policy_bytes = _policy(ctx)
    if params is None:
        return
    width = ref.dtype_bytes.value or policy_bytes
    yield self.diagnostic(ctx, args.call.kw_span("precompute_ref_log_probs") or ref.span or trainer.call.span, (
        f"{ctx.spelling.setting('precompute_ref_log_probs', True)} does not free the reference model here: "
        f"without an adapter axolotl loads the model a second time and passes it as {trainer.class_name}'s ref_model "
        f"(train.py setup_reference_model), ~{fmt_bytes(params * width)} resident for the whole run; precomputing "
        f"only drops a reference TRL builds itself. With an adapter (adapter: lora) the policy with its adapters "
        f"disabled is the reference"))
