"""Issue 10's budget: one training script checked as pre-commit checks it, in a repository whose launchers
run it (tests/fixtures/launch/layouts/fastchat_lora: a parameterised LoRA script, two launchers, a DeepSpeed
config). Each timed run first edits the script (a new comment), so its own cache record misses, as after an
edit; the launchers are unchanged. Prints the median and best wall time of N runs for:

  edited script, launches     the pre-commit case the budget (0.3 s) is for
  edited script, --no-launches the same without the launch layer
  unchanged script (cached)   a re-run with nothing changed
  edited script, no cache     --no-cache: the launchers are lexed again too

    python bench/one_file_launches.py [--runs 10] [--src OTHER/src]   # --src: another checkout's trainlint

trainlint runs with bytecode caching on (PYTHONDONTWRITEBYTECODE dropped), as installed copies have it; before
2026-12-02 this script kept the variable when the caller had it set, and its figures then included compiling
every module from source (0.43 s where the same run with bytecode takes 0.33 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAYOUT = HERE.parent / "tests" / "fixtures" / "launch" / "layouts" / "fastchat_lora"
SCRIPT = "chatlora/train/train_lora.py"


def timed(root: Path, args: list[str], edit: bool, n: int, env: dict) -> list[float]:
    out = []
    script = root / SCRIPT
    base = script.read_text()
    for i in range(n + 1):
        if edit:
            script.write_text(base + f"\n# edit {time.time_ns()}\n")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "trainlint", "check", *args, SCRIPT], cwd=root, env=env,
                       capture_output=True)
        if i:  # the first run is untimed (it fills the cache and the launcher store)
            out.append(time.perf_counter() - start)
    script.write_text(base)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--src", default=str(HERE.parent / "src"), help="the trainlint source tree to time")
    a = ap.parse_args()
    # bytecode caching on, as an installed copy has it (pip compiles at install; pre-commit's venv is writable)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": a.src}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        shutil.copytree(LAYOUT, root)
        for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.email=b@e.x", "-c", "user.name=b", "commit", "-qm",
                                                      "base"]):
            subprocess.run(["git", *cmd], cwd=root, check=True, capture_output=True)
        rows = [("edited script, launches", timed(root, [], True, a.runs, env)),
                ("edited script, --no-launches", timed(root, ["--no-launches"], True, a.runs, env)),
                ("unchanged script (cached)", timed(root, [], False, a.runs, env)),
                ("edited script, no cache", timed(root, ["--no-cache"], True, a.runs, env))]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"one file with launches ({SCRIPT}), {a.runs} runs each, {a.src}, load average {load:.2f}")
    for label, runs in rows:
        print(f"  {label:30s} median {statistics.median(runs):.3f} s  best {min(runs):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
