"""What one decoder layer saves for backward, tensor by tensor: score-sized vs token-sized bytes, on CPU.

Builds the architecture from its config (trainlint.verify.measure's geometries: GPT2, GEMMA2_2B, LLAMA3_1B, ...)
with 1 and then 2 layers and a 512-token vocabulary, runs one training forward under
torch.autograd.graph.saved_tensors_hooks, and counts each saved storage once (parameters left out). The difference
between 2 and 1 layers is one layer's: its score-sized tensors ([..., seq, seq]) per score element and its other
tensors per token x hidden. Importing trainlint.verify.measure swaps training dropout for torch.native_dropout (a
bool mask, what CUDA runs). Pick a sequence length other than the head dimension (Gemma 2's is 256) so that the
query/key/value tensors are not taken for scores. `--list` prints every score-sized tensor and the source line that
saved it.

    python bench/eager_saved_tensors.py GPT2 bf16 [--attn eager] [--batch 2] [--seq 384] [--lora c_attn] [--list]

Results (transformers 5.25.0, torch 2.13.0; bench/README.md 'Eager attention, tensor by tensor'): bytes per score
element per layer: LLAMA3_1B bf16 6, fp32 4; GPT2 bf16 5, fp32 9; GEMMA2_2B bf16 8.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def saved(geometry: dict, layers: int, dtype, attn: str, batch: int, seq: int, lora: list[str] | None,
          listing: bool = False) -> dict[int, tuple]:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = dict(geometry)
    model_type = cfg.pop("model_type")
    cfg["n_layer" if model_type == "gpt2" else "num_hidden_layers"] = layers
    cfg["vocab_size"] = 512
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **cfg), attn_implementation=attn,
                                             dtype=dtype)
    if lora:
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=lora))
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, tuple] = {}

    def pack(t):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in params and ptr not in seen:
            where = ""
            if listing:
                frames = [f for f in traceback.extract_stack()
                          if "/models/" in f.filename or "functional" in f.filename]
                where = f"{frames[-1].filename.split('/')[-1]}:{frames[-1].lineno} {frames[-1].line}" if frames else ""
            seen[ptr] = (storage.nbytes(), t.dtype, tuple(t.shape), where)
        return t

    ids = torch.randint(0, 512, (batch, seq))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids).loss  # noqa: B018  (the forward is what saves)
    return seen


def split(seen: dict[int, tuple], seq: int) -> tuple[int, int]:
    score = sum(n for n, _, shape, _ in seen.values() if len(shape) >= 3 and shape[-2:] == (seq, seq))
    return score, sum(n for n, *_ in seen.values()) - score


def main() -> int:
    import torch

    import trainlint.verify.measure as measure  # noqa: F401  (native dropout, the geometries)

    ap = argparse.ArgumentParser()
    ap.add_argument("geometry", help="a geometry of trainlint.verify.measure: GPT2, GEMMA2_2B, LLAMA3_1B, ...")
    ap.add_argument("dtype", choices=("fp32", "bf16"))
    ap.add_argument("--attn", default="eager")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=384)
    ap.add_argument("--lora", default=None, help="comma-separated LoRA target modules")
    ap.add_argument("--list", action="store_true", help="print each score-sized tensor of the 1-layer model")
    args = ap.parse_args()
    geometry = getattr(measure, args.geometry)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    lora = args.lora.split(",") if args.lora else None
    runs = {n: saved(geometry, n, dtype, args.attn, args.batch, args.seq, lora, args.list and n == 1) for n in (1, 2)}
    if args.list:
        for nbytes, dt, shape, where in runs[1].values():
            if len(shape) >= 3 and shape[-2:] == (args.seq, args.seq):
                print(f"  {nbytes:>12,} B {str(dt):<15} {shape}  {where}")
    (s1, o1), (s2, o2) = split(runs[1], args.seq), split(runs[2], args.seq)
    heads = geometry.get("num_attention_heads") or geometry["n_head"]
    hidden = geometry.get("hidden_size") or geometry["n_embd"]
    scores = args.batch * heads * args.seq * args.seq
    tokens = args.batch * args.seq
    print(f"{args.geometry} {args.dtype} {args.attn} b{args.batch} s{args.seq} lora={lora}: one layer saves "
          f"{(s2 - s1) / scores:.3f} B per score element and {(o2 - o1) / (tokens * hidden):.3f} B per token x hidden")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
