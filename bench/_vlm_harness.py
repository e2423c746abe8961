"""The parts the full-size FakeTensorMode bench scripts share (bench/measure_vlm*.py, measure_gemma3_text.py,
measure_qwen3_text.py): the fake-tensor setup around building and stepping a model, the bf16 build, LoRA, the
two measured training steps (trainlint.verify.measure.measured_step under a StepMemTracker), the record's measured
and version fields, the `--check-fake` real-vs-fake loop and the JSON merge-and-write main(). Each script keeps what
is its own: its configs, how its model is built and called, its record fields and its fake-tensor workarounds.

Run the scripts from the repository root with src/ on the path (each script's __main__ puts it there).
"""

from __future__ import annotations

import gc
import json
import time
from contextlib import contextmanager
from pathlib import Path

R = 16  # the LoRA rank of every VLM row (lora_alpha 2 * R, dropout 0.05)


@contextmanager
def fake_tensors(fake: bool = True, skip_trunc_normal: bool = False):
    """Run the block under FakeTensorMode (or on real tensors when `fake` is false) with nn.Module._apply made safe
    for fake tensors (trainlint.verify.measure._fake_safe_apply); `skip_trunc_normal`: under fake tensors the weight
    init's truncated normal leaves the tensor as it is (its rejection loop reads values, data-dependent under
    FakeTensors; the values do not matter there). Everything is restored on the way out; a clean exit collects."""
    import torch
    from torch import nn
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    import trainlint.verify.measure as M

    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()) if fake else None
    nn.Module._apply = M._fake_safe_apply if fake else M._orig_module_apply
    trunc = torch.nn.init._no_grad_trunc_normal_
    if fake and skip_trunc_normal:
        torch.nn.init._no_grad_trunc_normal_ = lambda tensor, *args, **kwargs: tensor
    if mode is not None:
        mode.__enter__()
    try:
        yield
    finally:
        if mode is not None:
            mode.__exit__(None, None, None)
        nn.Module._apply = M._orig_module_apply
        torch.nn.init._no_grad_trunc_normal_ = trunc
    gc.collect()


def build_bf16(factory):
    """`factory()` with bf16 as the default dtype (what from_pretrained(dtype=torch.bfloat16) gives)."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        return factory()
    finally:
        torch.set_default_dtype(previous)


def add_lora(model, targets, tower: str | None = None, r: int = R):
    """get_peft_model with the bench's LoRA (alpha 2r, dropout 0.05, bias none, CAUSAL_LM); returns the wrapped
    model, its trainable parameters and the record's "lora" field (`tower`: the name part of the tower's params;
    None: no tower, trainable_in_tower None)."""
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.05, target_modules=targets,
                                             bias="none", task_type="CAUSAL_LM"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    in_tower = None if tower is None else sum(p.numel() for n, p in model.named_parameters()
                                              if p.requires_grad and tower in n)
    lora = {"r": r, "lora_alpha": 2 * r, "lora_dropout": 0.05, "target_modules": targets,
            "trainable_params": sum(p.numel() for p in trainable), "trainable_in_tower": in_tower}
    return model, trainable, lora


def lora_for_training(model, targets, tower: str, gc_on: bool):
    """add_lora, then (non-reentrant) gradient checkpointing when `gc_on`, train mode and the for-loop AdamW
    (trainlint.verify.measure._make_optimizer) over the trainable parameters: returns model, trainable, the "lora"
    field and the optimizer."""
    import trainlint.verify.measure as M

    model, trainable, lora = add_lora(model, targets, tower)
    if gc_on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, trainable, lora, M._make_optimizer("adamw", trainable)


def two_steps(model, opt, fwd, *inputs) -> dict:
    """Two training steps (trainlint.verify.measure.measured_step: forward, backward, optimizer_step, zero_grad)
    under a StepMemTracker that also counts the model, the optimizer and `inputs`; `fwd()` returns the loss (the
    outputs die in its frame, as in Trainer.compute_loss). Returns the record's peak, peak_at, peak_categories and
    step2_phases."""
    import trainlint.verify.measure as M

    mt = M.StepMemTracker()
    mt.track_external(model, opt, *inputs)
    with mt:
        for step in (1, 2):
            mt.reset_mod_stats()
            M.measured_step(mt, step, fwd, opt)
    top, cats = mt.peaks["all"]
    phases = {k.split("/", 1)[1]: int(v[0]) for k, v in mt.peaks.items() if k.startswith("step2/")}
    return {"peak": int(top), "peak_at": f"step{cats['_step']}/{cats['_phase']}",
            "peak_categories": {k: int(v) for k, v in cats.items() if not k.startswith("_")},
            "step2_phases": phases}


def versions(fake: bool, t0: float) -> dict:
    """The record's closing fields: the library versions, whether the run was fake, the seconds since `t0`."""
    import torch
    import transformers

    return {"transformers": transformers.__version__, "torch": torch.__version__, "fake": fake,
            "seconds": round(time.perf_counter() - t0, 1)}


def compare(label: str, real: dict, fake: dict, agree=None) -> bool:
    """Print one `--check-fake` line; `agree(real, fake)` (default: equal peaks) decides, and when it is given the
    line shows the difference too."""
    same = real["peak"] == fake["peak"] if agree is None else agree(real, fake)
    diff = "" if agree is None else f" (real - fake {real['peak'] - fake['peak']:,})"
    print(f"{label}: real {real['peak']:,} fake {fake['peak']:,}{diff} {'agree' if same else 'DIFFERENT'}",
          flush=True)
    return same


def check_pairs(cases, run, agree=None) -> int:
    """For each (label, args) in `cases`: run(*args, fake=False) vs run(*args, fake=True); 1 if any disagree."""
    bad = 0
    for label, args in cases:
        real = run(*args, fake=False)
        fake = run(*args, fake=True)
        bad += not compare(label, real, fake, agree)
    return 1 if bad else 0


def write_record(out: Path, rec: dict, order: list[str] | None = None) -> None:
    """Merge `rec` into `out`'s {"configs": [...]} (replacing the row of its name); `order`: sort rows by name."""
    kept = json.loads(out.read_text())["configs"] if out.exists() else []
    kept = [r for r in kept if r["name"] != rec["name"]] + [rec]
    if order is not None:
        kept.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    out.write_text(json.dumps({"configs": kept}, indent=1) + "\n")


def run_configs(argv: list[str], configs, measure, out: Path, sort: bool = False) -> int:
    """main() of a script: measure each config (a tuple whose first item is its name; measure(*config)) whose name
    contains one of the non-option arguments (all when none), print it and merge it into `out`."""
    only = [a for a in argv if not a.startswith("-")]
    order = [c[0] for c in configs] if sort else None
    for config in configs:
        name = config[0]
        if only and not any(o in name for o in only):
            continue
        rec = measure(*config)
        print(name, f"{rec['peak'] / 2**30:.2f} GiB at {rec['peak_at']} ({rec['seconds']} s)", flush=True)
        write_record(out, rec, order)
    return 0
