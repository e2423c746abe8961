"""The command line: `trainlint check`, `trainlint rule` (click)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import click

from trainlint import __version__
from trainlint.config import ConfigError, Settings, discover, load_file, validate_code
from trainlint.discovery import MissingPath
from trainlint.discovery import discover as discover_files
from trainlint.report.names import FORMAT_NAMES


class _CodeList(click.ParamType):
    name = "codes"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        codes = tuple(c.strip().upper() for c in str(value).split(",") if c.strip())
        try:
            for code in codes:
                validate_code(code, f"--{param.name.replace('_', '-')}" if param else "codes")
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        return codes


CODES = _CodeList()


class _WithScriptArgs(click.Command):
    """`trainlint check train.py -- --per_device_train_batch_size 8`: what follows `--` is the script's own
    command line (an explicit launch), not more paths."""

    def parse_args(self, ctx, args):
        if "--" in args:
            at = args.index("--")
            ctx.meta["script_args"] = tuple(args[at + 1:])
            args = args[:at]
        return super().parse_args(ctx, args)


class _Jobs(click.ParamType):
    """A number of processes (at least 1), or `auto` (None: the runner decides)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
            return None
        try:
            number = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of processes or 'auto'", param, ctx)
        if number < 1:
            self.fail(f"{number} is not at least 1", param, ctx)
        return number


_JOBS = _Jobs()


def _framework_config(path: Path) -> bool:
    """An axolotl / LLaMA-Factory config: estimated as the run it describes (frameworks/)."""
    from trainlint.launch.framework_config import is_framework_config

    return is_framework_config(path)


def _settings(config: str | None) -> Settings:
    if config:
        return load_file(Path(config))
    return discover(Path.cwd())


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="trainlint")
def main() -> None:
    """trainlint: catch the GPU-memory mistakes in training scripts before you rent a GPU."""


@main.command(cls=_WithScriptArgs)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--select", type=CODES, default=None, help="Rule codes or prefixes to enable (replaces the configured set).")
@click.option("--ignore", type=CODES, default=None, help="Rule codes or prefixes to disable.")
@click.option("--extend-select", type=CODES, default=None, help="Rule codes or prefixes to enable in addition.")
@click.option("--output-format", type=click.Choice(list(FORMAT_NAMES)), default="text", show_default=True)
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--statistics", is_flag=True, help="Print the number of findings per rule instead of the findings.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("-v", "--verbose", is_flag=True, help="Also print, per file, the library versions and model specs assumed.")
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None,
              help="A pyproject.toml (its [tool.trainlint]) or a trainlint TOML file.")
@click.option("--force-exclude", is_flag=True, help="Apply `exclude` to paths passed explicitly too (for pre-commit).")
@click.option("--diff-base", default=None, metavar="REF",
              help="Git ref TL401 compares each file with (default HEAD; in CI e.g. origin/main).")
