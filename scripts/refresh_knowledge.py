"""Read the newest releases of transformers, trl and peft into trainlint's knowledge, and say what changed.

New releases are read, not feared: this runs the generators in order for every final release newer than the tables
know (`knowledge/versions.py` NEWEST_KNOWN), from the released wheels (`pip download --no-deps`, read with `ast`;
nothing is imported):

1. transformers / trl: the argument dataclasses (bench/gen_argument_fields.py, appended as a difference from the
   last release read) and the keyword-version index (scripts/gen_api_fields.py);
2. NEWEST_KNOWN and the known minor releases in knowledge/versions.py; the release lists of the generator;
3. what a rule depends on, printed: argument defaults that changed, keywords added or removed (renames),
   architectures added or removed and their SDPA / FlashAttention-2 declarations (TL101's default kernel),
   TRL trainers whose loss code changed (TL301's loss path), PEFT LoraConfig defaults (TL201 / TL501).

What it prints is for a person to read and act on: a changed default or a new eager-only architecture may need a
rule's table (knowledge/libraries.py, knowledge/trl_trainers.py) updated by hand, with its citation.

    python scripts/refresh_knowledge.py            # read what is new, write the tables, print the changes
    python scripts/refresh_knowledge.py --check    # exit 1 when a release newer than the tables exists; write nothing
    python scripts/refresh_knowledge.py --dry-run  # read and print the changes; write nothing
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSIONS_PY = ROOT / "src" / "trainlint" / "knowledge" / "versions.py"
GEN_ARGS = ROOT / "bench" / "gen_argument_fields.py"
ARGUMENTS_JSON = ROOT / "src" / "trainlint" / "knowledge" / "arguments.json"
LIBRARIES = ("transformers", "trl", "peft")
_FINAL = re.compile(r"^\d+(\.\d+)*$")


def vkey(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _module(path: Path, name: str):
    sys.path.insert(0, str(path.parent))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def released(lib: str) -> list[str]:
    """Final releases on the package index, newest first (`pip index versions`)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", lib], capture_output=True, text=True,
                         check=True).stdout
    m = re.search(r"Available versions:\s*(.+)", out)
    if not m:
        raise SystemExit(f"pip index versions {lib}: no versions listed")
    return [v for v in (p.strip() for p in m.group(1).split(",")) if _FINAL.match(v)]


def newest_known() -> dict[str, str]:
    text = VERSIONS_PY.read_text(encoding="utf-8")
    m = re.search(r"^NEWEST_KNOWN = (\{.*?\})$", text, re.M)
    return ast.literal_eval(m.group(1))


# --------------------------------------------------------------------------------------------------------------
# What changed
# --------------------------------------------------------------------------------------------------------------

def argument_changes(before: dict, after: dict) -> list[str]:
    """Classes and keywords added or removed, defaults and parser kinds that changed (a rule reads defaults)."""
    lines = []
    bc, ac = before["classes"], after["classes"]
    for name in sorted(set(ac) - set(bc)):
        lines.append(f"new class {name}")
    for name in sorted(set(bc) - set(ac)):
        lines.append(f"class removed: {name}")
    for name in sorted(set(bc) & set(ac)):
        bf, af = bc[name]["fields"], ac[name]["fields"]
        added, removed = sorted(set(af) - set(bf)), sorted(set(bf) - set(af))
        if added:
            lines.append(f"{name}: new keywords {', '.join(added)}")
        if removed:
            lines.append(f"{name}: keywords removed {', '.join(removed)}")
        for field in sorted(set(af) & set(bf)):
            old, new = bf[field], af[field]
            if old.get("d") != new.get("d"):
                lines.append(f"{name}.{field}: default {old.get('d')!r} -> {new.get('d')!r}")
            if old.get("k") != new.get("k"):
                lines.append(f"{name}.{field}: parsed as {old.get('k')} -> {new.get('k')}")
        if bc[name].get("post_init") != ac[name].get("post_init"):
            lines.append(f"{name}: __post_init__ changed (effective values may differ; check knowledge/post_init.py)")
    return lines


_MODELING = re.compile(r"^transformers/models/([a-z0-9_]+)/modeling_[a-z0-9_]+\.py$")


