"""`trainlint verify --simulate`: build the script's real architecture at full size from its config under
FakeTensorMode on the CPU, run training steps with its batch, length, dtype, attention, checkpointing,
LoRA and optimizer, and report the tensor-allocation peak per category (MemTracker). No GPU, no memory,
no weights: fake tensors carry shapes only."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from trainlint.config import Settings
from trainlint.memory.estimate import ALL_LINEAR, Plan

KNOWN_GAPS = (
    "allocator fragmentation and rounding, the CUDA context and kernel workspaces are not modelled",
    "CPU kernels stand in for CUDA ones (SDPA runs the CPU flash kernel; eager is the same math)",
    "fused / chunked losses (Liger, TRL's chunked loss) and 4/8-bit quantization are not simulated: the "
    "simulation runs transformers' default loss on 16/32-bit weights",
)
SIMULATED_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "smollm3")
CATEGORY_TO_CONSUMER = {"PARAM": "weights", "GRAD": "gradients", "OPT": "optimizer", "ACT": "activations",
                        "TEMP": "loss and backward temporaries", "BUFFER": "buffers", "OTH": "inputs"}


# What a simulation can check of a rule's fix (its declaration's `verifies`, codes.VERIFY_KINDS): fake tensors carry
# shapes, so a peak; whether adapters get gradients or how many samples make an optimizer step needs the real runs.
SIMULATED_KINDS = ("memory",)


class SimulationUnsupported(Exception):
    pass


@dataclass(frozen=True)
class Simulation:
    categories: dict[str, int]
    peak: int
    peak_phase: str
    seconds: float
    note: str


def model_config(plan: Plan, model_type: str | None) -> dict:
    if model_type not in SIMULATED_TYPES:
        raise SimulationUnsupported(f"simulation supports {', '.join(SIMULATED_TYPES)} architectures; "
                                    f"this model is {model_type or 'of an unknown type'}")
    g = plan.geometry
    return {"model_type": model_type, "vocab_size": g.vocab, "hidden_size": g.hidden, "num_hidden_layers": g.layers,
            "num_attention_heads": g.heads, "num_key_value_heads": g.kv_heads, "head_dim": g.head_dim,
            "intermediate_size": g.intermediate, "tie_word_embeddings": g.tied}


def simulate(plan: Plan, model_type: str | None, name: str = "script") -> Simulation:
    """Run the plan under FakeTensorMode (imports torch and transformers: verify only)."""
    from trainlint.verify import measure

    model = model_config(plan, model_type)
    optimizer = plan.optimizer if plan.optimizer in ("sgd", "sgd_momentum") else "adamw"
    targets = list(ALL_LINEAR) if plan.lora_targets == ("all-linear",) else list(plan.lora_targets)
    attn = "eager" if plan.attention == "eager" else "sdpa"  # ("sdpa-math" is CUDA's dispatch: a CPU run cannot show it)
    spec = measure.C(name, model, seq=plan.seq, batch=plan.batch, dtype="bf16" if plan.act_bytes == 2 else "fp32",
                     attn=attn, gc=plan.checkpointing, training="lora" if plan.lora_r else "full",
                     lora_targets=targets, r=plan.lora_r or 16, optimizer=optimizer, fake=True)
    record = measure.measure(spec, fake=True)
    m = record["measured"]
    notes = []
    if plan.optimizer not in ("adamw", "adam", "adamw_torch", "adamw_torch_fused", "sgd", "sgd_momentum"):
        notes.append(f"optimizer {plan.optimizer} simulated as AdamW")
    return Simulation({k: v for k, v in m.items() if k != "Total"}, m["Total"],
                      f"step {record.get('peak_step')}, {record.get('peak_phase')}", record["seconds"],
                      "; ".join(notes))


RL_TRAINERS = {"DPOTrainer": "dpo", "GRPOTrainer": "grpo"}
RL_GAPS = (
    "the phases are simulated with the installed TRL's fused LM head (verify/measure_rl.py), whatever TRL release "
    "the script is estimated for",
    "generation is HF generate's cache and decoding steps (vLLM is not installable here); sampling, rewards and "
    "the EOS mask are not simulated",
)


def rl_spec(plan: Plan, run) -> tuple[str, dict, list[str]] | None:
    """(which, verify.measure_rl spec, notes) for a DPOTrainer / GRPOTrainer run, from the plan the estimate reads
    (so both sides describe one run); None for any other trainer. SimulationUnsupported for what the simulation
    cannot build (LoRA)."""
    which = RL_TRAINERS.get(run.components.trainer or "")
    if which is None:
        return None
    if plan.lora_r:
        raise SimulationUnsupported(f"the {run.components.trainer} simulation builds full fine-tuning only; this "
                                    f"run trains LoRA adapters")
    notes = []
    common = {"gc": plan.checkpointing, "dtype": "bf16" if plan.dtype_bytes == 2 else "fp32",
              "reference": bool(run.components.resident("reference"))}
    if which == "dpo":
        pairs = max(1, plan.batch // 2)  # the plan counts rows: chosen and rejected concatenated
        spec = {**common, "pairs": pairs, "seq": plan.seq, "prompt": plan.seq // 2, "beta": 0.1,
                "eval_pairs": (max(1, plan.evaluation.batch // max(plan.evaluation.per_example, 1))
                               if plan.evaluation is not None else None)}
        notes.append(f"prompts of {plan.seq // 2} of the {plan.seq} tokens assumed (the labels' mask)")
    else:
        gen = plan.generation
        if gen is None:
            return None
        spec = {**common, "batch": plan.batch, "rows": gen.rows, "prompt": gen.prompt, "completion": gen.completion,
                "logps_rows": gen.logps_rows, "beta": 0.04}
        if gen.vllm is not None:
            notes.append(f"the script generates with vLLM ({gen.vllm}); simulated and predicted with HF generate")
    return which, spec, notes


def _plan(context) -> tuple[Plan, str | None]:
    """The estimate's Plan of `context` (planning.plan_for, no overrides) and its model's type; VerifyError when the
    plan cannot be made or leaves a value the simulation needs unknown."""
    from trainlint.planning import Overrides, PlanError, plan_for
    from trainlint.verify.run import VerifyError

    try:
        plan, model, _, unknown = plan_for(context, Overrides())
    except PlanError as exc:
        raise VerifyError(str(exc)) from None
    if unknown:
        raise VerifyError(f"{', '.join(unknown)} not known statically; simulation needs them")
    return plan, context.spec(model).model_type


def simulate_rl(script: Path, settings: Settings) -> tuple[dict, Plan] | None:
    """`verify --simulate` of a DPOTrainer or GRPOTrainer script: each phase (training step, generation, evaluation
    step) simulated at full size (verify/measure_rl.py) beside memory.estimate.phase_peaks of the same plan on CPU
    kernels (verify.run.predicted_phases). None when the script's trainer is not one of them."""
    from trainlint.run import resolve
    from trainlint.source import read_source
    from trainlint.verify import measure_rl
    from trainlint.verify.run import VerifyError, context_of, phase_rows, predicted_phases

    source = read_source(script)
    text = getattr(source, "text", None)
    if text is None:
        raise VerifyError(f"{script}: {getattr(source, 'reason', 'cannot be read')}")
    result = context_of(script, text, settings)
    if result.context is None:
        return None
    run = resolve(result.context)
    if RL_TRAINERS.get(run.components.trainer or "") is None:
        return None
    plan, model_type = _plan(result.context)
    try:
        config = model_config(plan, model_type)
        found = rl_spec(plan, run)
    except SimulationUnsupported as exc:
        raise VerifyError(str(exc)) from None
    if found is None:
        return None
    which, spec, notes = found
    config.pop("model_type")
    measured = measure_rl.measure(which, model_type, config, spec)
    phases = dict(measured["phases"])
    if "scoring" in phases:  # the estimate's generation phase is the larger of generate and the scoring pass
        phases["generation"] = max(phases.pop("generation"), phases.pop("scoring"))
    predicted = predicted_phases(plan, "cpu", hf_generate=True)
    return {"script": str(script), "device": "cpu (FakeTensorMode simulation)", "trainer": run.components.trainer,
            "simulated": {"spec": spec, "phases": phases, "seconds": measured["seconds"]},
            "phases": {"original": phase_rows(phases, predicted)}, "notes": notes,
            "known_gaps": list(KNOWN_GAPS[:2]) + list(RL_GAPS)}, plan