@click.option("--fix", "fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="With --fix or --diff, also apply unsafe fixes.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the fixes as a unified diff; write nothing (exit 1 if any).")
@click.option("--show-fixes", is_flag=True, help="With --fix, list what was fixed.")
@click.option("-j", "--jobs", type=_JOBS, default="auto", show_default=True,
              help="Worker processes, or auto: one per CPU when enough files are left to lint for it to pay off.")
@click.option("--no-cache", is_flag=True, help="Do not read or write .trainlint_cache/.")
@click.option("--no-launches", is_flag=True, help="Check scripts under their defaults only; do not look for launchers.")
@click.option("--certain-only", is_flag=True,
              help="Hide findings that rest on an assumption: a launcher's default the caller could override (an "
                   "option parser's MODEL=..., ${VAR:-x}; such findings otherwise say \"assuming ...\") or a model "
                   "geometry taken from another checkpoint's name. Config: certain-only = true.")
@click.option("--gpu", default=None, help="GPU the runs must fit (TL202, TL701): 24GB, T4, A100-80GB, H100...; "
                                          "overrides `gpu` and `gpus` in the config.")
@click.pass_context
def check(click_ctx, paths, select, ignore, extend_select, output_format, exit_zero, statistics, quiet, verbose, config,
          force_exclude, diff_base, fix, unsafe_fixes, show_diff, show_fixes, jobs, no_cache, no_launches, certain_only,
          gpu):
    """Lint training scripts for GPU-memory anti-patterns.

    A script is checked under each launch found for it in its repository (shell and Slurm launchers,
    README commands). Arguments after `--` are the script's own command line: then only that launch."""
    from trainlint.codes import enabled_codes
    from trainlint.report import render
    from trainlint.report.formats import statistics as stats_text

    try:
        settings = _settings(config)
        if diff_base:
            settings = replace(settings, diff_base=diff_base)
        if "script_args" in click_ctx.meta:
            settings = replace(settings, launch_args=click_ctx.meta["script_args"])
        if no_launches:
            settings = replace(settings, discover_launches=False)
        if certain_only:
            settings = replace(settings, certain_only=True)
        if gpu is not None:
            settings = replace(settings, gpu=_check_gpu(gpu), gpus=())
        files = discover_files(list(paths) or [Path(".")], settings, force_exclude)
        explicit = [p for p in paths if not p.is_dir()]
        if explicit and settings.discover_launches and settings.launch_args is None:
            from trainlint.launch.discover import expand_explicit

            given = {p.resolve() for p in explicit if p.exists()}
            expanded, launch_files, configs = expand_explicit([f for f in files if f.resolve() in given], settings)
            files = [f for f in files if f.resolve() not in given] + expanded
            if launch_files:
                settings = replace(settings, launch_files=launch_files, launch_configs=configs)
    except ConfigError as exc:
        click.echo(f"trainlint: error: {exc}", err=True)
        sys.exit(2)
    except MissingPath as exc:
        click.echo(f"trainlint: error: {exc}: no such file or directory", err=True)
        sys.exit(2)
    codes = enabled_codes(settings, select, ignore, extend_select)
    diagnostics = []
    fixed: list = []
    diffs: list[str] = []
    from trainlint.runner import run as run_files

    launch_fixes: dict[str, tuple[list, list[Path]]] = {}  # file -> (diagnostics, the scripts they are about)
    for result in run_files(files, settings, codes, jobs=jobs, cache=not no_cache, verbose=verbose):
        file = result.path
        fixable = [d for d in result.diagnostics if d.fix and (unsafe_fixes or d.fix.safe)]
        for d in fixable:
            target = (d.fix.file or d.filename)
            if target != result.display:  # a value written in a launcher or a config
                entry = launch_fixes.setdefault(target, ([], []))
                entry[0].append(d)
                entry[1].append(file)
        fixable = [d for d in fixable if (d.fix.file or d.filename) == result.display]
        if (fix or show_diff) and fixable:
            from trainlint.fix import plan_fixes, unified_diff, write_atomic

            outcome = plan_fixes(file, settings, codes, unsafe_fixes)
            if outcome.error:
                click.echo(f"trainlint: {result.display}: {outcome.error}", err=True)
            elif outcome.new_text is not None:
                if show_diff:
                    diffs.append(unified_diff(result.display, outcome.source.text, outcome.new_text))
                else:
                    try:
                        write_atomic(file, outcome.new_text, outcome.source)
                    except OSError as exc:
                        click.echo(f"trainlint: {result.display}: could not write the fixes ({exc}); "
                                   f"file left unchanged", err=True)
                    else:
                        fixed.extend(outcome.applied)
                        result.diagnostics = outcome.remaining
        diagnostics.extend(result.diagnostics)
        if verbose:
            for line in result.verbose:
                click.echo(f"{result.display}: {line}", err=True)
            if result.cached:
                click.echo(f"{result.display}: unchanged since the last run (from {'.trainlint_cache'})", err=True)
            elif result.skipped:
                click.echo(f"{result.display}: skipped: {result.skipped}", err=True)
    if (fix or show_diff) and launch_fixes:
        from trainlint.fix import plan_launch_fixes, unified_diff

        for target, (diags, scripts) in sorted(launch_fixes.items()):
            outcome = plan_launch_fixes(target, diags, list(dict.fromkeys(scripts)), settings, codes, write=not show_diff)
            if outcome.error:
                click.echo(f"trainlint: {target}: {outcome.error}", err=True)
            elif outcome.new_text is not None:
                if show_diff:
                    diffs.append(unified_diff(target, Path(target).read_text(encoding="utf-8"), outcome.new_text))
                else:
                    fixed.extend(outcome.applied)
                    diagnostics = [d for d in diagnostics if d not in outcome.applied]
    diagnostics.sort(key=lambda d: d.sort_key)
    if show_diff:
        if diffs:
            click.echo("".join(diffs), nl=False)
            click.echo(f"Would fix {sum(d.count(chr(10) + '@@') + d.startswith('@@') for d in diffs)} hunk(s) in "
                       f"{len(diffs)} file(s).", err=True)
        sys.exit(1 if diffs else 0)
    if fixed and (show_fixes or not quiet):
        # machine formats own stdout; the list of fixes goes to stderr then
        to_err = not show_fixes or output_format not in ("text", "concise", "full")
        click.echo(f"Fixed {len(fixed)} error{'s' if len(fixed) != 1 else ''}:", err=to_err)
        if show_fixes:
            for d in sorted(fixed, key=lambda d: d.sort_key):
                click.echo(f"- {d.location}: {d.code} {d.fix.message}", err=to_err)
    if statistics:
        if diagnostics:
            click.echo(stats_text(diagnostics))
    else:
        out = render(output_format, diagnostics, len(files), quiet)
        if out:
            click.echo(out)
        if output_format in ("text", "concise", "full") and not quiet and not fix:
            safe = sum(1 for d in diagnostics if d.fix and d.fix.safe)
            hidden = sum(1 for d in diagnostics if d.fix and not d.fix.safe)
            if safe or hidden:
                line = f"[*] {safe} fixable with the `--fix` option" if safe else "No fixes available"
                if hidden:
                    line += f" ({hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the " \
                            f"`--unsafe-fixes` option)"
                click.echo(line + ".")
    sys.exit(1 if diagnostics and not exit_zero else 0)


def _check_gpu(text: str) -> str:
    from trainlint.knowledge.gpus import parse_gpu

    try:
        parse_gpu(text)
    except ValueError as exc:
        raise ConfigError(f"--gpu: {exc}") from None
    return text


@main.command("rule", short_help="Print a rule's page (`trainlint rule TL101`), or list every rule.")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="List every rule: code, name, consumer, what to do, fix.")
def rule_cmd(code, show_all):
    """Print a rule's documentation page, for example `trainlint rule TL101`; `--all` lists every rule."""
    from trainlint.pages import page
    from trainlint.rules import META_RULES, REGISTRY

    declared = {**META_RULES, **REGISTRY}
    if show_all or not code:
        for c, r in sorted(declared.items()):
            click.echo(f"{c}\t{r.name}\t{r.consumer}: {r.fix_hint} (fix: {r.fix})")
        return
    text = page(code)
    if text is None:
        known = ", ".join(sorted(declared))
        click.echo(f"trainlint: error: no rule {code!r} (known: {known})", err=True)
        sys.exit(2)
    click.echo(text.rstrip())


