"""Packing and padding-free batches: when TRL's SFTTrainer (or transformers' DataCollatorWithFlattening) flattens a
micro-batch into one row, whether that row carries position_ids that restart per sequence, and whether transformers'
eager / SDPA attention then keeps the sequences apart. Read in the wheels (trl 0.9.6, 0.12.2, 0.16.1, 0.17.0, 0.18.2,
0.19.1, 0.20.0, 0.21.0, 0.22.2, 0.23.1, 0.24.0, 1.16.0; transformers 4.44.2, 4.48.3, 4.52.4, 4.53.3, 4.56.2, 5.25.0).

TRL (trl/trainer/sft_trainer.py, SFTTrainer.__init__ "Data collator"; trl/trainer/sft_config.py):
- <= 0.15: no padding-free; `packing=True` builds ConstantLengthDataset / concatenated blocks of max_seq_length
  (0.9.6, 0.12.2): rows of L tokens, one causal sequence each, whatever the attention. Nothing to honour.
- 0.16-0.18: `padding_free=True` -> transformers' DataCollatorWithFlattening() (0.16.1 l.232-254, 0.17.0 l.300,
  0.18.2 l.317): one row of the micro-batch's tokens, position_ids restarting at 0 per sequence, no attention_mask
  (transformers 4.44.2 data/data_collator.py DataCollatorWithFlattening l.1619-1650, return_position_ids=True).
  `packing=True` alone packs "wrapped" blocks (data_utils.pack_dataset / pack_examples): not padding-free.
- 0.19-0.22: padding-free when `padding_free=True` or `packing=True` with the padding-free strategy ("ffd", the
  default, in 0.19.1 l.402; "bfd", the default, from 0.20.0 l.439, 0.21.0 l.439, 0.22.2 l.702). The collator
  (trl's DataCollatorForLanguageModeling) is built with `return_position_ids=<attention is flash_attention_2>`
  (0.19.1 l.449, 0.20.0 l.485, 0.21.0 l.490, 0.22.2 l.756: "Using position_ids without flash_attn hurts the
  training"): with any other attention the flattened row gets an all-ones attention_mask and no position_ids
  (0.19.1 collator l.190-219), so the model sees ONE sequence of the micro-batch's tokens, positions 0..N-1.
- 0.23-1.x: the same switch ("bfd"; "bfd"/"bfd_split" in 1.16.0 l.916), and the collator always gives the flattened
  row position_ids restarting per sequence and no attention_mask (0.23.1 l.206-241, 0.24.0 l.167-206, 1.16.0
  l.179-208; 1.16.0 adds cu_seq_lens_q/k, read by the varlen kernels only).
TRL warns, from 0.16, that padding-free batches are only "known to reliably" work with flash attention (0.16.1
l.240, 0.24.0 l.715 FLASH_ATTENTION_VARIANTS), and, for packing, of "cross-contamination between samples" (0.19.1
l.453-463, 0.24.0 l.774); 1.16.0 no longer warns.

transformers, a row with restarting position_ids and no attention_mask:
- < 4.53 (4.48.3, 4.52.4 models/llama/modeling_llama.py LlamaModel._update_causal_mask): position_ids reach RoPE
  only; the mask is causal over the whole row (SDPA: no mask, is_causal, `AttentionMaskConverter.
  _ignore_causal_mask_sdpa`; eager: a dense causal float mask). The sequences attend to the ones before them.
- >= 4.53 (4.53.3 masking_utils.py `_preprocess_mask_arguments` l.699-707, `find_packed_sequence_indices`
  l.602-626, `create_causal_mask` l.768-770; 4.56.2 l.733-741, l.805-806; 5.25.0 l.864-872, l.991-996): the packed
  format is detected from the position_ids and the mask is causal AND same-sequence, built by the attention's
  mask interface: SDPA gets a dense boolean [batch x 1 x N x N] mask (allow_is_causal_skip=False), eager a dense
  float one. 4.53-4.56 do this only with torch >= 2.6 (`_is_torch_greater_or_equal_than_2_6`); 5.25.0 always.
  That detection runs only when the forward has no cache (`past_key_values is None`; 5.25.0 `cache is None`): a
  model whose config keeps `use_cache=True` (every public causal-LM config) builds a DynamicCache in the training
  forward too (4.56.2 / 5.25.0 modeling_llama.py LlamaModel.forward l.370 / l.374), and the row is then masked as
  one causal sequence. Who turns it off: TRL's SFTTrainer.compute_loss (`inputs["use_cache"] = False`, from 0.22:
  0.22.2 l.1040, 0.23.1 l.1095, 0.24.0 l.1097, 1.16.0 l.1564; not in 0.16.1-0.21.0); transformers' Trainer from 5.0
  (`self.model.config.use_cache = self.args.use_cache`, TrainingArguments.use_cache default False: 5.0.0 trainer.py
  l.755, 5.10.0 l.599; 4.53.3-4.57.6 leave the config alone except under XLA FSDP checkpointing); or the script.
- flash_attention_2/3 (and TRL's kernels-community variants) read the restarting position_ids as varlen boundaries
  (modeling_flash_attention_utils._flash_attention_forward): linear memory, sequences apart.
"""

