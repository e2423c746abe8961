"""`trainlint verify`: run a flagged script as written and with trainlint's fixes applied, a few steps each,
in subprocesses of their own process group, and compare what was measured with what was predicted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from trainlint.config import Settings
from trainlint.diagnostics import Diagnostic
from trainlint.fix import plan_fixes
from trainlint.lint import enabled_codes, lint_text
from trainlint.memory import fmt_bytes
from trainlint.memory.estimate import saving_of
from trainlint.source import Source, read_source
from trainlint.verify import fragmentation
from trainlint.verify.launch_fixes import LaunchFixes, launch_fixes
from trainlint.verify.target import Target, VerifyError  # noqa: F401  (VerifyError re-exported)


@dataclass
class RunResult:
    label: str
    data: dict = field(default_factory=dict)
    returncode: int | None = None
    timed_out: bool = False
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.data.get("ok")) and not self.data.get("error") and not self.timed_out

    @property
    def peak(self) -> int | None:
        return self.data.get("steady_peak") or self.data.get("peak_allocated")


def require_verify_extra() -> None:
    import importlib.util

    missing = [m for m in ("torch", "transformers") if importlib.util.find_spec(m) is None]
    if missing:
        raise VerifyError(f"verify needs {' and '.join(missing)}: install trainlint[verify]")


def fixed_source(path: Path, settings: Settings, codes: set[str]) -> tuple[Source, str, list[Diagnostic],
                                                                           list[Diagnostic]]:
    """(original source, fixed text, all diagnostics for `codes`, the ones whose fix was applied), through the
    same checked path as `--fix --unsafe-fixes` (the fixed copy parses, each fix removes its finding)."""
    outcome = plan_fixes(path, settings, codes, unsafe=True)
    if outcome.source is None:
        source = read_source(path)
        raise VerifyError(f"{path}: {getattr(source, 'reason', 'cannot be read')}")
    if outcome.error:
        raise VerifyError(f"{path}: {outcome.error}")
    text = outcome.new_text if outcome.new_text is not None else outcome.source.text
    return outcome.source, text, outcome.found, outcome.applied


def _harness_command(script: Path, out: Path, workdir: Path, steps: int, device: str, online: bool,
                     launcher: str | None, script_args: tuple[str, ...]) -> list[str]:
    args = ["--script", str(script), "--steps", str(steps), "--out", str(out), "--workdir", str(workdir),
            "--device", device, *(["--online"] if online else []), "--", *script_args]
    if launcher:
        import shlex

        return [*shlex.split(launcher), "-m", "trainlint.verify.harness", *args]
    return [sys.executable, "-m", "trainlint.verify.harness", *args]


def run_harness(label: str, script: Path, cwd: Path, workdir: Path, steps: int, device: str, timeout: float,
                online: bool, launcher: str | None, script_args: tuple[str, ...], extra_path: Path,
                env: dict[str, str] | None = None) -> RunResult:
    """`env`: the run's environment (default: this process's)."""
    out = workdir / f"{label}.json"
    cmd = _harness_command(script, out, workdir / label, steps, device, online, launcher, script_args)
    (workdir / label).mkdir(parents=True, exist_ok=True)
    base = os.environ if env is None else env
    env = {**base, "PYTHONPATH": os.pathsep.join(filter(None, [str(extra_path), base.get("PYTHONPATH", "")]))}
    result = RunResult(label)
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group: a timeout or Ctrl-C kills all of it
    try:
        _, stderr = proc.communicate(timeout=timeout)
        result.returncode = proc.returncode
        result.stderr_tail = "\n".join(stderr.splitlines()[-30:])
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        result.timed_out = True
        result.stderr_tail = f"killed after {timeout:g} s (the whole process group)"
        return result
    except BaseException:
        _kill_group(proc)
        raise
    try:
        result.data = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result.data = {"ok": False, "error": {"type": "HarnessError", "message": "the harness wrote no result",
                                              "traceback_tail": result.stderr_tail}}
    ranks = _rank_results(out)
    if ranks:  # under a launcher: rank 0's result, plus the maximum over all ranks
        result.data["ranks"] = 1 + len(ranks)
        result.data["max_peak_over_ranks"] = max(
            [result.data.get("peak_allocated") or 0] + [r.get("peak_allocated") or 0 for r in ranks])
        errors = [r["error"] for r in ranks if r.get("error")]
        if errors and not result.data.get("error"):
            result.data["error"] = errors[0]
    return result


def _rank_results(out: Path) -> list[dict]:
    """RESULT.json.rank<R> files the harness writes on ranks other than 0."""
    found = []
    for path in sorted(out.parent.glob(out.name + ".rank*")):
        try:
            found.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return found


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _predict(path: Path, text: str, settings: Settings):
    """The static estimate for `text` read as `path`, or None when the script says too little."""
    from trainlint.memory.estimate import estimate
    from trainlint.planning import Overrides, PlanError, plan_for

    result = context_of(path, text, settings)
    if result.context is None:
        return None
    try:
        plan, model, _, unknown = plan_for(result.context, Overrides())
    except PlanError:
        return None
    if unknown:
        return None
    return estimate(plan)


CUDA_TOLERANCE = 0.10  # issue 26: on CUDA, the predicted peak and saving each within ±10% of the measured ones


def _cuda_verdict(predicted_saving: int, measured_saving: int, predicted_peak: int, measured_peak: int | None) -> dict:
    """On CUDA a memory finding is confirmed when the saving and the original run's peak are both within
    CUDA_TOLERANCE of what the estimate predicted; else "not confirmed", with both pairs of figures."""
    saving_off = abs(measured_saving - predicted_saving) / predicted_saving
    peak_off = abs((measured_peak or 0) - predicted_peak) / predicted_peak if predicted_peak else 1.0
    figures = (f"measured saving {fmt_bytes(measured_saving)}, predicted {fmt_bytes(predicted_saving)} "
               f"({measured_saving / predicted_saving:.0%}); measured peak {fmt_bytes(measured_peak or 0)}, "
               f"predicted {fmt_bytes(predicted_peak)}")
    if saving_off <= CUDA_TOLERANCE and peak_off <= CUDA_TOLERANCE:
        return {"verdict": "confirmed", "note": f"within ±{CUDA_TOLERANCE:.0%}: {figures}"}
    return {"verdict": "not confirmed", "note": f"outside ±{CUDA_TOLERANCE:.0%}: {figures}"}


PHASES = ("train", "generation", "eval")
PHASE_TOLERANCE = 0.10  # issue 27 item 6: a phase's measured peak within ±10% of the estimate's


def predicted_phases(plan, device: str, hf_generate: bool) -> dict[str, int]:
    """memory.estimate.phase_peaks of `plan` as it ran: on the run's kernels (Plan.device "cpu" off CUDA: TRL's fused
    LM head folds its tiles in torch there), and with HF generate where the run had no vLLM (`hf_generate`: the
    harness turned use_vllm off, or the simulation generates with the model)."""
    from dataclasses import replace

    from trainlint.memory.phases import phase_peaks

    if not device.startswith("cuda"):
        plan = replace(plan, device="cpu")
    if hf_generate and plan.generation is not None and plan.generation.vllm is not None:
        plan = replace(plan, generation=replace(plan.generation, vllm=None), vllm_share=0.0)
    return phase_peaks(plan)


def has_phases(est, run: RunResult) -> bool:
    """An RL / preference run (a generation phase, other resident models) or one with an evaluation phase."""
    measured = run.data.get("phase_peaks") or {}
    plan = est.plan if est is not None else None
    return bool({"generation", "eval"} & set(measured)) or (plan is not None and bool(
        plan.generation is not None or plan.evaluation is not None or plan.models))


def phase_rows(measured: dict[str, int], predicted: dict[str, int] | None, eval_error: dict | None = None
               ) -> list[dict]:
    """One row per phase: measured and predicted peaks, "confirmed within ±10%" or "not confirmed" (its note:
    "measured X, predicted Y"), or why there is no comparison."""
    predicted = predicted or {}
    rows = []
    for phase in PHASES:
        m, p = measured.get(phase), predicted.get(phase)
        if m is None and p is None:
            continue
        row = {"phase": phase, "measured": m, "predicted": p}
        if m is None:
            why = "the run did not reach it"
            if phase == "eval" and eval_error:
                why = f"the evaluation failed: {eval_error.get('message', '')[:160]}"
            elif phase == "eval":
                why = "the run has no evaluation the harness could run (no eval_dataset, or eval_strategy 'no')"
            row.update(verdict="not measured", note=why)
        elif p is None:
            row.update(verdict="not predicted", note="the estimate has no such phase for this script")
        elif p > 0 and abs(m - p) / p <= PHASE_TOLERANCE:
            row.update(verdict=f"confirmed within ±{PHASE_TOLERANCE:.0%}",
                       note=f"measured {fmt_bytes(m)}, predicted {fmt_bytes(p)}")
        else:
            row.update(verdict="not confirmed", note=f"measured {fmt_bytes(m)}, predicted {fmt_bytes(p)}")
        rows.append(row)
    return rows


def phase_lines(phases: dict[str, list[dict]], skip: tuple[str, ...] = ()) -> list[str]:
    """The per-phase table of the text reports (run and --simulate)."""
    lines = []
    for label, rows in phases.items():
        if label in skip:
            continue
        lines.append("")
        lines.append(f"  {label} run, per phase:  {'predicted':>10} {'measured':>10}")
        for row in rows:
            pred = fmt_bytes(row["predicted"]) if row["predicted"] is not None else "-"
            meas = fmt_bytes(row["measured"]) if row["measured"] is not None else "-"
            verdict = row["verdict"] if row["verdict"].startswith("confirmed") else f"{row['verdict']}: {row['note']}"
            lines.append(f"    {row['phase']:<18} {pred:>10} {meas:>10}  {verdict}")
    return lines


def declaration(code: str):
    """The code's declaration (codes.RuleInfo): a rule's `@rule(...)`, or a TL0xx of codes.META_RULES; None for a
    code nothing declares. verify decides from it, never from the code itself."""
    from trainlint.rules import META_RULES, REGISTRY

    return REGISTRY.get(code) or META_RULES.get(code)


def fix_runs_on(code: str) -> str | None:
    """What the rule's fix needs to run (its declaration's `fix_runs_on`, codes.RuleInfo); None for a code without."""
    found = declaration(code)
    return found.fix_runs_on if found is not None else None


def verifies(code: str) -> str | None:
    """What verify checks of the rule's fixed run (its declaration's `verifies`, codes.VERIFY_KINDS); None: nothing."""
    found = declaration(code)
    return found.verifies if found is not None else None


def verified_codes(settings: Settings) -> set[str]:
    """The enabled codes whose findings verify reports: all but those saying a file could not be checked at all
    (category "unchecked", codes.CATEGORIES): nothing of such a file runs differently once fixed."""
    return {code for code in enabled_codes(settings)
            if (found := declaration(code)) is None or found.category != "unchecked"}


def context_of(path: Path, text: str, settings: Settings):
    """`text` read as `path` under `settings` with no rule run: its FileResult, whose `context` (None when the file
    says nothing trainlint reads) planning makes the estimate from."""
    return lint_text(path, text, settings, set())


@dataclass(frozen=True)
class Case:
    """One finding whose fix was applied, with both runs: what a VERIFY_CHECKS entry judges."""

    diagnostic: Diagnostic
    original: RunResult
    fixed: RunResult
    predicted: int | None  # the saving the estimate predicts for the fixed script (memory rules), else None
    predicted_peak: int | None  # the estimate's peak of the script as written
    device: str
    together: str = ""  # said first when the fixed script's prediction is not the finding's own figure


def _memory(case: Case) -> dict:
    original, fixed, pred, device = case.original, case.fixed, case.predicted, case.device
    measured = (original.peak or 0) - (fixed.peak or 0)
    row: dict = {"measured_saving": measured}
    if measured <= 0:
        row.update(note="the fixed run did not use less memory")
    elif pred is None:
        row.update(verdict="confirmed", note="memory went down; no static prediction to compare with")
    elif pred <= 0:
        row.update(note=f"another consumer sets the peak in this configuration, so the fix was not "
                        f"predicted to lower it; measured {fmt_bytes(measured)} lower")
    elif device.startswith("cuda"):
        row.update(**_cuda_verdict(pred, measured, case.predicted_peak, original.peak))
    elif 0.5 * pred <= measured <= 2 * pred:
        # off CUDA the run is a small model on a CPU: the estimate is calibrated for CUDA, so only the
        # direction and the order of magnitude can be confirmed here
        row.update(verdict="confirmed", note=f"measured {measured / pred:.0%} of the predicted saving "
                                             f"(off CUDA: within a factor 2)")
    else:
        row.update(note=f"measured saving is {measured / max(pred, 1):.0%} of the predicted one")
    row["note"] = case.together + row["note"]
    return row


def _adapter_grads(case: Case) -> dict:
    before, after = case.original.data.get("adapter_grad_ok"), case.fixed.data.get("adapter_grad_ok")
    if before is False and after is True:
        return {"verdict": "confirmed", "note": "adapters received no gradient before the fix, and did after"}
    return {"note": f"adapter_grad_ok before {before}, after {after}"}


def _adapters_rescued(case: Case) -> dict | None:
    """The original run failed because the adapters got no gradient, and the fixed one ran with every B weight
    getting one: the fix is confirmed."""
    if case.original.data.get("adapter_grad_ok") is False and case.fixed.ok \
            and case.fixed.data.get("adapter_grad_ok") is True:
        return {"verdict": "confirmed", "note": "the original run failed (adapters get no gradient); "
                                                "with the fix every LoRA B weight got a gradient"}
    return None


def _samples_per_step(case: Case) -> dict:
    expected = case.diagnostic.data.get("effective_batch")
    samples = case.fixed.data.get("samples_per_step") or []
    if expected is not None and samples and all(s == expected for s in samples):
        return {"verdict": "confirmed", "note": f"effective batch per optimizer step {samples[0]} after the fix "
                                                f"({(case.original.data.get('samples_per_step') or ['?'])[0]} before)"}
    return {"note": f"samples per step before {case.original.data.get('samples_per_step')}, after {samples}"}


@dataclass(frozen=True)
class Check:
    """How verify judges a rule's fix, by what the rule declares (`verifies`): `compare` when both runs completed;
    `failed` when one did not (a verdict, or None: "the ... run did not complete")."""

    compare: Callable[[Case], dict]
    failed: Callable[[Case], dict | None] = lambda case: None
    priced: bool = False  # the finding's own saving (memory.estimate.saving_of) is predicted and compared


# One entry per codes.VERIFY_KINDS (tests/test_verify_declared.py checks both lists are the same).
VERIFY_CHECKS: dict[str, Check] = {
    "memory": Check(_memory, priced=True),
    "adapter-grads": Check(_adapter_grads, _adapters_rescued),
    "samples-per-step": Check(_samples_per_step),
}


def verdicts(found: list[Diagnostic], applied: list[Diagnostic], original: RunResult, fixed: RunResult,
             predicted: tuple, device: str) -> list[dict]:
    est_orig, est_fixed = predicted
    out = []
    applied_ids = {id(d) for d in applied}
    for d in found:
        row = {"code": d.code, "file": d.filename, "line": d.span.line, "predicted_saving": None,
               "measured_saving": None,
               "verdict": "not confirmed", "note": ""}
        kind = verifies(d.code)
        check = VERIFY_CHECKS.get(kind) if kind is not None else None
        compare, together = None, ""
        own = saving_of(est_orig.plan, d.code) if check is not None and check.priced and est_orig is not None and \
            est_fixed is not None else None
        if own is not None:
            # the finding's own figure (memory.estimate.saving_of: its message's and estimate's lever's); the runs
            # are compared with the estimate of the fixed script, which differs when several fixes were applied
            row["predicted_saving"] = compare = own
            if est_orig.peak - est_fixed.peak != compare:
                compare = est_orig.peak - est_fixed.peak
                together = f"the fixed script (every applied fix) was predicted {fmt_bytes(max(compare, 0))} lower: "
        if id(d) not in applied_ids:
            row.update(verdict="not measurable here", note="trainlint has no fix to apply for this finding")
        elif (runs_on := fix_runs_on(d.code)) == "CUDA" and not device.startswith("cuda"):
            row.update(verdict="not measurable here",
                       note="the fix's kernel needs a CUDA GPU (Liger and cut-cross-entropy are Triton kernels); "
                            "no number is invented")
        elif runs_on is not None and (fixed.data.get("error") or {}).get("type") in ("ModuleNotFoundError",
                                                                                     "ImportError"):
            row.update(verdict="not measurable here",
                       note=f"the fixed run needs a package that is not installed here: "
                            f"{(fixed.data.get('error') or {}).get('message', '')}")
        elif check is None:
            row.update(verdict="not measurable here", note="the rule declares nothing for verify to check")
        else:
            case = Case(d, original, fixed, compare, est_orig.peak if est_orig is not None else None, device,
                        together)
            if not original.ok or not fixed.ok:
                failed = [r.label for r in (original, fixed) if not r.ok]
                row.update(check.failed(case) or {"note": f"the {' and '.join(failed)} run did not complete"})
            else:
                row.update(check.compare(case))
        out.append(row)
    return out


def verify(target: Target, *, steps: int = 3, device: str = "auto", codes: tuple[str, ...] = (),
           launcher: str | None = None, timeout: float = 600, online: bool = False) -> dict:
    """Run `target` as written and with trainlint's fixes (the script's in a copy; the launch values' in copies
    of the launcher / recipe / args file), and compare. Nothing of the user's is written."""
    require_verify_extra()
    script, settings = target.script, target.settings
    selected = set(codes) if codes else verified_codes(settings)
    source, fixed_text, found, applied = fixed_source(script, settings, selected)
    workdir = Path(tempfile.mkdtemp(prefix="trainlint-verify-"))
    try:
        fixed_copy = workdir / f"fixed_{script.name}"
        fixed_copy.write_text(fixed_text, encoding="utf-8")
        launch = launch_fixes(target, fixed_text, found, selected, workdir)
        applied = applied + launch.applied
        common = dict(cwd=target.cwd or script.parent, workdir=workdir, steps=steps, device=device, timeout=timeout,
                      online=online, launcher=launcher, extra_path=script.parent)
        started = time.perf_counter()
        original = run_harness("original", script, script_args=target.args, **common)
        fixed = run_harness("fixed", fixed_copy, script_args=launch.args, **common) if applied \
            else RunResult("fixed", dict(original.data))
        predicted = (_predict(script, source.text, settings), _predict(script, fixed_text, launch.settings(settings)))
        reruns: dict[str, RunResult] = {}

        def rerun(label: str) -> dict:
            run = run_harness(f"{label}_expandable", script if label == "original" else fixed_copy,
                              script_args=target.args if label == "original" else launch.args,
                              env=fragmentation.rerun_env(dict(os.environ)), **common)
            reruns[label] = run
            return run.data

        frag = fragmentation.check_runs({"original": original.data, "fixed": fixed.data if applied else None},
                                        dict(os.environ), rerun)
        dev = original.data.get("device") or fixed.data.get("device") or device
        rows = verdicts(found, applied, original, fixed, predicted, dev)
        fragmented = [f for f in frag if f["fragmented"]]
        for row in rows:
            if fragmented and "did not complete" in row["note"]:
                row["note"] += "; " + "; ".join(f"{f['run']} run: {f['note']}" for f in fragmented)
        report = {
            "script": str(script),
            "device": dev,
            "device_info": original.data.get("device_info") or fixed.data.get("device_info"),
            "steps": steps,
            "seconds": round(time.perf_counter() - started, 1),
            "launch": _launch_json(target, launch),
            "runs": {"original": _run_json(original, predicted[0]), "fixed": _run_json(fixed, predicted[1])},
            "diagnostics": rows,
            "fixes_applied": [_fix_line(d, script) for d in applied],
            "fragmentation": frag,
            "reruns": {f"{label}_expandable": _run_json(run, None) for label, run in reruns.items()},
        }
        notes = list(dict.fromkeys((original.data.get("notes") or []) + (fixed.data.get("notes") or [])))
        if notes:
            report["notes"] = notes
        if any(has_phases(est, run) for est, run in zip(predicted, (original, fixed))):
            report["phases"] = {
                label: phase_rows(run.data.get("phase_peaks") or {},
                                  None if est is None else predicted_phases(
                                      est.plan, dev, any("use_vllm" in n for n in run.data.get("notes") or [])),
                                  run.data.get("eval_error"))
                for label, est, run in zip(("original", "fixed"), predicted, (original, fixed))}
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _fix_line(d: Diagnostic, script: Path) -> str:
    from trainlint.discovery import display

    where = f"line {d.span.line}" if d.filename == display(script) else f"{d.filename}:{d.span.line}"
    return f"{d.code} {where}: {d.fix.message}"


