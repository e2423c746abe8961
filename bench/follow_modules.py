"""What following the repository's own modules (facts/inline.py, `follow-hops`) changes in what trainlint
knows: each Python file of each ROOT is linted with `follow-hops = 0` (the file alone) and with the default,
and a file counts as changed when any of these differ: the model loads seen, the loads whose id is known,
the loads whose attention implementation is known, the trainers seen (the repository's own subclasses
included), the sequence length / batch known, the findings.

    python bench/follow_modules.py ROOT [ROOT ...]

Each ROOT is copied into a temporary git repository of its own, then linted file by file. Prints one row
per root and the totals."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from trainlint.config import Settings  # noqa: E402
from trainlint.discovery import discover  # noqa: E402
from trainlint.lint import enabled_codes, lint_file  # noqa: E402


def known_of(result) -> dict[str, object]:
    ctxs = result.contexts
    out = dict(loads=0, ids=0, attn=0, trainers=0, subclass=0, seq=0, batch=0, modules=0,
               findings=sorted((d.code, d.filename, d.span.line) for d in result.diagnostics
                               if not d.code.startswith("TL0")))
    for ctx in ctxs[:1] if ctxs else ():
        f = ctx.facts
        out["loads"] = len(f.models)
        out["ids"] = sum(1 for m in f.models if m.model_id.known)
        out["attn"] = sum(1 for m in f.models if m.attn_implementation.known)
        out["trainers"] = len(f.trainers)
        out["subclass"] = sum(1 for t in f.trainers if t.subclass)
        out["seq"] = int(ctx.seq_len.known)
        out["batch"] = int(ctx.batch.known)
        out["modules"] = len(f.modules)
    return out


def measure(root: Path) -> dict[str, int]:
    alone = replace(Settings(root=root), follow_hops=0)
    follow = Settings(root=root)
    codes = enabled_codes(follow)
    totals = dict(files=0, analysed=0, changed=0, loads_before=0, loads_after=0, ids_before=0, ids_after=0,
                  attn_before=0, attn_after=0, trainers_before=0, trainers_after=0, findings_before=0,
                  findings_after=0)
    for path in discover([root], follow):
        if path.suffix != ".py":
            continue
        totals["files"] += 1
        before, after = known_of(lint_file(path, alone, codes)), known_of(lint_file(path, follow, codes))
        if after["loads"] or after["trainers"] or before["loads"] or before["trainers"]:
            totals["analysed"] += 1
        changed = {k for k in before if k != "modules" and before[k] != after[k]}
        if changed:
            totals["changed"] += 1
            print(f"  {path.relative_to(root)}: {', '.join(sorted(changed))} "
                  f"(modules followed: {after['modules']})")
        for key in ("loads", "ids", "attn", "trainers"):
            totals[f"{key}_before"] += before[key]
            totals[f"{key}_after"] += after[key]
        totals["findings_before"] += len(before["findings"])
        totals["findings_after"] += len(after["findings"])
    return totals


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    grand: dict[str, int] = {}
    for given in argv:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / Path(given).name
            shutil.copytree(given, root)
            subprocess.run(["git", "init", "-q", str(root)], check=True)
            print(f"{given}:")
            row = measure(root)
        print("  " + ", ".join(f"{k} {v}" for k, v in row.items()))
        for k, v in row.items():
            grand[k] = grand.get(k, 0) + v
    print("total: " + ", ".join(f"{k} {v}" for k, v in grand.items()))
    if grand.get("analysed"):
        print(f"files where following local modules changed what was known: {grand['changed']} of "
              f"{grand['files']} Python files ({grand['changed'] / grand['files']:.0%}); of the "
              f"{grand['analysed']} that load a model or build a trainer: "
              f"{grand['changed'] / grand['analysed']:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
