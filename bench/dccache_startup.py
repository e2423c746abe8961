"""What trainlint/_dccache.py (the compiled-code cache for the methods `dataclasses` generates) saves a one-file run.

    python bench/dccache_startup.py [--runs 15] [--src src] [--python PY]

One file (examples/full_finetune_qwen.py) in a folder of its own (its own pyproject.toml, no git repository), run
as `trainlint check --no-cache --exit-zero --quiet FILE` two ways, alternately, `--runs` times each after one
untimed run of each (bytecode and the dataclass cache written then):
- with: the console script's entry point (trainlint/__main__.py `run()`: installs the cache, then the CLI);
- without: the CLI's `main()` directly (no cache: every dataclass method compiled, as plain Python does).
Both as `python -c`, bytecode writing on, PYTHONPATH=SRC. Prints each run's median and the difference, and the
same for `import libcst` alone. Times are wall time around the process (time.perf_counter()); the load average
is printed before and after, since other work on the machine inflates every figure.
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

ROOT = Path(__file__).resolve().parents[1]
WITH = "import sys; sys.argv[0] = 'trainlint'; from trainlint.__main__ import run; run()"
WITHOUT = "import sys; sys.argv[0] = 'trainlint'; from trainlint.cli import main; main()"
LIBCST_WITH = "from trainlint import _dccache; _dccache.install(); import libcst"
LIBCST_WITHOUT = "import libcst"


def _time(python: str, code: str, args: list[str], env: dict, cwd: Path) -> float:
    start = time.perf_counter()
    r = subprocess.run([python, "-c", code, *args], env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if r.returncode not in (0, 1):
        raise SystemExit(f"failed ({r.returncode}): {r.stderr[-2000:]}")
    return elapsed


def _pair(label: str, python: str, codes: tuple[str, str], args: list[str], env: dict, cwd: Path, runs: int) -> None:
    for code in codes:  # untimed: writes the bytecode and the dataclass cache
        _time(python, code, args, env, cwd)
    times: dict[str, list[float]] = {"with": [], "without": []}
    for i in range(runs):
        order = (("with", codes[0]), ("without", codes[1])) if i % 2 == 0 else (("without", codes[1]), ("with", codes[0]))
        for name, code in order:
            times[name].append(_time(python, code, args, env, cwd))
    w, wo = statistics.median(times["with"]), statistics.median(times["without"])
    print(f"{label}: with the cache {w:.3f} s, without {wo:.3f} s (medians of {runs}); saved {wo - w:.3f} s "
          f"({(wo - w) / wo:.0%}); min {min(times['with']):.3f} / {min(times['without']):.3f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(args.src.resolve())
    version = subprocess.run([args.python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                             text=True).stdout.strip()
    print(f"python {version}, src {args.src}, load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        shutil.copy(ROOT / "examples" / "full_finetune_qwen.py", folder / "train.py")
        (folder / "pyproject.toml").write_text("[tool.trainlint]\n")
        check = ["check", "--no-cache", "--exit-zero", "--quiet", "train.py"]
        _pair("one-file check", args.python, (WITH, WITHOUT), check, env, folder, args.runs)
        _pair("import libcst", args.python, (LIBCST_WITH, LIBCST_WITHOUT), [], env, folder, args.runs)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
