"""A rule's finding on a framework config, said in the config's own keys, with a fix that edits the YAML text.

The rules speak HF's names (`attn_implementation="sdpa"`, `use_liger_kernel=True`, `per_device_train_batch_size`);
here their message is rewritten into the framework's keys and the fix becomes a text edit of the YAML: a value
replaced in place (its quotes kept) or a top-level key added on a line of its own after a related key, so
comments, key order and quoting stay as written. fix.py / lint.py re-load and re-lint the result.
"""

from __future__ import annotations

import re
from dataclasses import replace as dc_replace

from trainlint.diagnostics import Diagnostic, Span
from trainlint.edits import edit, make_fix, newline_of, replace, source_lines
from trainlint.frameworks import knowledge as K
from trainlint.frameworks.synth import Mapped
from trainlint.knowledge.libraries import SOFTCAPPED

# What TL101's fix sets (settings `fix-attention`), in each framework's spelling; None: the framework has no such key.
_LF_ATTENTION = {"sdpa": "sdpa", "flash_attention_2": "fa2", "flash_attention_3": "fa3", "flex_attention": None}


def _value(text: str, span: Span) -> str:
    lines = source_lines(text)
    if span.line != span.end_line or not 0 < span.line <= len(lines):
        return ""
    return lines[span.line - 1][span.col - 1:span.end_col - 1]


def _swap(text: str, span: Span, new: str) -> dict | None:
    """Replace a plain scalar in place, keeping its quotes; None for anything else (a flow mapping, a block)."""
    old = _value(text, span)
    quote = old[0] if len(old) >= 2 and old[0] in "'\"" and old[-1] == old[0] else ""
    if not old or (not quote and not re.fullmatch(r"[\w./:-]+", old)):
        return None
    return replace(span, f"{quote}{new}{quote}")


def _add_key(mapped: Mapped, text: str, after: str | None, line: str) -> dict:
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


def adapt(diag: Diagnostic, mapped: Mapped, text: str, fix_attention: str, model_type: str | None) -> Diagnostic:
    """The rule's finding in the framework's words, with a YAML fix (or none)."""
    if diag.code == "TL101":
        return _tl101(diag, mapped, text, fix_attention, model_type)
    if diag.code == "TL301":
        return _tl301(diag, mapped, text, model_type)
    if diag.code == "TL401":
        return _tl401(diag, mapped, text)
    return diag.with_fix(None)


def _tl101(diag: Diagnostic, mapped: Mapped, text: str, fix_attention: str, model_type: str | None) -> Diagnostic:
    softcapped = model_type in SOFTCAPPED
    keys = mapped.keys
    if diag.fix is None and "no fix" in diag.message:
        # the rule found no edit valid for the targeted transformers and architecture (tl101 plan_fix): the
        # framework's key would load the same attention, so no key is written either (issue 19)
        return diag
    target = "flex_attention" if softcapped and fix_attention == "sdpa" else fix_attention
    if mapped.framework == K.LLAMAFACTORY:
        target = "flash_attention_2" if softcapped and fix_attention == "sdpa" else fix_attention
        spelled = _LF_ATTENTION.get(target)
        advice = "set flash_attn: fa2 (SDPA cannot express Gemma 2's logit softcap)" if softcapped else \
            "set flash_attn: sdpa (or fa2)"
        message = re.sub(r"set attn_implementation=.*$", advice, diag.message)
        message = message.replace('attn_implementation="eager"', "flash_attn: disabled")
        fix = None
        if spelled is not None:
            safe = spelled == "sdpa"
            entry = keys.top.get("flash_attn")
            if entry is not None:
                swap = _swap(text, entry.span, spelled)
                fix = make_fix("safe" if safe else "unsafe", f"Set flash_attn: {spelled}", swap) if swap else None
            elif softcapped or model_type not in ("mpt", "bloom", "gpt_oss"):
                fix = make_fix("unsafe", f"Add flash_attn: {spelled}",
                               _add_key(mapped, text, "model_name_or_path", f"flash_attn: {spelled}"))
        return dc_replace(diag, message=message, fix=fix)
    advice = ("set attn_implementation: flash_attention_2 or flex_attention (SDPA cannot express its logit softcap)"
              if softcapped else "set attn_implementation: sdpa (or flash_attention_2)")
    message = re.sub(r"set attn_implementation=.*$", advice, diag.message)
    message = re.sub(r'attn_implementation="(\w+)"', r"attn_implementation: \1", message)
    legacy = next((name for name, impl in K.AXOLOTL_LEGACY_ATTENTION if impl == "eager" and name in keys.top), None)
    if legacy is not None:
        message = message.replace("attn_implementation: eager", f"{legacy}: true")
    # the rule could not tell whether this architecture takes the value in the targeted transformers: unsafe
    safe = target == "sdpa" and not softcapped and "so the fix is unsafe" not in diag.message
    fix = None
    entry = keys.top.get("attn_implementation")
    if entry is not None and isinstance(entry.value, str):
        swap = _swap(text, entry.span, target)
        fix = make_fix("safe" if safe else "unsafe", f"Set attn_implementation: {target}", swap) if swap else None
    elif legacy is not None:
        e = keys.top[legacy]
        if e.span.line == e.key_span.line:
            fix = make_fix("safe" if safe else "unsafe", f"Replace {legacy}: true with attn_implementation: {target}",
                           replace(Span(e.key_span.line, e.key_span.col, e.span.end_line, e.span.end_col),
                                   f"attn_implementation: {target}"))
    elif softcapped:  # nothing set and the architecture falls back to eager; flex/flash need a package or a GPU
        fix = make_fix("unsafe", f"Add attn_implementation: {target}",
                       _add_key(mapped, text, "base_model", f"attn_implementation: {target}"))
    return dc_replace(diag, message=message, fix=fix)