def _launch_json(target: Target, launch: LaunchFixes) -> dict:
    return {"launcher": str(target.launcher) if target.launcher else None,
            "config": str(target.config) if target.config else None,
            "cwd": str(target.cwd or target.script.parent), "args": list(target.args),
            "fixed_args": list(launch.args), "fixed_files": sorted(launch.texts), "notes": launch.notes}


def _run_json(run: RunResult, est) -> dict:
    d = dict(run.data)
    d["timed_out"] = run.timed_out
    if run.timed_out or not run.ok:
        d.setdefault("error", {"type": "Timeout" if run.timed_out else "Error", "message": run.stderr_tail})
    d["predicted"] = None if est is None else {"consumers": est.consumers, "peak": est.peak}
    return d


def text_report(r: dict) -> str:
    lines = [f"{r['script']}: {r['steps']} steps each, on {r['device']} ({r['seconds']} s)"]
    info = r.get("device_info") or {}
    versions = ", ".join(f"{k} {v}" for k, v in (("driver", info.get("driver")), ("CUDA", info.get("torch_cuda")),
                                                 ("torch", info.get("torch")), ("Python", info.get("python"))) if v)
    if versions:
        lines.append(f"  {info.get('name') or info.get('kind')}: {versions}")
    launch = r.get("launch") or {}
    if launch.get("launcher"):
        lines.append(f"  launched by {launch['launcher']}" + (f" (passing {launch['config']})" if launch.get("config")
                                                               else "") + f", from {launch['cwd']}")
    if launch.get("fixed_args") != launch.get("args"):
        lines.append(f"  fixed run's arguments: {' '.join(launch['fixed_args'])}")
    for note in launch.get("notes") or ():
        lines.append(f"  launch fix not applied: {note}")
    for fix in r["fixes_applied"]:
        lines.append(f"  fix applied: {fix}")
    lines.append("")
    lines.append(f"  {'run':<10} {'predicted peak':>15} {'measured peak':>15} {'step 1':>10} {'steady':>10}  notes")
    for label in ("original", "fixed"):
        run = r["runs"][label]
        pred = run.get("predicted")
        err = run.get("error")
        note = ""
        if err:
            note = f"{err.get('type')}: {str(err.get('message'))[:80]}"
        if run.get("adapter_grad_ok") is not None:
            note = (note + "; " if note else "") + f"adapters got gradients: {run['adapter_grad_ok']}"
        if run.get("samples_per_step"):
            note = (note + "; " if note else "") + f"samples/step {run['samples_per_step']}"
        lines.append(f"  {label:<10} {fmt_bytes(pred['peak']) if pred else '-':>15} "
                     f"{fmt_bytes(run['peak_allocated']) if run.get('peak_allocated') else '-':>15} "
                     f"{fmt_bytes(run['step1_peak']) if run.get('step1_peak') else '-':>10} "
                     f"{fmt_bytes(run['steady_peak']) if run.get('steady_peak') else '-':>10}  {note}")
        if err and err.get("traceback_tail"):
            tail = "\n".join("      " + x for x in str(err["traceback_tail"]).splitlines()[-6:])
            lines.append(f"    {label} run failed:\n{tail}")
    for note in r.get("notes") or ():
        lines.append(f"  note: {note}")
    lines += phase_lines(r.get("phases") or {}, () if r["fixes_applied"] else ("fixed",))  # unfixed: the same run
    lines.append("")
    for d in r["diagnostics"]:
        pred = fmt_bytes(d["predicted_saving"]) if d["predicted_saving"] else "-"
        meas = fmt_bytes(d["measured_saving"]) if d["measured_saving"] is not None else "-"
        where = f"{d['file']}:{d['line']}" if d.get("file") else f"line {d['line']}"
        lines.append(f"  {d['code']} {where}: {d['verdict'].upper()}  (predicted saving {pred}, "
                     f"measured {meas}) {d['note']}")
    if not r["diagnostics"]:
        lines.append("  nothing flagged: nothing to verify")
    for f in r.get("fragmentation") or ():
        lines.append(f"  {f['run']} run: reserved {fmt_bytes(f['reserved_at_peak'])} vs allocated "
                     f"{fmt_bytes(f['allocated_at_peak'])} at the peak: {f['note']}")
    return "\n".join(lines) + "\n"
