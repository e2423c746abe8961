"""Vision-language models' vision towers: which LoRA targets land in the checkpointed vision blocks, and
whether transformers' input hook (`enable_input_require_grads`) reaches the vision input, per family and version.

Why it matters (TL201): under reentrant checkpointing a block whose inputs do not require grad gives its
adapters no gradient. The vision blocks' input is the patch embedding of `pixel_values` (a frozen conv), so
unless something hooks that embedding, LoRA inside the vision blocks never trains, while the hook on the text
embeddings (the one PEFT, TRL and the Trainer install through `enable_input_require_grads`) serves only the
text decoder.

Library facts (read in the released sources, and measured on CPU by tests/fixtures/tl201_vision/):
- transformers 4.45.0 .. 4.57.1 `modeling_utils.py` `enable_input_require_grads` (4.57.1 l.2858, 4.52.4 l.2466,
  4.49.0 l.1846, 4.45.0 l.1800) hooks `self.get_input_embeddings()` only: the text `embed_tokens`.
  `_set_gradient_checkpointing` (4.57.1 l.3726-3729) sets `gradient_checkpointing` on every submodule that has
  the attribute, the vision tower's included (`Qwen2VisionTransformerPretrainedModel.__init__`), so its blocks are
  checkpointed too, reentrant by default (l.3692 `{"use_reentrant": True}`).
- transformers 5.0.0 .. 5.25.0 `enable_input_require_grads` (5.25.0 l.2162-2179, 5.0.0 l.2135) hooks the
  `get_input_embeddings()` of every `PreTrainedModel` submodule. Qwen2-VL's and Qwen2.5-VL's vision towers set
  `_input_embed_layer = "patch_embed"` (5.25.0 qwen2_vl/modeling_qwen2_vl.py l.647, 5.0.0 l.681;
  qwen2_5_vl 5.0.0 l.318), CLIP / SigLIP / Idefics3 / Mllama vision models return their patch embedding, so the
  vision input is hooked; `Qwen3VLVisionModel` (5.25.0 qwen3_vl/modeling_qwen3_vl.py l.620) sets none and its
  `get_input_embeddings()` raises NotImplementedError, which the loop skips: Qwen3-VL's vision input stays unhooked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from trainlint.knowledge.versions import LibraryVersion

HOOKS_EVERY_SUBMODEL_SINCE = (5, 0, 0)
CHECKED_THROUGH = (5, 25, 0)  # the newest release whose vision towers were read (installed)


@dataclass(frozen=True)
class VisionFamily:
    name: str  # shown in messages
    classes: tuple[str, ...]  # model classes that carry this tower
    id_pattern: str  # a hub id of the family (case-insensitive search)
    blocks: tuple[str, ...]  # module paths inside one checkpointed vision block (PEFT matches their suffixes)
    patch_embed: str  # the module whose output a hook must mark as requiring grad (as the advice names it)
    # the first release whose enable_input_require_grads reaches the vision input; None: no release read does
    hooked_since: tuple[int, ...] | None = HOOKS_EVERY_SUBMODEL_SINCE
    model_types: tuple[str, ...] = ()
    # the ModuleLists of checkpointed blocks, as named_modules() spells them in the releases read (the tower at the top
    # through 4.51, under `model.` from 4.52: PEFT's regex targets see either)
    block_paths: tuple[str, ...] = ("visual.blocks", "model.visual.blocks")
    shown: str = "visual.blocks"  # how a message names the blocks
    # the first release whose tower blocks are no longer checkpointed by gradient_checkpointing_enable; None: all are
    unchecked_since: tuple[int, ...] | None = None
    # classes that load a checkpoint of this family without its tower (the text model alone)
    text_classes: tuple[str, ...] = ()

    @property
    def hooked_in_5(self) -> bool:
        return self.hooked_since is not None


# CLIP (LLaVA, LLaVA-NeXT) and SigLIP (PaliGemma, Gemma 3, Idefics3 / SmolVLM's own copy) encoder layers: the same
# Linears in every release read (4.45.0, 4.54.1, 4.57.1, 5.25.0 models built from configs, tests/fixtures/tl201_vision/)
CLIP_BLOCK = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "mlp.fc1", "mlp.fc2")
# the tower's encoder layers under a LLaVA-style model: 4.45-4.51 at the top (`vision_tower.vision_model.encoder`),
# 4.52-4.57 under `model.`, 5.x without the inner `vision_model` (5.25.0: `model.vision_tower.encoder.layers.N`)
LLAVA_PATHS = ("vision_tower.vision_model.encoder.layers", "model.vision_tower.vision_model.encoder.layers",
               "model.vision_tower.encoder.layers")

FAMILIES: tuple[VisionFamily, ...] = (
    # module names from the 5.25.0 models built from configs (tests/test_tl201_vision.py prints the same set)
    VisionFamily("Qwen3-VL", ("Qwen3VLForConditionalGeneration", "Qwen3VLModel", "Qwen3VLMoeForConditionalGeneration",
                              "Qwen3VLMoeModel"), r"qwen3-vl",
                 ("attn.qkv", "attn.proj", "mlp.linear_fc1", "mlp.linear_fc2"), "visual.patch_embed", None,
                 ("qwen3_vl", "qwen3_vl_moe")),
    VisionFamily("Qwen2.5-VL", ("Qwen2_5_VLForConditionalGeneration", "Qwen2_5_VLModel"), r"qwen2\.5-vl",
                 ("attn.qkv", "attn.proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"), "visual.patch_embed",
                 model_types=("qwen2_5_vl",)),
    VisionFamily("Qwen2-VL", ("Qwen2VLForConditionalGeneration", "Qwen2VLModel"), r"qwen2-vl",
                 ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"), "visual.patch_embed", model_types=("qwen2_vl",)),
    # issue 28 item 1, the other families. In 4.45.0 .. 4.57.1 their towers' encoder layers are checkpointed
    # (CLIPEncoder / SiglipEncoder / Idefics3Encoder carry `gradient_checkpointing`, which _set_gradient_checkpointing
    # sets on every submodule; measured on CPU with 4.54.1 and 4.57.1, OBSERVED.md), and enable_input_require_grads
    # hooks only the text embeddings, except where the model class overrides it: Idefics3 / SmolVLM's
    # `enable_input_require_grads` also hooks `model.vision_model.get_input_embeddings()` (4.57.1
    # idefics3/modeling_idefics3.py l.777-789, smolvlm/modeling_smolvlm.py l.779; the same override in 4.46.3 through
    # 4.56.2, from each family's first release). In 5.x the loop over submodels reaches every one of these towers:
    # CLIPVisionModel / SiglipVisionModel `_input_embed_layer = "patch_embedding"` (5.25.0 clip/modeling_clip.py l.588,
    # siglip/modeling_siglip.py l.557), Idefics3 / SmolVLM vision `get_input_embeddings` -> `embeddings` (5.25.0
    # idefics3/modeling_idefics3.py l.423), MllamaVisionModel -> `patch_embedding` (mllama/modeling_mllama.py l.862).
    VisionFamily("LLaVA", ("LlavaForConditionalGeneration", "LlavaModel"), r"llava-1\.5|llava-v1\.5|bakllava",
                 CLIP_BLOCK, "vision_tower.vision_model.embeddings", model_types=("llava",), block_paths=LLAVA_PATHS,
                 shown="vision_tower.*.encoder.layers"),
    VisionFamily("LLaVA-NeXT", ("LlavaNextForConditionalGeneration", "LlavaNextModel"), r"llava-v1\.6|llava-next",
                 CLIP_BLOCK, "vision_tower.vision_model.embeddings", model_types=("llava_next",),
                 block_paths=LLAVA_PATHS, shown="vision_tower.*.encoder.layers"),
    VisionFamily("PaliGemma", ("PaliGemmaForConditionalGeneration", "PaliGemmaModel"), r"paligemma",
                 CLIP_BLOCK, "vision_tower.vision_model.embeddings", model_types=("paligemma",),
                 block_paths=LLAVA_PATHS, shown="vision_tower.*.encoder.layers"),
    # AutoModelForCausalLM loads a gemma3 checkpoint as Gemma3ForConditionalGeneration, the tower included
    # (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES "gemma3" in 4.50.3, 4.52.4, 4.57.1, 5.25.0 models/auto/modeling_auto.py);
    # Gemma3ForCausalLM loads the text model alone
    VisionFamily("Gemma 3", ("Gemma3ForConditionalGeneration", "Gemma3Model"), r"gemma-3-(4|12|27)b",
                 CLIP_BLOCK, "vision_tower.vision_model.embeddings", model_types=("gemma3",),
                 block_paths=LLAVA_PATHS, shown="vision_tower.*.encoder.layers", text_classes=("Gemma3ForCausalLM",)),
    VisionFamily("Idefics3", ("Idefics3ForConditionalGeneration", "Idefics3Model"), r"idefics3",
                 CLIP_BLOCK, "model.vision_model.embeddings", (4, 46, 0), ("idefics3",),
                 ("model.vision_model.encoder.layers",), "vision_model.encoder.layers"),
    VisionFamily("SmolVLM", ("SmolVLMForConditionalGeneration", "SmolVLMModel"), r"smolvlm",
                 CLIP_BLOCK, "model.vision_model.embeddings", (4, 50, 0), ("smolvlm",),
                 ("model.vision_model.encoder.layers",), "vision_model.encoder.layers"),
    # Mllama's vision encoders (`transformer`, 32 layers, and `global_transformer`, 8 gated ones) are checkpointed
    # through 4.54.1 (MllamaVisionEncoder.forward calls _gradient_checkpointing_func: 4.45.0 l.436, 4.54.1 l.391) and
    # not from 4.55.0 (4.55.0, 4.56.2, 4.57.1, 5.25.0: its layers are plain nn.Modules called directly, 5.25.0
    # mllama/modeling_mllama.py l.368-373); AutoModelForCausalLM loads MllamaForCausalLM, the text model alone
    # (4.57.1, 5.25.0 MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    VisionFamily("Llama 3.2 Vision", ("MllamaForConditionalGeneration", "MllamaModel"), r"llama-3\.2-\d+b-vision",
                 ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.fc1",
                  "mlp.fc2"), "vision_model.patch_embedding", model_types=("mllama",),
                 block_paths=("vision_model.transformer.layers", "vision_model.global_transformer.layers",
                              "model.vision_model.transformer.layers", "model.vision_model.global_transformer.layers"),
                 shown="vision_model.*transformer.layers", unchecked_since=(4, 55, 0),
                 text_classes=("MllamaForCausalLM", "AutoModelForCausalLM")),
)
# what any of these towers' modules are called in a module path (a script's own hook on one of them)
TOWER_WORDS = ("visual", "vision", "patch_embed")
# hub ids whose model_type is one of the above but whose tower was not read (Pixtral checkpoints are model_type llava)
UNREAD_IDS = r"pixtral"


def family_of(class_name: str | None, model_id: str | None, model_type: str | None = None) -> VisionFamily | None:
    for fam in FAMILIES:
        if class_name in fam.classes:
            return fam
    found = None
    if isinstance(model_id, str) and re.search(UNREAD_IDS, model_id, re.IGNORECASE):
        return None
    if model_type:
        found = next((f for f in FAMILIES if model_type in f.model_types), None)
    if found is None and isinstance(model_id, str):
        found = next((f for f in FAMILIES if re.search(f.id_pattern, model_id, re.IGNORECASE)), None)
    if found is not None and class_name in found.text_classes:
        return None
    return found


def vision_input_hooked(fam: VisionFamily, transformers: LibraryVersion) -> bool | None:
    """Whether `enable_input_require_grads()` in this transformers hooks the vision tower's input; None for a
    5.0.0 pre-release, whose loop was not read."""
    if fam.hooked_since is not None and fam.hooked_since < HOOKS_EVERY_SUBMODEL_SINCE:
        # the model class's own override (Idefics3, SmolVLM), there from the class's first release: an earlier
        # transformers has no such class, so it is not judged
        return True if transformers.at_least(*fam.hooked_since) else None
    if not transformers.at_least(*HOOKS_EVERY_SUBMODEL_SINCE):
        return False
    if transformers.tuple[:3] in ((5,), (5, 0), (5, 0, 0)) and transformers.pre is not None:
        return None
    return fam.hooked_since is not None


def tower_checkpointed(fam: VisionFamily, transformers: LibraryVersion) -> bool:
    """Whether gradient_checkpointing_enable checkpoints the tower's blocks in this transformers."""
    return fam.unchecked_since is None or not transformers.at_least(*fam.unchecked_since)


