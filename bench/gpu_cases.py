#!/usr/bin/env python3
"""The shared GPU configurations (../shared/gpu-truth/cases.json) measured on this machine's CUDA GPU, side by side with
`trainlint estimate` and with the peaks recorded on the H200 (peaks-h200.json), in GiB, with the ±5% verdict.
Writes a Markdown table (bench/GPU_CASES.md unless --out) and a JSON next to it (same name, .json).

Method (../shared/gpu-truth/README.md), one child process per case so that an out-of-memory case does not end the
others: the model is `AutoModelForCausalLM.from_config(config, attn_implementation=..., dtype=...)` built under
`torch.device("cuda")` with the default dtype set to the weights' dtype (no autocast, no master copy); LoRA is
`get_peft_model(model, LoraConfig(r, alpha, dropout, target_modules, bias="none"))` with PEFT's defaults; checkpointing
is `gradient_checkpointing_enable({"use_reentrant": False})` after LoRA; `"liger": true` applies Liger's patch for the
model type before the model is built; data is `torch.randint(vocab, (batch, seq))` with `labels = input_ids`, and an
all-ones `attention_mask` where the case says so; each of 2 steps is `loss = model(...).loss` inside a function,
`backward()`, `optimizer.step()`, `zero_grad(set_to_none=True)`; AdamW with torch's default `foreach`. The measured
figure is `torch.cuda.max_memory_allocated()` from before the model is built (weights included; no CUDA context).

The estimate is `trainlint estimate --format json` run as a command on the case's Trainer script
(gpu-truth/scripts/<case>.py, copied beside a `models` link, as bench/estimate_gpu.py does): the harness imports no
trainlint code.

    python bench/gpu_cases.py [--truth ../shared/gpu-truth] [--cases NAME ...] [--out FILE.md] [--tolerance 5]
    python bench/gpu_cases.py --tiny     # CPU dry run: each case built at a tiny geometry and trained 2 steps on
                                         # the CPU; no measured peak (the table's shape, not a measurement)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GIB = 2**30
DEFAULT_TRUTH = Path(os.environ.get("TRAINLINT_GPU_TRUTH", "/work/shared/gpu-truth"))
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, head_dim=16,
            vocab_size=1024)
TINY_SEQ, TINY_BATCH = 64, 2


def load_cases(truth: Path) -> list[dict]:
    """cases.json, each case checked for what the runner reads; a malformed case raises ValueError."""
    cases = json.loads((truth / "cases.json").read_text())
    if not isinstance(cases, list):
        raise ValueError(f"{truth / 'cases.json'}: a list of cases expected")
    for case in cases:
        missing = [k for k in ("name", "model_dir", "dtype", "attn_implementation", "batch", "seq", "training")
                   if k not in case]
        if missing:
            raise ValueError(f"case {case.get('name', '?')}: no {', '.join(missing)}")
    return cases


def model_config(truth: Path, case: dict, tiny: bool) -> tuple[str, dict]:
    """(model_type, config keyword arguments) from the case's models/<name>/config.json; shrunk under --tiny."""
    cfg = json.loads((truth / case["model_dir"] / "config.json").read_text())
    cfg.pop("architectures", None)
    model_type = cfg.pop("model_type")
    if tiny:
        gqa = (cfg.get("num_key_value_heads") or cfg.get("num_attention_heads")) != cfg.get("num_attention_heads")
        names = {"hidden_size": "n_embd", "num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                 "intermediate_size": "n_inner"} if model_type == "gpt2" else {}
        for key, value in TINY.items():
            if model_type == "gpt2" and key == "head_dim":
                continue
            cfg[names.get(key, key)] = value
        if model_type != "gpt2":
            cfg["num_key_value_heads"] = 2 if gqa else TINY["num_attention_heads"]
        cfg.pop("rope_scaling", None) if model_type == "gpt2" else None
    return model_type, cfg


def measure_one(truth: Path, case: dict, tiny: bool, steps: int = 2) -> dict:
    """Build and train one case; the measured peak on CUDA (None on the CPU dry run)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    device = "cpu" if tiny else "cuda"
    if not tiny and not torch.cuda.is_available():
        return {"error": "no CUDA device (use --tiny for the CPU dry run)"}
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[case["dtype"]]
    model_type, kwargs = model_config(truth, case, tiny)
    if case.get("liger"):
        try:
            from liger_kernel.transformers import _apply_liger_kernel
        except ImportError:
            return {"error": "liger-kernel is not installed (the case applies Liger's fused loss)"}
        _apply_liger_kernel(model_type)
    config = AutoConfig.for_model(model_type, **kwargs)
    batch, seq = (min(case["batch"], TINY_BATCH), TINY_SEQ) if tiny else (case["batch"], case["seq"])
    torch.manual_seed(0)
    if not tiny:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, attn_implementation=case["attn_implementation"],
                                                     dtype=dtype)
    finally:
        torch.set_default_dtype(previous)
    training = case["training"]
    if training.get("mode") == "lora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=training["r"], lora_alpha=training["alpha"],
                                                 lora_dropout=training.get("dropout", 0.0),
                                                 target_modules=training["target_modules"], bias="none"))
    if case.get("gradient_checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-5)
    ids = torch.randint(config.vocab_size, (batch, seq), device=device)
    inputs = {"input_ids": ids, "labels": ids}
    if case.get("attention_mask"):
        inputs["attention_mask"] = torch.ones_like(ids)

    def loss_of():
        return model(**inputs).loss  # the outputs are dropped before backward

    losses = []
    for _ in range(steps):
        loss = loss_of()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    peak = None if tiny else torch.cuda.max_memory_allocated()
    return {"measured_bytes": peak, "losses": losses, "batch": batch, "seq": seq, "device": device,
            "device_name": torch.cuda.get_device_name(0) if not tiny else "cpu"}


def measure_in_child(truth: Path, name: str, tiny: bool, timeout: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--truth", str(truth), "--measure-one", name]
    if tiny:
        cmd.append("--tiny")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {r.returncode}: {tail[-200:]}"}


def estimate(truth: Path, name: str, work: Path) -> tuple[int | None, str | None]:
    """`trainlint estimate --format json` on gpu-truth/scripts/<name>.py: (peak bytes, None) or (None, why not)."""
    source = truth / "scripts" / f"{name}.py"
    if not source.exists():
        return None, f"no {source}"
    script = work / source.name
    shutil.copyfile(source, script)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-m", "trainlint", "estimate", "--format", "json", str(script)],
                         capture_output=True, text=True, env=env, cwd=work, check=False)
    if out.returncode not in (0, 1):
        return None, f"trainlint estimate exited {out.returncode}: {out.stderr.strip()[-200:]}"
    return json.loads(out.stdout)["peak"], None


def gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


def table(rows: list[dict], tiny: bool, tolerance: float) -> str:
    head = (f"| case | measured GiB | estimated GiB | error % | within ±{tolerance:g}% | H200 recorded GiB | note |\n"
            "|---|---:|---:|---:|:---:|---:|---|\n")
    body = []
    for r in rows:
        err = "-" if r["error_pct"] is None else f"{r['error_pct']:+.1f}"
        verdict = "dry run" if tiny else ("-" if r["within"] is None else ("yes" if r["within"] else "no"))
        body.append(f"| {r['case']} | {gib(r['measured_bytes'])} | {gib(r['estimated_bytes'])} | {err} | {verdict} | "
                    f"{gib(r['recorded_bytes'])} | {r['note']} |")
    return head + "\n".join(body) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", type=Path, default=DEFAULT_TRUTH, help="the gpu-truth folder")
    ap.add_argument("--tiny", action="store_true", help="CPU dry run with tiny geometries (no measured peak)")
    ap.add_argument("--cases", nargs="*", help="only these cases (names from cases.json)")
    ap.add_argument("--tolerance", type=float, default=5.0, help="acceptable error of the peak, percent")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per case")
    ap.add_argument("--out", type=Path, default=HERE / "GPU_CASES.md")
    ap.add_argument("--measure-one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        cases = load_cases(args.truth)
    except (OSError, ValueError) as exc:
        print(f"cannot read the cases: {exc}", file=sys.stderr)
        return 2
    by_name = {c["name"]: c for c in cases}
    if args.measure_one:
        print(json.dumps(measure_one(args.truth, by_name[args.measure_one], args.tiny)))
        return 0
    unknown = [n for n in args.cases or () if n not in by_name]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}", file=sys.stderr)
        return 2
    chosen = [by_name[n] for n in args.cases] if args.cases else cases
    peaks = args.truth / "peaks-h200.json"
    recorded = ({r["name"]: r["peak_bytes"] for r in json.loads(peaks.read_text())["results"]}
                if peaks.exists() else {})
    rows, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "scripts"
        work.mkdir()
        (work / "models").symlink_to(args.truth / "models", target_is_directory=True)
        for case in chosen:
            name = case["name"]
            measured = measure_in_child(args.truth, name, args.tiny, args.timeout)
            est, why = estimate(args.truth, name, work)
            meas = measured.get("measured_bytes")
            err = (est - meas) / meas * 100 if est is not None and meas else None
            note = measured.get("error") or why or ""
            if args.tiny and not measured.get("error"):
                note = (f"tiny model trained on CPU (b{measured['batch']} x {measured['seq']}, "
                        f"losses {', '.join(f'{x:.2f}' for x in measured['losses'])})")
            rows.append({"case": name, "measured_bytes": meas, "estimated_bytes": est, "error_pct": err,
                         "within": None if err is None else abs(err) <= args.tolerance,
                         "recorded_bytes": recorded.get(name), "note": note, "run": measured})
            print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    device = next((r["run"].get("device_name") for r in rows if r["run"].get("device_name")), "none")
    scored = [r for r in rows if r["within"] is not None]
    summary = ("CPU dry run (tiny models): nothing measured" if args.tiny else
               f"{sum(r['within'] for r in scored)}/{len(rows)} within ±{args.tolerance:g}%"
               + (f" (mean absolute error {sum(abs(r['error_pct']) for r in scored) / len(scored):.1f}%)"
                  if scored else ""))
    text = (f"# The shared GPU cases on {device}\n\n{time.strftime('%Y-%m-%d %H:%M')}; "
            f"{time.perf_counter() - t0:.0f} s; truth {args.truth}\n\n" + table(rows, args.tiny, args.tolerance)
            + f"\n{summary}\n")
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps({"device": device, "tiny": args.tiny,
                                                         "tolerance": args.tolerance, "rows": rows}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
