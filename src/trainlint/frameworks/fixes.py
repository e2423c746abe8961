"""How a framework config says a setting (its Spelling: the framework's keys, values, trainer and levers, which the
rules ask when they word a finding) and the fix that edits the YAML text for a finding.

A fix is a text edit of the YAML: a value replaced in place (its quotes kept) or a top-level key added on a line of
its own after a related key, so comments, key order and quoting stay as written. fix.py / lint.py re-load and
re-lint the result.
"""

from __future__ import annotations

import re
from dataclasses import replace as dc_replace

from trainlint.diagnostics import ACCUMULATION, ATTENTION, FUSED_LOSS, Diagnostic, Edit, Fix, Span
from trainlint.edits import edit, make_fix, newline_of, replace, source_lines
from trainlint.frameworks.axolotl import dpo_liger_key
from trainlint.frameworks.synth import Keys, Mapped
from trainlint.knowledge import frameworks as K
from trainlint.knowledge.libraries import SOFTCAPPED
from trainlint.spelling import Spelling

# The attention a fix sets (settings `fix-attention`), in each framework's spelling; None: the framework has no such key.
_LF_ATTENTION = {"sdpa": "sdpa", "flash_attention_2": "fa2", "flash_attention_3": "fa3", "flex_attention": None}
# LLaMA-Factory's `flash_attn` values for transformers' attn_implementation (its model_args.py AttentionFunction)
_LF_ATTENTION_VALUES = {"eager": "disabled", "sdpa": "sdpa", "flash_attention_2": "fa2", "flash_attention_3": "fa3"}


def _value(text: str, span: Span) -> str:
    lines = source_lines(text)
    if span.line != span.end_line or not 0 < span.line <= len(lines):
        return ""
    return lines[span.line - 1][span.col - 1:span.end_col - 1]


def _swap(text: str, span: Span, new: str) -> Edit | None:
    """Replace a plain scalar in place, keeping its quotes; None for anything else (a flow mapping, a block)."""
    old = _value(text, span)
    quote = old[0] if len(old) >= 2 and old[0] in "'\"" and old[-1] == old[0] else ""
    if not old or (not quote and not re.fullmatch(r"[\w./:-]+", old)):
        return None
    return replace(span, f"{quote}{new}{quote}")


def _add_key(mapped: Mapped, text: str, after: str | None, line: str) -> Edit:
    """A new top-level `key: value` line after the key `after` (after its whole value), else at the end."""
    nl = newline_of(text)
    entry = mapped.keys.top.get(after) if after else None
    if entry is not None:
        row = max(entry.span.end_line, entry.key_span.line)
        indent = " " * (entry.key_span.col - 1)
        return edit((row + 1, 1), (row + 1, 1), f"{indent}{line}{nl}")
    lines = source_lines(text)
    if text.endswith(("\n", "\r")):
        return edit((len(lines), 1), (len(lines), 1), f"{line}{nl}")
    return edit((len(lines), len(lines[-1]) + 1), (len(lines), len(lines[-1]) + 1), f"{nl}{line}{nl}")


