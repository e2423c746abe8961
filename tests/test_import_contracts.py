"""The layers hold (issue 29, item 7): import-linter's contracts in pyproject.toml, checked by `lint-imports` run
as a real subprocess on this tree, and no import cycle among the package's modules (grimp's graph, the one
import-linter checks: module-level and function-level imports alike).

Truth used: import-linter and grimp themselves, on the source files; a copy of the package with one import
added up the layers, to show that the contract breaks (so the test can fail).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

pytest.importorskip("importlinter", reason="import-linter is in the test extra")
grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter")


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]


def _lint_imports(root: Path, src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` in `root` (its pyproject.toml) over the package under `src`, no cache written."""
    exe = Path(sys.executable).with_name("lint-imports")
    command = [str(exe)] if exe.exists() else [sys.executable, "-c",
                                                "import sys; from importlinter.cli import lint_imports_command as c; "
                                                "sys.exit(c())"]
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*command, "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300)


def test_lint_imports_keeps_every_contract():
    r = _lint_imports(ROOT, SRC)
    assert r.returncode == 0, f"lint-imports: a contract is broken\n{r.stdout}\n{r.stderr}"
    assert "BROKEN" not in r.stdout and " kept, 0 broken" in r.stdout, r.stdout


def test_an_import_up_the_layers_breaks_the_contract(tmp_path: Path):
    """The same tree with one import from the knowledge tables up to the CLI: lint-imports fails and names it."""
    shutil.copytree(SRC / "trainlint", tmp_path / "src" / "trainlint",
                    ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    names = tmp_path / "src" / "trainlint" / "knowledge" / "names.py"
    names.write_text(names.read_text(encoding="utf-8") + "\n\ndef _up():\n    from trainlint import cli  # noqa\n",
                     encoding="utf-8")
    r = _lint_imports(tmp_path, tmp_path / "src")
    assert r.returncode != 0, r.stdout
    assert "BROKEN" in r.stdout and "trainlint.knowledge.names -> trainlint.cli" in r.stdout, r.stdout


def _graph() -> dict[str, set[str]]:
    graph = grimp.build_graph("trainlint", cache_dir=None)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    if len(members) > 1:
                        out.append(sorted(members))
    return out


def _waived() -> set[tuple[str, str]]:
    """The arrows the contracts ignore, each with its comment in pyproject.toml saying who removes it."""
    out = set()
    for contract in _config()["contracts"]:
        for line in contract.get("ignore_imports", ()):
            importer, imported = (part.strip() for part in line.split("->"))
            out.add((importer, imported))
    return out


def test_the_package_has_no_import_cycle():
    graph = _graph()
    assert "trainlint.launch.discover" in graph and "trainlint.knowledge.gpus" in graph  # every package is seen
    for importer, imported in _waived():
        graph.get(importer, set()).discard(imported)
    found = _cycles(graph)
    listed = "\n".join(
        f"{len(c)} modules: " + ", ".join(c) + "\n    " +
        "\n    ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) for c in found)
    assert not found, f"import cycles:\n{listed}"


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def _parts(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph with every top-level part trainlint.X (a module, or a package and everything under it) as one node."""
    out: dict[str, set[str]] = {}
    for importer, imported in graph.items():
        top = ".".join(importer.split(".")[:2])
        out.setdefault(top, set()).update(".".join(m.split(".")[:2]) for m in imported)
    for top, imported in out.items():
        imported.discard(top)
    return out


def test_the_top_level_packages_have_no_import_cycle():
    """Modules without a cycle can still make packages with one (main had discovery -> frameworks.sniff,
    launch.discover -> frameworks.detect, frameworks.synth -> launch.model): the packages must be acyclic too,
    else a layer cannot be drawn for them. import-linter's acyclic_siblings contract checks every depth."""
    graph = _graph()
    for importer, imported in _waived():
        graph.get(importer, set()).discard(imported)
    parts = _parts(graph)
    assert {"trainlint.launch", "trainlint.frameworks", "trainlint.discovery"} <= parts.keys()
    found = _cycles(parts)
    assert not found, "import cycles between top-level parts:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_cycle_between_packages_is_found_when_modules_have_none():
    """The shape main had: module arrows with no cycle, whose packages make one."""
    graph = {"t.discovery": {"t.frameworks.sniff"}, "t.frameworks.sniff": set(),
             "t.frameworks.synth": {"t.launch.model"}, "t.launch.model": set(),
             "t.launch.discover": {"t.discovery", "t.frameworks.detect"}, "t.frameworks.detect": set()}
    assert _cycles(graph) == []
    assert _cycles(_parts(graph)) == [["t.discovery", "t.frameworks", "t.launch"]]


def test_an_import_between_packages_that_closes_a_cycle_breaks_the_contract(tmp_path: Path):
    """The same tree with discovery importing a framework module (frameworks -> launch -> discovery): the
    acyclic_siblings contract fails and names the cycle."""
    shutil.copytree(SRC / "trainlint", tmp_path / "src" / "trainlint",
                    ignore=shutil.ignore_patterns("__pycache__", "*.json"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    discovery = tmp_path / "src" / "trainlint" / "discovery.py"
    discovery.write_text(discovery.read_text(encoding="utf-8") +
                         "\n\ndef _around():\n    from trainlint.frameworks import synth  # noqa\n", encoding="utf-8")
    r = _lint_imports(tmp_path, tmp_path / "src")
    assert r.returncode != 0, r.stdout
    assert "No cycles are allowed in trainlint." in r.stdout, r.stdout


def test_every_module_sits_in_a_layer():
    """A new module must be placed in the layers (else no contract checks its imports)."""
    layers = next(c for c in _config()["contracts"] if c["type"] == "layers")["layers"]
    names = {name.strip().strip("()") for line in layers for part in line.split("|") for name in part.split(":")}
    outside = sorted(m for m in _graph() if m != "trainlint"  # the root package holds only the version
                     and not any(m == n or m.startswith(n + ".") for n in names))
    assert not outside, f"modules in no layer of pyproject.toml's contract: {outside}"


def test_the_bench_script_counts_the_arrows_import_linter_sees():
    """bench/import_graph.py (the figures in the issue's before/after) reads the same graph as grimp."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import import_graph
    finally:
        sys.path.remove(str(ROOT / "bench"))
    mine = import_graph.measure(SRC)
    assert {m: set(t) for m, t in mine["graph"].items()} == _graph()
    assert [f"{a} -> {b}" for a, b in sorted(_waived())] == mine["arrows_up"]
