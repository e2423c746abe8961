"""Which catalog checkpoint a derivative's name stands for: mirrors, re-uploads, quantized uploads, fine-tunes.

`NousResearch/Llama-2-7b-hf`, `unsloth/llama-3-8b-bnb-4bit`, `TheBloke/Llama-2-7B-Chat-GPTQ` or
`someone/phi-1_5-finetuned-sql` carry their base's geometry (a fine-tune or a quantized upload keeps the shapes of
its base). The base is taken from the name only when every catalog name the id embeds has the same geometry;
otherwise the model stays unknown, so no rule speaks from a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Upload suffixes that change neither vocabulary nor shapes (quantized or re-serialised weights).
_QUANT = re.compile(r"([-_.](unsloth|bnb|4bit|8bit|int4|int8|awq|gptq|gguf|ggml|exl2|fp16|bf16|fp8|mlx|onnx|"
                    r"q4_k_m|q5_k_m|q8_0|gptq-int4|gptq-int8|\d+bit))+$", re.IGNORECASE)
_QUANTIZED = re.compile(r"(bnb|4bit|8bit|int4|int8|awq|gptq|gguf|ggml|exl2|fp8|\dbit)", re.IGNORECASE)
_MIRRORS = {"unsloth", "nousresearch", "thebloke"}
GEOMETRY = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "head_dim", "intermediate_size", "tie_word_embeddings", "model_type")


@dataclass(frozen=True)
class Derivation:
    base_id: str  # the catalog id whose geometry is assumed
    reason: str  # what --verbose prints


def _basename(ident: str) -> str:
    return ident.rsplit("/", 1)[-1].lower()


def _names(index: dict[str, dict]) -> dict[str, list[tuple[str, dict]]]:
    """Catalog names without their organisation (and without a trailing -hf), each with the (id as spelled in the
    catalog, entry) pairs it names."""
    out: dict[str, list[tuple[str, dict]]] = {}
    for key, entry in index.items():
        spelled = next((i for i in (entry["id"], *entry.get("aliases", [])) if i.lower() == key), key)
        base = _basename(key)
        for name in {base, base[:-3] if base.endswith("-hf") else base}:
            if len(name) >= 4:
                out.setdefault(name, []).append((spelled, entry))
    return out


def _same_geometry(pairs: list[tuple[str, dict]]) -> bool:
    return len({tuple(e.get(k) for k in GEOMETRY) for _, e in pairs}) == 1


def _embedded(name: str, names: dict[str, list[tuple[str, dict]]]) -> list[str]:
    """Catalog names that occur in `name` between separators, keeping only those no longer match contains."""
    found = []
    for candidate in names:
        for m in re.finditer(re.escape(candidate), name):
            before = name[m.start() - 1] if m.start() else "-"
            after = name[m.end()] if m.end() < len(name) else "-"
            if before in "-_." and after in "-_.":
                found.append((m.start(), m.end(), candidate))
    return sorted({c for s, e, c in found
                   if not any(s2 <= s and e <= e2 and (e2 - s2) > (e - s) for s2, e2, _ in found)})


def derive(model_id: str, index: dict[str, dict]) -> Derivation | None:
    """The catalog entry a derivative's name stands for, or None when the name is not unambiguous."""
    if not model_id or "/" not in model_id and model_id.lower() in index:
        return None
    name = _basename(model_id)
    stripped = _QUANT.sub("", name)
    names = _names(index)
    quantized = " (a quantized upload: its weights are stored in fewer bits)" if _QUANTIZED.search(
        name[len(stripped):]) else ""
    for candidate in dict.fromkeys((name, stripped)):
        entries = names.get(candidate)
        if entries and _same_geometry(entries):
            base = _preferred(entries)
            return Derivation(base, f"assumed the geometry of {base} from the name{quantized}")
        if entries:
            return None  # the bare name means checkpoints of different shapes
    embedded = _embedded(stripped, names)
    if not embedded:
        spread = _spread(stripped, names)
        entries = [e for c in spread for e in names[c]]
        if not spread or not _same_geometry(entries):
            return None
        longest = max(spread, key=len)
        base = _preferred(names[longest])
        return Derivation(base, f"assumed the geometry of {base} from the name (its family and size: "
                                f"{' '.join(repr(t) for t in _tokens(longest))}){quantized}")
    entries = [e for c in embedded for e in names[c]]
    if not _same_geometry(entries):
        return None
    longest = max(embedded, key=len)
    base = _preferred(names[longest])
    return Derivation(base, f"assumed the geometry of {base} from the name (it embeds {longest!r}){quantized}")


_SIZE = re.compile(r"^\d+(?:\.\d+)?[bm]$")
# a name with one of these words is another kind of model than a catalog name without it (a vision-language or
# mixture-of-experts sibling of a text model)
_KIND_WORDS = {"vl", "vision", "audio", "omni", "moe", "mm", "llava", "reward", "rm", "prm"}


def _tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[-_]", name) if t]


def _spread(name: str, names: dict[str, list[tuple[str, dict]]]) -> list[str]:
    """Catalog names of three or more words (family, version, size: `llama-3.1-8b`) whose words all occur in
    `name` in order, starting it, with at most two words between them, the size among them and no other size
    (`llama-3.1-tulu-3-8b-sft`): a fine-tune that puts its own name between family and size."""
    words = _tokens(name)
    sizes = {w for w in words if _SIZE.match(w)}
    found = []
    for candidate in names:
        parts = _tokens(candidate)
        if len(parts) < 3 or not _SIZE.match(parts[-1]) or sizes != {parts[-1]} or not words or words[0] != parts[0]:
            continue
        if (_KIND_WORDS & set(words)) - set(parts):
            continue
        at, ok = 0, True
        for part in parts:
            try:
                nxt = words.index(part, at)
            except ValueError:
                ok = False
                break
            if at and nxt - at > 2:
                ok = False
                break
            at = nxt + 1
        if ok:
            found.append(candidate)
    return found


def _preferred(pairs: list[tuple[str, dict]]) -> str:
    """The name to report: the checkpoint's publisher's spelling (an entry's own id before a re-upload's)."""
    return min(pairs, key=lambda p: (p[0].split("/")[0].lower() in _MIRRORS, p[0] != p[1]["id"], p[0]))[0]