@main.command("server")
@click.option("--stdio", is_flag=True, help="Talk over stdin/stdout (the default and only transport).")
def server_cmd(stdio):
    """Run the language server (LSP over stdio) for editors: diagnostics, fixes as code actions, rule pages on hover.

    Needs the `lsp` extra: pip install 'trainlint[lsp]'."""
    try:
        from trainlint.server.app import main as serve
    except ImportError as exc:
        click.echo(f"trainlint: error: the server needs the lsp extra (pip install 'trainlint[lsp]'): {exc}", err=True)
        sys.exit(2)
    serve()


@main.command(cls=_WithScriptArgs)
@click.argument("script", type=click.Path(path_type=Path))
@click.option("--gpu", default=None, help="GPU to judge against: 24GB (read as GiB), T4, L4, A10G, RTX4090, A100-80GB, "
                                          "H100, H200, B200, MI300X...; the exit code is then the verdict.")
@click.option("--max-batch", is_flag=True, help="Print the largest per-device micro-batch that fits the GPU and the "
                                                "gradient_accumulation_steps that keeps the effective batch.")
@click.option("--batch", type=click.IntRange(min=1), default=None, help="Per-device batch, if the script leaves it to the command line.")
@click.option("--seq", type=click.IntRange(min=1), default=None, help="Sequence length, if the script leaves it open.")
@click.option("--world-size", type=click.IntRange(min=1), default=None, help="GPUs that shard the model states (ZeRO/FSDP).")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write to this file instead of stdout.")
@click.option("--config", "config", type=click.Path(dir_okay=False), default=None)
@click.pass_context
def estimate(click_ctx, script, gpu, max_batch, batch, seq, world_size, fmt, output, config):
    """Where the memory goes, per consumer, for SCRIPT's model and config, before you rent a GPU.

    SCRIPT may be a launcher (`scripts/train.sh`) or a config a launcher passes (`recipe.yaml`): the script
    they run is estimated under that launch. Arguments after `--` are the script's own command line.

    \b
    Exit codes, with --gpu (so `trainlint estimate train.py --gpu L4 && accelerate launch train.py`):
      0  the run fits the GPU
      1  it does not fit
      2  cannot say (model, batch or sequence length unknown), or a usage error
    With --max-batch: 0 when a micro-batch of at least 1 fits, 1 when none does, 2 when it cannot say.
    Without either: 0 when an estimate was printed (a GPU from the config or the launch adds a verdict,
    not an exit code), 2 on an error."""
    from trainlint.knowledge.gpus import parse_gpu
    from trainlint.lint import enabled_codes, lint_file
    from trainlint.memory.estimate import estimate as run_estimate
    from trainlint.planning import Overrides, PlanError, plan_for
    from trainlint.report.estimate import FORMATS as EST_FORMATS
    from trainlint.report.estimate import Report

    def fail(message: str) -> None:
        click.echo(f"trainlint: error: {message}", err=True)
        sys.exit(2)

    try:
        settings = _settings(config)
        chosen_gpu = parse_gpu(gpu or settings.gpu) if (gpu or settings.gpu) else None
    except (ConfigError, ValueError) as exc:
        fail(str(exc))
    if not script.exists():
        fail(f"{script}: no such file or directory")
    if "script_args" in click_ctx.meta:
        settings = replace(settings, launch_args=click_ctx.meta["script_args"])
    elif script.suffix not in (".py", ".ipynb") and not _framework_config(script):
        from trainlint.launch.discover import expand_explicit

        targets, launch_files, configs = expand_explicit([script], settings)
        scripts = [t for t in targets if t.suffix in (".py", ".ipynb")]
        if not scripts:
            fail(f"{script}: launches no Python script trainlint can find")
        script = scripts[0]
        settings = replace(settings, launch_files=launch_files, launch_configs=configs)
    if gpu is None and settings.gpus:
        from trainlint.rules.fit import gpu_for_path

        chosen_gpu = gpu_for_path(script, settings)  # `gpus = { "jobs/small/**" = "24GB" }`, as check reads it
    result = lint_file(script, settings, enabled_codes(settings, select=("TL101",)))
    if result.context is None:
        reason = result.diagnostics[0].message if result.diagnostics else (result.skipped or "nothing to read")
        fail(f"{result.display}: {reason}")
    launch = result.context.launch
    gpu_note = []
    if chosen_gpu is None and not settings.gpus:  # no --gpu, no setting: the GPU the launch requests (launch/gpu.py)
        requested, _why = result.context.launch_gpu
        if requested is not None:
            chosen_gpu = (requested.name, requested.capacity)
            gpu_note = [f"GPU {requested.name}: requested at {requested.span.file}:{requested.span.line} "
                        f"({requested.option})"]
    if max_batch and chosen_gpu is None:
        fail("--max-batch needs a GPU: pass --gpu (e.g. --gpu RTX4090 or --gpu 24GB)")
    if world_size is None and launch.world_size is not None and launch.world_size.known:
        world_size = launch.world_size.value
    try:
        plan, model, notes, unknown = plan_for(result.context, Overrides(batch, seq, world_size))
    except PlanError as exc:
        fail(f"{result.display}: {exc}")
    spec = result.context.spec(model)
    source = spec.source.split(" (")[0]  # the full citation is in models.json and --verbose
    read = [] if launch.label == "defaults" else [f"launch {launch.label}: " + ", ".join(
        f"{k}={v.value!r}" + (f" ({v.origin.file}:{v.origin.line})" if v.origin and v.origin.file else "")
        for k, v in launch.bindings if v.known) or f"launch {launch.label}: no values read"]
    if len(result.contexts) > 1:
        read.append(f"{len(result.contexts)} launches found; estimated under the first ({launch.label})")
    g = plan.geometry
    experts = (f", {g.moe_experts} experts, top-{g.moe_top_k}" + (
        " (transformers runs every expert on every token)" if g.moe_dense_train else "") + (
        f", {spec.moe_parameters[1] / 1e9:.2f} B per token" if spec.moe_parameters else "")) if g.moe_experts else ""
    model_line = f"{spec.id} ({g.params / 1e9:.2f} B parameters{experts}; {source})"
    largest = None
    if max_batch:
        largest = _largest_batch(result, Overrides(batch, seq, world_size), unknown, chosen_gpu, model_line)
    report = Report(result.display, model_line, run_estimate(plan), chosen_gpu, tuple(read + gpu_note + notes),
                    tuple(unknown), largest)
    out = EST_FORMATS[fmt](report)
    if output:
        output.write_text(out, encoding="utf-8")
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(out, nl=False)
    if max_batch:
        sys.exit(2 if isinstance(largest, str) else 0 if largest.batch else 1)
    sys.exit({True: 0, False: 1, None: 2}[report.fits] if gpu is not None else 0)