def _block_names(fam: VisionFamily, leaf: str) -> list[str]:
    """The names PEFT matches a block module by: the base model's `named_modules()` keys in the releases read, e.g.
    `visual.blocks.N...` (the tower at the top, transformers <= 4.51) or `model.visual.blocks.N...` (4.52+ and 5.x)."""
    return [f"{path}.{i}.{leaf}" for path in fam.block_paths for i in (0, 1)]


def _peft_matches(target: str | list[str], key: str) -> bool:
    """peft 0.21.2 tuners_utils.py `check_target_module_exists` (l.2350-2376): a string is a full regex match,
    a list matches a name or a `.`-suffix; the same for `exclude_modules`."""
    if isinstance(target, str):
        return re.fullmatch(target, key) is not None
    return any(key == t or key.endswith("." + t) for t in target)


def adapted_blocks(fam: VisionFamily, target_modules: object, exclude_modules: object = None) -> list[str] | None:
    """The vision-block modules (as `attn.qkv`, ...) that LoRA adapts; None when the targets are not readable.

    "all-linear" adapts every linear layer but the output head (peft tuners_utils
    `_maybe_include_all_linear_layers`, 0.21.2 l.2441-2468), the vision tower's included."""
    if not _readable(target_modules) or not (exclude_modules is None or _readable(exclude_modules)):
        return None
    hit = []
    for leaf in fam.blocks:
        for key in _block_names(fam, leaf):
            included = (isinstance(target_modules, str) and target_modules.lower() == "all-linear") or _peft_matches(target_modules, key)  # type: ignore[arg-type]
            excluded = exclude_modules is not None and _peft_matches(exclude_modules, key)  # type: ignore[arg-type]
            if included and not excluded:
                hit.append(leaf)
                break
    return hit


