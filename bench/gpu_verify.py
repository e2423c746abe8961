#!/usr/bin/env python3
"""`trainlint verify` on the four flagged traps with real architectures built from configs (no download), the
GPU check of issue 17. Writes bench/RESULTS.md (the table) and bench/RESULTS.json (every report).

Runs (each is `trainlint verify`: the script as written, then with trainlint's fix, N optimizer steps each):

* TL101 eager vs SDPA attention, Llama-3.2-1B geometry in bf16, non-reentrant checkpointing, at 4,096 and
  8,192 tokens;
* TL301 unfused cross-entropy on the 128,256-token vocabulary (Trainer) vs the fix, Liger's fused loss
  (``use_liger_kernel=True``: needs the liger-kernel package; without it the verdict is "not measurable here");
* TL201 LoRA on ViT-base with reentrant checkpointing: adapter gradients before and after the fix;
* TL401 a Trainer whose batch was shrunk from 8 to 2 in the last commit: the effective batch per step before
  and after (a git repository is made in the work folder for it).

Per run: predicted peak (the static estimate) vs measured (``max_memory_allocated``), the reserved memory at the
peak and the fragmentation verdict, the device, driver and library versions from the harness's result.

    python bench/gpu_verify.py            # on a CUDA GPU: about 6-8 minutes on an H100-class card
    python bench/gpu_verify.py --tiny     # on a CPU: a dry run of the same pipeline with tiny models
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

TL101 = '''
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
'''

TL301 = '''
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("./llama", dtype=torch.bfloat16, attn_implementation="sdpa")
    MAX_LENGTH = {seq}
    ids = torch.randint(0, 1000, (64, MAX_LENGTH)).tolist()
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16={bf16}, use_cpu={cpu},
                             gradient_checkpointing=True, report_to="none")
    Trainer(model=model, args=args, train_dataset=Dataset.from_dict({{"input_ids": ids, "labels": ids}})).train()
'''

TL201 = '''
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
'''

TL401 = '''
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("./llama", dtype=torch.bfloat16, attn_implementation="sdpa")
    ids = torch.randint(0, 1000, (64, 512)).tolist()
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=BATCH, gradient_accumulation_steps=1,
                             bf16={bf16}, use_cpu={cpu}, report_to="none")
    Trainer(model=model, args=args, train_dataset=Dataset.from_dict({{"input_ids": ids, "labels": ids}})).train()
'''

# (file name, template, sequence length on CUDA, on CPU, extra verify options)
RUNS = [
    ("tl101_eager_4k.py", TL101, 4096, 2048, ()),
    ("tl101_eager_8k.py", TL101, 8192, 2048, ()),
    ("tl301_trainer_unfused_loss.py", TL301, 4096, 256, ()),
    ("tl201_vit_lora_reentrant.py", TL201, 0, 0, ()),
    ("tl401_batch_shrunk.py", TL401, 0, 0, ("--codes", "TL401")),
]


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
    LlamaForCausalLM(llama).to(torch.bfloat16).save_pretrained(root / "llama")
    ViTForImageClassification(vit).save_pretrained(root / "vit")


def git(work: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=work, check=True, capture_output=True)


def write_scripts(work: Path, cuda: bool) -> None:
    device = "cuda" if cuda else "cpu"
    git(work, "init", "-q")
    git(work, "config", "user.email", "bench@trainlint")
    git(work, "config", "user.name", "bench")
    for name, template, seq_cuda, seq_cpu, _ in RUNS:
        text = textwrap.dedent(template.format(seq=seq_cuda if cuda else seq_cpu, device=device, bf16=cuda,
                                               cpu=not cuda, image=224 if cuda else 32))
        if "BATCH" in text:  # TL401: batch 8 at HEAD, 2 in the working tree
            (work / name).write_text(text.replace("BATCH", "8"))
            git(work, "add", name)
            git(work, "commit", "-qm", "batch 8")
            text = text.replace("BATCH", "2")
        (work / name).write_text(text)


GIB = 2**30  # trainlint.units.GIB: every memory figure in GiB, as nvidia-smi and torch.cuda count


def gb(n) -> str:
    return "-" if not n else f"{n / GIB:.2f}"


def rows_of(name: str, report: dict) -> list[str]:
    rows = []
    frag = {f["run"]: f for f in report.get("fragmentation") or ()}
    verdicts = "; ".join(f"{d['code']} {d['verdict']}: {d['note']}" for d in report["diagnostics"]) or "nothing flagged"
    for label in ("original", "fixed"):
        run = report["runs"][label]
        pred = (run.get("predicted") or {}).get("peak")
        f = frag.get(label)
        frag_note = "-" if f is None else (f"{f['unallocated_share']:.0%} unallocated" +
                                           (" (fragmented)" if f["fragmented"] else ""))
        err = run.get("error")
        extra = f"error {err.get('type')}" if err else ""
        if run.get("adapter_grad_ok") is not None:
            extra += f" adapters got gradients: {run['adapter_grad_ok']}"
        if run.get("samples_per_step"):
            extra += f" samples/step {run['samples_per_step']}"
        rows.append(f"| {name} | {label} | {gb(pred)} | {gb(run.get('peak_allocated'))} | "
                    f"{gb(run.get('reserved_at_peak') or run.get('peak_reserved'))} | {frag_note} | {extra.strip()} | "
                    f"{verdicts if label == 'fixed' else ''} |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=240, help="seconds per verify run")
    ap.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args()
    import torch

    cuda = torch.cuda.is_available() and not args.tiny
    device = "cuda" if cuda else "cpu"
    work = Path(tempfile.mkdtemp(prefix="trainlint-gpu-verify-"))
    t0 = time.perf_counter()
    build_models(work, not cuda)
    write_scripts(work, cuda)
    rows, reports = [], {}
    info = None
    for name, *_, options in RUNS:
        r = subprocess.run([sys.executable, "-m", "trainlint", "verify", name, "--steps", str(args.steps),
                            "--device", device, "--format", "json", "--timeout", str(args.timeout), *options],
                           cwd=work, capture_output=True, text=True)
        try:
            report = json.loads(r.stdout)
        except ValueError:
            rows.append(f"| {name} | - | - | - | - | - | error: {r.stderr.strip()[-200:]} | |")
            continue
        reports[name] = report
        info = info or report.get("device_info")
        rows.extend(rows_of(name, report))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    elapsed = time.perf_counter() - t0
    info = info or {}
    libs = ", ".join(f"{k} {v}" for k, v in (info.get("libraries") or {}).items())
    header = (f"# verify on {'CUDA: ' + str(info.get('name')) if cuda else 'CPU (dry run, tiny models)'}\n\n"
              f"{time.strftime('%Y-%m-%d %H:%M')}; driver {info.get('driver')}, CUDA {info.get('torch_cuda')}, "
              f"{libs}; Python {info.get('python')}; {elapsed:.0f} s in all, {args.steps} steps per run.\n\n"
              "| script | run | predicted peak (GiB) | measured peak allocated (GiB) | reserved at the peak (GiB) | "
              "allocator | measured | verdict |\n|---|---|---|---|---|---|---|---|\n")
    Path(args.out).write_text(header + "\n".join(rows) + "\n")
    print(Path(args.out).read_text())
    Path(args.out).with_suffix(".json").write_text(json.dumps(reports, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
