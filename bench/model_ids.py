"""Share of model ids resolved to a geometry on model loads seen in public scripts (bench/data/model_ids.json).

    python bench/model_ids.py                 # this checkout's catalog
    python bench/model_ids.py --before REF    # also the catalog at a git ref (e.g. main), side by side

"Resolved": trainlint.knowledge.models.lookup_model returns a spec (catalog id, alias, or a derivative's name
that embeds one unambiguous catalog name); no local files or Hugging Face cache are consulted here.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data" / "model_ids.json"


def measure(src: Path) -> dict:
    """Run the lookup in a child so `src` (this checkout or an exported ref) is the code that answers."""
    code = (
        "import json, sys, tempfile\nfrom pathlib import Path\n"
        "from trainlint.knowledge.models import lookup_model\n"
        "data = json.load(open(sys.argv[1]))\nempty = Path(tempfile.mkdtemp())\n"
        "def ok(i):\n    return lookup_model(i, empty) is not None\n"
        "loads = data['loads']\nlits = [l['id'] for l in loads if l['id']]\nuniq = sorted(set(lits))\n"
        "extra = data['issue_examples']['ids']\n"
        "print(json.dumps({'loads': len(loads), 'loads_resolved': sum(1 for l in loads if l['id'] and ok(l['id'])),"
        " 'literal_loads': len(lits), 'ids': len(uniq), 'ids_resolved': sum(map(ok, uniq)),"
        " 'unresolved': [i for i in uniq if not ok(i)], 'issue_ids': len(extra),"
        " 'issue_ids_resolved': sum(map(ok, extra)), 'issue_unresolved': [i for i in extra if not ok(i)]}))\n")
    env = dict(os.environ, PYTHONPATH=str(src), HF_HOME=tempfile.mkdtemp(), HF_HUB_CACHE="")
    out = subprocess.run([sys.executable, "-c", code, str(DATA)], env=env, capture_output=True, text=True,
                         check=True, cwd=tempfile.mkdtemp())
    return json.loads(out.stdout)


def export(ref: str) -> Path:
    target = Path(tempfile.mkdtemp())
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "src"


def show(label: str, r: dict) -> None:
    pct = lambda a, b: f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"  # noqa: E731
    print(f"{label}: literal ids known {pct(r['ids_resolved'], r['ids'])}; model loads resolved "
          f"{pct(r['loads_resolved'], r['loads'])}; issue #11's examples {pct(r['issue_ids_resolved'], r['issue_ids'])}")
    if r["unresolved"] or r["issue_unresolved"]:
        print(f"  unknown: {', '.join(r['unresolved'] + r['issue_unresolved'])}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="git ref whose catalog to measure too (e.g. main)")
    args = parser.parse_args()
    if args.before:
        show(f"before ({args.before})", measure(export(args.before)))
    show("after (this checkout)", measure(ROOT / "src"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