def architectures(root: Path) -> dict[str, dict[str, str]]:
    """Model folder -> {"sdpa": flag, "flash": flag} from its modeling files (gen_attention_defaults.flags_of)."""
    gen = _module(ROOT / "scripts" / "gen_attention_defaults.py", "gen_attention_defaults")
    found: dict[str, dict[str, list[str]]] = {}
    for path in sorted(root.glob("transformers/models/*/modeling_*.py")):
        m = _MODELING.match(path.relative_to(root).as_posix())
        if not m:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        entry = found.setdefault(m.group(1), {"sdpa": [], "flash": []})
        entry["sdpa"].append(gen.flags_of(text, "_supports_sdpa"))
        entry["flash"].append(gen.flags_of(text, "_supports_flash_attn"))
    def merge(flags: list[str]) -> str:
        return "unknown" if "unknown" in flags else ("true" if "true" in flags else "false")
    return {name: {k: merge(v) for k, v in e.items()} for name, e in found.items()}


def architecture_changes(old_root: Path, new_root: Path) -> list[str]:
    old, new = architectures(old_root), architectures(new_root)
    lines = []
    for name in sorted(set(new) - set(old)):
        f = new[name]
        eager = " -> eager by default: add it to knowledge/libraries.py if a causal LM" if f["sdpa"] == "false" else ""
        lines.append(f"new architecture {name}: _supports_sdpa {f['sdpa']}, _supports_flash_attn {f['flash']}{eager}")
    for name in sorted(set(old) - set(new)):
        lines.append(f"architecture removed: {name}")
    for name in sorted(set(old) & set(new)):
        if old[name] != new[name]:
            lines.append(f"{name}: {old[name]} -> {new[name]}")
    return lines


_LOSS_WORDS = re.compile(r"loss|logits|log_softmax|logps|liger|chunk|cross_entropy|entropy", re.I)


def trl_loss_changes(old_root: Path, new_root: Path) -> list[str]:
    """Trainer files whose loss-related lines changed (TL301's loss path per trainer), with a count of lines."""
    lines = []
    files = {p.relative_to(new_root).as_posix() for p in new_root.glob("trl/**/*_trainer.py")}
    files |= {p.relative_to(old_root).as_posix() for p in old_root.glob("trl/**/*_trainer.py")}
    for rel in sorted(files):
        a, b = old_root / rel, new_root / rel
        if not a.exists() or not b.exists():
            lines.append(f"{rel}: {'new' if b.exists() else 'removed'}")
            continue
        changed = [ln for ln in difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(), n=0)
                   if ln[:1] in "+-" and not ln.startswith(("+++", "---")) and _LOSS_WORDS.search(ln)]
        if changed:
            lines.append(f"{rel}: {len(changed)} loss-related lines changed, e.g. {changed[0][:100].strip()}")
    return lines


