#!/usr/bin/env python3
"""Regenerate the estimator's reference measurements.

Two sets, two trackers:

- default: bench/estimate_measurements.json, real architectures trained on CPU under MemTracker (fake tensors
  for full size). The code lives in the package (trainlint.verify.measure), where `verify --simulate` uses it.
- `--live`: bench/live_measurements.json, small real models (a few tens of M parameters at most) trained
  for two steps on real CPU tensors under `verify`'s own live-bytes tracker (the TorchDispatchMode that
  `trainlint verify` uses on CPU, trainlint.verify.harness.memory_cpu.make_cpu_tracker), so the estimate is checked
  against the same counter verify reports. These are the configurations issue 14 found over- or
  under-estimated (LoRA on all linear layers in fp32 without checkpointing, LoRA + checkpointing on a tiny
  model, full fine-tuning in fp32 with SGD under checkpointing) and their neighbours.

Run from the repository root:

    python bench/measure_memory.py [--only NAME_SUBSTRING] [--check-fake] [--list]
    python bench/measure_memory.py --live [--only NAME_SUBSTRING]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIVE_OUT = ROOT / "bench" / "live_measurements.json"

# SmolLM2-360M's layout (llama, 49,152 tied vocabulary, GQA 3:1) scaled down to ~25M parameters.
SMOL_MINI = dict(model_type="llama", vocab_size=49152, hidden_size=384, num_hidden_layers=4, num_attention_heads=6,
                 num_key_value_heads=2, head_dim=64, intermediate_size=1024, tie_word_embeddings=True,
                 max_position_embeddings=2048)

# Many thin layers and a small vocabulary: the activations, not the loss head, dominate (as in SmolLM2-360M's
# 32 layers), at ~8M parameters.
DEEP_MINI = dict(model_type="llama", vocab_size=8192, hidden_size=256, num_hidden_layers=16, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=64, intermediate_size=640, tie_word_embeddings=True,
                 max_position_embeddings=2048)

# A wide vocabulary on a thin body, tied (as Gemma / SmolLM / Qwen2.5-0.5B): with SGD and checkpointing the peak is the
# end of backward, where the embedding's own gradient meets the LM head's (issue 26). Its untied twin for contrast.
WIDE_TIED = dict(model_type="llama", vocab_size=65536, hidden_size=512, num_hidden_layers=2, num_attention_heads=8,
                 num_key_value_heads=8, head_dim=64, intermediate_size=1024, tie_word_embeddings=True,
                 max_position_embeddings=2048)
WIDE_UNTIED = {**WIDE_TIED, "tie_word_embeddings": False}


def live_configs():
    from trainlint.verify.measure import ALL_LINEAR, ATTN_PROJ, TINY_LLAMA, C

    return [
        C("live_smol-mini_sdpa_s256_b4_lora16all_adamw_fp32", SMOL_MINI, seq=256, batch=4, dtype="fp32",
          training="lora", lora_targets=ALL_LINEAR, fake=False),
        C("live_smol-mini_sdpa_s256_b4_lora16all_adamw_bf16", SMOL_MINI, seq=256, batch=4, training="lora",
          lora_targets=ALL_LINEAR, fake=False),
        C("live_tiny-llama_sdpa_s512_b2_lora16all_adamw_fp32", TINY_LLAMA, seq=512, batch=2, dtype="fp32",
          training="lora", lora_targets=ALL_LINEAR, fake=False),
        C("live_tiny-llama_eager_s512_b2_lora16attn_adamw_bf16_gc", TINY_LLAMA, seq=512, batch=2, attn="eager",
          training="lora", lora_targets=ATTN_PROJ, gc=True, fake=False),
        C("live_tiny-llama_sdpa_s512_b2_lora16attn_adamw_bf16", TINY_LLAMA, seq=512, batch=2, training="lora",
          lora_targets=ATTN_PROJ, fake=False),
        C("live_tiny-llama_sdpa_s512_b2_full_sgd_fp32_gc", TINY_LLAMA, seq=512, batch=2, dtype="fp32",
          optimizer="sgd", gc=True, fake=False),
        C("live_smol-mini_sdpa_s512_b2_full_sgd_fp32_gc", SMOL_MINI, seq=512, batch=2, dtype="fp32",
          optimizer="sgd", gc=True, fake=False),
        C("live_smol-mini_sdpa_s256_b2_full_adamw_fp32", SMOL_MINI, seq=256, batch=2, dtype="fp32", fake=False),
        C("live_smol-mini_sdpa_s512_b2_full_adamw_bf16_gc", SMOL_MINI, seq=512, batch=2, gc=True, fake=False),
        C("live_deep-mini_sdpa_s512_b4_lora16all_adamw_fp32", DEEP_MINI, seq=512, batch=4, dtype="fp32",
          training="lora", lora_targets=ALL_LINEAR, fake=False),
        C("live_deep-mini_sdpa_s512_b4_lora16all_adamw_bf16", DEEP_MINI, seq=512, batch=4, training="lora",
          lora_targets=ALL_LINEAR, fake=False),
        C("live_deep-mini_sdpa_s512_b4_lora16all_adamw_bf16_gc", DEEP_MINI, seq=512, batch=4, training="lora",
          lora_targets=ALL_LINEAR, gc=True, fake=False),
        C("live_deep-mini_sdpa_s512_b4_full_sgd_fp32_gc", DEEP_MINI, seq=512, batch=4, dtype="fp32",
          optimizer="sgd", gc=True, fake=False),
        C("live_deep-mini_sdpa_s512_b4_full_adamw_fp32", DEEP_MINI, seq=512, batch=4, dtype="fp32", fake=False),
        C("live_smol-mini_eager_s512_b2_lora16attn_adamw_bf16_gc", SMOL_MINI, seq=512, batch=2, attn="eager",
          training="lora", lora_targets=ATTN_PROJ, gc=True, fake=False),
        C("live_wide-tied_sdpa_s64_b1_full_sgd_fp32_gc", WIDE_TIED, seq=64, batch=1, dtype="fp32", optimizer="sgd",
          gc=True, fake=False),
        C("live_wide-untied_sdpa_s64_b1_full_sgd_fp32_gc", WIDE_UNTIED, seq=64, batch=1, dtype="fp32", optimizer="sgd",
          gc=True, fake=False),
    ]


def measure_live(spec: dict) -> dict:
    """Two Trainer-like steps of one configuration on real CPU tensors; the live-bytes peak."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from trainlint.verify.harness.memory_cpu import make_cpu_tracker as _make_cpu_tracker
    from trainlint.verify.measure import DTYPES, _make_optimizer, _model_record  # (patches dropout as CUDA runs it)

    t0 = time.perf_counter()
    dtype = DTYPES[spec["dtype"]]
    mcfg = dict(spec["model"])
    cfg = AutoConfig.for_model(mcfg.pop("model_type"), **mcfg)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=spec["attn"])
    finally:
        torch.set_default_dtype(previous)
    lora = None
    if spec["training"] == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=spec["r"], lora_alpha=2 * spec["r"], lora_dropout=0.05,
                                                 target_modules=spec["lora_targets"], bias="none",
                                                 task_type="CAUSAL_LM"))
        lora = {"r": spec["r"], "target_modules": spec["lora_targets"],
                "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad)}
    if spec["gc"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    base = model.get_base_model() if lora else model
    record = _model_record(spec, base, cfg.num_hidden_layers)
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = _make_optimizer(spec["optimizer"], trainable)
    ids = torch.randint(0, cfg.vocab_size, (spec["batch"], spec["seq"]), dtype=torch.long)

    def fwd():  # the outputs die here, as in Trainer.compute_loss
        return model(input_ids=ids, labels=ids).loss

    tracker = _make_cpu_tracker(torch)
    with tracker:
        for _ in range(2):
            loss = fwd()
            loss.backward()
            del loss
            opt.step()
            opt.zero_grad(set_to_none=True)
    return {"name": spec["name"], "model": record, "batch": spec["batch"], "seq": spec["seq"],
            "dtype": spec["dtype"], "attn": spec["attn"], "gradient_checkpointing": spec["gc"],
            "training": spec["training"], "lora": lora, "optimizer": spec["optimizer"],
            "measured": {"Total": int(tracker.peak)}, "tracker": "trainlint.verify live bytes",
            "seconds": round(time.perf_counter() - t0, 2)}


def main_live(argv: list[str]) -> int:
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    kept = json.loads(LIVE_OUT.read_text())["configs"] if LIVE_OUT.exists() else []
    done = []
    for spec in live_configs():
        if only is not None and only not in spec["name"]:
            continue
        rec = measure_live(spec)
        done.append(rec)
        print(f"{rec['name']:<58} {rec['measured']['Total'] / 2**20:9.1f} MiB  ({rec['seconds']} s)", flush=True)
    names = {r["name"] for r in done}
    import torch
    import transformers

    configs = [r for r in kept if r["name"] not in names] + done
    LIVE_OUT.write_text(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                                    "configs": configs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    if "--live" in sys.argv[1:]:
        raise SystemExit(main_live(sys.argv[1:]))
    from trainlint.verify.measure import main

    raise SystemExit(main())
