"""Generate src/trainlint/knowledge/framework_keys.json: the config keys axolotl and LLaMA-Factory accept, per release.

A dev tool, never on the lint path. It reads the released wheels' *source* with `ast` (nothing is imported):

- axolotl: the fields (and pydantic `alias=` names) of `AxolotlInputConfig` and every base class it has in
  `axolotl/utils/schemas/` (followed by name through the package), plus, per integration directory
  `axolotl/integrations/<name>/args.py`, the fields of its classes: those keys exist only when a plugin of that
  directory is listed in `plugins:` (axolotl utils/config/__init__.py merges plugin args only then).
  `DeprecatedParameters` (utils/schemas/deprecated.py) is recorded apart: accepted, but no longer in effect.
- LLaMA-Factory: the fields of every dataclass in `llamafactory/hparams/*.py` (ModelArguments, DataArguments,
  FinetuningArguments, GeneratingArguments, its TrainingArguments and their bases). The HF
  `Seq2SeqTrainingArguments` fields its TrainingArguments inherits come from knowledge/arguments.json at lint time.

    pip download --no-deps axolotl==0.19.0 -d /tmp/fw/ax-0.19.0 && (cd /tmp/fw/ax-0.19.0 && unzip -q *.whl)
    python bench/gen_framework_keys.py /tmp/fw          # reads ax-<version>/ and lf-<version>/ below it
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "trainlint" / "knowledge" / "framework_keys.json"


def _classes(files: list[Path]) -> dict[str, tuple[list[str], list[str]]]:
    """class name -> (base names, field names and aliases), over all files."""
    out: dict[str, tuple[list[str], list[str]]] = {}
    for file in files:
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
            fields: list[str] = []
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    fields.append(stmt.target.id)
                    if isinstance(stmt.value, ast.Call):
                        for kw in stmt.value.keywords:
                            if kw.arg == "alias" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                                fields.append(kw.value.value)
            out.setdefault(node.name, (bases, fields))
    return out


def _closure(classes: dict, root: str, skip: set[str] = frozenset()) -> set[str]:
    seen: set[str] = set()
    fields: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in classes or name in skip:
            continue
        seen.add(name)
        bases, own = classes[name]
        fields.update(own)
        todo.extend(bases)
    return fields


def axolotl(root: Path) -> dict:
    pkg = root / "axolotl" if (root / "axolotl").is_dir() else root / "src" / "axolotl"
    schemas = sorted((pkg / "utils" / "schemas").rglob("*.py"))
    classes = _classes(schemas)
    deprecated = set(classes.get("DeprecatedParameters", ([], []))[1])
    core = _closure(classes, "AxolotlInputConfig", {"DeprecatedParameters"})
    plugins: dict[str, list[str]] = {}
    for args in sorted((pkg / "integrations").glob("*/args.py")):
        fields = set()
        for _, (_, own) in _classes([args]).items():
            fields.update(own)
        plugins[f"axolotl.integrations.{args.parent.name}."] = sorted(fields - core)
    return {"core": sorted(core), "deprecated": sorted(deprecated - core), "plugins": plugins}


def llamafactory(root: Path) -> dict:
    classes = _classes(sorted((root / "llamafactory" / "hparams").glob("*.py")))
    fields: set[str] = set()
    for _, (_, own) in classes.items():
        fields.update(own)
    return {"core": sorted(fields)}


def main(base: Path) -> None:
    data: dict = {"generated_by": "bench/gen_framework_keys.py", "axolotl": {}, "llamafactory": {}}
    for d in sorted(base.glob("ax-*")):
        data["axolotl"][d.name[3:]] = axolotl(d / f"axolotl-{d.name[3:]}" if (d / f"axolotl-{d.name[3:]}").is_dir() else d)
    for d in sorted(base.glob("lf-*")):
        data["llamafactory"][d.name[3:]] = llamafactory(d)
    OUT.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: axolotl {sorted(data['axolotl'])}, llamafactory {sorted(data['llamafactory'])}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/fw"))