def merger_targeted(target_modules: object, exclude_modules: object = None) -> bool:
    """Whether a target_modules list or regex reaches Qwen3-VL's merger Linears (`visual.merger.linear_fc1` / `_fc2`,
    and the deepstack mergers' of the same names: 5.25.0 qwen3_vl/modeling_qwen3_vl.py l.170-182): the names it
    shares with the blocks' MLP, so `["linear_fc1", "linear_fc2"]` adapts the mergers too (PEFT's suffix match)."""
    if isinstance(target_modules, str) and target_modules.lower() == "all-linear":
        return False  # decided by the caller
    if not _readable(target_modules) or not (exclude_modules is None or _readable(exclude_modules)):
        return False
    for prefix in ("", "model."):
        for leaf in ("linear_fc1", "linear_fc2"):
            for key in (f"{prefix}visual.merger.{leaf}", f"{prefix}visual.deepstack_merger_list.0.{leaf}"):
                if _peft_matches(target_modules, key) and not (  # type: ignore[arg-type]
                        exclude_modules is not None and _peft_matches(exclude_modules, key)):  # type: ignore[arg-type]
                    return True
    return False


def merger_excluded(exclude_modules: object) -> bool:
    """Whether exclude_modules leaves out the patch merger's Linears (`visual.merger.mlp.0` / `.2`)."""
    if exclude_modules is None or not _readable(exclude_modules):
        return False
    # Qwen2-VL / Qwen2.5-VL: merger.mlp.0 / .2; Qwen3-VL: merger.linear_fc1 / linear_fc2 (5.25.0 l.170-182)
    return any(_peft_matches(exclude_modules, f"{prefix}visual.merger.{leaf}")  # type: ignore[arg-type]
               for prefix in ("", "model.") for leaf in ("mlp.0", "mlp.2", "linear_fc1", "linear_fc2"))