def simulate_script(script: Path, settings: Settings, codes: tuple[str, ...] | None) -> dict:
    """Simulate the script as written and with trainlint's fixes; static estimate beside each."""
    from trainlint.memory import fmt_bytes
    from trainlint.memory.estimate import estimate, saving_of
    from trainlint.verify.run import VerifyError, context_of, fix_runs_on, fixed_source, verified_codes, verifies

    script = script.resolve()
    if not script.is_file():
        raise VerifyError(f"{script}: no such file")
    selected = set(codes) if codes else verified_codes(settings)
    source, fixed_text, found, applied = fixed_source(script, settings, selected)
    rl = simulate_rl(script, settings)
    if rl is not None:  # a DPO / GRPO script: its phases as written; each finding keeps its one figure
        report, plan = rl
        report["diagnostics"] = [
            {"code": d.code, "line": d.span.line,
             "predicted_saving": saving_of(plan, d.code), "measured_saving": None,
             "verdict": "not measurable here",
             "note": f"--simulate runs a {report['trainer']} script as written only; run `trainlint verify` for the "
                     f"fixed run"} for d in found]
        return report
    runs, plans = {}, {}
    for label, text in (("original", source.text), ("fixed", fixed_text)):
        result = context_of(script, text, settings)
        if result.context is None:
            raise VerifyError(f"{script}: nothing to simulate ({result.skipped})")
        plan, model_type = _plan(result.context)
        plans[label] = plan
        sim = simulate(plan, model_type, label)
        # compare like with like: the estimate of exactly what is simulated (default loss, unquantized, CPU kernels)
        est = estimate(replace(plan, loss="full", quantization=None, device="cpu"))  # CPU kernels under FakeTensorMode
        runs[label] = {"predicted": {"consumers": est.consumers, "peak": est.peak},
                       "simulated": {"categories": sim.categories, "peak": sim.peak, "peak_at": sim.peak_phase,
                                     "seconds": round(sim.seconds, 1)},
                       "note": sim.note}
    # the simulated runs' like-with-like prediction: every applied fix together, on transformers' default loss
    expected = runs["original"]["predicted"]["peak"] - runs["fixed"]["predicted"]["peak"]
    measured = runs["original"]["simulated"]["peak"] - runs["fixed"]["simulated"]["peak"]
    diagnostics = []
    for d in found:
        # the finding's own figure (memory.estimate.fix_saving: its message's and estimate's lever's), for the script
        # as written; other codes have no figure of their own, only the simulated runs' difference
        own = saving_of(plans["original"], d.code)
        pred = expected if own is None else own
        kind = verifies(d.code)
        like = "the prediction" if expected == pred else (
            f"the {fmt_bytes(max(expected, 0))} predicted for the runs simulated (transformers' default loss, "
            f"unquantized, every applied fix)")
        if fix_runs_on(d.code) is not None:
            verdict, note = "not measurable here", (f"the fix's kernel needs {fix_runs_on(d.code)}; the simulation "
                                                    f"runs transformers' default loss on the CPU")
        elif kind is not None and kind not in SIMULATED_KINDS:
            verdict, note = "not measurable here", "a correctness finding: run `trainlint verify` without --simulate"
        elif d not in applied:
            verdict, note = "not measurable here", "no fix to apply"
        elif kind is None:
            verdict, note = "not measurable here", "the rule declares nothing for verify to check"
        elif measured > 0 and (expected <= 0 or 0.5 * expected <= measured <= 2 * expected):
            verdict, note = "confirmed", f"simulated saving within a factor 2 of {like}"
        else:
            verdict, note = "not confirmed", (f"simulated saving {fmt_bytes(max(measured, 0))}, not within a factor 2 "
                                              f"of {like}")
        diagnostics.append({"code": d.code, "line": d.span.line, "predicted_saving": pred, "measured_saving": measured,
                            "simulated_prediction": expected, "verdict": verdict, "note": note})
    return {"script": str(script), "device": "cpu (FakeTensorMode simulation)", "runs": runs,
            "diagnostics": diagnostics, "known_gaps": list(KNOWN_GAPS)}


