#!/usr/bin/env python3
"""Speed benchmark: trainlint vs. two peer LibCST linters (Fixit, TorchFix).

Standard library only. Usage:

    python3 bench/bench_check.py --setup          # make bench/.venvs/{fixit,torchfix}, then bench
    python3 bench/bench_check.py                  # bench on the default corpus
    python3 bench/bench_check.py --repeat 5 --corpus PATH [--corpus PATH ...] [--json]

Every tool lints the same copy of the corpus under bench/.work/corpus/, whose root
holds a pyproject.toml that marks it as a project root, so no tool reads a config
or a .gitignore from above it. Each tool runs --repeat timed times on the corpus (the
first run's output is kept in bench/.work/logs/ for inspection, the others' discarded),
then max(--repeat, 5) times on one file after one untimed warm-up run. Wall time is
time.perf_counter() around subprocess.run().
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
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


def _copy_py_tree(src: Path, dst: Path) -> None:
    if src.is_file():
        dst.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / src.name)
        return

    def ignore(d, names):
        return [n for n in names
                if n == "__pycache__" or (not n.endswith(".py") and not os.path.isdir(os.path.join(d, n)))]

    shutil.copytree(src, dst, ignore=ignore)


def build_corpus(paths: list[str] | None) -> list[tuple[str, Path]]:
    """Copy sources into bench/.work/corpus/<name>/; return [(name, source)]."""
    sources: list[tuple[str, Path]] = []
    if paths:
        for p in paths:
            sp = Path(p).expanduser().resolve()
            if not sp.exists():
                raise SystemExit(f"error: corpus path not found: {p}")
            sources.append((sp.stem if sp.is_file() else sp.name, sp))
    else:
        if not MAIN_PY.exists():
            raise SystemExit(f"error: {MAIN_PY} not found; cannot locate trl/peft/accelerate")
        rc, out, err = run_capture(
            [str(MAIN_PY), "-c", 'import sysconfig;print(sysconfig.get_paths()["purelib"])'],
            timeout=60,
        )
        if rc != 0:
            raise SystemExit(f"error: cannot ask {MAIN_PY} for site-packages:\n{tail(err)}")
        purelib = Path(out.strip())
        for pkg in DEFAULT_PKGS:
            if (purelib / pkg).is_dir():
                sources.append((pkg, purelib / pkg))
            else:
                log(f"[corpus] {pkg} not installed in {purelib}; skipped")
        if not sources:
            raise SystemExit("error: none of trl, peft, accelerate found")
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    CORPUS.mkdir(parents=True)
    seen: dict[str, int] = {}
    out_sources = []
    for name, src in sources:
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}_{seen[name]}"
        _copy_py_tree(src, CORPUS / name)
        out_sources.append((name, src))
    (CORPUS / "pyproject.toml").write_text(MARKER_PYPROJECT)
    return out_sources


def py_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def pick_one_file(files: list[Path]) -> Path:
    """A typical training script: examples/*.py if any, else trl's SFT script, else
    the corpus file of median size."""
    ex = sorted((REPO / "examples").glob("*.py"))
    if ex:
        train = [p for p in ex if "train" in p.name.lower()]
        return (train or ex)[0]
    for cand in ("trl/scripts/sft.py", "trl/scripts/dpo.py"):
        if (CORPUS / cand).is_file():
            return CORPUS / cand
    by_size = sorted(files, key=lambda p: p.stat().st_size)
    return by_size[len(by_size) // 2]


def stage_one_file(src: Path) -> Path:
    if ONEFILE.exists():
        shutil.rmtree(ONEFILE)
    ONEFILE.mkdir(parents=True)
    dst = ONEFILE / src.name
    shutil.copy2(src, dst)
    (ONEFILE / "pyproject.toml").write_text(MARKER_PYPROJECT)
    return dst


# --------------------------------------------------------------------------- tools


def tool_specs(corpus: Path, one: Path) -> list[dict]:
    """Each spec: name, python, base argv builder, optional flags (droppable)."""
    tl_exe = REPO / ".venv" / "bin" / "trainlint"
    specs = [
        {
            "name": "trainlint",
            "python": MAIN_PY,
            "dist": "trainlint",
            # python -m keeps the import path the same as the console script's
            "corpus_cmd": [str(MAIN_PY), "-m", "trainlint", "check",
                           "--exit-zero", "--quiet", "--no-cache", str(corpus)],
            "one_cmd": ([str(tl_exe)] if tl_exe.exists() else [str(MAIN_PY), "-m", "trainlint"])
                       + ["check", "--no-cache", str(one)],
            "version_cmd": [str(MAIN_PY), "-m", "trainlint", "--version"],
            "droppable": ["--no-cache", "--exit-zero", "--quiet"],
            "caches": True,
        },
    ]
    for name, (_req, dist) in PEERS.items():
        bindir = VENVS / name / "bin"
        exe = str(bindir / name)
        if name == "fixit":
            corpus_cmd, one_cmd = [exe, "lint", str(corpus)], [exe, "lint", str(one)]
        else:
            corpus_cmd, one_cmd = [exe, str(corpus)], [exe, str(one)]
        specs.append({
            "name": name, "python": bindir / "python", "dist": dist,
            "corpus_cmd": corpus_cmd, "one_cmd": one_cmd,
            "version_cmd": [exe, "--version"], "droppable": [], "caches": False,
        })
    return specs


def probe(spec: dict, env: dict) -> str | None:
    """Return None if the tool is runnable, else the reason it is not."""
    if not Path(spec["python"]).exists():
        if spec["name"] == "trainlint":
            return f"{spec['python']} not found"
        return f"not set up (no {VENVS / spec['name']}; run with --setup)"
    rc, out, err = run_capture(spec["version_cmd"], timeout=120, cwd=WORK, env=env)
    if rc != 0:
        return f"`{shlex.join(spec['version_cmd'])}` failed (rc={rc}):\n{tail(err or out)}"
    spec["version"] = (out.strip() or err.strip()).splitlines()[0] if (out or err).strip() else "?"
    code = ("import importlib.metadata as m, sys, platform\n"
            "def v(n):\n"
            "    try: return m.version(n)\n"
            "    except Exception: return '?'\n"
            f"print(v({spec['dist']!r}), v('libcst'), platform.python_version())")
    rc, out, _ = run_capture([str(spec["python"]), "-c", code], timeout=120, env=env)
    parts = out.split() if rc == 0 else []
    spec["dist_version"], spec["libcst"], spec["pyver"] = (parts + ["?"] * 3)[:3]
    return None


def clear_caches() -> None:
    for base in (WORK, CORPUS, ONEFILE):
        for d in base.rglob(".trainlint_cache") if base.exists() else ():
            shutil.rmtree(d, ignore_errors=True)


def _run_once(cmd, env, timeout, cwd, stem=None):
    """One run; returns (seconds, rc, stdout, stderr). Output goes to logs/<stem>.*
    when stem is given (read back afterwards), else to /dev/null."""
    if stem is None:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           cwd=cwd, env=env, timeout=timeout)
        return time.perf_counter() - t0, p.returncode, "", ""
    LOGS.mkdir(parents=True, exist_ok=True)
    fo, fe = LOGS / f"{stem}.out", LOGS / f"{stem}.err"
    with open(fo, "wb") as o, open(fe, "wb") as e:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=o, stderr=e, cwd=cwd, env=env, timeout=timeout)
        dt = time.perf_counter() - t0
    return (dt, p.returncode, fo.read_text(errors="replace"), fe.read_text(errors="replace"))


def measure(spec: dict, key: str, reps: int, warm: bool, env: dict, timeout: int) -> dict:
    """Run spec[key] reps times (timed), plus one untimed warm-up first if warm.
    The first run's output is kept in logs/; the others' is discarded. An optional
    flag the tool rejects (exit 2, "no such option") is dropped and the run redone."""
    cmd = list(spec[key])
    stem = f"{spec['name']}.{key.split('_')[0]}"
    cwd = CORPUS if key == "corpus_cmd" else ONEFILE
    times: list[float] = []
    first = None
    try:
        while True:
            if spec["caches"]:
                clear_caches()
            dt, rc, out, err = _run_once(cmd, env, timeout, cwd, stem)
            m = re.search(r"no such option:?\s*'?(--[\w-]+)", err + out, re.I)
            if rc == 2 and m and m.group(1) in spec["droppable"] and m.group(1) in cmd:
                log(f"  {spec['name']}: {m.group(1)} rejected; retrying without it")
                cmd.remove(m.group(1))
                continue
            break
        spec[key] = cmd
        first = {"rc": rc, "stdout": out, "stderr": err,
                 "tracebacks": (out + err).count("Traceback (most recent call last)")}
        if not warm:
            times.append(dt)
        bad = looks_failed(spec, first)
        if bad:
            return {"first": first, "error": bad}
        while len(times) < reps:
            if spec["caches"]:
                clear_caches()
            times.append(_run_once(cmd, env, timeout, cwd)[0])
    except subprocess.TimeoutExpired:
        return {"first": first, "error": f"timed out after {timeout}s"}
    except OSError as e:
        return {"first": first, "error": f"{type(e).__name__}: {e}"}
    return {"first": first, "times": times}


CHECKED_RE = re.compile(r"(\d+) files? checked|Finished checking (\d+) files?")


def files_checked(spec: dict, first: dict, env: dict, timeout: int) -> int | None:
    """How many files the tool says it checked (its own summary line). For a command
    run with --quiet (no summary), one extra untimed run without --quiet asks."""
    text = first["stdout"] + first["stderr"]
    if "--quiet" in spec["corpus_cmd"]:
        cmd = [a for a in spec["corpus_cmd"] if a != "--quiet"]
        rc, out, err = run_capture(cmd, timeout=timeout, cwd=CORPUS, env=env)
        text = out + err
    counts = [int(a or b) for a, b in CHECKED_RE.findall(text)]
    return counts[-1] if counts else None


def looks_failed(spec: dict, w: dict) -> str | None:
    """A warm-up that says the tool did not run at all (not: found lint errors)."""
    if w["rc"] is None:
        return w["stderr"]
    if spec["name"] == "trainlint" and w["rc"] not in (0, 1):
        return f"exit code {w['rc']}:\n{tail(w['stderr'] or w['stdout'])}"
    if w["rc"] not in (0, 1) and w["tracebacks"]:
        return f"exit code {w['rc']} with a traceback:\n{tail(w['stderr'])}"
    return None


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


def fmt_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("| " + " | ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                                       for i, c in enumerate(r)) + " |")
        if j == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


def main(argv=None) -> int:
    global _out
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", metavar="PATH",
                    help="directory or .py file to lint (repeatable); default: the "
                         "trl, peft and accelerate packages of /work/main/.venv")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per tool (default 3)")
    ap.add_argument("--setup", action="store_true",
                    help="create/upgrade bench/.venvs/{fixit,torchfix} first")
    ap.add_argument("--tools", default="trainlint,fixit,torchfix",
                    help="comma-separated subset (default: all three)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run (default 900)")
    ap.add_argument("--json", nargs="?", const="-", metavar="FILE",
                    help="results as JSON: bare --json prints only JSON on stdout (progress "
                         "to stderr); --json FILE writes it to FILE and prints the tables too")
    args = ap.parse_args(argv)
    if args.json == "-":
        _out = sys.stderr
    n = max(1, args.repeat)
    wanted = [t.strip() for t in args.tools.split(",") if t.strip()]

    log(f"machine: {machine()}")
    log(f"date:    {time.strftime('%Y-%m-%d %H:%M %Z')}")
    load0 = loadavg()
    log(f"load:    {load0} (1/5/15 min; anything else running skews wall times)")
    if args.setup:
        for name in PEERS:
            if name in wanted:
                setup_peer(name)

    sources = build_corpus(args.corpus)
    files = py_files(CORPUS)
    per_pkg = {name: len(py_files(CORPUS / name)) for name, _ in sources}
    torch_files = sum(1 for f in files if "torch" in f.read_text(errors="replace"))
    log(f"corpus:  {CORPUS}  ({len(files)} .py files: "
        + ", ".join(f"{k} {v}" for k, v in per_pkg.items()) + ")")
    for name, src in sources:
        log(f"         {name} <- {src}")
    one_src = pick_one_file(files)
    one = stage_one_file(one_src)
    log(f"one-file: {one}  (copy of {one_src})")

    env = clean_env()
    specs = [s for s in tool_specs(CORPUS, one) if s["name"] in wanted]
    results = []
    for spec in specs:
        res = {"tool": spec["name"]}
        results.append(res)
        log()
        why = probe(spec, env)
        if why:
            log(f"[{spec['name']}] skipped: {why}")
            res["skipped"] = why
            continue
        res.update(version=spec["version"], libcst=spec["libcst"], python=spec["pyver"])
        log(f"[{spec['name']}] version {spec['version']}, libcst {spec['libcst']}, "
            f"python {spec['pyver']}")
        for key, label, reps, warm in (("corpus_cmd", "corpus", n, False),
                                       ("one_cmd", "one-file", max(n, 5), True)):
            log(f"  {label:8} $ {shlex.join(spec[key])}")
            before = list(spec[key])
            r = measure(spec, key, reps, warm, env, args.timeout)
            if spec[key] != before:
                log(f"  {label:8} $ {shlex.join(spec[key])}   (as run)")
            f = r["first"]
            if f:
                log(f"  {label:8}   first run: rc={f['rc']}, stdout {len(f['stdout'].splitlines())}"
                    f" lines, tracebacks {f['tracebacks']}"
                    f" (output: {LOGS}/{spec['name']}.{key.split('_')[0]}.out/.err)")
            if "error" in r:
                log(f"  {label:8}   not timed: {r['error']}")
                res[label] = {"cmd": spec[key], "error": r["error"]}
                continue
            t = r["times"]
            res[label] = {"cmd": spec[key], "rc": f["rc"], "times": t,
                          "best": min(t), "median": statistics.median(t)}
            if label == "corpus":
                res[label]["checked"] = files_checked(spec, f, env, args.timeout)
                log(f"  {label:8}   files checked (tool's own count): {res[label]['checked']}")
            log(f"  {label:8}   runs: " + ", ".join(f"{x:.3f}" for x in t) + " s")

    # ---- tables
    fx = next((r for r in results if r["tool"] == "fixit" and "corpus" in r
               and "median" in r["corpus"]), None)
    fx_med = fx["corpus"]["median"] if fx else None
    fx_one = fx["one-file"]["median"] if fx and "median" in fx.get("one-file", {}) else None

    def rows_for(label: str, nfiles: int, ref: float | None) -> list[list[str]]:
        rows = [["tool", "files", "checked", "best wall s", "median wall s", "files/s",
                 "x Fixit (median)"]]
        for r in results:
            m = r.get(label, {})
            if "median" not in m:
                why = "skipped" if r.get("skipped") else ("failed" if "error" in m else "not run")
                rows.append([r["tool"], str(nfiles), "-", "-", "-", "-", why + " (see above)"])
                continue
            checked = m.get("checked", 1 if label == "one-file" else None)
            rows.append([r["tool"], str(nfiles), "?" if checked is None else str(checked),
                         f"{m['best']:.3f}", f"{m['median']:.3f}",
                         f"{nfiles / m['median']:.1f}",
                         f"{m['median'] / ref:.3f}" if ref else "-"])
        return rows

    report = {
        "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "corpus": str(CORPUS), "files": len(files), "files_per_package": per_pkg,
        "files_containing_torch": torch_files, "one_file": str(one_src), "repeat": n,
        "load_before": load0, "load_after": loadavg(), "results": results,
    }
    goals = []
    tl = next((r for r in results if r["tool"] == "trainlint"), None)
    if tl and fx_med and "median" in tl.get("corpus", {}):
        ratio = tl["corpus"]["median"] / fx_med
        goals.append(f"corpus: trainlint {ratio:.3f}x Fixit (goal <= 0.1x): "
                     + ("PASS" if ratio <= 0.1 else "FAIL"))
    if tl and "median" in tl.get("one-file", {}):
        s = tl["one-file"]["median"]
        goals.append(f"one-file: trainlint {s:.3f} s (goal <= 0.3 s): "
                     + ("PASS" if s <= 0.3 else "FAIL"))
    report["goals"] = goals

    if args.json == "-":
        print(json.dumps(report, indent=2))
        return 0
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    log()
    log(f"Corpus: {len(files)} .py files ("
        + ", ".join(f"{k} {v}" for k, v in per_pkg.items())
        + f"); {torch_files} of them contain 'torch'. {n} timed runs each.")
    log()
    log(fmt_table(rows_for("corpus", len(files), fx_med)))
    log()
    log(f"One file: {one_src.name} ({max(n, 5)} timed runs each)")
    log()
    log(fmt_table(rows_for("one-file", 1, fx_one)))
    log()
    log("Versions:")
    for r in results:
        if "version" in r:
            log(f"  {r['tool']:9} {r['version']:24} libcst {r['libcst']:8} python {r['python']}")
    if "torchfix" in wanted:
        log(f"Note: TorchFix only parses files whose text contains 'torch' "
            f"({torch_files} of {len(files)} here); its files/s counts all corpus files.")
    log(f"Load average before {load0}, after {loadavg()}.")
    for g in goals:
        log("Goal " + g)
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
