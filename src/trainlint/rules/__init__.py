"""All rules, by code. Each lives in its own module: tlNNN_<name>.py, documented in rules/TLNNN.md."""

from trainlint.rules import (  # noqa: F401  (registration)
    tl101_eager_attention,
    tl102_sdpa_math_fallback,
    tl201_lora_checkpointing,
    tl202_checkpointing_off,
    tl203_loss_kept_with_graph,
    tl301_unfused_cross_entropy,
    tl302_eval_logits,
    tl401_batch_shrunk,
    tl501_frozen_fp32,
    tl701_does_not_fit,
)
from trainlint.rules.base import REGISTRY, Rule

from trainlint.codes import META_RULES, RULE_CODES  # noqa: E402,F401  (the light table)

__all__ = ["REGISTRY", "Rule", "META_RULES"]