def simulation_text(r: dict) -> str:
    from trainlint.memory import fmt_bytes

    lines = [f"{r['script']}: simulated at full size on {r['device']}", ""]
    if "trainer" in r:
        from trainlint.verify.run import phase_lines

        lines[-1:] = [f"  {r['trainer']}, each phase ({r['simulated']['seconds']} s)"]
        lines += phase_lines(r["phases"])
        lines += [""] + [f"  note: {n}" for n in r["notes"]]
        for d in r.get("diagnostics") or ():
            saving = f"predicted saving {fmt_bytes(d['predicted_saving'])}" if d["predicted_saving"] else "-"
            lines.append(f"  {d['code']} line {d['line']}: {d['verdict'].upper()}  ({saving}) {d['note']}")
        lines += ["", "  known gaps:"] + [f"    - {g}" for g in r["known_gaps"]]
        return "\n".join(lines) + "\n"
    cats = ["PARAM", "GRAD", "OPT", "ACT", "TEMP"]
    lines.append(f"  {'':<22}" + "".join(f"{c:>11}" for c in cats) + f"{'peak':>11}{'predicted':>11}")
    for label, run in r["runs"].items():
        sim = run["simulated"]
        lines.append(f"  {label + ' (simulated)':<22}" + "".join(f"{fmt_bytes(sim['categories'].get(c, 0)):>11}"
                                                                for c in cats)
                     + f"{fmt_bytes(sim['peak']):>11}{fmt_bytes(run['predicted']['peak']):>11}")
    lines.append("")
    for d in r["diagnostics"]:
        lines.append(f"  {d['code']} line {d['line']}: {d['verdict'].upper()}  predicted saving "
                     f"{fmt_bytes(max(d['predicted_saving'], 0))}, simulated {fmt_bytes(max(d['measured_saving'], 0))}"
                     f"  ({d['note']})")
    lines += ["", "  known gaps:"] + [f"    - {g}" for g in r["known_gaps"]]
    return "\n".join(lines) + "\n"
