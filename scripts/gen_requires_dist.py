"""Write src/trainlint/knowledge/requires_dist.json: what each trl / peft release's wheel requires of transformers,
trl and peft (its METADATA `Requires-Dist` lines without an environment marker: what `pip install trl==X` enforces on any
Python; an `extra ==` line holds only when that extra is asked for, a `python_version` one only on that Python).

knowledge/versions.py solves the versions of a run with these bounds together with the project's pins and the
file's calls (a repository pinning trl==0.12.2 runs on transformers < 4.47.0, whatever else it allows).

Usage: `python scripts/gen_requires_dist.py FOLDER` where FOLDER holds either wheels or their METADATA saved as
`<lib>-<version>.METADATA`, fetched with `pip download --no-deps --only-binary :all: <lib>==<version> -d FOLDER`
for every release to record (read 2026-12-06: trl 0.7.0-1.16.0, peft 0.2.0-0.21.2, every release on PyPI).
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "trainlint" / "knowledge" / "requires_dist.json"
LIBRARIES = ("transformers", "trl", "peft")
_REQ = re.compile(r"^Requires-Dist:\s*([A-Za-z0-9_.\-]+)\s*(?:\[[^\]]*\])?\s*\(?([^;()]*)\)?\s*(?:;(.*))?$", re.I)


def requires(metadata: str) -> dict[str, str]:
    """{library: spec} of the unconditional Requires-Dist lines naming transformers / trl / peft ("" = any)."""
    out: dict[str, str] = {}
    for line in metadata.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the description follows
        m = _REQ.match(line.strip())
        if not m:
            continue
        name, spec, marker = m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", ""), m.group(3) or ""
        if name in LIBRARIES and not marker.strip():  # an extra, or a Python version the run may not have
            out[name] = ",".join(filter(None, (out.get(name, ""), spec)))
    return out


def read(folder: Path) -> dict[str, dict[str, dict[str, str]]]:
    found: dict[str, dict[str, dict[str, str]]] = {}
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".whl":
            lib, version = path.name.split("-")[:2]
            with zipfile.ZipFile(path) as z:
                name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
                text = z.read(name).decode("utf-8", "replace")
        elif path.name.endswith(".METADATA"):
            lib, version = path.name[: -len(".METADATA")].split("-", 1)
            text = path.read_text(encoding="utf-8", errors="replace")
        else:
            continue
        found.setdefault(lib.lower(), {})[version] = requires(text)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    from trainlint.knowledge.versions import parse_version

    found = read(Path(argv[0]))
    out = {"format": 1,
           "generated_by": "scripts/gen_requires_dist.py from the wheels' METADATA (pip download --no-deps), "
                           "Requires-Dist lines without an environment marker",
           "requires": {lib: {v: found[lib][v] for v in sorted(found[lib], key=parse_version)} for lib in sorted(found)}}
    OUT.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}: " + ", ".join(f"{lib} {len(v)} releases" for lib, v in out["requires"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