def _dataclass_defaults(path: Path, cls: str) -> dict[str, str]:
    if not path.exists():
        return {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            out = {}
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    value = item.value
                    if isinstance(value, ast.Call) and any(k.arg == "default" for k in value.keywords):
                        value = next(k.value for k in value.keywords if k.arg == "default")
                    out[item.target.id] = ast.unparse(value) if value is not None else "(required)"
            return out
    return {}


def peft_changes(old_root: Path, new_root: Path) -> list[str]:
    rel = Path("peft/tuners/lora/config.py")
    old, new = _dataclass_defaults(old_root / rel, "LoraConfig"), _dataclass_defaults(new_root / rel, "LoraConfig")
    lines = [f"LoraConfig: new keyword {k} = {new[k]}" for k in sorted(set(new) - set(old))]
    lines += [f"LoraConfig: keyword removed {k}" for k in sorted(set(old) - set(new))]
    lines += [f"LoraConfig.{k}: default {old[k]} -> {new[k]}" for k in sorted(set(old) & set(new)) if old[k] != new[k]]
    return lines


# --------------------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------------------

def add_to_release_list(text: str, list_name: str, version: str) -> str:
    """Append "version" to the `LIST_NAME = [...]` literal of bench/gen_argument_fields.py."""
    m = re.search(rf"^{list_name} = \[(.*?)\n\]", text, re.M | re.S)
    if not m:
        raise SystemExit(f"{GEN_ARGS}: no {list_name} list")
    body = m.group(1).rstrip().rstrip(",")
    last_line = body.splitlines()[-1]
    item = f'"{version}",'
    body = body + ("," + (" " + item if len(last_line) + len(item) < 116 else "\n    " + item))
    return text[:m.start(1)] + body + text[m.end(1):]


def set_newest_known(text: str, lib: str, version: str) -> str:
    text = re.sub(rf'("{lib}": )"[\d.]+"', rf'\g<1>"{version}"', text, count=1)
    major, minor = vkey(version)[:2]
    # _KNOWN_MINORS: the last range of the library's major release line ends at the newest minor + 1
    pattern = rf'(\[f"{major}\.{{m}}\.0" for m in range\(\d+, )(\d+)(\)\])'
    section = re.search(rf'"{lib}": \[.*?\],?$', text, re.M)
    if section and re.search(pattern, section.group(0)):
        new_section = re.sub(pattern, lambda mm: mm.group(1) + str(max(int(mm.group(2)), minor + 1)) + mm.group(3),
                             section.group(0))
        text = text[:section.start()] + new_section + text[section.end():]
    return text


def source(lib: str, version: str) -> Path:
    """Every .py file of the release's wheel, unpacked once under $TMPDIR/trainlint-wheels/<lib>-<version>."""
    root = Path(tempfile.gettempdir()) / "trainlint-wheels" / f"{lib}-{version}"
    if (root / ".complete").exists():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{lib}=={version}", "-d", tmp],
                       check=True)
        with zipfile.ZipFile(next(Path(tmp).glob("*.whl"))) as zf:
            zf.extractall(root, [n for n in zf.namelist() if n.endswith(".py") and n.split("/")[0] == lib])
    (root / ".complete").write_text(version)
    return root


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a newer release exists; read and write nothing")
    ap.add_argument("--dry-run", action="store_true", help="read and print what changed; write nothing")
    ns = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    known = newest_known()
    pending = {}
    for lib in LIBRARIES:
        newer = sorted((v for v in released(lib) if vkey(v) > vkey(known[lib])), key=vkey)
        print(f"{lib}: tables read up to {known[lib]}; newest release {max([known[lib], *newer], key=vkey)}"
              + (f"; new: {', '.join(newer)}" if newer else "; nothing new"))
        if newer:
            pending[lib] = newer
    if ns.check:
        return 1 if pending else 0
    gen = _module(GEN_ARGS, "gen_argument_fields")
    gen_text = GEN_ARGS.read_text(encoding="utf-8")
    versions_text = VERSIONS_PY.read_text(encoding="utf-8")
    out = ARGUMENTS_JSON
    if ns.dry_run:
        tmp = Path(tempfile.mkdtemp()) / "arguments.json"
        tmp.write_text(ARGUMENTS_JSON.read_text(encoding="utf-8"), encoding="utf-8")
        out = tmp
    for lib, newer in pending.items():
        previous = known[lib]
        for version in newer:
            print(f"\n== {lib} {previous} -> {version}")
            old_root, new_root = source(lib, previous), source(lib, version)
            changes: list[str] = []
            if lib in ("transformers", "trl"):
                before, after = gen.append(lib, version, out=out)
                changes += argument_changes(before, after)
                list_name = "TRANSFORMERS_VERSIONS" if lib == "transformers" else "TRL_VERSIONS"
                gen_text = add_to_release_list(gen_text, list_name, version)
            if lib == "transformers":
                changes += architecture_changes(old_root, new_root)
            if lib == "trl":
                changes += trl_loss_changes(old_root, new_root)
            if lib == "peft":
                changes += peft_changes(old_root, new_root)
            print("\n".join(f"  - {c}" for c in changes) if changes else "  (nothing a rule reads changed)")
            versions_text = set_newest_known(versions_text, lib, version)
            previous = version
    if ns.dry_run or not pending:
        return 0
    GEN_ARGS.write_text(gen_text, encoding="utf-8")
    VERSIONS_PY.write_text(versions_text, encoding="utf-8")
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_api_fields.py")], check=True)
    print("\nwrote arguments.json, api_fields.json, versions.py (NEWEST_KNOWN), the generator's release lists")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
