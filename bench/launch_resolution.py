"""How much of a repository's runs trainlint can see, with and without launches: per model load, whether
its model id is known, and whether the model resolves to a known geometry (vocabulary and size); per script,
whether the sequence length and the batch are known.

    python bench/launch_resolution.py [ROOT ...]   # default: the launch layouts in tests/fixtures

Each ROOT is copied into a temporary git repository of its own (launchers are looked for in the repository
a script belongs to), then linted. Prints one table row per root and
the totals, without launches (the script's defaults only) and with them (every launch found; a value counts as
resolved when at least one launch resolves it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from trainlint.config import Settings  # noqa: E402
from trainlint.discovery import discover  # noqa: E402
from trainlint.lint import enabled_codes, lint_file  # noqa: E402


def measure(root: Path, launches: bool) -> dict[str, int]:
    settings = replace(Settings(root=root), discover_launches=launches)
    codes = enabled_codes(settings)
    out = dict(scripts=0, loads=0, ids_known=0, loads_known=0, seq_known=0, batch_known=0, launched=0, findings=0)
    for path in discover([root], settings):
        if path.suffix not in (".py", ".ipynb"):
            continue
        result = lint_file(path, settings, codes)
        out["findings"] += sum(1 for d in result.diagnostics if not d.code.startswith("TL0"))
        if not result.contexts:
            continue
        out["scripts"] += 1
        contexts = result.contexts
        out["launched"] += any(c.launch.label != "defaults" for c in contexts)
        n = len(contexts[0].facts.models)
        out["loads"] += n
        for i in range(n):
            loads = [c.facts.models[i] for c in contexts if i < len(c.facts.models)]
            out["ids_known"] += any(m.model_id.known and isinstance(m.model_id.value, str) for m in loads) or any(
                m.config_class is not None for m in loads)
            # a geometry: the vocabulary and the size are known (a class name alone does not count)
            out["loads_known"] += any(_geometry(c, c.facts.models[i]) for c in contexts if i < len(c.facts.models))
        out["seq_known"] += any(c.seq_len.known for c in contexts)
        out["batch_known"] += any(c.batch.known for c in contexts)
    return out


def _geometry(ctx, model) -> bool:
    spec = ctx.spec(model)
    return spec is not None and spec.vocab_size is not None and (spec.num_parameters or spec.hidden_size) is not None


def main(argv: list[str]) -> None:
    roots = [Path(a).resolve() for a in argv] or sorted(
        p for p in (HERE.parent / "tests" / "fixtures" / "launch" / "layouts").iterdir() if p.is_dir())
    cols = ("scripts", "launched", "loads", "ids_known", "loads_known", "seq_known", "batch_known", "findings")
    print(f"{'root':28} {'':8} " + " ".join(f"{c:>11}" for c in cols))
    totals = {False: dict.fromkeys(cols, 0), True: dict.fromkeys(cols, 0)}
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp())
    for root in roots:
        repo = tmp / root.name
        shutil.copytree(root, repo, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
        for launches in (False, True):
            row = measure(repo, launches)
            for c in cols:
                totals[launches][c] += row[c]
            label = "launches" if launches else "defaults"
            print(f"{root.name[:28]:28} {label:8} " + " ".join(f"{row[c]:>11}" for c in cols))
    for launches in (False, True):
        label = "launches" if launches else "defaults"
        print(f"{'TOTAL':28} {label:8} " + " ".join(f"{totals[launches][c]:>11}" for c in cols))
    print(f"({time.perf_counter() - start:.1f} s)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
