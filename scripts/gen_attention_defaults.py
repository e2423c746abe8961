"""Write src/trainlint/knowledge/attention_defaults.json: per transformers 4.x release line, which model folders
declare `_supports_sdpa = True` / `_supports_flash_attn_2 = True` on a class of their modeling files.

Why: in transformers 4.36-4.57, `from_pretrained` without `attn_implementation` picks SDPA only when the class has
`_supports_sdpa` (4.40.2 modeling_utils.py `_autoset_attn_implementation` -> `_check_and_enable_sdpa`, l.1611-1638:
`if not is_torch_sdpa_available() or not cls._supports_sdpa: return config`, i.e. eager), so TL101 needs the flag of
each architecture in each release line.

Usage: download the wheels (`pip download --no-deps transformers==4.40.2 -d WHEELS`, one per minor), then
`python scripts/gen_attention_defaults.py WHEELS`. The wheels are read as zip files with `ast`; nothing is imported.
A folder is recorded as "sdpa" when some class body assigns `_supports_sdpa = True` and no class assigns it a value
that is not a literal (a property or an expression, as in composite models: unknown, left out); "eager" when no class
in it assigns `_supports_sdpa = True` and no class makes it a property.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "trainlint" / "knowledge" / "attention_defaults.json"
_MODELING = re.compile(r"^transformers/models/([a-z0-9_]+)/modeling_[a-z0-9_]+\.py$")


def flags_of(source: str, flag: str) -> str:
    """"true" / "false" (every assignment a literal, at least one True / none True) or "unknown"."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "unknown"
    seen_true = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for item in node.body:
            if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == flag for t in item.targets):
                if not isinstance(item.value, ast.Constant):
                    return "unknown"
                seen_true = seen_true or item.value.value is True
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.target.id == flag:
                if not isinstance(item.value, ast.Constant):
                    return "unknown"
                seen_true = seen_true or item.value.value is True
            elif isinstance(item, ast.FunctionDef) and item.name == flag:
                return "unknown"  # a property (composite models forward their sub-model's flag)
    return "true" if seen_true else "false"


def read_wheel(path: Path) -> tuple[str, dict[str, dict[str, str]]]:
    version = path.name.split("-")[1]
    folders: dict[str, dict[str, list[str]]] = {}
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            m = _MODELING.match(name)
            if not m:
                continue
            text = zf.read(name).decode("utf-8", "replace")
            per = folders.setdefault(m.group(1), {"sdpa": [], "flash_attention_2": []})
            per["sdpa"].append(flags_of(text, "_supports_sdpa"))
            per["flash_attention_2"].append(flags_of(text, "_supports_flash_attn_2"))
    out: dict[str, dict[str, str]] = {}
    for folder, per in folders.items():
        out[folder] = {}
        for key, found in per.items():
            if "unknown" in found:
                out[folder][key] = "unknown"
            else:
                out[folder][key] = "true" if "true" in found else "false"
    return version, out


def main(wheel_dir: str) -> None:
    wheels = sorted(Path(wheel_dir).glob("transformers-4.*-py3-none-any.whl"),
                    key=lambda p: tuple(int(x) for x in p.name.split("-")[1].split(".")))
    lines: dict[str, dict[str, str]] = {}
    per_version: dict[str, dict[str, dict[str, str]]] = {}
    for wheel in wheels:
        version, folders = read_wheel(wheel)
        minor = ".".join(version.split(".")[:2])
        lines[minor] = {"read": version}
        per_version[minor] = folders
    # compact: per folder, per flag, the release lines where it is "true", "false" or "unknown"
    table: dict[str, dict[str, dict[str, list[str]]]] = {}
    for minor, folders in per_version.items():
        for folder, flags in folders.items():
            for key, state in flags.items():
                table.setdefault(folder, {}).setdefault(key, {}).setdefault(state, []).append(minor)
    data = {
        "format": 1,
        "generated_by": "scripts/gen_attention_defaults.py (ast over the released wheels' modeling files)",
        "source": "transformers/models/<folder>/modeling_*.py, class attributes _supports_sdpa / _supports_flash_attn_2",
        "release_lines": lines,
        "folders": table,
    }
    OUT.write_text(json.dumps(data, indent=None, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {OUT} ({len(table)} folders, {len(lines)} release lines)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