def _tl301(diag: Diagnostic, mapped: Mapped, text: str, model_type: str | None) -> Diagnostic:
    keys = mapped.keys
    # the trainer the framework builds, named as the user knows it
    trainer = "LLaMA-Factory's trainer (a Seq2SeqTrainer)" if mapped.framework == K.LLAMAFACTORY else \
        "axolotl's trainer (a transformers Trainer)"
    diag = dc_replace(diag, message=re.sub(r"^(Seq2SeqTrainer|Trainer) computes", f"{trainer} computes", diag.message))
    if mapped.framework == K.LLAMAFACTORY:
        if keys.raw("stage", K.LF_DEFAULTS["stage"]) not in ("pt", "sft"):
            return diag  # the stage's own trainer said it (no Liger fusion outside pt / sft: no fix to offer)
        supported = model_type in K.LF_LIGER_TYPES
        advice = ("set enable_liger_kernel: true (LLaMA-Factory then fuses the loss for stage pt/sft; needs the "
                  "liger-kernel package and a CUDA GPU)" if supported else
                  "LLaMA-Factory's enable_liger_kernel does not cover this model type; use a fused or chunked loss")
        message = re.sub(r"set use_liger_kernel=True.*$", advice, diag.message)
        message = re.sub(r"; use_liger_kernel needs transformers.*$", f"; {advice}", message)
        fix = None
        if supported:
            entry = keys.top.get("enable_liger_kernel")
            if entry is not None:
                swap = _swap(text, entry.span, "true")
                fix = make_fix("unsafe", "Set enable_liger_kernel: true (needs liger-kernel and a CUDA GPU)", swap) \
                    if swap else None
            else:
                fix = make_fix("unsafe", "Add enable_liger_kernel: true (needs liger-kernel and a CUDA GPU)",
                               _add_key(mapped, text, "model_name_or_path", "enable_liger_kernel: true"))
        return dc_replace(diag, message=message, fix=fix)
    advice = (f"list {K.CCE_PLUGIN} in plugins: (or {K.LIGER_PLUGIN} with liger_fused_linear_cross_entropy: true; "
              f"either needs its package and a CUDA GPU)")
    message = re.sub(r"set use_liger_kernel=True.*$", advice, diag.message)
    message = re.sub(r"; use_liger_kernel needs transformers.*$", f"; {advice}", message)
    return dc_replace(diag, message=message, fix=_add_plugin(mapped, text))


def _add_plugin(mapped: Mapped, text: str) -> dict | None:
    """Unsafe: cut-cross-entropy is a package of its own and needs a CUDA GPU and bf16/fp16 (its args.py)."""
    keys = mapped.keys
    if keys.raw("bf16") not in (True, "auto") and keys.raw("fp16") is not True:
        return None  # CutCrossEntropyArgs.check_dtype_is_half would refuse the config
    message = "Add the CutCrossEntropyPlugin to plugins: (needs cut-cross-entropy and a CUDA GPU)"
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


def _tl401(diag: Diagnostic, mapped: Mapped, text: str) -> Diagnostic:
    message = diag.message.replace("auto_find_batch_size=True", "auto_find_batch_size: true")
    for hf, own in mapped.spelled.items():
        message = message.replace(hf, own)
    m = re.search(r"set gradient_accumulation_steps=(\d+)", message)
    fix = None
    if m:
        steps = m.group(1)
        message = message.replace(m.group(0), f"set gradient_accumulation_steps: {steps}")
        keys = mapped.keys
        entry = keys.top.get("gradient_accumulation_steps")
        batch_key = "micro_batch_size" if mapped.framework == K.AXOLOTL else "per_device_train_batch_size"
        if entry is not None:
            swap = _swap(text, entry.span, steps)
            fix = make_fix("safe", f"Set gradient_accumulation_steps: {steps}", swap) if swap else None
        elif not keys.has("batch_size"):
            fix = make_fix("safe", f"Add gradient_accumulation_steps: {steps}",
                           _add_key(mapped, text, batch_key, f"gradient_accumulation_steps: {steps}"))
    return dc_replace(diag, message=message, fix=fix)
