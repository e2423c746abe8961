"""Predicted (trainlint.memory.estimate) vs measured (bench/estimate_measurements.json) memory, per consumer.

The measurements come from bench/measure_memory.py: real transformers architectures built from configs,
one or two training steps on CPU under PyTorch's MemTracker (FakeTensorMode for the large ones), peak per
category. This script maps each configuration to a trainlint Plan and prints the error of the peak.

    python bench/estimate_accuracy.py [--json bench/estimate_measurements.json] [--target 10]

Mapping of MemTracker's categories to trainlint's consumers at the peak instant:
  PARAM -> weights, OPT -> optimizer, GRAD -> gradients, ACT + TEMP -> activations + logits + attention.
The measured peak is the larger of the CPU run's peak and the optimizer step replayed as CUDA's default
foreach AdamW would run it (`cuda_foreach_optimizer_step`), since the estimate is for a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from trainlint.knowledge.moe import PEFT_CONVERTS, moe_from_config  # noqa: E402
from trainlint.memory.estimate import Geometry, Plan, estimate  # noqa: E402

MIB = 2**20
OPTIM = {"adamw": "adamw", "sgd": "sgd", "sgd_momentum": "sgd_momentum", "sgdm": "sgd_momentum"}


def moe_fields(m: dict, layers: int) -> dict:
    """The mixture-of-experts Geometry fields of a measured model record (knowledge/moe.py reads the same keys)."""
    moe = moe_from_config(m, layers)
    if moe is None:
        return {}
    return dict(moe_experts=moe.experts, moe_top_k=moe.top_k, moe_intermediate=moe.expert_intermediate,
                moe_layers=moe.sparse_layers, moe_shared=moe.shared_intermediate,
                router_logits=moe.output_router_logits, peft_converts=m.get("model_type") in PEFT_CONVERTS)


def plan_of(c: dict) -> Plan:
    m = c["model"]
    layers = c.get("layers_built") or m["num_hidden_layers"]
    heads = m["num_attention_heads"]
    geo = Geometry(vocab=m["vocab_size"], hidden=m["hidden_size"], layers=layers, heads=heads,
                   kv_heads=m.get("num_key_value_heads") or heads,
                   head_dim=m.get("head_dim") or m["hidden_size"] // heads,
                   intermediate=m.get("intermediate_size") or 4 * m["hidden_size"],
                   params=m["num_parameters"], tied=bool(m.get("tie_word_embeddings")),
                   softcap=m.get("model_type") == "gemma2", rms_norm=m.get("model_type") != "gpt2",
                   softmax_fp32=m.get("model_type") != "gpt2",
                   attention_dropout=bool((m.get("dropout") or {}).get("attn")),
                   sandwich_norms=m.get("model_type") == "gemma2",
                   **moe_fields(m, layers))
    size = 4 if c["dtype"] == "fp32" else 2
    lora = c.get("lora") or {}
    return Plan(geometry=geo, batch=c["batch"], seq=c["seq"], dtype_bytes=size, act_bytes=size,
                lora_r=lora.get("r") if c["training"] == "lora" else None,
                lora_targets=tuple(lora.get("target_modules") or ("q_proj", "v_proj")),
                lora_parameters=tuple(lora.get("target_parameters") or ()),
                checkpointing=bool(c.get("gradient_checkpointing")), attention=c["attn"], loss="full",
                optimizer=OPTIM.get(c["optimizer"], c["optimizer"]), device="cpu")  # measured on CPU kernels


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="append", default=None,
                    help="measurements file (repeatable); default: estimate_measurements.json and live_measurements.json")
    ap.add_argument("--target", type=float, default=10.0, help="acceptable peak error, percent")
    args = ap.parse_args()
    here = Path(__file__).parent
    files = args.json or [str(here / "estimate_measurements.json"), str(here / "live_measurements.json")]
    configs = [c for f in files if Path(f).exists() for c in json.loads(Path(f).read_text())["configs"]]
    rows = []
    print(f"{'configuration':<52} {'measured':>9} {'predicted':>9} {'err%':>6}   weights  optim  act+loss (MiB, measured/predicted)")
    for c in configs:
        if "measured" not in c or c.get("error"):
            print(f"{c['name']:<52} skipped: {c.get('error', 'no measurement')}")
            continue
        m = c["measured"]
        e = estimate(plan_of(c))
        pred = e.peak
        # trainlint estimates GPU runs: the optimizer step as CUDA's default foreach AdamW runs it (measured
        # on the same state by measure_memory.py) can be the peak there, though not on CPU.
        meas = max(m["Total"], (c.get("cuda_foreach_optimizer_step") or {}).get("Total", 0))
        err = (pred - meas) / meas * 100
        rows.append((c["name"], err))
        if "PARAM" not in m:  # the live-bytes tracker (bench/live_measurements.json) counts the total only
            print(f"{c['name']:<52} {meas / MIB:>9.0f} {pred / MIB:>9.0f} {err:>+6.1f}   (live bytes: total only)")
            continue
        act_meas = m["ACT"] + m["TEMP"] + m.get("OTH", 0)
        act_pred = e.consumers["activations"] + e.consumers["logits"] + e.consumers["attention"]
        print(f"{c['name']:<52} {meas / MIB:>9.0f} {pred / MIB:>9.0f} {err:>+6.1f}   "
              f"{m['PARAM'] / MIB:>5.0f}/{e.consumers['weights'] / MIB:<5.0f} {m['OPT'] / MIB:>5.0f}/"
              f"{e.consumers['optimizer'] / MIB:<5.0f} {act_meas / MIB:>6.0f}/{act_pred / MIB:<6.0f}")
    if not rows:
        return 1
    worst = max(rows, key=lambda r: abs(r[1]))
    within = sum(1 for _, err in rows if abs(err) <= args.target)
    mean_abs = sum(abs(err) for _, err in rows) / len(rows)
    print(f"\n{len(rows)} configurations; {within} within +-{args.target:g}%; mean |error| {mean_abs:.1f}%; "
          f"worst {worst[0]} {worst[1]:+.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
