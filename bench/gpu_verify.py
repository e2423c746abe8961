#!/usr/bin/env python3
"""Run `trainlint verify` on three flagged scripts with real models built from configs (no download)
and write the table to bench/RESULTS.md. On a CUDA machine it uses a ~1B Llama (Llama-3.2-1B geometry)
and ViT-base; `--tiny` uses small models so the script itself can be checked on a CPU.

    python bench/gpu_verify.py            # on a GPU: budget about 8 minutes in all
    python bench/gpu_verify.py --tiny     # on a CPU: a dry run of the same pipeline
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCRIPTS = {
    "tl101_eager_long_context.py": '''
        import torch
        from torch.utils.data import DataLoader
        from transformers import AutoModelForCausalLM

        SEQ_LEN = {seq}
        model = AutoModelForCausalLM.from_pretrained("./llama", dtype=torch.bfloat16, attn_implementation="eager")
        model.to("{device}").train()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": False}})
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        loader = DataLoader(torch.randint(0, 1000, (64, SEQ_LEN)), batch_size=1)
        for input_ids in loader:
            input_ids = input_ids.to("{device}")
            loss = model(input_ids=input_ids, labels=input_ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    ''',
    "tl301_trainer_unfused_loss.py": '''
        import torch
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("./llama", dtype=torch.bfloat16, attn_implementation="sdpa")
        MAX_LENGTH = {seq}
        ids = torch.randint(0, 1000, (64, MAX_LENGTH)).tolist()
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16={bf16}, use_cpu={cpu},
                                 gradient_checkpointing=True, report_to="none")
        Trainer(model=model, args=args, train_dataset=Dataset.from_dict({{"input_ids": ids, "labels": ids}})).train()
    ''',
    "tl201_vit_lora_reentrant.py": '''
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import ViTForImageClassification

        model = ViTForImageClassification.from_pretrained("./vit")
        model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], modules_to_save=["classifier"]))
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={{"use_reentrant": True}})
        model.to("{device}").train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        for step in range(100):
            x = torch.randn(8, 3, {image}, {image}, device="{device}")
            loss = model(pixel_values=x, labels=torch.randint(0, 10, (8,), device="{device}")).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    ''',
}


def build_models(root: Path, tiny: bool) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    if tiny:
        llama = LlamaConfig(vocab_size=128256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2)
        vit = ViTConfig(image_size=32, patch_size=8, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_labels=10)
    else:  # Llama-3.2-1B geometry (1.24 B parameters) and ViT-base
        llama = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                            num_attention_heads=32, num_key_value_heads=8, head_dim=64, tie_word_embeddings=True,
                            max_position_embeddings=131072, rope_theta=500000.0)
        vit = ViTConfig(num_labels=10)
    with torch.device("meta" if False else "cpu"):
        LlamaForCausalLM(llama).to(torch.bfloat16).save_pretrained(root / "llama")
        ViTForImageClassification(vit).save_pretrained(root / "vit")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    import torch

    cuda = torch.cuda.is_available() and not args.tiny
    device = "cuda" if cuda else "cpu"
    seq = 4096 if cuda else 2048
    work = Path(tempfile.mkdtemp(prefix="trainlint-gpu-verify-"))
    t0 = time.perf_counter()
    build_models(work, args.tiny or not cuda)
    rows, reports = [], {}
    for name, src in SCRIPTS.items():
        (work / name).write_text(textwrap.dedent(src.format(seq=seq, device=device, bf16=cuda, cpu=not cuda,
                                                            image=224 if cuda else 32)))
        r = subprocess.run([sys.executable, "-m", "trainlint", "verify", name, "--steps", str(args.steps),
                            "--device", device, "--format", "json", "--timeout", "240"],
                           cwd=work, capture_output=True, text=True)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            rows.append(f"| {name} | - | - | - | error: {r.stderr.strip()[-200:]} |")
            continue
        reports[name] = report
        orig, fixed = report["runs"]["original"], report["runs"]["fixed"]
        for d in report["diagnostics"]:
            rows.append(f"| {name} | {d['code']} | {orig.get('peak_allocated')} -> {fixed.get('peak_allocated')} | "
                        f"{d['predicted_saving']} / {d['measured_saving']} | {d['verdict']}: {d['note']} |")
    elapsed = time.perf_counter() - t0
    header = (f"# verify on {'CUDA: ' + torch.cuda.get_device_name(0) if cuda else 'CPU (dry run, tiny models)'}\n\n"
              f"{time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {elapsed:.0f} s in all, "
              f"{args.steps} steps per run.\n\n"
              "| script | code | peak allocated, original -> fixed (B) | predicted / measured saving (B) | verdict |\n"
              "|---|---|---|---|---|\n")
    Path(args.out).write_text(header + "\n".join(rows) + "\n")
    print(Path(args.out).read_text())
    (Path(args.out).with_suffix(".json")).write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