def spelling_for(mapped: Mapped, model_type: str | None, style: str = "yaml") -> Spelling:
    """How the user sets things in this config (or on `llamafactory-cli train`'s command line: style "flag"): the
    framework's own key for a transformers argument, its own values, its trainer, and its own levers where the advice
    is not a key of the same meaning (the loss plugins of axolotl, LLaMA-Factory's liger key with its conditions)."""
    softcapped = model_type in SOFTCAPPED
    keys = mapped.keys
    trainer_names: tuple[str, ...] = ("Trainer", "Seq2SeqTrainer")
    if mapped.framework == K.LLAMAFACTORY:
        base = Spelling(style, keys=(("attn_implementation", "flash_attn"),),
                        values=tuple((("attn_implementation", hf), own) for hf, own in _LF_ATTENTION_VALUES.items()))
        attention = base.advise("attn_implementation", "flash_attention_2", "SDPA cannot express Gemma 2's logit "
                                                                             "softcap") if softcapped else \
            base.advise("attn_implementation", "sdpa", "or fa2")
        levers = [("attention", attention)]
        if keys.raw("stage", K.LF_DEFAULTS["stage"]) in ("pt", "sft"):
            # no Liger fusion outside pt / sft: there the stage's own trainer says what it has
            levers.append(("fused_loss", base.advise(
                "enable_liger_kernel", True, "LLaMA-Factory then fuses the loss for stage pt/sft; needs the liger-kernel "
                                          "package and a CUDA GPU") if model_type in K.LF_LIGER_TYPES else
                "LLaMA-Factory's enable_liger_kernel does not cover this model type; use a fused or chunked loss"))
        trainers = tuple((name, "LLaMA-Factory's trainer (a Seq2SeqTrainer)") for name in trainer_names)
        return Spelling(style, base.keys, base.values, trainers, tuple(levers))
    dpo_liger = dpo_liger_key(keys, mapped.release)
    # a TRL trainer's use_liger_kernel: axolotl's own dpo_use_liger_kernel key (>= 0.18), else no key sets it
    # (GRPOConfig's steps_per_generation has no axolotl key in any release read: utils/schemas/trl.py 0.18.0)
    base = Spelling(style, keys=tuple(mapped.spelled.items()) + ((("use_liger_kernel", dpo_liger),) if dpo_liger else ()),
                    unsettable=("steps_per_generation",) + (() if dpo_liger else ("use_liger_kernel",)))
    attention = (f"{base.advise('attn_implementation', 'flash_attention_2')} or flex_attention (SDPA cannot express "
                 f"its logit softcap)" if softcapped else base.advise("attn_implementation", "sdpa", "or flash_attention_2"))
    # CutCrossEntropyArgs.check_chunked_cross_entropy_not_set (0.19.0 integrations/cut_cross_entropy/args.py:47-52)
    # refuses the plugin together with chunked_cross_entropy
    chunked = " with chunked_cross_entropy: false (the plugin refuses both)" if _chunked(mapped) else ""
    levers = (("attention", attention),
              ("fused_loss", f"list {K.CCE_PLUGIN} in plugins:{chunked} (or {K.LIGER_PLUGIN} with "
                             f"liger_fused_linear_cross_entropy: true; either needs its package and a CUDA GPU)"))
    own = list(base.keys)
    values = []
    legacy = _legacy_eager(mapped)
    if legacy is not None:  # the eager attention was chosen by a legacy flag: that is what the user wrote
        own.append(("attn_implementation", legacy))
        values.append((("attn_implementation", "eager"), True))
    trainers = tuple((name, "axolotl's trainer (a transformers Trainer)") for name in trainer_names)
    return Spelling(style, tuple(own), tuple(values), trainers, levers, base.unsettable)


def _chunked(mapped: Mapped) -> bool:
    value = mapped.keys.raw("chunked_cross_entropy")
    return mapped.framework == K.AXOLOTL and bool(value) and value != "false"


def _legacy_eager(mapped: Mapped) -> str | None:
    if mapped.framework != K.AXOLOTL:
        return None
    return next((name for name, impl in K.AXOLOTL_LEGACY_ATTENTION if impl == "eager" and name in mapped.keys.top),
                None)


def adapt(diag: Diagnostic, mapped: Mapped, text: str, fix_attention: str, model_type: str | None) -> Diagnostic:
    """The rule's finding (already said in the config's spelling: spelling_for) with a YAML fix for what its setting
    is about (Setting.target), or none: the rule's own fix edits Python, not this config."""
    target = diag.setting.target if diag.setting is not None else None
    if target is None:
        # no setting, or none a config key expresses (e.g. TL101 with no attention valid for the targeted
        # transformers and architecture, tl101 plan_fix: the framework's key would load the same attention, so no key
        # is written either, issue 19)
        return diag.with_fix(None)
    return diag.with_fix(_FIXES[target](diag, mapped, text, fix_attention, model_type))


def _attention(diag: Diagnostic, mapped: Mapped, text: str, fix_attention: str, model_type: str | None) -> Fix | None:
    softcapped = model_type in SOFTCAPPED
    keys = mapped.keys
    target = "flex_attention" if softcapped and fix_attention == "sdpa" else fix_attention
    if mapped.framework == K.LLAMAFACTORY:
        target = "flash_attention_2" if softcapped and fix_attention == "sdpa" else fix_attention
        spelled = _LF_ATTENTION.get(target)
        if spelled is None:
            return None
        safe = spelled == "sdpa"
        entry = keys.top.get("flash_attn")
        if entry is not None:
            swap = _swap(text, entry.span, spelled)
            return make_fix("safe" if safe else "unsafe", f"Set flash_attn: {spelled}", swap) if swap else None
        if softcapped or model_type not in ("mpt", "bloom", "gpt_oss"):
            return make_fix("unsafe", f"Add flash_attn: {spelled}",
                            _add_key(mapped, text, "model_name_or_path", f"flash_attn: {spelled}"))
        return None
    legacy = _legacy_eager(mapped)
    # the rule could not tell whether this architecture takes the value in the targeted transformers: unsafe
    safe = target == "sdpa" and not softcapped and diag.setting.known_valid
    entry = keys.top.get("attn_implementation")
    if entry is not None and isinstance(entry.value, str):
        swap = _swap(text, entry.span, target)
        return make_fix("safe" if safe else "unsafe", f"Set attn_implementation: {target}", swap) if swap else None
    if legacy is not None:
        e = keys.top[legacy]
        if e.span.line == e.key_span.line:
            return make_fix("safe" if safe else "unsafe", f"Replace {legacy}: true with attn_implementation: {target}",
                            replace(Span(e.key_span.line, e.key_span.col, e.span.end_line, e.span.end_col),
                                    f"attn_implementation: {target}"))
        return None
    if softcapped:  # nothing set and the architecture falls back to eager; flex/flash need a package or a GPU
        return make_fix("unsafe", f"Add attn_implementation: {target}",
                        _add_key(mapped, text, "base_model", f"attn_implementation: {target}"))
    return None