from __future__ import annotations

from dataclasses import dataclass

PADDING_FREE_SINCE = (0, 16)  # SFTConfig.padding_free (0.16.1 sft_config.py l.120)
PACKING_PADDING_FREE_SINCE = (0, 19)  # packing_strategy, whose default flattens the batch (0.19.1 sft_config.py l.189)
TRL_CACHE_OFF_SINCE = (0, 22)  # SFTTrainer.compute_loss passes use_cache=False
TRAINER_CACHE_OFF_SINCE = (5, 0)  # Trainer sets model.config.use_cache = args.use_cache (default False)
POSITIONS_FOR_EVERY_ATTENTION_SINCE = (0, 23)  # 0.19-0.22: position_ids only with flash_attention_2
PACKED_MASK_SINCE = (4, 53)  # transformers masking_utils.find_packed_sequence_indices
PACKED_MASK_ANY_TORCH_SINCE = (5, 25)  # read unconditional in 5.25.0; 4.53.3 / 4.56.2 need torch >= 2.6
FLATTENING_COLLATOR_SINCE = (4, 44)  # transformers DataCollatorWithFlattening (4.44.2 data_collator.py l.1619)

# The strategies whose packed rows SFTTrainer flattens padding-free, and the default, per TRL release line.
_STRATEGIES = (((1, 16), frozenset({"bfd", "bfd_split"}), "bfd"),
               ((0, 20), frozenset({"bfd"}), "bfd"),
               ((0, 19), frozenset({"ffd"}), "ffd"))
# strategy names that exist but were not read as padding-free (or not) in every release between: no decision
_UNREAD = frozenset({"bfd_split", "bfd-requeue"})

FLASH = frozenset({"flash_attention_2", "flash_attention_3", "paged|flash_attention_2", "kernels-community/flash-attn",
                   "kernels-community/flash-attn3", "kernels-community/vllm-flash-attn3",
                   "kernels-community/flash-attn2"})


@dataclass(frozen=True)
class Flattened:
    """How a TRL release flattens a micro-batch: `why` (the setting, in words), whether the row keeps position_ids
    restarting per sequence (`positions`), and the lines that say so (`cite`)."""

    why: str
    positions: bool
    cite: str


def trl_flattens(trl: tuple[int, ...], padding_free: bool | None, packing: bool | None, strategy: str | None,
                 attention: str | None) -> Flattened | None | str:
    """Whether SFTTrainer of release `trl` flattens its micro-batches into one padding-free row with this
    attention: a Flattened, None when it does not, or "unknown" when the release or a setting is not decided."""
    if trl < PADDING_FREE_SINCE:
        return None
    if padding_free is None and packing is None:
        return "unknown"
    flash = attention in FLASH
    if padding_free:
        why = "padding_free=True"
    elif packing and trl >= PACKING_PADDING_FREE_SINCE:
        known = next(((names, default) for since, names, default in _STRATEGIES if trl >= since), None)
        if known is None:
            return "unknown"
        names, default = known
        chosen = default if strategy is None else strategy
        if chosen in _UNREAD and chosen not in names:
            return "unknown"
        if chosen not in names:
            return None  # "wrapped" (or ffd after 0.19): blocks of max_length, not padding-free
        why = f"packing=True with packing_strategy=\"{chosen}\"" + (" (the default)" if strategy is None else "")
    elif padding_free is None and trl >= PACKING_PADDING_FREE_SINCE:
        return "unknown"
    else:
        return None
    if trl < PACKING_PADDING_FREE_SINCE:
        return Flattened(why, True, f"trl {'.'.join(map(str, trl[:2]))} passes transformers' "
                                    f"DataCollatorWithFlattening (sft_trainer.py)")
    if trl < POSITIONS_FOR_EVERY_ATTENTION_SINCE and not flash:
        return Flattened(why, False, "its collator is built with return_position_ids only for flash_attention_2 "
                                     "(sft_trainer.py: \"Using position_ids without flash_attn hurts the training\")")
    return Flattened(why, True, "its collator gives the row position_ids restarting per sequence and no "
                                "attention_mask (sft_trainer.py DataCollatorForLanguageModeling)")


def boundaries_kept(transformers: tuple[int, ...], positions: bool, cache_off: bool) -> str:
    """What transformers' eager / SDPA attention does with a flattened row: "ignored" (one causal sequence over the
    whole row: no position_ids, or before 4.53), "cache" (4.53+, but the forward builds a cache, so the packed
    format is not looked for), "mask" (a dense same-sequence mask, built from the position_ids), or "mask with torch
    >= 2.6" (4.53-5.24: the condition was read in 4.53.3 and 4.56.2 and is gone in 5.25.0)."""
    if not positions or transformers < PACKED_MASK_SINCE:
        return "ignored"
    if not cache_off:
        return "cache"
    if transformers >= PACKED_MASK_ANY_TORCH_SINCE:
        return "mask"
    return "mask with torch >= 2.6"
