"""Model geometry (vocabulary, hidden size, layers, heads...) for a model a script loads.

Looked up, in order: a config built inline in the script; a local model directory's config.json;
the local Hugging Face cache; the bundled catalog (models.json, copied from public config.json
files). Never the network. Anything else is unknown, and rules that need it say less.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from trainlint.knowledge.moe import Moe, moe_from_config, moe_params
from trainlint.knowledge.vision_towers import TowerConfig, tower_config

_NON_TEXT_INPUTS = {
    # model_type -> main_input_name (transformers sets `main_input_name` on these PreTrainedModel classes)
    "vit": "pixel_values", "deit": "pixel_values", "beit": "pixel_values", "swin": "pixel_values",
    "swinv2": "pixel_values", "convnext": "pixel_values", "convnextv2": "pixel_values", "dinov2": "pixel_values",
    "resnet": "pixel_values", "siglip_vision_model": "pixel_values", "clip_vision_model": "pixel_values",
    "whisper": "input_features", "speech_to_text": "input_features", "wav2vec2": "input_values",
    "hubert": "input_values", "wavlm": "input_values",
}
_CLASS_PREFIX_TO_TYPE = [
    ("Whisper", "whisper"), ("ViT", "vit"), ("DeiT", "deit"), ("Beit", "beit"), ("Swinv2", "swinv2"),
    ("Swin", "swin"), ("ConvNextV2", "convnextv2"), ("ConvNext", "convnext"), ("Dinov2", "dinov2"),
    ("ResNet", "resnet"), ("Wav2Vec2", "wav2vec2"), ("Hubert", "hubert"), ("WavLM", "wavlm"),
    ("Speech2Text", "speech_to_text"),
]


@dataclass(frozen=True)
class ModelSpec:
    id: str
    model_type: str | None
    vocab_size: int | None
    hidden_size: int | None
    num_layers: int | None
    num_heads: int | None
    num_kv_heads: int | None
    head_dim: int | None
    intermediate_size: int | None
    tie_word_embeddings: bool | None
    num_parameters: int | None
    main_input_name: str
    source: str
    attn_logit_softcapping: float | None = None
    dtype: str | None = None  # the checkpoint's dtype from config.json ("bfloat16"), what dtype="auto" loads
    architecture: str | None = None  # config.json `architectures[0]` (the class the checkpoint was saved from)
    num_labels: int | None = None  # from config.json's id2label / num_labels, when it states them
    assumed_from: str | None = None  # why this geometry was taken from another checkpoint (--verbose says it)
    # the attention the checkpoint's own code runs under trust_remote_code, when its config.json says
    # ("eager": the full score matrix; "fused": a kernel that never holds it), and why
    remote_attention: tuple[str, str] | None = None
    # mixture of experts (knowledge/moe.py): the routed layers, and the parameters (all experts, those a token uses)
    # counted from the config when it is one
    moe: Moe | None = None
    moe_parameters: tuple[int, int] | None = None
    vision: TowerConfig | None = None  # a vision-language model's tower (knowledge/vision_towers.py tower_config)

    def describe(self) -> str:
        def n(v: Any) -> str:
            return "?" if v is None else (f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))

        return (f"{self.id} ({self.model_type or '?'}): vocab {n(self.vocab_size)}, hidden {n(self.hidden_size)}, "
                f"layers {n(self.num_layers)}, heads {n(self.num_heads)}/{n(self.num_kv_heads)} kv, "
                f"params {n(self.num_parameters)}{self._moe_text()}; from {self.source}")

    def _moe_text(self) -> str:
        if self.moe is None:
            return ""
        m = self.moe
        shared = f" + shared {m.shared_intermediate:,}" if m.shared_intermediate else ""
        dense = "; transformers runs all on every token" if m.dense_dispatch else ""
        return (f", {m.experts} experts x {m.expert_intermediate:,} (top-{m.top_k}{shared}{dense}) in {m.sparse_layers} "
                f"layers" + (f", {self.moe_parameters[1]:,} active" if self.moe_parameters else ""))


def main_input_for(model_type: str | None, class_name: str | None) -> str:
    if model_type and model_type in _NON_TEXT_INPUTS:
        return _NON_TEXT_INPUTS[model_type]
    if class_name:
        for prefix, mtype in _CLASS_PREFIX_TO_TYPE:
            if class_name.startswith(prefix):
                return _NON_TEXT_INPUTS[mtype]
        if "ForImageClassification" in class_name or "ForAudioClassification" in class_name:
            return "pixel_values" if "Image" in class_name else "input_values"
        if "ForSpeechSeq2Seq" in class_name:
            return "input_features"
    return "input_ids"


def _first(d: dict, *keys: str) -> Any:
    for key in keys:
        value = d.get(key)
        if value is not None:
            return value
    return None


def spec_from_config(config: dict, model_id: str, source: str, class_name: str | None = None) -> ModelSpec:
    """Read a config.json-shaped dict (any of the common key spellings; text_config for multimodal)."""
    outer_type = config.get("model_type")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    hidden = _first(text, "hidden_size", "n_embd", "d_model", "dim")
    heads = _first(text, "num_attention_heads", "n_head", "num_heads", "encoder_attention_heads")
    kv = _first(text, "num_key_value_heads", "multi_query_group_num") or heads
    head_dim = _first(text, "head_dim") or (hidden // heads if hidden and heads else None)
    inter = _first(text, "intermediate_size", "n_inner", "ffn_dim", "d_ff", "encoder_ffn_dim")
    if inter is None and hidden and outer_type == "gpt2":
        inter = 4 * hidden
    ints = {k: v if isinstance(v, int) and not isinstance(v, bool) else None
            for k, v in dict(vocab=_first(text, "vocab_size") or _first(config, "vocab_size"), hidden=hidden,
                             layers=_first(text, "num_hidden_layers", "n_layer", "num_layers", "encoder_layers"),
                             heads=heads, kv=kv, head_dim=head_dim, inter=inter,
                             params=config.get("num_parameters")).items()}
    tie = config.get("tie_word_embeddings", text.get("tie_word_embeddings"))
    arch = config.get("architectures")
    arch = arch[0] if isinstance(arch, list) and arch and isinstance(arch[0], str) else config.get("architecture")
    labels = config.get("num_labels")
    if not isinstance(labels, int) and isinstance(config.get("id2label"), dict):
        labels = len(config["id2label"])
    return ModelSpec(
        id=model_id,
        model_type=outer_type,
        vocab_size=ints["vocab"],
        hidden_size=ints["hidden"],
        num_layers=ints["layers"],
        num_heads=ints["heads"],
        num_kv_heads=ints["kv"],
        head_dim=ints["head_dim"],
        intermediate_size=ints["inter"],
        tie_word_embeddings=tie if isinstance(tie, bool) else None,
        num_parameters=ints["params"],
        main_input_name=config.get("main_input_name") or main_input_for(outer_type, class_name),
        source=source,
        attn_logit_softcapping=_first(text, "attn_logit_softcapping"),
        dtype=_first(config, "dtype", "torch_dtype") if isinstance(_first(config, "dtype", "torch_dtype"), str) else None,
        architecture=arch if isinstance(arch, str) else None,
        num_labels=labels if isinstance(labels, int) and not isinstance(labels, bool) else None,
        remote_attention=_remote_attention(config, outer_type),
        moe=(moe := moe_from_config(config, ints["layers"])),
        moe_parameters=_moe_counts(config, tie) if moe is not None else None,
        vision=tower_config(config, outer_type),
    )


def _moe_counts(config: dict, tie: Any) -> tuple[int, int] | None:
    """(all parameters, those a token uses) of a mixture-of-experts config; None when tying is not stated."""
    if not isinstance(tie, bool):
        return None
    total, active = moe_params(config, tie), moe_params(config, tie, active_only=True)
    return (total, active) if total and active else None


def _remote_attention(config: dict, model_type: str | None) -> tuple[str, str] | None:
    """MPT checkpoints' own code (auto_map to modeling_mpt / attention.py) picks its kernel from
    config.json `attn_config.attn_impl`: "torch" runs `scaled_multihead_dot_product_attention`, which computes
    `q.matmul(k) * softmax_scale` and its softmax (the full score matrix, as eager); "flash" / "triton" run kernels
    that do not hold it (mosaicml/mpt-7b's attention.py; a copy is file id 40655880607 of the search corpus)."""
    attn = config.get("attn_config")
    if model_type != "mpt" or not isinstance(attn, dict) or not isinstance(attn.get("attn_impl"), str):
        return None
    impl = attn["attn_impl"]
    if impl == "torch":
        return "eager", ('the checkpoint\'s own MPT code with attn_config.attn_impl "torch" (its config.json): '
                         'q.matmul(k) and a softmax over the full score matrix')
    if impl in ("flash", "triton"):
        return "flash_attention_2", f'the checkpoint\'s own MPT code with attn_config.attn_impl "{impl}"'
    return None


@lru_cache(maxsize=1)
def _catalog() -> dict[str, dict]:
    path = Path(__file__).with_name("models.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    index: dict[str, dict] = {}
    for entry in data.get("models", []):
        for key in (entry["id"], *entry.get("aliases", [])):
            index[key.lower()] = entry
    return index


def catalog_ids() -> list[str]:
    return sorted({entry["id"] for entry in _catalog().values()})


def _hf_cache_dirs() -> list[Path]:
    dirs = []
    if os.environ.get("HF_HUB_CACHE"):
        dirs.append(Path(os.environ["HF_HUB_CACHE"]))
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    dirs.append(home / "hub")
    return dirs


def _read_config(path: Path) -> dict | None:
    try:
        with path.open(encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


_HUB_ID_RE = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


def lookup_model(model_id: str, script_dir: Path, class_name: str | None = None,
                 declared: tuple[tuple[str, str], ...] = (), root: Path | None = None) -> ModelSpec | None:
    """Geometry for a hub id or local path, from local files, the user's declarations or the catalog only.

    Order: a local model directory; `[tool.trainlint.models]` (a private id or path mapped to a catalog id or a
    config.json); the Hugging Face cache; the catalog; a derivative's name that embeds one catalog name."""
    if not model_id or len(model_id) > 300:
        return None
    spec = _local(model_id, script_dir, class_name)
    if spec is not None:
        return spec
    target = _declared_target(model_id, script_dir, declared, root or Path.cwd())
    if target is not None:
        return _declared_spec(model_id, target, root or Path.cwd(), class_name)
    if _HUB_ID_RE.match(model_id) and "/" in model_id:
        for cache in _hf_cache_dirs():
            snapshots = cache / f"models--{model_id.replace('/', '--')}" / "snapshots"
            if snapshots.is_dir():
                for snap in sorted(snapshots.iterdir(), reverse=True):
                    config = _read_config(snap / "config.json")
                    if config is not None:
                        return spec_from_config(config, model_id, f"Hugging Face cache {snap}", class_name)
    spec = _from_catalog(model_id, model_id, class_name)
    if spec is not None:
        return spec
    from trainlint.knowledge.names import derive

    name, how = model_id, ""
    if not _HUB_ID_RE.match(model_id):
        # a local path that is not here (`/home/u/models/LLM-Research/Meta-Llama-3___1-8B-Instruct`): its last
        # folder is the checkpoint's name as downloaded; ModelScope writes "." as "___" in it
        name = model_id.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1].replace("___", ".")
        if not _HUB_ID_RE.match(name):
            return None
        how = f"the name of the path's last folder ({model_id!r} is not here)"
    derivation = derive(name, _catalog())
    if derivation is None:
        return None
    spec = _from_catalog(derivation.base_id, model_id, class_name)
    reason = derivation.reason.replace("from the name", f"from {how}", 1) if how else derivation.reason
    return replace(spec, assumed_from=reason) if spec is not None else None


def _local(model_id: str, script_dir: Path, class_name: str | None) -> ModelSpec | None:
    for base in (script_dir, Path.cwd()):
        candidate = (base / model_id) if not os.path.isabs(model_id) else Path(model_id)
        config = _read_config(candidate / "config.json") if candidate.is_dir() else None
        if config is not None:
            return spec_from_config(config, model_id, f"local {candidate / 'config.json'}", class_name)
    return None


def _from_catalog(catalog_id: str, shown_id: str, class_name: str | None) -> ModelSpec | None:
    entry = _catalog().get(catalog_id.lower())
    if entry is None:
        return None
    return spec_from_config(dict(entry), shown_id, f"bundled catalog ({entry.get('source', 'public config.json')})",
                            class_name)


def _declared_target(model_id: str, script_dir: Path, declared: tuple[tuple[str, str], ...], root: Path) -> str | None:
    for key, target in declared:
        if key == model_id:
            return target
        if not _HUB_ID_RE.match(key) or key.startswith("."):  # a path: the same place, however it is spelled
            try:
                if (root / key).resolve() == (script_dir / model_id).resolve():
                    return target
            except (OSError, ValueError):
                continue
    return None


def _declared_spec(model_id: str, target: str, root: Path, class_name: str | None) -> ModelSpec | None:
    """A declared target: a catalog id, or a config.json (or a folder holding one) relative to the settings."""
    spec = _from_catalog(target, model_id, class_name)
    if spec is not None:
        return replace(spec, assumed_from=f"declared in [tool.trainlint.models] as {target}")
    path = root / target
    path = path / "config.json" if path.is_dir() else path
    config = _read_config(path)
    if config is None:
        return None
    return replace(spec_from_config(config, model_id, f"declared config {path}", class_name),
                   assumed_from=f"declared in [tool.trainlint.models] as {target}")


def declared_target_problem(target: str, root: Path) -> str | None:
    """Why a `[tool.trainlint.models]` target cannot be used (None when it can)."""
    if target.lower() in _catalog():
        return None
    path = root / target
    path = path / "config.json" if path.is_dir() else path
    if _read_config(path) is not None:
        return None
    return f"{target!r} is neither a catalog id (`trainlint` knows {len(catalog_ids())}) nor a readable config.json"


def spec_from_inline(config_class: str, kwargs: dict[str, Any], class_name: str) -> ModelSpec:
    """A config built in the script (`LlamaConfig(vocab_size=...)`): only what it spells out is known."""
    model_type = config_class[: -len("Config")].lower() or None
    config = {k: v for k, v in kwargs.items() if v is not None}
    config["model_type"] = model_type
    return spec_from_config(config, f"inline {config_class}(...)", "config built in the script", class_name)


def class_only_spec(class_name: str) -> ModelSpec:
    """When only the class is known (e.g. `ViTForImageClassification(config)`), its input is still known."""
    return ModelSpec(class_name, None, None, None, None, None, None, None, None, None, None,
                     main_input_for(None, class_name), "class name only")


@lru_cache(maxsize=1)
def _tied_defaults() -> dict[str, bool]:
    path = Path(__file__).with_name("tied_defaults.json")
    try:
        return json.loads(path.read_text(encoding="utf-8"))["defaults"]
    except (OSError, ValueError, KeyError):
        return {}


def tied_default(model_type: str | None) -> bool | None:
    """Whether `model_type` ties its embedding and LM head when its config.json does not say: its transformers
    config class's default (tied_defaults.json, scripts/gen_tied_defaults.py); None when not read."""
    return _tied_defaults().get(model_type) if model_type else None