def _fused_loss(diag: Diagnostic, mapped: Mapped, text: str, fix_attention: str, model_type: str | None
                ) -> Fix | None:
    keys = mapped.keys
    if mapped.framework == K.LLAMAFACTORY:
        if keys.raw("stage", K.LF_DEFAULTS["stage"]) not in ("pt", "sft") or model_type not in K.LF_LIGER_TYPES:
            return None  # the stage's own trainer said it, or LLaMA-Factory's liger key does not cover the model
        entry = keys.top.get("enable_liger_kernel")
        if entry is not None:
            swap = _swap(text, entry.span, "true")
            return make_fix("unsafe", "Set enable_liger_kernel: true (needs liger-kernel and a CUDA GPU)", swap) \
                if swap else None
        return make_fix("unsafe", "Add enable_liger_kernel: true (needs liger-kernel and a CUDA GPU)",
                        _add_key(mapped, text, "model_name_or_path", "enable_liger_kernel: true"))
    return _add_plugin(mapped, text)


def _add_plugin(mapped: Mapped, text: str) -> Fix | None:
    """Unsafe: cut-cross-entropy is a package of its own and needs a CUDA GPU and bf16/fp16 (its args.py)."""
    keys = mapped.keys
    if keys.raw("bf16") not in (True, "auto") and keys.raw("fp16") is not True:
        return None  # CutCrossEntropyArgs.check_dtype_is_half would refuse the config
    message = "Add the CutCrossEntropyPlugin to plugins: (needs cut-cross-entropy and a CUDA GPU)"
    if _chunked(mapped):  # the plugin refuses chunked_cross_entropy: switch it off in the same fix
        entry = keys.top["chunked_cross_entropy"]
        off = _swap(text, entry.span, "false")
        plugin = _add_plugin(_without_chunked(mapped), text)
        if off is None or plugin is None:
            return None
        return make_fix("unsafe", "Add the CutCrossEntropyPlugin to plugins: and set chunked_cross_entropy: false "
                                  "(needs cut-cross-entropy and a CUDA GPU)", *plugin.edits, off)
    entry = keys.top.get("plugins")
    if entry is None:
        nl = newline_of(text)
        return make_fix("unsafe", message, _add_key(mapped, text, None, f"plugins:{nl}  - {K.CCE_PLUGIN}"))
    if not isinstance(entry.value, list):
        return None
    lines = source_lines(text)
    first = lines[entry.span.line - 1] if 0 < entry.span.line <= len(lines) else ""
    indent = first[:entry.span.col - 1]
    if entry.span.line == entry.key_span.line or indent.strip() or not first[entry.span.col - 1:].startswith("- "):
        return None  # a flow list `[...]` (or something unusual): not edited
    row = entry.span.end_line
    return make_fix("unsafe", message, edit((row + 1, 1), (row + 1, 1),
                                            f"{indent}- {K.CCE_PLUGIN}{newline_of(text)}"))


def _without_chunked(mapped: Mapped) -> Mapped:
    keys = Keys(mapped.keys.reading)
    keys.top.pop("chunked_cross_entropy", None)
    return dc_replace(mapped, keys=keys)


def _accumulation(diag: Diagnostic, mapped: Mapped, text: str, fix_attention: str, model_type: str | None
                  ) -> Fix | None:
    if diag.setting.argument != "gradient_accumulation_steps":
        return None
    steps = str(diag.setting.value)
    keys = mapped.keys
    entry = keys.top.get("gradient_accumulation_steps")
    batch_key = "micro_batch_size" if mapped.framework == K.AXOLOTL else "per_device_train_batch_size"
    if entry is not None:
        swap = _swap(text, entry.span, steps)
        return make_fix("safe", f"Set gradient_accumulation_steps: {steps}", swap) if swap else None
    if not keys.has("batch_size"):
        return make_fix("safe", f"Add gradient_accumulation_steps: {steps}",
                        _add_key(mapped, text, batch_key, f"gradient_accumulation_steps: {steps}"))
    return None


# Each Setting.target, set in the config's own keys (diagnostics.SETTING_TARGETS; tests/test_frameworks.py checks
# every target has one).
_FIXES = {ATTENTION: _attention, FUSED_LOSS: _fused_loss, ACCUMULATION: _accumulation}