def _readable(targets: object) -> bool:
    return isinstance(targets, str) or (isinstance(targets, list) and all(isinstance(t, str) for t in targets))


# -- image tokens per sample (issue 28 part 1, item 2) ------------------------------------------------------------

@dataclass(frozen=True)
class ImageProcessor:
    """The Qwen-VL image processor's settings that decide an image's token count: the image is resized so that
    both sides are multiples of patch_size * merge_size and its area lies in [min_pixels, max_pixels]; each
    merge_size x merge_size group of patches becomes one token (transformers 5.25.0
    `models/qwen2_vl/image_processing_qwen2_vl.py` `smart_resize` l.64-90; 4.57.1 l.55; 4.45.0 l.100)."""

    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int
    source: str

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    def tokens(self, height: int, width: int) -> int:
        """Image tokens for one height x width image (the `<|image_pad|>` tokens; `smart_resize` in integers)."""
        import math

        f = self.factor
        h_bar = round(height / f) * f
        w_bar = round(width / f) * f
        if h_bar * w_bar > self.max_pixels:
            beta = math.sqrt((height * width) / self.max_pixels)
            h_bar = max(f, math.floor(height / beta / f) * f)
            w_bar = max(f, math.floor(width / beta / f) * f)
        elif h_bar * w_bar < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h_bar = math.ceil(height * beta / f) * f
            w_bar = math.ceil(width * beta / f) * f
        return (h_bar // f) * (w_bar // f)

    def max_tokens(self) -> int:
        """The most tokens one image can take: max_pixels / factor^2 (any aspect ratio reaches it within a
        rounding step)."""
        return self.max_pixels // (self.factor * self.factor)

    def with_pixels(self, min_pixels: int | None, max_pixels: int | None, why: str) -> "ImageProcessor":
        return ImageProcessor(self.patch_size, self.merge_size, min_pixels or self.min_pixels,
                              max_pixels or self.max_pixels, why)


# What `AutoProcessor.from_pretrained(<hub id>)` loads: the checkpoint's preprocessor_config.json, not the class
# defaults. Qwen2-VL / Qwen2.5-VL checkpoints: min_pixels 3136, max_pixels 12845056 (= 16384 * 28 * 28), patch 14,
# merge 2; Qwen3-VL: size {"shortest_edge": 65536, "longest_edge": 16777216} (= 16384 * 32 * 32), patch 16, merge 2.
# These values were not read from the hub files here: they are as quoted from those files by public code
# (search-corpus file ids 69393411951 `QWEN25_PREPROCESSOR`, 62983406432 `VISION_DEFAULTS`), and the 16,384-token
# ceiling is the one reported in EvolvingLMMs-Lab/lmms-eval#436 and QwenLM/Qwen3-VL#2026. The class defaults differ:
# transformers 4.45.0-5.25.0 `Qwen2VLImageProcessor` max_pixels = 28 * 28 * 1280 (1,280 tokens; 5.25.0 l.96,
# 4.57.1 l.142, 4.45.0 l.176), which is what a processor built without a checkpoint uses.
CHECKPOINT_PROCESSORS: dict[str, ImageProcessor] = {
    "Qwen2-VL": ImageProcessor(14, 2, 3136, 12845056, "the checkpoint's preprocessor_config.json max_pixels=12845056"),
    "Qwen2.5-VL": ImageProcessor(14, 2, 3136, 12845056, "the checkpoint's preprocessor_config.json max_pixels=12845056"),
    "Qwen3-VL": ImageProcessor(16, 2, 65536, 16777216,
                               "the checkpoint's preprocessor_config.json longest_edge=16777216"),
}
CLASS_DEFAULT_MAX_PIXELS = 28 * 28 * 1280
# the tokens around each image in the Qwen-VL chat template: <|vision_start|> ... <|vision_end|>
IMAGE_WRAP_TOKENS = 2


# -- the tower's geometry, from a config.json `vision_config` or the catalog's `vision` (issue 28 item 1) -----------

@dataclass(frozen=True)
class TowerConfig:
    """A Qwen-VL vision tower's geometry as its config states it (memory/vision.py Tower is built from it).

    Field names per family (transformers 5.25.0 configuration files): Qwen2-VL `Qwen2VLVisionConfig` (embed_dim,
    mlp_ratio, hidden_size = the text model's width; LayerNorm, fc1/fc2: qwen2_vl/modeling_qwen2_vl.py
    `Qwen2VLVisionBlock`, `VisionMlp`); Qwen2.5-VL `Qwen2_5_VLVisionConfig` (hidden_size, intermediate_size,
    out_hidden_size; RMSNorm, gate/up/down with biases: modeling_qwen2_5_vl.py l.85-96, l.342-348); Qwen3-VL
    `Qwen3VLVisionConfig` (configuration_qwen3_vl.py l.44-57: depth, hidden_size, intermediate_size, num_heads,
    out_hidden_size, patch_size 16, num_position_embeddings 2304, deepstack_visual_indexes (8, 16, 24), hidden_act
    gelu_pytorch_tanh; LayerNorm blocks with linear_fc1/linear_fc2: modeling_qwen3_vl.py l.77-87, l.327-352)."""

    depth: int
    hidden: int
    intermediate: int
    heads: int
    out_hidden: int
    patch_size: int
    temporal_patch_size: int
    merge: int
    gated_mlp: bool
    rms_norm: bool
    params: int | None  # stated by the catalog (the tower transformers builds on the meta device); None: computed
    kind: str = "qwen"  # "clip": LLaVA-1.5's CLIP ViT and projector; "siglip": Gemma 3's (memory/vision.py Tower.kind)
    image_size: int = 0
    unused_layers: int = 0
    pool: int = 1  # "siglip": Gemma 3's projector avg-pool kernel; "idefics3": the connector's scale_factor
    deepstack: int = 0  # "qwen3": the deepstack mergers (len(deepstack_visual_indexes))
    pos_embeddings: int = 0  # "qwen3": the learned position grid's rows (num_position_embeddings)
    in_total: bool = False  # the model's stated num_parameters already holds the tower (memory/vision.py Tower)


def _int(d: dict, key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def tower_config(config: dict, model_type: str | None) -> TowerConfig | None:
    """The tower of a Qwen2-VL / 2.5-VL / 3-VL, LLaVA (CLIP), Gemma 3 / PaliGemma (SigLIP) or Idefics3 config.json
    (`vision_config`) or
    catalog entry (`vision`, whose hidden_size is the tower's width); None for another model type or a config that
    does not state the geometry."""
    d = config.get("vision") if isinstance(config.get("vision"), dict) else config.get("vision_config")
    if model_type == "llava" and isinstance(d, dict):
        return _clip_tower(config, d)
    if model_type == "gemma3" and isinstance(d, dict):
        return _siglip_tower(config, d)
    if model_type == "idefics3" and isinstance(d, dict):
        return _idefics3_tower(config, d)
    if model_type == "paligemma" and isinstance(d, dict):
        return _paligemma_tower(config, d)
    kind = {"qwen2_vl": "2", "qwen2_5_vl": "2.5", "qwen3_vl": "3", "qwen3_vl_moe": "3"}.get(model_type or "")
    if kind is None or not isinstance(d, dict):
        return None
    if kind == "3":
        return _qwen3_tower(d)
    if "embed_dim" in d:  # Qwen2-VL's own config.json: hidden_size is the text model's width there
        hidden, out = _int(d, "embed_dim"), _int(d, "hidden_size")
    else:
        hidden, out = _int(d, "hidden_size"), _int(d, "out_hidden_size")
    ratio = d.get("mlp_ratio")
    inter = _int(d, "intermediate_size") or (int(hidden * ratio) if hidden and isinstance(ratio, (int, float)) else None)
    depth, heads = _int(d, "depth"), _int(d, "num_heads")
    if None in (hidden, out, inter, depth, heads):
        return None
    return TowerConfig(depth, hidden, inter, heads, out, _int(d, "patch_size") or (16 if kind == "3" else 14),
                       _int(d, "temporal_patch_size") or 2, _int(d, "spatial_merge_size") or 2,
                       gated_mlp=kind == "2.5", rms_norm=kind == "2.5", params=_int(d, "num_parameters"))


def _qwen3_tower(d: dict) -> TowerConfig | None:
    """Qwen3-VL's (and Qwen3-VL-MoE's: the same vision model, qwen3_vl_moe/modeling_qwen3_vl_moe.py) tower from its
    config.json `vision_config` or the catalog's `vision`; unstated fields are Qwen3VLVisionConfig's defaults
    (transformers 5.25.0). Another activation is not modelled (None)."""
    if d.get("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        return None
    depth, hidden, inter, heads, out = (_int(d, "depth"), _int(d, "hidden_size"), _int(d, "intermediate_size"),
                                        _int(d, "num_heads"), _int(d, "out_hidden_size"))
    stack = d.get("deepstack_visual_indexes", (8, 16, 24))
    if None in (depth, hidden, inter, heads, out) or not isinstance(stack, (list, tuple)) or \
            not all(isinstance(i, int) and not isinstance(i, bool) for i in stack):
        return None
    return TowerConfig(depth, hidden, inter, heads, out, _int(d, "patch_size") or 16, _int(d, "temporal_patch_size") or 2,
                       _int(d, "spatial_merge_size") or 2, gated_mlp=False, rms_norm=False,
                       params=_int(d, "num_parameters"), kind="qwen3",
                       deepstack=len(stack),  # a merger is built per index (the configs' indexes are blocks)
                       pos_embeddings=_int(d, "num_position_embeddings") or 2304)


def _clip_tower(config: dict, d: dict) -> TowerConfig | None:
    """LLaVA-1.5's tower from its config.json (`vision_config`: a CLIPVisionConfig, whose unstated fields are the
    class defaults, transformers 5.25.0 clip/configuration_clip.py: hidden_act quick_gelu) or the catalog's `vision`
    (out_hidden_size: the text width the projector maps to). Only a CLIP tower is read: a Pixtral or SigLIP one under
    model_type llava is not modelled (None)."""
    if d.get("model_type", "clip_vision_model") != "clip_vision_model" or \
            d.get("hidden_act", "quick_gelu") != "quick_gelu":
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    out = _int(d, "out_hidden_size") or _int(text, "hidden_size") or (4096 if text else None)  # LlamaConfig default
    layer = config.get("vision_feature_layer", -2)
    depth, hidden, inter, heads = (_int(d, "num_hidden_layers"), _int(d, "hidden_size"), _int(d, "intermediate_size"),
                                   _int(d, "num_attention_heads"))
    patch, size = _int(d, "patch_size"), _int(d, "image_size")
    if None in (depth, hidden, inter, heads, out, patch, size) or not isinstance(layer, int) or \
            isinstance(layer, bool) or not -depth <= layer < 0:
        return None
    # vision_feature_layer -2 reads the hidden state before the last layer: that layer runs, its output is unused
    # (5.25.0 llava/modeling_llava.py get_image_features: output_hidden_states=True, hidden_states[layer])
    return TowerConfig(depth, hidden, inter, heads, out, patch, 1, 1, gated_mlp=False, rms_norm=False,
                       params=_int(d, "num_parameters"), kind="clip", image_size=size, unused_layers=-layer - 1)


def _siglip_tower(config: dict, d: dict) -> TowerConfig | None:
    """Gemma 3's tower from its config.json (`vision_config`: a SiglipVisionConfig; unstated fields are the class
    defaults, transformers 5.25.0 siglip/configuration_siglip.py: hidden_act gelu_pytorch_tanh) or the catalog's
    `vision` (out_hidden_size: the text width; `in_num_parameters`: the entry's num_parameters counts the tower).
    The projector pools patches_per_side / sqrt(mm_tokens_per_image) patches a side into one token (5.25.0
    gemma3/modeling_gemma3.py Gemma3MultiModalProjector l.647-650; mm_tokens_per_image 256 by default,
    configuration_gemma3.py l.207). A tower with the attention-pooling head (vision_use_head true) or another
    activation is not modelled (None)."""
    if d.get("model_type", "siglip_vision_model") != "siglip_vision_model" or \
            d.get("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh" or d.get("vision_use_head") is True:
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    out = _int(d, "out_hidden_size") or _int(text, "hidden_size")
    depth, hidden, inter, heads = (_int(d, "num_hidden_layers"), _int(d, "hidden_size"), _int(d, "intermediate_size"),
                                   _int(d, "num_attention_heads"))
    patch, size = _int(d, "patch_size"), _int(d, "image_size")
    tokens = _int(d, "mm_tokens_per_image") or _int(config, "mm_tokens_per_image") or 256
    if None in (depth, hidden, inter, heads, out, patch, size):
        return None
    side, token_side = size // patch, round(tokens ** 0.5)
    if token_side * token_side != tokens or side % token_side:
        return None
    return TowerConfig(depth, hidden, inter, heads, out, patch, 1, 1, gated_mlp=False, rms_norm=False,
                       params=_int(d, "num_parameters"), kind="siglip", image_size=size, pool=side // token_side,
                       in_total=d.get("in_num_parameters") is True)


def _idefics3_tower(config: dict, d: dict) -> TowerConfig | None:
    """Idefics3's tower from its config.json (`vision_config`: an Idefics3VisionConfig, unstated fields the class
    defaults, transformers 5.25.0 idefics3/configuration_idefics3.py: hidden_act gelu_pytorch_tanh; `scale_factor`
    at the top, default 2, l.90) or the catalog's `vision` (scale_factor, out_hidden_size: the text width). The
    connector shuffles scale_factor x scale_factor patches into one token (modeling_idefics3.py l.368-383), so a
    tile's tokens are (image_size / patch_size / scale_factor)^2. SmolVLM's model is the same code
    (smolvlm/modeling_smolvlm.py) but its checkpoints' processors (512 px tiles, other token counts) were not read:
    only model_type idefics3 comes here. Another activation is not modelled (None)."""
    if d.get("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh":
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    out = _int(d, "out_hidden_size") or _int(text, "hidden_size")
    depth, hidden, inter, heads = (_int(d, "num_hidden_layers"), _int(d, "hidden_size"), _int(d, "intermediate_size"),
                                   _int(d, "num_attention_heads"))
    patch, size = _int(d, "patch_size"), _int(d, "image_size")
    scale = _int(d, "scale_factor") or _int(config, "scale_factor") or 2
    if None in (depth, hidden, inter, heads, out, patch, size) or (size // patch) % scale:
        return None
    return TowerConfig(depth, hidden, inter, heads, out, patch, 1, 1, gated_mlp=False, rms_norm=False,
                       params=_int(d, "num_parameters"), kind="idefics3", image_size=size, pool=scale,
                       in_total=d.get("in_num_parameters") is True)


def _paligemma_tower(config: dict, d: dict) -> TowerConfig | None:
    """PaliGemma's tower from its config.json (`vision_config`: a SiglipVisionConfig whose unstated fields are the
    class defaults, transformers 5.25.0 siglip/configuration_siglip.py: image_size 224, hidden_act gelu_pytorch_tanh,
    vision_use_head True; `projection_dim` at the top, default 2048, paligemma/configuration_paligemma.py l.83) or the
    catalog's `vision` (out_hidden_size: projection_dim). A tower with the attention-pooling head (vision_use_head
    true or unstated: SiglipVisionConfig.vision_use_head defaults to True, 5.25.0 siglip/configuration_siglip.py l.103,
    and the head then runs in every forward, modeling_siglip.py SiglipVisionTransformer l.567-569, l.613) or
    another activation is not modelled (None)."""
    if d.get("model_type", "siglip_vision_model") != "siglip_vision_model" or \
            d.get("hidden_act", "gelu_pytorch_tanh") != "gelu_pytorch_tanh" or d.get("vision_use_head") is not False:
        return None
    out = _int(d, "out_hidden_size") or _int(config, "projection_dim") or _int(d, "projection_dim") or 2048
    depth, hidden, inter, heads = (_int(d, "num_hidden_layers"), _int(d, "hidden_size"), _int(d, "intermediate_size"),
                                   _int(d, "num_attention_heads"))
    patch, size = _int(d, "patch_size") or 14, _int(d, "image_size") or 224
    if None in (depth, hidden, inter, heads):
        return None
    return TowerConfig(depth, hidden, inter, heads, out, patch, 1, 1, gated_mlp=False, rms_norm=False,
                       params=_int(d, "num_parameters"), kind="paligemma", image_size=size,
                       in_total=d.get("in_num_parameters") is True)


# -- image tokens of the other vision-language families (issue 28 item 1, "processor settings per family") ---------

@dataclass(frozen=True)
class TiledImages:
    """How many text positions one image takes in a family whose processor cuts it into fixed-size tiles (or scales
    it to a fixed size), at the processor's defaults in transformers 5.25.0; `max_tokens` is an image large enough to
    reach the most tiles. `in_text` False: the image reaches the text through cross-attention and takes one token
    (Mllama); its `vision_positions` are the tower's sequence instead."""

    name: str
    model_types: tuple[str, ...]
    id_pattern: str
    max_tokens: int
    source: str
    in_text: bool = True
    vision_positions: int = 0


def idefics3_tokens(rows: int, cols: int, seq: int) -> int:
    """Idefics3 / SmolVLM's prompt for an image split into rows x cols tiles (5.25.0 smolvlm/processing_smolvlm.py
    `_prompt_split_image` l.48-66, the same in idefics3/processing_idefics3.py): per tile the fake token, the
    `<row_i_col_j>` token and `seq` image tokens, a newline per row, then a newline and the global image (fake token,
    global token, `seq` image tokens, fake token)."""
    return rows * cols * (seq + 2) + rows + 1 + (seq + 3)


TILED: tuple[TiledImages, ...] = (
    TiledImages("LLaVA-1.5", ("llava",), r"llava-1\.5|llava-v1\.5", 576,
                "336 px crop, patch 14, the CLS dropped (vision_feature_select_strategy 'default'): 24 x 24 "
                "(5.25.0 llava/processing_llava.py l.66-68; LlavaConfig.image_seq_length 576, configuration_llava.py "
                "l.73)"),
    TiledImages("LLaVA-NeXT", ("llava_next",), r"llava-v1\.6|llava-next", 2928,
                "anyres: the 336 px base image (576) plus the best-fitting grid of 336 px tiles from "
                "image_grid_pinpoints (default up to 672 x 672: 48 x 48 features) with a newline per row "
                "(5.25.0 llava_next/processing_llava_next.py `_get_number_of_features` l.82-122; the pinpoints "
                "configuration_llava_next.py l.28)"),
    TiledImages("Idefics3", ("idefics3",), r"idefics3", idefics3_tokens(4, 4, 169),
                "longest edge 4 x 364 px cut into 364 px tiles (4 x 4) plus the global image, 169 tokens each "
                "(5.25.0 idefics3/image_processing_idefics3.py size l.206-207, processing_idefics3.py "
                "image_seq_len 169 l.44)"),
    TiledImages("SmolVLM", ("smolvlm",), r"smolvlm", idefics3_tokens(4, 4, 169),
                "the processor classes' defaults (5.25.0 smolvlm/image_processing_smolvlm.py l.195-196, "
                "processing_smolvlm.py image_seq_len 169 l.108); a checkpoint's own preprocessor_config.json "
                "(512 px tiles, fewer tokens per tile) was not read"),
    # PaliGemma's prompt: image_seq_length image tokens per image, then <bos>, the prompt and a newline (5.25.0
    # paligemma/processing_paligemma.py `build_string_from_input` l.170-178, image_seq_length from the image
    # processor; PaliGemmaConfig: (image_size / patch_size)^2, configuration_paligemma.py l.94): 256 at 224 px, the
    # -448 and -896 checkpoints 1,024 and 4,096 (matched by their ids; by model_type alone, 224 px)
    TiledImages("PaliGemma", (), r"paligemma.*-448", 1024,
                "448 px, patch 14: 32 x 32 image tokens (5.25.0 paligemma/configuration_paligemma.py l.94)"),
    TiledImages("PaliGemma", (), r"paligemma.*-896", 4096,
                "896 px, patch 14: 64 x 64 image tokens (5.25.0 paligemma/configuration_paligemma.py l.94)"),
    TiledImages("PaliGemma", ("paligemma",), r"paligemma", 256,
                "224 px, patch 14: 16 x 16 image tokens before <bos> and the prompt (5.25.0 "
                "paligemma/processing_paligemma.py l.170-178, configuration_paligemma.py l.94)"),
    TiledImages("Llama 3.2 Vision", ("mllama",), r"llama-3\.2-\d+b-vision", 1,
                "one <|image|> token in the text; the image reaches it through cross-attention layers "
                "(5.25.0 mllama/processing_mllama.py); up to 4 tiles of 560 px (image_processing_mllama.py "
                "max_image_tiles 4 l.342), 40 x 40 patches + CLS each in the vision tower", in_text=False,
                vision_positions=4 * (40 * 40 + 1)),
    TiledImages("Gemma 3", ("gemma3",), r"gemma-3-(4|12|27)b", 256 + 2,
                "896 px, 256 tokens per image (Gemma3Config.mm_tokens_per_image, 5.25.0 "
                "gemma3/configuration_gemma3.py l.207; processing_gemma3.py image_seq_length 256 l.41) between "
                "<start_of_image> and <end_of_image>; pan-and-scan is off by default (processing_gemma3.py l.29) and "
                "adds up to 4 crops of the same size when on"),
    TiledImages("Pixtral", ("pixtral", "llava"), r"pixtral", 64 * 65,
                "longest edge 1024 px, patch 16: 64 rows of 64 [IMG] tokens, each row ended by [IMG_BREAK] "
                "(the last by [IMG_END]) (5.25.0 pixtral/image_processing_pixtral.py l.103-104, "
                "processing_pixtral.py `replace_image_token` l.91-99)"),
    TiledImages("InternVL", ("internvl",), r"internvl", 13 * 256 + 2,
                "448 px tiles, up to 12 (crop_to_patches on: 5.25.0 internvl/processing_internvl.py l.34; "
                "got_ocr2 image processor max_patches 12 l.137) plus the thumbnail, 256 tokens each "
                "(InternVLConfig.image_seq_length, configuration_internvl.py l.117), between <img> and </img>"),
)


def tiled_family(model_type: str | None, model_id: str | None) -> TiledImages | None:
    """The family of a model by its hub id (a Pixtral checkpoint is model_type llava), else by model_type."""
    if isinstance(model_id, str):
        for fam in TILED:
            if re.search(fam.id_pattern, model_id, re.IGNORECASE):
                return fam
    return next((f for f in TILED if model_type in f.model_types and f.name != "Pixtral"), None)
