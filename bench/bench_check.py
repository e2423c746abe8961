#!/usr/bin/env python3
"""Speed benchmark: trainlint vs. two peer LibCST linters (Fixit, TorchFix), all figures in one run.

Standard library only. Usage:

    python3 bench/bench_check.py --setup          # make bench/.venvs/{fixit,torchfix}, then bench
    python3 bench/bench_check.py                  # everything, this checkout's trainlint
    python3 bench/bench_check.py --trainlint before=/tmp/old/src --trainlint after=src   # side by side

It prints, from one run: (1) every tool on the same files, the installed trl and trl + peft +
accelerate (copied under bench/.work/corpus/, whose pyproject.toml marks a project root), with the
ratio to Fixit; (2) one training script as pre-commit runs it, median of --one-file-runs (trainlint
uncached and cached); (3) trainlint over every installed torch / transformers / peft / trl /
accelerate file, cold (empty cache) then warm, with files/s and peak RSS. Wall time is
time.perf_counter() around the process; peak RSS is wait4's (the process and its workers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENVS = BENCH / ".venvs"
WORK = BENCH / ".work"
CORPUS = WORK / "corpus"
ONEFILE = WORK / "onefile"
LOGS = WORK / "logs"
MAIN_PY = REPO / ".venv" / "bin" / "python"
DEFAULT_PKGS = ("trl", "peft", "accelerate")
# torch is only installed if a peer turns out to need it; this version lies on local
# disk as a CPU build (pip config: find-links), so nothing CUDA is ever fetched.
TORCH_PIN = "torch==2.13.0"

PEERS = {
    # name: (pip requirement, distribution name for importlib.metadata)
    "fixit": ("fixit", "fixit"),
    "torchfix": ("torchfix", "TorchFix"),
}

MARKER_PYPROJECT = """\
# Written by bench/bench_check.py. Marks this folder as a project root so that no
# linter reads a config or a .gitignore from a folder above it (tools run with this
# folder as their working directory).
# Fixit: root = true stops its config search here; it then runs its default rules.
[tool.fixit]
root = true

