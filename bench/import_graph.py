"""The package's import graph: modules, lines, import arrows, arrows that go up the layers, and every cycle.

    python bench/import_graph.py                  # this checkout's src/trainlint
    python bench/import_graph.py --src /other/src # another tree (e.g. main), for a before/after
    python bench/import_graph.py --arrows         # also list every arrow
    python bench/import_graph.py --json out.json

Counts what import-linter (grimp) counts: every `import` / `from ... import` of a trainlint module, at module level
and inside functions (and under `if TYPE_CHECKING:`), one arrow per (importer, imported) pair of files.
`from trainlint.a import b` is an arrow to trainlint.a.b when that is a module, else to trainlint.a.

Layers: read from the layers contract in the tree's pyproject.toml ([tool.importlinter], the contract whose
name starts with "Layers"), else the built-in copy below (the same layers; main had no contract). A module's layer
is the first layer whose name is it or a package above it; an arrow "goes up" when the importer sits in a lower
layer than the module it imports. Independent siblings written `a | b` on one line share a layer.

Cycles: the strongly connected components of more than one module (Tarjan), each with its members, and the
arrows inside it.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "trainlint"

# Highest first, as import-linter writes them. Kept equal to pyproject.toml's contract (read from there when present).
DEFAULT_LAYERS = [
    "trainlint.__main__",
    "trainlint.cli",
    "trainlint.server | trainlint.verify | trainlint.runner",
    "trainlint.fix | trainlint.report",
    "trainlint.lint",
    "trainlint.framework_lint",
    "trainlint.rules | trainlint.results",
    "trainlint.planning",
    "(trainlint.run)",
    "trainlint.context",
    "trainlint.resolve",
    "trainlint.frameworks",
    "trainlint.launch",
    "trainlint.edits",
    "trainlint.facts | trainlint.notebook | trainlint.history",
    "trainlint.discovery",
    "trainlint.config",
    "trainlint.memory | trainlint.knowledge",
    "trainlint.units | trainlint.diagnostics | trainlint.source | trainlint.codes | trainlint.pages | "
    "trainlint.sniff | trainlint._hash | trainlint.atomic | trainlint._dccache | trainlint.spelling",
]


def modules_of(src: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    target = _resolve(alias.name, modules)
                    if target:
                        out.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            if stem.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                target = _resolve(f"{stem}.{alias.name}", modules) if alias.name != "*" else None
                target = target if target and target != _resolve(stem, modules) else _resolve(stem, modules)
                if target:
                    out.add(target)
    out.discard(module)
    return out


def read_layers(src: Path) -> list[list[str]]:
    pyproject = src.parent / "pyproject.toml"
    layers = DEFAULT_LAYERS
    if pyproject.exists():
        config = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("importlinter", {})
        for contract in config.get("contracts", []):
            if contract.get("type") == "layers" and contract.get("name", "").lower().startswith("layers"):
                layers = contract["layers"]
                break
    return [[name.strip().strip("()") for name in line.replace(":", "|").split("|") if name.strip()]
            for line in layers]


def layer_of(module: str, layers: list[list[str]]) -> int | None:
    """0 = the top layer; None = in no layer."""
    best = None
    for index, line in enumerate(layers):
        for name in line:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > best[1]:
                    best = (index, len(name))
    return best[0] if best else None


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one member (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return sorted(out, key=lambda c: (-len(c), c))


def measure(src: Path) -> dict:
    modules = modules_of(src)
    graph = {module: imports_of(module, path, modules) for module, path in modules.items()}
    layers = read_layers(src)
    up = []
    for importer, targets in sorted(graph.items()):
        for target in sorted(targets):
            a, b = layer_of(importer, layers), layer_of(target, layers)
            if a is not None and b is not None and a > b:
                up.append((importer, target))
    unlayered = sorted(m for m in modules if layer_of(m, layers) is None)
    found = cycles(graph)
    squashed: dict[str, set[str]] = {}  # trainlint.X with everything under it as one node (the count)
    for importer, targets in graph.items():
        top = ".".join(importer.split(".")[:2])
        squashed.setdefault(top, set()).update(".".join(t.split(".")[:2]) for t in targets)
    for top, targets in squashed.items():
        targets.discard(top)
    return {
        "src": str(src),
        "modules": len(modules),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules.values()),
        "arrows": sum(len(t) for t in graph.values()),
        "arrows_up": [f"{a} -> {b}" for a, b in up],
        "cycles": [{"members": c, "arrows": sorted(f"{a} -> {b}" for a in c for b in graph[a] if b in c)}
                   for c in found],
        "unlayered": unlayered,
        "parts": len(squashed),
        "part_cycles": cycles(squashed),
        "graph": {m: sorted(t) for m, t in sorted(graph.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="the folder holding trainlint/ (default: src)")
    parser.add_argument("--arrows", action="store_true", help="list every arrow too")
    parser.add_argument("--json", type=Path, help="write the whole measurement here")
    args = parser.parse_args(argv)
    result = measure(args.src.resolve())
    print(f"{result['src']}")
    print(f"modules: {result['modules']}   lines: {result['lines']}   arrows: {result['arrows']}   "
          f"arrows up: {len(result['arrows_up'])}   cycles: {len(result['cycles'])} "
          f"(modules in them: {sum(len(c['members']) for c in result['cycles'])})")
    print(f"top-level parts (trainlint.X, packages squashed): {result['parts']}   cycles between them: "
          f"{len(result['part_cycles'])}" + "".join(f"\n  {' <-> '.join(c)}" for c in result["part_cycles"]))
    if result["unlayered"]:
        print(f"\nin no layer ({len(result['unlayered'])}): {', '.join(result['unlayered'])}")
    if result["arrows_up"]:
        print(f"\narrows up the layers ({len(result['arrows_up'])}):")
        for arrow in result["arrows_up"]:
            print(f"  {arrow}")
    for number, cycle in enumerate(result["cycles"], 1):
        print(f"\ncycle {number}: {len(cycle['members'])} modules, {len(cycle['arrows'])} arrows inside")
        print("  members: " + ", ".join(cycle["members"]))
        for arrow in cycle["arrows"]:
            print(f"    {arrow}")
    if args.arrows:
        print("\narrows:")
        for importer, targets in result["graph"].items():
            for target in targets:
                print(f"  {importer} -> {target}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
