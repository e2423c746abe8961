"""The vision tower of a vision-language model in the estimate: its weights, its LoRA adapters, and the activations
of the image patches it keeps for backward (issue 28 item 1). Pure arithmetic over a VisionPlan; estimate.py adds
these terms to its consumers.

Modelled: LLaVA-1.5's CLIP tower and projector (`kind="clip"`, below), Gemma 3's SigLIP tower and its pooling
projector (`kind="siglip"`, below), Idefics3's SigLIP copy over every tile and its pixel-shuffle connector
(`kind="idefics3"`, below), and the Qwen2-VL / Qwen2.5-VL towers (transformers 5.25.0 models/qwen2_vl, qwen2_5_vl modeling files; each
block's saved tensors counted to the byte against the blocks transformers builds; Qwen3-VL's too, `kind="qwen3"`, with its deepstack mergers): `depth` blocks over the image patches (norm, attention with a fused qkv Linear and `proj`, an MLP),
then the patch merger (each merge x merge group of patches becomes one text token: a norm and two Linears
`merger.mlp.0` (4h -> 4h) and `merger.mlp.2` (4h -> text hidden)). One sample's patches are merge^2 times its image
tokens (knowledge/vision_towers.py ImageProcessor.tokens).

What autograd keeps depends on whether anything in the tower needs a gradient:
- a frozen tower with no adapter in it (LoRA on the text only, LLaMA-Factory's `freeze_vision_tower: true`):
  nothing in the tower requires grad (pixel_values do not, its weights are frozen), so its forward saves no tensor;
  its working set is freed before the text decoder runs, and only the merged image features remain, inside the text
  sequence's embeddings. Measured: bench/vlm_measurements.json (the lora-attn rows without checkpointing).
- the same frozen tower under gradient checkpointing on transformers >= 5 (`hooked`): `gradient_checkpointing_enable`
  calls `enable_input_require_grads()` for any model whose main input is input_ids (5.25.0 modeling_utils.py
  l.3192-3200), which hooks every submodel's input embeddings, the Qwen2-VL / Qwen2.5-VL tower's patch_embed
  included (knowledge/vision_towers.py): the tower then keeps what a frozen block keeps for its input's gradient,
  checkpointed like an adapted one. Measured: the lora-attn rows with checkpointing (5.4 GiB at 65,536 patches).
- adapters in the tower (target_modules that match its module names, "all-linear") or a trained tower: every block
  keeps its tensors per patch (vision_layer_bytes_per_patch); under gradient checkpointing the blocks are checkpointed
  like the text layers (`Qwen2_5_VLVisionBlock` is a GradientCheckpointingLayer, 5.25.0 modeling_qwen2_5_vl.py
  l.342; `gradient_checkpointing_enable` sets it on every such layer, modeling_utils.py), so each keeps its input
  (h x 2 bytes per patch) and one block is recomputed at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

# PEFT keeps adapters in fp32 (autocast_adapter_dtype=True): what an adapted Linear saves per input element (its
# input cast to fp32 through dropout: the fp32 dropout output and the bool mask) and per rank (lora_A's fp32 output),
# as in memory/estimate.py activation_bytes_per_layer
LORA_BYTES_PER_INPUT, LORA_BYTES_PER_RANK = 5, 4
# RMSNorm (Qwen2.5-VL / Qwen3-VL towers) keeps its fp32 input; LayerNorm (Qwen2-VL) its input and per-patch stats
NORM_FP32_INPUT = 4
LAYER_NORM_STATS = 8  # a LayerNorm's mean and rstd per patch, fp32 on CUDA (native_layer_norm's accumulate type)


@dataclass(frozen=True)
class Tower:
    """A Qwen-VL vision tower's geometry (its config.json `vision_config`)."""

    depth: int
    hidden: int
    intermediate: int  # the MLP's width (Qwen2-VL: mlp_ratio x hidden)
    heads: int
    out_hidden: int  # the text model's hidden size (the merger's output)
    patch_size: int = 14
    temporal_patch_size: int = 2
    merge: int = 2
    gated_mlp: bool = True  # gate/up/down (Qwen2.5-VL); False: fc1/fc2 (Qwen2-VL)
    rms_norm: bool = True  # False: LayerNorm with a bias (Qwen2-VL)
    mlp_bias: bool = True
    params: int | None = None  # stated (the catalog's count from the tower transformers builds); None: tower_params
    # "qwen": the Qwen-VL towers above; "clip": a CLIP ViT under a LLaVA-style projector (LLaVA-1.5: one position per
    # patch plus the CLS, separate q/k/v/out_proj, LayerNorm, quick_gelu, then Linear-GELU-Linear to the text width)
    # "siglip": Gemma 3's SigLIP ViT (no CLS, the same Linears as CLIP, gelu_pytorch_tanh, a post_layernorm over
    # every patch) under Gemma3MultiModalProjector (an avg-pool of pool x pool patches, an RMSNorm, a matmul by an
    # nn.Parameter to the text width: transformers 5.25.0 gemma3/modeling_gemma3.py l.635-668)
    # "idefics3": Idefics3 / SmolVLM's SigLIP copy (transformers 5.25.0 idefics3/modeling_idefics3.py: the same encoder
    # layers as SigLIP, l.258-291, a Conv2d patch embedding with its bias and a position per patch, l.83-100,
    # post_layernorm, l.418) run over every tile of the split image, then Idefics3Connector (l.362-383): a pixel
    # shuffle of `pool` x `pool` patches (config.scale_factor) into one 16-bit row of pool^2 x h and one Linear
    # without bias (`connector.modality_projection.proj`, l.246-255) to the text width
    # "paligemma": PaliGemma's SigLIP (the tower Gemma 3 has, at 224 / 448 / 896 px, no head) under
    # PaliGemmaMultiModalProjector, one Linear with a bias from the tower's width to projection_dim (5.25.0
    # paligemma/modeling_paligemma.py l.74-82; get_image_features l.123-131 reads last_hidden_state, after
    # post_layernorm)
    kind: str = "qwen"
    image_size: int = 0  # "clip" / "siglip": the square image the tower sees
    unused_layers: int = 0  # "clip": the last blocks whose output the model does not read (vision_feature_layer -2: 1)
    pool: int = 1  # "siglip": the projector's avg-pool kernel (patches per side / sqrt(mm_tokens_per_image))
    # the model's stated parameter count already holds the tower (the catalog's gemma-3 entries: num_parameters is
    # the whole Gemma3ForConditionalGeneration): its weights are not added again (weights_bytes, trainable_params)
    in_total: bool = False
    # "qwen3": Qwen3-VL's tower (transformers 5.25.0 qwen3_vl/modeling_qwen3_vl.py): Qwen2-VL's LayerNorm blocks with
    # an MLP linear_fc1 / linear_fc2 under gelu_pytorch_tanh (l.77-87), a patch embedding with a bias (l.90-107), a
    # learned position grid (`pos_embed`, num_position_embeddings rows, l.635) and, after the blocks listed in
    # deepstack_visual_indexes, a merger each (`deepstack_merger_list`, its LayerNorm over the merged 4h row, l.653-661)
    deepstack: int = 0
    pos_embeddings: int = 0

    @property
    def parameters(self) -> int:
        return self.params if self.params is not None else tower_params(self)

    @property
    def vit(self) -> bool:
        return self.kind in ("clip", "siglip", "idefics3", "paligemma")

    @property
    def siglip(self) -> bool:
        return self.kind == "siglip"

    @property
    def idefics3(self) -> bool:
        return self.kind == "idefics3"

    @property
    def qwen3(self) -> bool:
        return self.kind == "qwen3"

    @property
    def positions_per_image(self) -> int:
        """"clip": the tower's sequence for one image, its patches and the CLS; "siglip": its patches (no CLS,
        5.25.0 siglip/modeling_siglip.py SiglipVisionEmbeddings); "idefics3": the patches of one tile (its images
        are cut into tiles of image_size px, each through the tower)."""
        return (self.image_size // self.patch_size) ** 2 + (1 if self.kind == "clip" else 0)

    @property
    def kept_depth(self) -> int:
        """Blocks whose saved tensors live until backward (a block whose output is not read is freed after the
        forward)."""
        return self.depth - self.unused_layers

    @property
    def block_linears(self) -> dict[str, tuple[int, int]]:
        """(d_in, d_out) of each Linear in one block, by the name PEFT sees (knowledge/vision_towers.py blocks)."""
        h, f = self.hidden, self.intermediate
        if self.vit:
            return {"self_attn.q_proj": (h, h), "self_attn.k_proj": (h, h), "self_attn.v_proj": (h, h),
                    "self_attn.out_proj": (h, h), "mlp.fc1": (h, f), "mlp.fc2": (f, h)}
        mlp = {"mlp.gate_proj": (h, f), "mlp.up_proj": (h, f), "mlp.down_proj": (f, h)} if self.gated_mlp else \
            {"mlp.linear_fc1": (h, f), "mlp.linear_fc2": (f, h)} if self.qwen3 else {"mlp.fc1": (h, f), "mlp.fc2": (f, h)}
        return {"attn.qkv": (h, 3 * h), "attn.proj": (h, h), **mlp}

    @property
    def merger_linears(self) -> tuple[tuple[int, int], ...]:
        if self.idefics3:  # the connector's one Linear over the shuffled pool^2 x h row
            return (self.hidden * self.pool ** 2, self.out_hidden),
        if self.kind == "paligemma":  # multi_modal_projector.linear
            return (self.hidden, self.out_hidden),
        if self.siglip:  # Gemma3MultiModalProjector has no Linear: its projection is an nn.Parameter PEFT does not adapt
            return ()
        if self.vit:  # LLaVA's multi_modal_projector: linear_1 (tower -> text width), GELU, linear_2
            return (self.hidden, self.out_hidden), (self.out_hidden, self.out_hidden)
        wide = self.hidden * self.merge ** 2
        return (wide, wide), (wide, self.out_hidden)


def tower_params(t: Tower) -> int:
    """Parameters of the tower: the patch embedding (a Conv3d without bias over 3 x temporal x patch^2 inputs), the
    blocks (two norms, the Linears with their biases) and the merger (a norm and two Linears with biases). Equal to the
    towers transformers 5.25.0 builds from the catalog's vision configs (tests/test_vision_estimate.py)."""
    h = t.hidden
    if t.idefics3:
        # transformers 5.25.0 idefics3/modeling_idefics3.py Idefics3VisionEmbeddings (a Conv2d with its bias, a
        # position per patch of a tile, l.89-100), the encoder layers (two LayerNorms, q/k/v/out_proj and fc1/fc2
        # with biases), post_layernorm (l.418), Idefics3SimpleMLP's proj (no bias, l.251)
        blocks = t.depth * (2 * 2 * h + sum(i * o + o for i, o in t.block_linears.values()))
        embed = 3 * t.patch_size ** 2 * h + h + t.positions_per_image * h
        return embed + blocks + 2 * h + sum(i * o for i, o in t.merger_linears)
    if t.kind == "paligemma":
        # transformers 5.25.0 siglip/modeling_siglip.py as for Gemma 3 (embeddings, layers, post_layernorm, no head);
        # paligemma/modeling_paligemma.py PaliGemmaMultiModalProjector.linear with its bias
        blocks = t.depth * (2 * 2 * h + sum(i * o + o for i, o in t.block_linears.values()))
        embed = 3 * t.patch_size ** 2 * h + h + t.positions_per_image * h
        return embed + blocks + 2 * h + sum(i * o + o for i, o in t.merger_linears)
    if t.siglip:
        # transformers 5.25.0 siglip/modeling_siglip.py: SiglipVisionEmbeddings (a Conv2d with its bias, a position per
        # patch), the encoder layers (two LayerNorms, q/k/v/out_proj and fc1/fc2 with biases), post_layernorm (no
        # head: vision_use_head False); gemma3/modeling_gemma3.py Gemma3MultiModalProjector (mm_soft_emb_norm's
        # weight, mm_input_projection_weight h x text width)
        blocks = t.depth * (2 * 2 * h + sum(i * o + o for i, o in t.block_linears.values()))
        embed = 3 * t.patch_size ** 2 * h + h + t.positions_per_image * h
        return embed + blocks + 2 * h + h + h * t.out_hidden
    if t.vit:
        # transformers 5.25.0 clip/modeling_clip.py: CLIPVisionEmbeddings (a Conv2d without bias, the CLS
        # embedding, a position per patch and the CLS), pre_layrnorm, the encoder layers (two LayerNorms, q/k/v/out
        # and fc1/fc2 with biases), post_layernorm; llava/modeling_llava.py LlavaMultiModalProjector (two Linears
        # with biases)
        blocks = t.depth * (2 * 2 * h + sum(i * o + o for i, o in t.block_linears.values()))
        embed = 3 * t.patch_size ** 2 * h + h + t.positions_per_image * h
        return embed + 2 * 2 * h + blocks + sum(i * o + o for i, o in t.merger_linears)
    norm = h if t.rms_norm else 2 * h
    linears = sum(i * o + o for i, o in t.block_linears.values())
    if not t.mlp_bias:
        linears -= sum(o for name, (_, o) in t.block_linears.items() if name.startswith("mlp."))
    block = 2 * norm + linears
    merger = norm + sum(i * o + o for i, o in t.merger_linears)
    embed = 3 * t.temporal_patch_size * t.patch_size ** 2 * h
    if t.qwen3:  # the patch embedding's bias, the position grid, the deepstack mergers (a LayerNorm over 4h each)
        embed += h + t.pos_embeddings * h
        merger += t.deepstack * (2 * h * t.merge ** 2 + sum(i * o + o for i, o in t.merger_linears))
    return embed + t.depth * block + merger


@dataclass(frozen=True)
class VisionPlan:
    """The vision tower in one training step: its geometry, the patches of one sample, and what trains in it."""

    tower: Tower
    patches: int  # patches per sample (merge^2 x the image tokens of all its images)
    trained: str = "frozen"  # "frozen" | "lora" (adapters in the tower) | "full" (the tower's weights train)
    adapted: tuple[str, ...] = ()  # block Linears LoRA adapts ("attn.qkv", "mlp.down_proj", ...)
    merger_adapted: bool = False  # the merger's two Linears too ("all-linear")
    # the tower's input requires grad although nothing in it trains: transformers >= 5's gradient_checkpointing_enable
    # hooks every submodel's input embeddings, Qwen2-VL's and Qwen2.5-VL's patch_embed included (run/vision.py)
    hooked: bool = False
    # the blocks run under checkpointing when the run checkpoints (False: LLaMA-Factory's checkpoint function runs a
    # block with no trainable parameter without it, 0.9.5 model_utils/checkpointing.py l.84-100, so a hooked frozen
    # tower keeps every block's tensors; read in the source, not measured)
    checkpointed: bool = True

    @property
    def keeps_activations(self) -> bool:
        return self.trained != "frozen" or self.hooked


def lora_params(v: VisionPlan, r: int) -> int:
    """LoRA's A (r x d_in) and B (d_out x r) on each adapted Linear of every block, and the merger's."""
    per_block = sum(r * sum(v.tower.block_linears[name]) for name in v.adapted if name in v.tower.block_linears)
    merger = sum(r * (i + o) for i, o in v.tower.merger_linears) if v.merger_adapted else 0
    return v.tower.depth * per_block + merger * (1 + v.tower.deepstack)


def trainable_params(v: VisionPlan | None, r: int | None) -> int:
    """The tower's trainable parameters beyond the text model's: its adapters (fp32) or, trained, all of it."""
    if v is None:
        return 0
    if v.trained == "full":
        return 0 if v.tower.in_total else v.tower.parameters
    return lora_params(v, r) if r and v.trained == "lora" else 0


def weights_bytes(v: VisionPlan | None, dtype_bytes: int, r: int | None) -> int:
    """The tower's weights in the model's dtype and, with LoRA, its fp32 adapters. A 4-/8-bit load is not applied
    here: the tower is counted at the 16-bit dtype (what transformers' bitsandbytes path does to a vision tower's
    Linears was not read)."""
    if v is None:
        return 0
    adapters = lora_params(v, r) * 4 if r and v.trained == "lora" else 0
    return (0 if v.tower.in_total else v.tower.parameters * dtype_bytes) + adapters


def vision_layer_bytes_per_patch(v: VisionPlan, act_bytes: int, r: int | None) -> int:
    """Bytes one block keeps for backward per patch, read from what autograd saves in transformers 5.25.0
    `Qwen2_5_VLVisionBlock.forward` (modeling_qwen2_5_vl.py l.351-369), `Qwen2_5_VLVisionAttention.forward`
    (l.273-340) and `apply_rotary_pos_emb_vision` (l.208-219; its fp32 cos/sin are shared by every block):
    - each norm: RMSNorm (Qwen2.5-VL) its fp32 input (4 h) and rsqrt (4), a trained weight also the 16-bit normalised
      output (2 h); LayerNorm (Qwen2-VL, `Qwen2VLVisionBlock` norm1/norm2 in the model dtype) its 16-bit input (2 h) and
      its mean and rstd (fp32 on CUDA: 8; CPU keeps them in bf16);
    - attention: SDPA's inputs, q and k (the rotary's 16-bit outputs, 2 h each) and v, a view that keeps the whole
      fused qkv output alive (3 x 2 h), its output (2 h) and fp32 logsumexp (4 per head); `proj`'s input (2 h) and
      `qkv`'s (2 h) when their weights train;
    - MLP (gated): the gate output, its SiLU and the up output (3 x 2 f), and when trained the input (2 h) and the
      down projection's input (2 f); (fc1/fc2): fc1's output and the activation's (2 x 2 f), plus the inputs trained;
      Qwen3-VL's linear_fc1/linear_fc2 (5.25.0 qwen3_vl/modeling_qwen3_vl.py l.77-87, `Qwen3VLVisionBlock` l.327-352,
      otherwise Qwen2-VL's block): gelu_pytorch_tanh keeps only linear_fc1's output (1 x 2 f);
    - each LoRA-adapted Linear: 5 bytes per input element and 4 per rank (LORA_BYTES_PER_INPUT / _PER_RANK).
    16-bit terms scale with the activation dtype; the fp32 ones do not. Counted tensor by tensor with
    saved_tensors_hooks on a block transformers builds (tests/test_vision_estimate.py), to the byte."""
    t = v.tower
    h, f = t.hidden, t.intermediate
    full = v.trained == "full"
    if t.vit:
        return _vit_layer_bytes_per_position(v, act_bytes, r)
    # SDPA's tensors; the MLP's activations (Qwen3-VL's gelu_pytorch_tanh keeps only its input)
    bits16 = 6 * 2 * h + (3 if t.gated_mlp else 1 if t.qwen3 else 2) * 2 * f
    if full:
        bits16 += 2 * 2 * h + 2 * h + 2 * f  # qkv/proj inputs, the MLP's and its down projection's inputs
    if t.rms_norm:
        fp32 = 2 * (NORM_FP32_INPUT * h + 4) + 4 * t.heads
        bits16 += 2 * 2 * h if full else 0  # the normalised outputs a trained weight's gradient reads
    else:
        fp32 = 2 * LAYER_NORM_STATS + 4 * t.heads
        bits16 += 2 * 2 * h  # each LayerNorm's 16-bit input
    lora = 0
    if r and v.trained == "lora":
        lora = sum(LORA_BYTES_PER_INPUT * t.block_linears[name][0] + LORA_BYTES_PER_RANK * r
                   for name in v.adapted if name in t.block_linears)
    return int(bits16 * act_bytes / 2) + fp32 + lora


def _vit_layer_bytes_per_position(v: VisionPlan, act_bytes: int, r: int | None) -> int:
    """A SigLIP encoder layer (5.25.0 siglip/modeling_siglip.py `SiglipEncoderLayer` l.325-356, `SiglipMLP` l.310-322)
    keeps what a CLIP one does but for its activation: gelu_pytorch_tanh saves only its input (1 x 2 f, GeluBackward
    with approximate="tanh"), quick_gelu (x * sigmoid(1.702 x)) its input and the sigmoid (2 x 2 f).

    A CLIP encoder layer (transformers 5.25.0 clip/modeling_clip.py `CLIPEncoderLayer`, `CLIPAttention` on SDPA,
    `CLIPMLP` with quick_gelu, the vision_config default): per position, each LayerNorm's 16-bit input and its mean
    and rstd (8 bytes, fp32 on CUDA; bf16 on CPU), SDPA's q, k, v and output (4 x 2 h) and fp32 logsumexp (4 per
    head), quick_gelu's input and its sigmoid (2 x 2 f); trained weights also read the LayerNorms' outputs (2 x 2 h)
    and fc2's input (2 f) (out_proj's input is SDPA's output, already kept); each LoRA-adapted Linear 5 bytes per input
    element and 4 per rank. Counted tensor by tensor with saved_tensors_hooks on a layer transformers builds
    (tests/test_vision_estimate.py, with the bool dropout mask CUDA keeps: trainlint.verify.measure)."""
    t = v.tower
    h, f = t.hidden, t.intermediate
    bits16 = 2 * 2 * h + 4 * 2 * h + (2 if t.kind == "clip" else 1) * 2 * f
    if v.trained == "full":
        bits16 += 2 * 2 * h + 2 * f
    lora = 0
    if r and v.trained == "lora":
        lora = sum(LORA_BYTES_PER_INPUT * t.block_linears[name][0] + LORA_BYTES_PER_RANK * r
                   for name in v.adapted if name in t.block_linears)
    return int(bits16 * act_bytes / 2) + 2 * LAYER_NORM_STATS + 4 * t.heads + lora


def merger_bytes_per_patch(v: VisionPlan, act_bytes: int, r: int | None) -> int:
    """What the merger keeps per patch when it is adapted or trained (it is outside the checkpointed blocks): its
    norm's input (fp32 for RMSNorm), the GELU's input (2 bytes per element of the 4h-wide merged row, i.e. 2 h per patch) and, per
    adapted Linear, 5 bytes per input element (h per patch each) and 4 per rank per merged token."""
    if not v.keeps_activations:
        return 0
    if v.tower.idefics3 or v.tower.kind == "paligemma":
        # PaliGemma: the same with no shuffle (pool 1): post_layernorm's output is the projector Linear's input
        # (paligemma/modeling_paligemma.py l.74-82, l.123-131; PaliGemmaModel.forward scales nothing it saves).
        # Idefics3, per patch: post_layernorm's 16-bit input and its mean / rstd (5.25.0
        # idefics3/modeling_idefics3.py l.466; the pixel shuffle is views and reshapes, l.368-377, saving nothing); the connector's Linear (l.246-255):
        # trained, its input, the shuffled copy (2 h per patch); adapted, PEFT's fp32 dropout output and mask (5 bytes
        # per input element, h per patch) and lora_A's output (4 r per merged token, pool^2 patches)
        h, k2 = v.tower.hidden, v.tower.pool ** 2
        kept = int(2 * h * act_bytes / 2) + LAYER_NORM_STATS
        if v.trained == "full":
            kept += int(2 * h * act_bytes / 2)
        if v.merger_adapted and r:
            kept += LORA_BYTES_PER_INPUT * h + LORA_BYTES_PER_RANK * r // k2
        return kept
    if v.tower.siglip:
        # per patch: post_layernorm's 16-bit input and mean/rstd (its output is the avg-pool's input, kept as a
        # contiguous copy: avg_pool2d's backward reads its input); per pooled token (pool^2 patches): the RMSNorm's
        # fp32 input and rsqrt (Gemma3RMSNorm computes in fp32, gemma3/modeling_gemma3.py l.119-133); trained, also
        # its fp32 normalised output (the (1 + w) product's input for w's gradient) and its 16-bit output (the
        # matmul's input for mm_input_projection_weight's gradient)
        h, k2 = v.tower.hidden, v.tower.pool ** 2
        kept = int(2 * 2 * h * act_bytes / 2) + LAYER_NORM_STATS
        per_token = NORM_FP32_INPUT * h + 4
        if v.trained == "full":
            per_token += NORM_FP32_INPUT * h + int(2 * h * act_bytes / 2)
        return kept + per_token // k2
    if v.tower.vit:
        # LLaVA's projector per position (the image tokens are the positions less the CLS): the GELU's input
        # (2 x text width) and, trained or adapted, linear_1's and linear_2's inputs
        h, out = v.tower.hidden, v.tower.out_hidden
        kept = int(2 * out * act_bytes / 2)
        if v.trained == "full":
            kept += int(2 * (h + out) * act_bytes / 2)
        if v.merger_adapted and r:
            kept += LORA_BYTES_PER_INPUT * (h + out) + 2 * LORA_BYTES_PER_RANK * r
        return kept
    h, m2 = v.tower.hidden, v.tower.merge ** 2
    norm = NORM_FP32_INPUT * h if v.tower.rms_norm else int(2 * h * act_bytes / 2)
    kept = norm + int(2 * h * act_bytes / 2)
    if v.trained == "full":
        kept += int(2 * 2 * h * act_bytes / 2)
    if v.merger_adapted and r:
        kept += 2 * LORA_BYTES_PER_INPUT * h + 2 * LORA_BYTES_PER_RANK * r // m2
    if v.tower.qwen3:
        # the merger's LayerNorm stats (8 bytes per patch); each deepstack merger keeps what the merger keeps but its
        # norm's input (the block's output, already kept as the next block's input) and with its stats per merged
        # token (8 / merge^2 per patch): Qwen3VLVisionPatchMerger(use_postshuffle_norm=True), l.170-182
        kept += LAYER_NORM_STATS + v.tower.deepstack * (kept - norm + LAYER_NORM_STATS // m2)
        if v.trained == "full":
            # the trained position grid's gather: its bilinear interpolation's 4 taps per patch, int64 indices and fp32
            # weights (5.25.0 vision_utils.py get_vision_interpolation_indices_and_weights; modeling_qwen3_vl.py
            # `self.pos_embed(interp_indices) * interp_weights[:, :, None]`)
            kept += 4 * 8 + 4 * 4
    return kept


def activation_bytes(v: VisionPlan | None, batch: int, act_bytes: int, r: int | None) -> int:
    """Without checkpointing: every block's tensors and the merger's, for the batch's patches (0 for a frozen tower
    with no adapter: its forward saves nothing)."""
    if v is None or not v.keeps_activations:
        return 0
    patches = batch * v.patches
    return patches * (v.tower.kept_depth * vision_layer_bytes_per_patch(v, act_bytes, r) + merger_bytes_per_patch(
        v, act_bytes, r))


def checkpoint_bytes(v: VisionPlan | None, batch: int, act_bytes: int, r: int | None) -> int:
    """Under checkpointing: each block's input (h per patch in the activation dtype) and the merger's tensors (not
    checkpointed), kept from the tower's forward until its backward."""
    if v is None or not v.keeps_activations:
        return 0
    if not v.checkpointed:
        return activation_bytes(v, batch, act_bytes, r)
    patches = batch * v.patches
    return patches * (v.tower.kept_depth * v.tower.hidden * act_bytes + merger_bytes_per_patch(v, act_bytes, r))


def recomputed_bytes(v: VisionPlan | None, batch: int, act_bytes: int, r: int | None) -> int:
    """Under checkpointing: one block's tensors, recomputed during the tower's backward."""
    if v is None or not v.keeps_activations or not v.checkpointed:
        return 0
    return batch * v.patches * vision_layer_bytes_per_patch(v, act_bytes, r)