def _largest_batch(result, overrides, unknown: list[str], gpu: tuple[str, int], model_line: str):
    """--max-batch: the run re-planned (planning.plan_for, as --batch does) and re-estimated at each candidate
    micro-batch, judged as the verdict is (Report.fits); a MaxBatch, or why there is none."""
    from trainlint.memory.estimate import estimate as run_estimate
    from trainlint.memory.max_batch import MaxBatch, largest_batch
    from trainlint.planning import plan_for
    from trainlint.report.estimate import Report

    shape_unknown = [u for u in unknown if u != "batch"]
    if shape_unknown:
        return f"{', '.join(shape_unknown)} unknown (pass --seq)"

    def fits(candidate: int) -> bool:
        plan = plan_for(result.context, replace(overrides, batch=candidate))[0]
        return Report(result.display, model_line, run_estimate(plan), gpu, (), ()).fits

    found, at_limit = largest_batch(fits)
    micro = overrides.batch or (result.context.batch.value if result.context.batch.known else None)
    steps = result.context.accumulation
    return MaxBatch(found, at_limit, micro * steps.value if micro and steps.known else None)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path(path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--steps", type=click.IntRange(min=1), default=3, show_default=True, help="Optimizer steps per run.")
@click.option("--device", type=click.Choice(["auto", "cuda", "cpu"]), default="auto", show_default=True)
@click.option("--codes", type=CODES, default=None, help="Only these findings (e.g. TL101,TL201).")
@click.option("--launcher", default=None, help='Run under a launcher, e.g. "torchrun --nproc-per-node 8".')
@click.option("--timeout", type=click.FloatRange(min=1), default=600, show_default=True, help="Seconds per run.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--online", is_flag=True, help="Allow the Hugging Face hub (default: HF_HUB_OFFLINE=1).")
@click.option("--simulate", is_flag=True, help="No GPU needed: full-size architecture under FakeTensorMode.")
def verify(script, script_args, steps, device, codes, launcher, timeout, fmt, online, simulate):
    """Run SCRIPT for a few real steps, as written and with trainlint's fixes, and show predicted vs measured.

    Arguments after SCRIPT (or after `--`) are passed to the script. SCRIPT may be a launcher, or a recipe / JSON
    args file a launcher passes: the script it runs is run with the launch's arguments, from the launch's folder,
    in one process; fixes to values the launch writes are applied to temporary copies for the fixed run."""
    from trainlint.verify.run import VerifyError, require_verify_extra, text_report
    from trainlint.verify.run import verify as run_verify
    from trainlint.verify.simulate import SimulationUnsupported
    from trainlint.verify.target import resolve

    try:
        settings = _settings(None)
        require_verify_extra()
        target = resolve(Path(script), tuple(script_args), settings)
        if simulate:
            from trainlint.verify.simulate import simulate_script

            report = simulate_script(target.script, target.settings, codes)
        else:
            report = run_verify(target, steps=steps, device=device, codes=codes or (), launcher=launcher,
                                timeout=timeout, online=online)
    except VerifyError as exc:
        click.echo(f"trainlint: error: {exc}", err=True)
        sys.exit(2)
    except SimulationUnsupported as exc:  # what the simulation cannot build (an architecture, LoRA under RL)
        click.echo(f"trainlint: error: cannot simulate {script}: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("trainlint: interrupted; the runs were stopped", err=True)
        sys.exit(130)
    if simulate:
        from trainlint.verify.simulate import simulation_text

        click.echo(json.dumps(report, indent=2) if fmt == "json" else simulation_text(report), nl=fmt == "json")
        return
    click.echo(json.dumps(report, indent=2) if fmt == "json" else text_report(report), nl=fmt == "json")
    failed = [label for label, run in report["runs"].items() if run.get("error") or run.get("timed_out")]
    sys.exit(1 if failed and not any(d["verdict"] == "confirmed" for d in report["diagnostics"]) else 0)
