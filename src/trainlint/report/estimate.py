"""`trainlint estimate` output: text (with a bar chart like the lesson's figure), JSON for tools, and one
self-contained HTML page with an SVG chart (no scripts, no network)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass

from trainlint.knowledge.gpus import describe_gpu
from trainlint.memory import GIB, fmt_bytes
from trainlint.memory.estimate import CONSUMERS, CUDA_OVERHEAD, ROWS, Estimate, Lever
from trainlint.memory.phases import eval_peak, generation_parts, generation_peak
from trainlint.memory.max_batch import MaxBatch

LABELS = {
    "weights": "Weights",
    "gradients": "Gradients",
    "optimizer": "Optimizer state",
    "activations": "Activations kept for backward",
    "logits": "Logits and loss",
    "attention": "Attention scores",
}
COLORS = {"weights": "#4e79a7", "gradients": "#f28e2b", "optimizer": "#e15759", "activations": "#76b7b2",
          "logits": "#59a14f", "attention": "#b07aa1", "checkpoints": "#76b7b2", "recomputed": "#9cd3cd",
          "recomputed_attention": "#b07aa1", "embedding_sum": "#f6b26b", "step": "#edc948", "models": "#9c755f"}
DEPENDS_ON_SHAPE = ("activations", "logits", "attention")
ROW_DEPENDS_ON_SHAPE = ("activations", "logits", "attention", "checkpoints", "recomputed", "recomputed_attention")
LABEL_WIDTH = max(map(len, ROWS.values()))
CONTEXT_NOTE = "CUDA context and allocator, one process (measured on an H200), not in the rows"


@dataclass(frozen=True)
class Report:
    script: str
    model: str
    estimate: Estimate
    gpu: tuple[str, int] | None
    assumptions: tuple[str, ...]
    unknown: tuple[str, ...]  # "batch", "sequence length"
    max_batch: MaxBatch | str | None = None  # --max-batch: the answer, or why there is none; None: not asked

    def rows(self) -> list[tuple[str, int | None]]:
        """What is live at the peak moment (memory.estimate.moments): the rows sum to the peak; a row that depends on
        an unknown batch or sequence length is None."""
        return [(name, None if self.unknown and name in ROW_DEPENDS_ON_SHAPE else value)
                for name, value in self.estimate.rows]

    def other_moments(self) -> list[tuple[str, int]]:
        """The other moments of the training step, with their totals (the peak's own is the peak)."""
        return [(m.name, m.total) for m in self.estimate.moments if m.name != self.estimate.peak_phase]

    def consumers(self) -> dict[str, int | None]:
        out: dict[str, int | None] = dict(self.estimate.consumers)
        if self.unknown:
            for name in DEPENDS_ON_SHAPE:
                out[name] = None
        return out

    @property
    def eval_peak(self) -> int:
        """The evaluation step's peak (0: no evaluation phase); memory.estimate.eval_peak."""
        return eval_peak(self.estimate.plan)

    @property
    def generation_peak(self) -> int:
        """The generation phase's peak (0: none); memory.estimate.generation_peak."""
        return generation_peak(self.estimate.plan)

    @property
    def vllm_bytes(self) -> int:
        """Colocated vLLM's share of the card (vllm_gpu_memory_utilization x the GPU's memory; 0 without a GPU)."""
        share = self.estimate.plan.vllm_share
        return int(share * self.gpu[1]) if share and self.gpu else 0

    @property
    def need(self) -> int:
        """What the GPU must hold: the highest of the training, evaluation and generation peaks, plus the CUDA
        context, plus a colocated vLLM's share of the card."""
        return max(self.estimate.peak, self.eval_peak, self.generation_peak) + CUDA_OVERHEAD + self.vllm_bytes

    @property
    def fits(self) -> bool | None:
        if self.gpu is None:
            return None
        need = self.need
        if self.unknown and need <= self.gpu[1]:
            return None  # the unknown consumers could still push it over
        return need <= self.gpu[1]


def describe_plan(r: Report) -> str:
    p = r.estimate.plan
    parts = []
    if p.lora_r:
        parts.append(f"{'QLoRA' if p.quantization == '4bit' else 'LoRA'} r={p.lora_r} on {', '.join(p.lora_targets)}"
                     + (f" + parameters {', '.join(p.lora_parameters)}" if p.lora_parameters else ""))
    else:
        parts.append("full fine-tuning" + (f" ({p.quantization})" if p.quantization else ""))
    parts.append({2: "16-bit", 4: "fp32"}.get(p.dtype_bytes, "?") + " weights")
    if "batch" not in r.unknown and "sequence length" not in r.unknown:
        parts.append(f"batch {p.batch} x {p.seq:,} tokens")
    parts.append("sdpa attention on the math kernel" if p.attention == "sdpa-math" else f"{p.attention} attention")
    parts.append("checkpointing " + ("on" if p.checkpointing else "off"))
    parts.append({"full": "unfused loss", "chunked": "TRL chunked loss", "liger": "fused (Liger) loss",
                  "chunked-upcast": f"full logits, fp32 upcast in {p.loss_chunks} chunks"}[p.loss])
    parts.append(p.optimizer)
    if p.sharding:
        parts.append(f"{p.sharding} over {p.world_size} GPU(s)")
    if p.offload:
        parts.append(f"{', '.join(p.offload)} offloaded to the CPU")
    return ", ".join(parts)


def _verdict(r: Report) -> str:
    if r.gpu is None:
        return "no GPU given: pass --gpu (e.g. --gpu A100-80GB or --gpu 24GB, read as GiB) for a verdict"
    name, capacity = r.gpu
    need = r.need
    gpu = describe_gpu(name, capacity)  # device memory in GiB, as the driver counts it (knowledge/gpus.py)
    if r.fits is None:
        return (f"{gpu}: cannot say: {', '.join(r.unknown)} unknown (pass --batch / --seq); "
                f"without those it needs {fmt_bytes(need)}")
    if r.fits:
        return f"{gpu}: fits, with {fmt_bytes(capacity - need)} of headroom"
    training = r.estimate.peak + CUDA_OVERHEAD + r.vllm_bytes
    own = max(r.estimate.peak, r.eval_peak, r.generation_peak) + CUDA_OVERHEAD
    if r.vllm_bytes and own < capacity:  # the colocated vLLM share is what pushes it over
        most = int((capacity - own) / capacity * 100) / 100
        return (f"{gpu}: does NOT fit with vllm_gpu_memory_utilization={r.estimate.plan.vllm_share:g} "
                f"({fmt_bytes(r.vllm_bytes)}); fits only with vllm_gpu_memory_utilization <= {most:.2f}")
    if training <= capacity and r.generation_peak >= r.eval_peak:  # the generation phase is the one over the card
        return f"{gpu}: fits for training; generation needs {fmt_bytes(need - capacity)} more"
    if training <= capacity:  # the evaluation step is the one over the card
        return f"{gpu}: fits for training; the first evaluation needs {fmt_bytes(need - capacity)} more"
    return f"{gpu}: does NOT fit: needs {fmt_bytes(need - capacity)} more"


def _eval_line(r: Report) -> str | None:
    """Other phases: the evaluation step's peak, under the training peak."""
    e = r.estimate.plan.evaluation
    if e is None:
        return None
    if e.generation is not None:  # GRPO / RLOO: a generation round at the eval batch
        how = "HF generate" if e.generation.vllm is None else "vLLM"
        return (f"evaluation step (eval batch {e.batch} completions, generated with {how} and scored under no_grad): "
                f"{fmt_bytes(r.eval_peak)}")
    what = ("logits kept on the GPU for " + (f"{e.kept_batches} eval batches" if e.kept_batches else "1 eval batch")
            if e.kept_bytes else "the logits of one eval batch" if e.logits else "no logits (fused loss)")
    if e.jsd:  # GKD (run/eval.py `_distillation_eval`)
        what = "student and teacher logits and the generalized JSD under no_grad" + \
            (f", {what}" if e.kept_bytes else "")
    batch = f"{e.batch // e.per_example} pairs, {e.batch} rows" if e.per_example == 2 else f"{e.batch}"
    return f"evaluation step (eval batch {batch}, {what}): {fmt_bytes(r.eval_peak)}"


def _generation_line(r: Report) -> str | None:
    """The generation phase's peak and what holds it (memory.estimate.generation_parts)."""
    g = r.estimate.plan.generation
    if g is None:
        return None
    parts = ", ".join(f"{ROWS[name].split(' (')[0].lower()} {fmt_bytes(b)}" for name, b in generation_parts(
        r.estimate.plan))
    how = {None: "HF generate", "colocate": "vLLM colocated", "server": "vLLM server (other GPUs)"}[g.vllm]
    line = (f"generation ({how}, {g.rows} completions x {g.prompt + g.completion:,} tokens): "
            f"{fmt_bytes(r.generation_peak)} ({parts})")
    if r.estimate.plan.vllm_share:
        line += (f"; colocated vLLM takes vllm_gpu_memory_utilization={r.estimate.plan.vllm_share:g} of the card"
                 + (f" ({fmt_bytes(r.vllm_bytes)})" if r.vllm_bytes else ""))
    return line


def _max_batch(r: Report) -> list[str]:
    """--max-batch's answer in sentences (text and HTML)."""
    mb = r.max_batch
    if isinstance(mb, str):
        return [f"largest micro-batch: cannot say: {mb}"]
    gpu = describe_gpu(*r.gpu)
    if mb.batch == 0:
        return [f"largest micro-batch: none: not even a micro-batch of 1 fits {gpu}"]
    lines = [f"largest micro-batch that fits {gpu}: {'at least ' if mb.at_limit else ''}{mb.batch} per device"]
    if mb.effective is None:
        lines.append("the script's batch or gradient_accumulation_steps is unknown: no effective batch to keep")
    elif mb.exact:
        lines.append(f"gradient_accumulation_steps={mb.accumulation} keeps the script's effective batch of "
                     f"{mb.effective} per device")
    else:
        d = mb.exact_batch
        lines.append(f"gradient_accumulation_steps={mb.accumulation} gives {mb.batch * mb.accumulation} per device, "
                     f"not the script's {mb.effective} (no whole number of steps keeps it at {mb.batch}); "
                     f"micro-batch {d} with gradient_accumulation_steps={mb.effective // d} keeps it exactly")
    return lines


def _lever_name(lever: Lever) -> str:
    """'SDPA / flash attention (TL101)': a lever that is a finding's fix names it (the same saving as its message)."""
    return f"{lever.name} ({lever.code})" if lever.code else lever.name


def text(r: Report) -> str:
    rows = r.rows()
    known = [v for _, v in rows if v is not None]
    top = max(known) if known else 1
    width = 32
    lines = [f"{r.script}: {r.model}", f"  {describe_plan(r)}", "",
             f"  live at the peak ({r.estimate.peak_phase}):"]
    for name, value in rows:
        label = f"{ROWS[name]:<{LABEL_WIDTH}}"
        if value is None:
            lines.append(f"  {label} {'?':>10}   unknown: {', '.join(r.unknown)} not set (use --batch / --seq)")
            continue
        cells = value / top * width if top else 0
        bar = "█" * int(cells) + ("▏" if value and int(cells) == 0 else "")
        lines.append(f"  {label} {fmt_bytes(value):>10}   {bar}")
    peak_note = " (at least)" if r.unknown else ""
    lines += [f"  {'= peak' + peak_note:<{LABEL_WIDTH}} {fmt_bytes(r.estimate.peak):>10}", ""]
    others = [f"{name} {fmt_bytes(total)}" for name, total in r.other_moments()]
    if others:
        lines.append(f"  other moments of the step: {'; '.join(others)}")
    if (phase := _eval_line(r)) is not None:
        lines.append(f"  other phases: {phase}")
    if (phase := _generation_line(r)) is not None:
        lines.append(f"  other phases: {phase}")
    lines += [f"  + {CONTEXT_NOTE}: ~{fmt_bytes(CUDA_OVERHEAD)}"]
    if r.estimate.paged_optimizer:
        lines.append(f"  + paged optimizer state in managed memory (not in allocated-memory counters): "
                     f"{fmt_bytes(r.estimate.paged_optimizer)}")
    lines.append(f"  verdict: {_verdict(r)}")
    if r.max_batch is not None:
        lines.extend(f"  {line}" for line in _max_batch(r))
    lines.append("")
    if r.estimate.levers:
        lines.append("  levers, by what they would save on this script's peak:")
        for lever in r.estimate.levers:
            lines.append(f"    -{fmt_bytes(lever.saves):>9}  {_lever_name(lever)}  (cost: {lever.cost})")
        lines.append("")
    if r.assumptions:
        lines.append("  assumptions:")
        lines.extend(f"    - {a}" for a in r.assumptions)
    return "\n".join(lines).rstrip() + "\n"


def as_json(r: Report) -> str:
    return json.dumps({
        "script": r.script,
        "model": r.model,
        "plan": describe_plan(r),
        "consumers": r.consumers(),
        "peak": r.estimate.peak,
        "peak_phase": r.estimate.peak_phase,
        "rows": [{"name": name, "label": ROWS[name], "bytes": value} for name, value in r.rows()],
        "peak_is_lower_bound": bool(r.unknown),
        "moments": {m.name: m.total for m in r.estimate.moments},
        "phases": {**({"evaluation": r.eval_peak} if r.estimate.plan.evaluation is not None else {}),
                   **({"generation": r.generation_peak} if r.estimate.plan.generation is not None else {})},
        "components": [{"role": role, "bytes": b} for role, b in r.estimate.plan.models],
        "vllm_colocated": r.vllm_bytes,
        "cuda_overhead": CUDA_OVERHEAD,
        "paged_optimizer": r.estimate.paged_optimizer,
        "gpu": {"name": r.gpu[0], "bytes": r.gpu[1], "gib": round(r.gpu[1] / GIB, 2)} if r.gpu else None,
        "fits": r.fits,
        "levers": [{"name": lv.name, "saves": lv.saves, "cost": lv.cost, "code": lv.code} for lv in r.estimate.levers],
        "assumptions": list(r.assumptions),
        "unknown": list(r.unknown),
        "max_batch": _max_batch_json(r.max_batch),
    }, indent=2)


def _max_batch_json(mb: MaxBatch | str | None) -> dict | None:
    if mb is None:
        return None
    if isinstance(mb, str):
        return {"batch": None, "cannot_say": mb}
    exact = mb.exact_batch
    return {"batch": mb.batch, "at_limit": mb.at_limit, "effective_batch": mb.effective,
            "gradient_accumulation_steps": mb.accumulation, "exact": mb.exact,
            "exact_alternative": None if mb.exact or exact is None else
            {"batch": exact, "gradient_accumulation_steps": mb.effective // exact}}


def as_html(r: Report) -> str:
    live = r.rows()
    known = [v for _, v in live if v is not None]
    top = max(known) if known else 1
    row_h, label_w, bar_w = 34, 360, 400
    rows = []
    for i, (name, value) in enumerate(live):
        y = 10 + i * row_h
        w = 0 if not value else max(2, value / top * bar_w)
        shown = "unknown" if value is None else fmt_bytes(value)
        rows.append(
            f'<text x="{label_w - 10}" y="{y + 21}" text-anchor="end" class="label">{html.escape(ROWS[name])}</text>'
            f'<rect x="{label_w}" y="{y + 6}" width="{w:.1f}" height="{row_h - 12}" rx="3" fill="{COLORS[name]}"/>'
            f'<text x="{label_w + w + 8:.1f}" y="{y + 21}" class="value">{shown}</text>')
    height = 20 + len(live) * row_h
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 110}" height="{height}" '
           f'role="img" aria-label="What is live at the peak">{"".join(rows)}</svg>')
    others = "; ".join(f"{name} {fmt_bytes(total)}" for name, total in r.other_moments())
    fits = r.fits
    badge = {True: ("fits", "#2e7d32"), False: ("does not fit", "#c62828"), None: ("no verdict", "#757575")}[fits]
    levers = "".join(f"<tr><td>{html.escape(_lever_name(lv))}</td><td class='num'>−{fmt_bytes(lv.saves)}</td>"
                     f"<td>{html.escape(lv.cost)}</td></tr>" for lv in r.estimate.levers)
    assumptions = "".join(f"<li>{html.escape(a)}</li>" for a in r.assumptions)
    max_batch = "".join(f"<p>{html.escape(line)}</p>" for line in (_max_batch(r) if r.max_batch is not None else []))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>trainlint estimate: {html.escape(r.script)}</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 900px; color: #222; }}
h1 {{ font-size: 1.4rem; margin-bottom: .2rem; }} .sub {{ color: #555; margin-top: 0; }}
.peak {{ font-size: 2.2rem; font-weight: 600; }} .badge {{ color: #fff; background: {badge[1]}; border-radius: 4px;
padding: .2rem .6rem; font-size: 1rem; vertical-align: middle; margin-left: .8rem; }}
.label {{ font-size: 14px; fill: #333; }} .value {{ font-size: 13px; fill: #333; font-variant-numeric: tabular-nums; }}
table {{ border-collapse: collapse; width: 100%; }} td, th {{ border-bottom: 1px solid #ddd; padding: .4rem; text-align: left; }}
.num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }} .note {{ color: #666; font-size: .9rem; }}
</style></head><body>
<h1>{html.escape(r.model)}</h1>
<p class="sub">{html.escape(r.script)} · {html.escape(describe_plan(r))}</p>
<p><span class="peak">{fmt_bytes(r.estimate.peak)}</span> peak ({html.escape(r.estimate.peak_phase)})<span class="badge">{badge[0]}</span></p>
<p>{html.escape(_verdict(r))}</p>
{max_batch}
<h2>Live at the peak ({html.escape(r.estimate.peak_phase)})</h2>
{svg}
<p class="note">The bars sum to the peak{" (at least: " + html.escape(", ".join(r.unknown)) + " unknown)" if r.unknown else ""}. Plus the {html.escape(CONTEXT_NOTE)}: ~{fmt_bytes(CUDA_OVERHEAD)}.</p>
{f"<p>other moments of the step: {html.escape(others)}</p>" if others else ""}
{f"<p>other phases: {html.escape(_eval_line(r))}</p>" if _eval_line(r) else ""}
{f"<p>other phases: {html.escape(_generation_line(r))}</p>" if _generation_line(r) else ""}
<h2>Levers</h2><table><tr><th>lever</th><th class="num">saves</th><th>cost</th></tr>{levers}</table>
<h2>Assumptions</h2><ul>{assumptions or "<li>none</li>"}</ul>
</body></html>
"""


FORMATS = {"text": text, "json": as_json, "html": as_html}
