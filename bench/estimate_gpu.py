"""`trainlint estimate` against the peaks measured on a real GPU (../shared/gpu-truth/peaks-h200.json), side by side.

Each case of peaks-h200.json has a Trainer script, gpu-truth/scripts/<case>.py, that loads `models/<name>/`
relative to itself. The scripts are copied into a temporary folder beside a `models` symlink to gpu-truth/models
(nothing is written into the shared folder), and `trainlint estimate --format json` is run on each as the command
line, as a user would run it. The measured figure is `torch.cuda.max_memory_allocated()` (no CUDA context), so it is
compared with the estimate's peak (the CUDA context line is not part of it).

    python bench/estimate_gpu.py [--truth ../shared/gpu-truth] [--tolerance 5] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30
DEFAULT_TRUTH = Path(os.environ.get("TRAINLINT_GPU_TRUTH", "/work/shared/gpu-truth"))


def estimated_peak(script: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-m", "trainlint", "estimate", "--format", "json", str(script)],
                         capture_output=True, text=True, env=env, cwd=script.parent, check=False)
    if out.returncode not in (0, 1):
        raise RuntimeError(f"{script.name}: trainlint estimate exited {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)["peak"]


def rows(truth: Path) -> list[tuple[str, float, float]]:
    """(case, measured GiB, estimated GiB) for every case of peaks-h200.json."""
    results = json.loads((truth / "peaks-h200.json").read_text())["results"]
    with tempfile.TemporaryDirectory() as tmp:
        scripts = Path(tmp) / "scripts"
        scripts.mkdir()
        (scripts / "models").symlink_to(truth / "models", target_is_directory=True)
        out = []
        for case in results:
            script = scripts / f"{case['name']}.py"
            shutil.copyfile(truth / "scripts" / script.name, script)
            out.append((case["name"], case["peak_bytes"] / GIB, estimated_peak(script) / GIB))
        return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth", type=Path, default=DEFAULT_TRUTH, help="the gpu-truth folder")
    ap.add_argument("--tolerance", type=float, default=5.0, help="acceptable error of the peak, percent")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table (for bench/README.md)")
    args = ap.parse_args()
    if not (args.truth / "peaks-h200.json").exists():
        print(f"no {args.truth / 'peaks-h200.json'}: nothing to compare", file=sys.stderr)
        return 2
    table = rows(args.truth)
    if args.markdown:
        print("| case | measured GiB | estimated GiB | error % | within ±{:g}% |".format(args.tolerance))
        print("|---|---:|---:|---:|:---:|")
    else:
        print(f"{'case':<55} {'measured':>9} {'estimated':>9} {'error %':>8}  within ±{args.tolerance:g}%")
    within = 0
    for name, measured, est in table:
        err = (est - measured) / measured * 100
        ok = abs(err) <= args.tolerance
        within += ok
        if args.markdown:
            print(f"| {name} | {measured:.1f} | {est:.1f} | {err:+.1f} | {'yes' if ok else 'no'} |")
        else:
            print(f"{name:<55} {measured:>9.1f} {est:>9.1f} {err:>+8.1f}  {'yes' if ok else 'no'}")
    mean = sum(abs(e - m) / m for _, m, e in table) / len(table) * 100
    print(f"\n{within}/{len(table)} within ±{args.tolerance:g}% (mean absolute error {mean:.1f}%)")
    return 0 if within == len(table) else 1


if __name__ == "__main__":
    sys.exit(main())