# trainlint: an empty table stops its config search here (defaults, nothing excluded).
[tool.trainlint]
"""

_out = sys.stdout  # progress stream; stderr when --json owns stdout


def log(msg: str = "") -> None:
    print(msg, file=_out, flush=True)


def run_capture(cmd, timeout=600, cwd=None, env=None):
    """Run cmd, return (rc, stdout, stderr); never raises (rc None on failure)."""
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env,
            errors="replace",
        )
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout}s"
    except OSError as e:
        return None, "", f"{type(e).__name__}: {e}"


def tail(text: str, n: int = 6) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join("    " + ln for ln in lines[-n:])


def clean_env() -> dict:
    env = dict(os.environ)
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(k, None)
    env["NO_COLOR"] = "1"
    return env


# --------------------------------------------------------------------------- setup


def setup_peer(name: str) -> bool:
    req, _dist = PEERS[name]
    venv = VENVS / name
    py = venv / "bin" / "python"
    log(f"[setup] {name}: virtualenv {venv}")
    if not py.exists():
        rc, _, err = run_capture([sys.executable, "-m", "venv", str(venv)], timeout=300)
        if rc != 0:
            log(f"[setup] {name}: cannot create virtualenv:\n{tail(err)}")
            return False
    pip = [str(py), "-m", "pip"]
    # What would pip install? If the resolution pulls in torch, put the local CPU
    # build in first so pip never goes looking for another (CUDA) build.
    rc, out, err = run_capture(
        pip + ["install", "--dry-run", "--quiet", "--report", "-", "--upgrade", req],
        timeout=600,
    )
    if rc != 0:
        log(f"[setup] {name}: pip cannot resolve {req!r}:\n{tail(err)}")
        return False
    try:
        names = {i["metadata"]["name"].lower() for i in json.loads(out).get("install", [])}
    except (ValueError, KeyError, TypeError):
        names = set()
    if "torch" in names:
        log(f"[setup] {name}: {req} needs torch; installing {TORCH_PIN} (CPU build) first")
        rc, _, err = run_capture(pip + ["install", "--quiet", TORCH_PIN], timeout=900)
        if rc != 0:
            log(f"[setup] {name}: cannot install {TORCH_PIN}:\n{tail(err)}")
            return False
    rc, _, err = run_capture(pip + ["install", "--quiet", "--upgrade", req], timeout=900)
    if rc != 0:
        log(f"[setup] {name}: pip install {req} failed:\n{tail(err)}")
        return False
    rc, out, _ = run_capture(pip + ["show", "torch"], timeout=120)
    if rc == 0:
        ver = next((ln.split(":", 1)[1].strip() for ln in out.splitlines()
                    if ln.startswith("Version:")), "?")
        cuda = "+cu" in ver or bool(re.search(r"^nvidia-", run_capture(
            pip + ["list", "--format=freeze"], timeout=120)[1], re.M | re.I))
        log(f"[setup] {name}: torch {ver} present" + ("  (WARNING: CUDA build)" if cuda else ""))
    else:
        log(f"[setup] {name}: torch not installed (not needed)")
    log(f"[setup] {name}: ok")
    return True


# -------------------------------------------------------------------------- corpus


def purelib(python: Path) -> Path:
    rc, out, err = run_capture([str(python), "-c", 'import sysconfig;print(sysconfig.get_paths()["purelib"])'],
                               timeout=60)
    if rc != 0:
        raise SystemExit(f"error: cannot ask {python} for site-packages:\n{tail(err)}")
    return Path(out.strip())


def _copy_py_tree(src: Path, dst: Path) -> None:
    def ignore(d, names):
        return [n for n in names
                if n == "__pycache__" or (not n.endswith(".py") and not os.path.isdir(os.path.join(d, n)))]

    shutil.copytree(src, dst, ignore=ignore)


def build_corpus(site: Path) -> dict[str, int]:
    """Copy trl, peft and accelerate into bench/.work/corpus/<pkg>/; return files per package."""
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    CORPUS.mkdir(parents=True)
    counts = {}
    for pkg in DEFAULT_PKGS:
        if not (site / pkg).is_dir():
            raise SystemExit(f"error: {pkg} is not installed in {site}")
        _copy_py_tree(site / pkg, CORPUS / pkg)
        counts[pkg] = len(py_files(CORPUS / pkg))
    (CORPUS / "pyproject.toml").write_text(MARKER_PYPROJECT)
    return counts


def py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def stage_one_file() -> tuple[Path, Path]:
    """A typical training script (the first of examples/*.py, preferring a name with "train"), as
    pre-commit meets it: in a git repository of its own, committed, then edited (a comment appended), so
    TL401 reads the version at HEAD from git, as it does in a real hook run."""
    ex = sorted((REPO / "examples").glob("*.py"))
    src = ([p for p in ex if "train" in p.name.lower()] or ex)[0]
    if ONEFILE.exists():
        shutil.rmtree(ONEFILE)
    ONEFILE.mkdir(parents=True)
    shutil.copy2(src, ONEFILE / src.name)
    (ONEFILE / "pyproject.toml").write_text(MARKER_PYPROJECT)
    (ONEFILE / ".gitignore").write_text(".trainlint_cache/\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "script"]):
        run_capture(git + cmd, timeout=60, cwd=ONEFILE)
    with open(ONEFILE / src.name, "a") as fh:
        fh.write("# edited\n")
    return src, ONEFILE / src.name


# --------------------------------------------------------------------------- runs


def timed(cmd: list[str], cwd: Path, env: dict, timeout: int, log_stem: str | None = None) -> dict:
    """One run: wall seconds (perf_counter around the process), its peak RSS (wait4: the largest resident
    set of the process and the worker processes it waited for), exit code, stdout line count."""
    LOGS.mkdir(parents=True, exist_ok=True)
    out = open(LOGS / f"{log_stem}.out", "wb") if log_stem else subprocess.DEVNULL
    err = open(LOGS / f"{log_stem}.err", "wb") if log_stem else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err)
        deadline = t0 + timeout
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, usage = os.wait4(p.pid, 0)
                return {"error": f"timed out after {timeout}s"}
            time.sleep(0.005)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    finally:
        for f in (out, err):
            if f is not subprocess.DEVNULL:
                f.close()
    res = {"wall": wall, "rss_mb": usage.ru_maxrss / 1024, "rc": p.returncode}
    if log_stem:
        text = (LOGS / f"{log_stem}.out").read_text(errors="replace")
        res["lines"] = len(text.splitlines())
        res["tracebacks"] = (text + (LOGS / f"{log_stem}.err").read_text(errors="replace")).count("Traceback (most")
    return res


def clear_caches(*roots: Path) -> None:
    for base in roots:
        for d in base.rglob(".trainlint_cache") if base.exists() else ():
            shutil.rmtree(d, ignore_errors=True)


class Tool:
    """A command-line linter: trainlint (one per source tree compared) or a peer."""

    def __init__(self, label: str, argv: list[str], env: dict, version: str, caches: bool) -> None:
        self.label, self.argv, self.env, self.version, self.caches = label, argv, env, version, caches

    def corpus_cmd(self, target: Path) -> list[str]:
        if self.caches:
            return self.argv + ["check", "--exit-zero", "--quiet", "--no-cache", str(target)]
        return self.argv + (["lint"] if self.label == "fixit" else []) + [str(target)]

    def one_cmd(self, target: Path, cached: bool) -> list[str]:
        if self.caches:
            return self.argv + ["check"] + ([] if cached else ["--no-cache"]) + [str(target)]
        return self.argv + (["lint"] if self.label == "fixit" else []) + [str(target)]


def trainlint_tools(python: Path, variants: list[str]) -> list[Tool]:
    tools = []
    for spec in variants:
        label, _, src = spec.partition("=")
        if not src:
            label, src = ("trainlint", spec) if spec else ("trainlint", str(REPO / "src"))
        src_path = Path(src).resolve()
        env = clean_env()
        env["PYTHONPATH"] = str(src_path)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # start-up as users have it: with cached bytecode
        rc, out, err = run_capture([str(python), "-m", "trainlint", "--version"], timeout=120, env=env)
        if rc != 0:
            raise SystemExit(f"error: trainlint from {src_path} does not start:\n{tail(err or out)}")
        head = run_capture(["git", "-C", str(src_path), "rev-parse", "--short", "HEAD"], timeout=30)[1].strip()
        tools.append(Tool(label, [str(python), "-m", "trainlint"], env,
                          f"{out.strip()} from {src_path}" + (f" (git {head})" if head else ""), True))
    return tools


def peer_tools(wanted: list[str]) -> list[Tool]:
    tools = []
    for name in PEERS:
        if name not in wanted:
            continue
        exe = VENVS / name / "bin" / name
        if not exe.exists():
            log(f"[{name}] skipped: not set up (no {exe}; run with --setup)")
            continue
        env = clean_env()
        rc, out, err = run_capture([str(exe), "--version"], timeout=120, env=env)
        if rc != 0:
            log(f"[{name}] skipped: `{exe} --version` failed:\n{tail(err or out)}")
            continue
        code = "import importlib.metadata as m, platform; print(m.version('libcst'), platform.python_version())"
        ver = run_capture([str(VENVS / name / "bin" / "python"), "-c", code], timeout=120, env=env)[1].split()
        tools.append(Tool(name, [str(exe)], env, f"{(out or err).strip().splitlines()[0]} (libcst "
                                                 f"{ver[0] if ver else '?'}, python {ver[1] if ver else '?'})", False))
    return tools


def median_of(runs: list[dict], key: str = "wall") -> float:
    return statistics.median(r[key] for r in runs)


def fmt_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("| " + " | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                                       for i, c in enumerate(r)) + " |")
        if j == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or "?"
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(Path("/proc/meminfo").read_text().split()[1])
        mem = f"{kb / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return f"{os.cpu_count()} cores, {cpu}, {mem} RAM, {platform.system()} {platform.release()}"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# ---------------------------------------------------------------------------- main


def main(argv=None) -> int:
    global _out
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=str(MAIN_PY if MAIN_PY.exists() else Path(sys.executable)),
                    help="interpreter with trainlint's dependencies (default: .venv/bin/python, else this one)")
    ap.add_argument("--trainlint", action="append", metavar="[LABEL=]SRC",
                    help="a trainlint source tree to run (PYTHONPATH=SRC); repeat to compare trees side by side "
                         "in one run (e.g. before=/tmp/old/src after=src). Default: this checkout's src/")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool and corpus (default 3)")
    ap.add_argument("--one-file-runs", type=int, default=10, help="timed one-file runs (default 10)")
    ap.add_argument("--setup", action="store_true", help="create/upgrade bench/.venvs/{fixit,torchfix} first")
    ap.add_argument("--tools", default="fixit,torchfix", help="peers to run (default: fixit,torchfix; '' for none)")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: corpus, onefile, libraries")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--json", nargs="?", const="-", metavar="FILE",
                    help="results as JSON: bare --json prints only JSON on stdout (progress to stderr); "
                         "--json FILE writes it to FILE and prints the tables too")
    args = ap.parse_args(argv)
    if args.json == "-":
        _out = sys.stderr
    python = Path(args.python)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    wanted = [t.strip() for t in args.tools.split(",") if t.strip()]
    load0 = loadavg()
    log(f"machine: {machine()}")
    log(f"date:    {time.strftime('%Y-%m-%d %H:%M %Z')}")
    log(f"load:    {load0} (1/5/15 min; anything else running skews wall times)")
    if args.setup:
        for name in PEERS:
            if name in wanted:
                setup_peer(name)
    site = purelib(python)
    tls = trainlint_tools(python, args.trainlint or [""])
    peers = peer_tools(wanted)
    for t in tls + peers:
        log(f"[{t.label}] {t.version}")
    report: dict = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M %Z"), "load_before": load0,
                    "tools": {t.label: t.version for t in tls + peers}}
    tables: list[str] = []

    # ---- 1. the same files, every tool: trl, then trl + peft + accelerate
    if "corpus" not in skip:
        counts = build_corpus(site)
        corpora = [("trl", CORPUS / "trl", counts["trl"]), ("trl+peft+accelerate", CORPUS, sum(counts.values()))]
        report["corpus"] = {"files_per_package": counts, "results": {}}
        for name, target, nfiles in corpora:
            log(f"\n[corpus] {name}: {nfiles} .py files ({target})")
            results = {}
            for tool in tls + peers:
                runs = []
                for rep in range(max(1, args.repeat)):
                    if tool.caches:
                        clear_caches(CORPUS)
                    r = timed(tool.corpus_cmd(target), CORPUS, tool.env, args.timeout,
                              f"{tool.label}.{name}" if rep == 0 else None)
                    if "error" in r:
                        log(f"  {tool.label}: {r['error']}")
                        break
                    runs.append(r)
                if runs:
                    results[tool.label] = runs
                    log(f"  {tool.label:12} " + ", ".join(f"{r['wall']:.2f}" for r in runs)
                        + f" s   (rc {runs[0]['rc']}, tracebacks {runs[0]['tracebacks']})")
            report["corpus"]["results"][name] = results
            ref = median_of(results["fixit"]) if "fixit" in results else None
            rows = [["tool", "files", "median wall s", "best wall s", "files/s", "peak RSS MB", "x Fixit"]]
            for label, runs in results.items():
                med = median_of(runs)
                rows.append([label, str(nfiles), f"{med:.2f}", f"{min(r['wall'] for r in runs):.2f}",
                             f"{nfiles / med:.1f}", f"{max(r['rss_mb'] for r in runs):.0f}",
                             f"{med / ref:.3f}" if ref else "-"])
            tables.append(f"{name} ({nfiles} files, {args.repeat} run(s) each)\n\n" + fmt_table(rows))

    # ---- 2. one file, as pre-commit runs it
    if "onefile" not in skip:
        src, one = stage_one_file()
        log(f"\n[one file] {src.name} ({len(src.read_text().splitlines())} lines), "
            f"{args.one_file_runs} timed runs after one untimed")
        rows = [["tool", "median wall s", "best wall s", "peak RSS MB"]]
        report["one_file"] = {"file": str(src), "results": {}}
        for tool in tls + peers:
            for cached in ((False, True) if tool.caches else (False,)):
                label = f"{tool.label} ({'cached' if cached else 'uncached'})" if tool.caches else tool.label
                clear_caches(ONEFILE)
                timed(tool.one_cmd(one, cached), ONEFILE, tool.env, args.timeout)  # warm-up (and fills the cache)
                runs = [timed(tool.one_cmd(one, cached), ONEFILE, tool.env, args.timeout)
                        for _ in range(max(1, args.one_file_runs))]
                report["one_file"]["results"][label] = runs
                rows.append([label, f"{median_of(runs):.3f}", f"{min(r['wall'] for r in runs):.3f}",
                             f"{max(r['rss_mb'] for r in runs):.0f}"])
                log(f"  {label:24} median {median_of(runs):.3f} s")
        tables.append(f"one file: {src.name}, median of {args.one_file_runs}\n\n" + fmt_table(rows))

    # ---- 3. every installed torch / transformers / peft / trl / accelerate file: cold, then warm
    if "libraries" not in skip:
        roots = [site / p for p in ("torch", "transformers", "peft", "trl", "accelerate") if (site / p).is_dir()]
        nfiles = sum(len(py_files(r)) for r in roots)
        log(f"\n[libraries] {nfiles} .py files of {', '.join(r.name for r in roots)} (in place)")
        rows = [["tool", "run", "wall s", "files/s", "peak RSS MB", "findings lines", "tracebacks"]]
        report["libraries"] = {"files": nfiles, "results": {}}
        work = WORK / "libraries"
        for tool in tls:
            if work.exists():
                shutil.rmtree(work)
            work.mkdir(parents=True)
            (work / "pyproject.toml").write_text(MARKER_PYPROJECT)  # the cache goes to work/.trainlint_cache
            for run in ("cold", "warm"):
                cmd = tool.argv + ["check", "--exit-zero", "--quiet", *map(str, roots)]
                r = timed(cmd, work, tool.env, args.timeout, f"{tool.label}.libraries.{run}")
                if "error" in r:
                    log(f"  {tool.label} {run}: {r['error']}")
                    break
                report["libraries"]["results"][f"{tool.label} {run}"] = r
                rows.append([tool.label, run, f"{r['wall']:.1f}", f"{nfiles / r['wall']:.0f}", f"{r['rss_mb']:.0f}",
                             str(r["lines"]), str(r["tracebacks"])])
                log(f"  {tool.label:12} {run}: {r['wall']:.1f} s, peak RSS {r['rss_mb']:.0f} MB")
        tables.append(f"all installed library files ({nfiles}), 2 runs: cold (empty cache), warm\n\n" + fmt_table(rows))

    report["load_after"] = loadavg()
    if args.json == "-":
        print(json.dumps(report, indent=2))
        return 0
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    log()
    for t in tables:
        log(t)
        log()
    for label, version in report["tools"].items():
        log(f"{label:12} {version}")
    log(f"Load average before {load0}, after {report['load_after']}.")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit:
        raise
    except Exception as e:  # never a traceback
        print(f"bench_check: error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
