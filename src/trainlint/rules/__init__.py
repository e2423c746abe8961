"""All rules, by code. Each lives in its own module: tlNNN_<name>.py, documented in rules/TLNNN.md."""

from trainlint.rules import (  # noqa: F401  (registration)
    tl101_eager_attention,
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

# TL0xx describe trainlint itself (files it could not read); they are produced by the engine.
META_RULES = {
    "TL001": ("syntax-error", "the file could not be parsed as Python"),
    "TL002": ("unreadable-file", "binary, undecodable, unreadable or oversized file, or an unreadable notebook"),
    "TL003": ("file-timeout", "the file took longer than `per-file-timeout` to lint"),
    "TL004": ("internal-error", "trainlint itself failed on this file; the other files were still linted"),
    "TL005": ("unreadable-launch", "a launcher, args file or config that could not be read (shell that does not "
                                   "lex, YAML/JSON that does not load, a circular `source`)"),
    "TL006": ("launched-script-missing", "a launcher runs a Python script that does not exist"),
    "TL007": ("framework-config-key", "an axolotl / LLaMA-Factory config key the framework refuses, ignores, or that "
                                      "has no effect (unknown, removed, or a plugin's key without the plugin)"),
    "TL008": ("model-path-missing", "a framework config's model is a local path that does not exist"),
    "TL009": ("version-conflict", "a pinned or installed library version that the file's own calls cannot run on "
                                  "(a keyword or import that release does not have)"),
}

__all__ = ["REGISTRY", "Rule", "META_RULES"]
