"""Vision-language runs: the image tokens each training sample adds to the sequence, from the processor's
settings (knowledge/vision_towers.py: the Qwen-VL families' patch and merge sizes, min/max pixels).

The estimate's sequence is the longest sample; for a Qwen-VL model that is the text plus, per image, up to
max_pixels / (patch_size * merge_size)^2 tokens (16,384 with the checkpoints' preprocessor_config.json) and the
two tokens around it. Unless the script or its launch says otherwise: one image per sample, the checkpoint's
processor settings (what `AutoProcessor.from_pretrained(<id>)` loads), an image that reaches max_pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainlint.context import FileContext
from trainlint.facts import Value
from trainlint.knowledge import vision_towers
from trainlint.knowledge.vision_towers import IMAGE_WRAP_TOKENS, ImageProcessor, VisionFamily
from trainlint.memory.vision import Tower, VisionPlan
from trainlint.run.decided import Decided

PROCESSOR_CLASSES = ("AutoProcessor", "AutoImageProcessor")
# the hook LLaMA-Factory's checkpointing installs (frameworks/llamafactory.py synthesizes it)
LF_CHECKPOINTING = "llamafactory.model.model_utils.checkpointing.enable_input_require_grads"
VLM_CLASS_ENDINGS = ("ForConditionalGeneration", "ForImageTextToText", "ForVision2Seq")


@dataclass(frozen=True)
class ImageTokens:
    family: str
    per_image: int  # image tokens of the largest image the processor lets through, with the wrap tokens
    images: int  # images per sample
    processor: ImageProcessor | None  # the Qwen-VL processor's settings; None for a tiled family

    @property
    def per_sample(self) -> int:
        return self.per_image * self.images


def vision_family(ctx: FileContext) -> VisionFamily | None:
    for model in ctx.facts.models:
        spec = ctx.spec(model)
        fam = vision_towers.family_of(model.class_name, model.model_id.value if model.model_id.known else None,
                                      spec.model_type if spec is not None else None)
        if fam is not None:
            return fam
    return None


def _processor_call(ctx: FileContext):
    for call in ctx.facts.calls:
        if call.short != "from_pretrained":
            continue
        receiver = (call.qualified or "").rsplit(".", 2)[-2] if call.qualified and "." in call.qualified else \
            (call.receiver or "")
        if receiver in PROCESSOR_CLASSES or receiver.endswith("Processor"):
            return call
    return None


def _pixels(call, name: str, size_key: str):
    """(value, unreadable) for `min_pixels`/`max_pixels=` or `size={"shortest_edge"/"longest_edge": ...}`."""
    value = call.kw(name)
    if value.known and isinstance(value.value, int) and not isinstance(value.value, bool) and value.value > 0:
        return value.value, False
    if value.known or value.unknown:
        return None, True
    size = call.kw("size")
    if size.known and isinstance(size.value, dict):
        item = size.value.get(size_key)
        if isinstance(item, int) and not isinstance(item, bool) and item > 0:
            return item, False
        return None, size_key in size.value
    return None, size.unknown


def image_tokens(ctx: FileContext) -> Decided[ImageTokens | None]:
    """The image tokens one sample adds (None for a model that is not a known vision-language family, or when
    the processor's max_pixels is not readable)."""
    fam = vision_family(ctx)
    if fam is None or fam.name not in vision_towers.CHECKPOINT_PROCESSORS:
        return _tiled_tokens(ctx)
    base = vision_towers.CHECKPOINT_PROCESSORS[fam.name]
    notes: list[str] = []
    call = _processor_call(ctx)
    span = None
    if call is not None:
        lo, lo_unreadable = _pixels(call, "min_pixels", "shortest_edge")
        hi, hi_unreadable = _pixels(call, "max_pixels", "longest_edge")
        if hi_unreadable:
            return Decided(None, call.span, False, "the processor's max_pixels is not readable",
                           ("image tokens per sample not known: the processor's max_pixels is not readable",))
        processor = base.with_pixels(lo, hi, f"max_pixels={hi:,} at line {call.span.line}" if hi else base.source)
        span = call.span if hi else None
    else:
        processor = base
    per_image = processor.max_tokens() + IMAGE_WRAP_TOKENS
    if span is None:
        notes.append(f"{fam.name} image tokens: up to {processor.max_tokens():,} per image ({processor.source}; "
                     f"patch {processor.patch_size}, merge {processor.merge_size}), assumed: no max_pixels set for the "
                     f"processor and images that reach it")
    images, images_note = images_per_sample(ctx)
    notes.append(f"{images_note} ({per_image:,} tokens each with <|vision_start|>/<|vision_end|>)")
    return Decided(ImageTokens(fam.name, per_image, images, processor), span, False,
                   f"{fam.name} processor ({processor.source})", tuple(notes))


def images_per_sample(ctx: FileContext) -> tuple[int, str]:
    """The images one sample carries: the most `{"type": "image"}` entries one message-content list written in the
    script holds (a collate or formatting function's template), else one, assumed. A dataset's own image column is
    not read."""
    if not ctx.facts.image_slots:
        return 1, "1 image per sample assumed"
    count, span = max(ctx.facts.image_slots, key=lambda slot: slot[0])
    return count, (f"{count} image{'s' if count > 1 else ''} per sample: the message content at line {span.line} "
                   f"lists {count}")


def _tiled_tokens(ctx: FileContext) -> Decided[ImageTokens | None]:
    """LLaVA / LLaVA-NeXT / Idefics3 / SmolVLM / Llama 3.2 Vision / Gemma 3 / Pixtral / InternVL: the most text
    positions one image takes at the processor's defaults (knowledge/vision_towers.py TILED); their processors'
    own settings in a script are not read yet. Only for a run that feeds images: a vision-language model class or a
    processor loaded (Gemma 3 checkpoints, for one, are often fine-tuned on text alone)."""
    if _processor_call(ctx) is None and not any(
            (m.class_name or "").endswith(VLM_CLASS_ENDINGS) for m in ctx.facts.models):
        return Decided(None, None, True, "no image input seen")
    for model in ctx.facts.models:
        spec = ctx.spec(model)
        fam = vision_towers.tiled_family(spec.model_type if spec is not None else None,
                                         model.model_id.value if model.model_id.known else None)
        if fam is None:
            continue
        images, images_note = images_per_sample(ctx)
        notes = (f"{fam.name} image tokens: up to {fam.max_tokens:,} per image ({fam.source}), assumed: images that "
                 f"reach the most tiles, the processor's defaults", images_note)
        return Decided(ImageTokens(fam.name, fam.max_tokens, images, None), None, False, f"{fam.name} processor",
                       notes)
    return Decided(None, None, True, "not a vision-language model trainlint knows")


def sequence_with_images(seq: Value, images: Decided[ImageTokens | None]) -> Value:
    """The sequence a rule judges: the script's own length when it sets one (a max length bounds text and image
    tokens together); when it sets none, the image tokens of one sample, carried as an assumption (`assumed`)."""
    if not seq.unset or images.value is None:
        return seq
    return Value("known", images.value.per_sample, images.span,
                 f"{images.value.family} image tokens of one sample, no max length set",
                 assumed=images.notes)


def tower_plan(ctx: FileContext, spec, images: Decided[ImageTokens | None], adapters,
               checkpointing: bool = False) -> Decided[VisionPlan | None]:
    """The vision tower in the step (memory/vision.py): its geometry (the model's config.json `vision_config` or the
    catalog's), the patches of one sample (merge^2 per image token), and what trains in it: LoRA adapters where
    target_modules match its block Linears (knowledge/vision_towers.py adapted_blocks; "all-linear" also its
    merger's), all of it under full fine-tuning, nothing otherwise. None when the model is not a family whose tower
    is modelled (Qwen2-VL / 2.5-VL / 3-VL, LLaVA-1.5's CLIP, Gemma 3's SigLIP,
    Idefics3's tiled SigLIP copy) with a known geometry, or its image
    tokens are not known."""
    geo = spec.vision if spec is not None else None
    fam = vision_family(ctx)
    if geo is None or fam is None or images.value is None:
        return Decided(None, None, True, "no vision tower modelled")
    tower = Tower(geo.depth, geo.hidden, geo.intermediate, geo.heads, geo.out_hidden, geo.patch_size,
                  geo.temporal_patch_size, geo.merge, geo.gated_mlp, geo.rms_norm, params=geo.params, kind=geo.kind,
                  image_size=geo.image_size, unused_layers=geo.unused_layers, pool=geo.pool, in_total=geo.in_total,
                  deepstack=geo.deepstack, pos_embeddings=geo.pos_embeddings)
    if tower.idefics3:
        # each tile of the split image and the global image go through the tower: a tile's prompt is seq + 2 tokens
        # (its fake and <row_i_col_j> tokens), the rows' newlines and the global image's 3 extra tokens fewer than a
        # tile more (knowledge/vision_towers.py idefics3_tokens), so the tiles are per_image // (seq + 2)
        seq = tower.positions_per_image // tower.pool ** 2
        patches = tower.positions_per_image * max(1, images.value.per_image // (seq + 2)) * images.value.images
    elif tower.vit:  # every image is scaled to the tower's size: its patches and the CLS
        patches = tower.positions_per_image * images.value.images
    else:
        tokens = (images.value.per_image - IMAGE_WRAP_TOKENS) * images.value.images
        patches = tokens * geo.merge ** 2
    notes: list[str] = []
    if adapters is None:
        plan = VisionPlan(tower, patches, "full")
        notes.append(f"{fam.name} vision tower trained with the model ({tower.parameters:,} parameters, {patches:,} "
                     f"patches per sample kept for backward); freezing it (requires_grad_(False) on the tower) "
                     f"would keep none")
    else:
        targets: object = "all-linear" if adapters.targets == ("all-linear",) else list(adapters.targets)
        plan = adapt(VisionPlan(tower, patches), fam, targets, adapters.exclude)
        if plan.trained == "lora":
            notes.append(f"LoRA adapts the {fam.name} vision tower too ({', '.join(plan.adapted)}"
                         f"{' and the merger' if plan.merger_adapted else ''} in {tower.depth} blocks): its "
                         f"{patches:,} patches per "
                         f"sample keep activations for backward")
        else:
            notes.append(f"{fam.name} vision tower frozen (no LoRA target in it): its weights "
                         f"({tower.parameters:,} parameters) count, its activations are freed before the text layers")
    if checkpointing and not plan.keeps_activations and vision_towers.vision_input_hooked(
            fam, ctx.versions.transformers):
        # transformers >= 5 gradient_checkpointing_enable -> enable_input_require_grads (5.25.0 modeling_utils.py
        # l.3192-3200) hooks the tower's patch_embed: the frozen tower's blocks keep their inputs for its backward.
        # Under LLaMA-Factory the hook comes from PEFT: its loader enables checkpointing (0.9.5 model/loader.py l.180,
        # patcher.py l.420) before get_peft_model (l.183), whose PeftModel.__init__ then calls
        # enable_input_require_grads (peft 0.21.2 peft_model.py l.184-185, l.728-735); and LLaMA-Factory's checkpoint
        # function runs a block with no trainable parameter without checkpointing (model_utils/checkpointing.py
        # l.84-100): every block's tensors are kept
        # by the synthesized call's full name: `calls_to` matches an unqualified `model.enable_input_require_grads()`
        # (a script's, or axolotl's synthesized one) by its short name
        lf = any(c.qualname == LF_CHECKPOINTING for c in ctx.facts.calls)
        plan = replace(plan, hooked=True, checkpointed=not lf)
        kept = "every block keeps its tensors (LLaMA-Factory checkpoints no frozen block)" if lf else \
            f"its {tower.depth} checkpointed blocks keep their inputs"
        notes[-1] = (f"{fam.name} vision tower frozen (no LoRA target in it; {tower.parameters:,} parameters), but "
                     f"transformers {ctx.versions.transformers.version}'s enable_input_require_grads() (called when "
                     f"checkpointing is enabled) hooks its patch embedding: the tower runs its backward, and {kept}")
    return Decided(plan, images.span, images.certain, f"{fam.name} vision tower", tuple(notes))


def adapt(plan: VisionPlan, fam: VisionFamily, targets: object, exclude: object = None) -> VisionPlan:
    """The tower under LoRA with these target_modules (less exclude_modules): the block Linears they match
    (knowledge/vision_towers.py adapted_blocks, PEFT's matching) and, with "all-linear" (or, for Qwen3-VL, a target
    naming linear_fc1 / linear_fc2), the merger's two Linears
    (PEFT adapts every Linear but the output layer: peft 0.21.2 tuners_utils.py `_maybe_include_all_linear_layers`)
    unless exclude_modules leaves out the tower (LLaMA-Factory's freeze_vision_tower)."""
    if isinstance(exclude, tuple):
        exclude = list(exclude)
    hit = tuple(vision_towers.adapted_blocks(fam, targets, exclude) or ())
    # Gemma 3's projector has no Linear (memory/vision.py Tower.merger_linears): "all-linear" leaves it as it is
    merger = isinstance(targets, str) and targets.lower() == "all-linear" and bool(plan.tower.merger_linears) and \
        not vision_towers.merger_excluded(exclude)
    # Qwen3-VL's mergers share linear_fc1 / linear_fc2 with its blocks' MLP: a list naming either adapts them too
    # (both Linears are then counted as adapted: one of two named is an overcount of that one's adapters)
    merger = merger or (plan.tower.qwen3 and vision_towers.merger_targeted(targets, exclude))
    return replace(plan, trained="lora" if hit or merger else "frozen", adapted=hit, merger_adapted=merger)
