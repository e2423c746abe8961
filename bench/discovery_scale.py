"""Issue 29 ("Keep, and scale"): a one-file check must not grow with the size of the tree around it.

Builds, under /tmp, a small folder and a big one (~144k files: the same training script and launcher inside a
monorepo-like tree of Python modules, JSON, text, one README.md and one YAML file per folder, a shell script
every tenth folder), each as a plain folder and as a git repository (everything committed), then times
`trainlint check train.py` there: the median (and best) of N runs, for

  --no-cache      nothing read from or written to .trainlint_cache/ (the launch discovery runs every time)
  cached          a re-run with nothing changed (the file's record and the discovery index are read)
  edited          the script edited before each run (its record misses, the launchers and index do not)
  --no-launches   the same without the launch layer (what the tree costs nothing for)

    python bench/discovery_scale.py [--runs 5] [--files 144000] [--src A/src --src B/src] [--keep DIR]

Each --src is a trainlint source tree (PYTHONPATH); default: this checkout's. Bytecode is written under the
bench's folder (PYTHONPYCACHEPREFIX), not into the trees timed. The trees are deleted at the end unless --keep
names where to build them (then they are reused on the next run). Runs one after the other: on a shared machine,
compare figures of one invocation only, and read the load averages it prints.
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

TRAIN = '''"""Fine-tune a model."""
import argparse

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--lr", type=float, default=1e-4)
args = parser.parse_args()

model = torch.nn.Linear(1024, 1024).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
loader = DataLoader(list(range(1000)), batch_size=args.batch_size)
losses = []
for batch in loader:
    loss = model(torch.randn(args.batch_size, 1024, device="cuda")).sum()
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss)
'''
LAUNCHER = "#!/bin/bash\nset -e\npython train.py --batch_size 64 --lr 3e-4\n"


def build(root: Path, files: int, git: bool) -> None:
    """The small tree (files=0) or the big one: train.py and run.sh at the root, plus `files` others."""
    root.mkdir(parents=True)
    (root / "train.py").write_text(TRAIN)
    (root / "run.sh").write_text(LAUNCHER)
    per_dir = 120
    made = 2
    d = 0
    while made < files:
        folder = root / f"pkg{d // 100:03d}" / f"mod{d % 100:03d}"
        folder.mkdir(parents=True)
        for i in range(min(per_dir, files - made)):
            if i == 0:
                name, text = "README.md", f"# mod{d}\n\nRun `python -m pkg.mod{d}.main --help`.\n"
            elif i == 1:
                name, text = "config.yaml", f"name: mod{d}\nlayers: 4\n"
            elif i == 2 and d % 10 == 0:
                name, text = "build.sh", f"#!/bin/sh\npython -m pkg.mod{d}.tool --out dist/\n"
            elif i % 7 == 0:
                name, text = f"data{i}.json", '{"k": 1}\n'
            elif i % 11 == 0:
                name, text = f"notes{i}.txt", "text\n"
            else:
                name, text = f"m{i}.py", f"X = {i}\n"
            (folder / name).write_text(text)
            made += 1
        d += 1
    if git:
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@b"}
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "add", "-A"], cwd=root, check=True)
        subprocess.run(["git", "commit", "-qm", "tree"], cwd=root, check=True, env=env)


def timed(root: Path, srcs: list[str], args: list[str], runs: int, pycaches: list[Path],
          edit: bool = False) -> list[list[float]]:
    """Wall times of `check ARGS train.py` per source tree, the trees taking turns run by run (so a load that
    comes and goes on a shared machine falls on both alike)."""
    # bytecode (and the dataclass-code cache) on, as an installed copy has it, kept under `pycache`: nothing is
    # written into the source trees timed (the base snapshot is read-only by convention)
    envs = [{**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONPATH": src,
             "PYTHONPYCACHEPREFIX": str(pycache)} for src, pycache in zip(srcs, pycaches)]
    out: list[list[float]] = [[] for _ in srcs]
    script = root / "train.py"
    for i in range(runs + 1):
        for n, env in enumerate(envs):
            if edit:
                script.write_text(TRAIN + f"# edit {time.time_ns()}\n")
            start = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "trainlint", "check", *args, "train.py"], cwd=root, env=env,
                               capture_output=True, text=True)
            if i:  # the first run is untimed (it fills the caches: bytecode, the file's record, the index)
                out[n].append(time.perf_counter() - start)
            elif r.returncode not in (0, 1):
                raise SystemExit(f"trainlint ({srcs[n]}) failed in {root}: {r.stderr[-2000:]}")
    if edit:
        script.write_text(TRAIN)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--files", type=int, default=144_000)
    ap.add_argument("--src", action="append", help="trainlint source trees to time (default: this checkout's)")
    ap.add_argument("--keep", help="build the trees here and keep them (reused when present)")
    a = ap.parse_args()
    srcs = a.src or [str(HERE.parent / "src")]
    base = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="discovery_scale_"))
    try:
        trees = {}
        for name, files, git in (("small", 0, False), ("small-git", 0, True), ("big", a.files, False),
                                 ("big-git", a.files, True)):
            root = base / name
            if not root.exists():
                t = time.perf_counter()
                build(root, files, git)
                print(f"built {name} ({files} files) in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            trees[name] = root
        pycaches = [base / f"pycache-{n}" for n in range(len(srcs))]
        for pycache in pycaches:
            shutil.rmtree(pycache, ignore_errors=True)
        for n, src in enumerate(srcs):
            print(f"[{n}] {src}")
        print(f"load average before: {os.getloadavg()[0]:.2f}\n")
        print(f"{'tree':<10} {'case':<13}" + "".join(f" {f'[{n}] median (best)':>20}" for n in range(len(srcs))))
        for name, root in trees.items():
            shutil.rmtree(root / ".trainlint_cache", ignore_errors=True)
            for case, args, edit in (("--no-cache", ["--no-cache"], False), ("cached", [], False),
                                     ("edited", [], True), ("--no-launches", ["--no-cache", "--no-launches"], False)):
                times = timed(root, srcs, args, a.runs, pycaches, edit)
                cells = "".join(f" {f'{statistics.median(t):.3f} ({min(t):.3f})':>20}" for t in times)
                print(f"{name:<10} {case:<13}{cells}  load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
