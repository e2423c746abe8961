"""Write src/trainlint/knowledge/api_fields.json: for every TrainingArguments / TRL config field whose presence is
bounded by the releases read in knowledge/arguments.json, its first release and the first release without it.

Why a second file: arguments.json (all fields with their types and defaults, 180+ releases) takes a large part of
a pre-commit run to load, while the version bound of a keyword needs only this index (knowledge/api_versions.py).
Regenerate after bench/gen_argument_fields.py: `python scripts/gen_api_fields.py`; tests/test_api_versions.py
checks that the committed file is what this script writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "trainlint" / "knowledge" / "api_fields.json"


def build() -> dict:
    from trainlint.knowledge import api_versions

    out: dict = {"format": 1, "generated_by": "scripts/gen_api_fields.py from knowledge/arguments.json",
                 "libraries": {}}
    for lib in ("transformers", "trl"):
        versions, table = api_versions._presence(lib)
        classes = sorted({name for snapshot in table for name in snapshot})
        entry: dict = {"read": [versions[0], versions[-1]], "releases": list(versions), "classes": {}}
        for name in classes:
            fields = sorted({f for i in range(len(versions)) for f in api_versions._fields_at(table, name, i)})
            bounded = {}
            for field in fields:
                since, until, _ = api_versions.scan_field_range(lib, name, field)
                if since or until:
                    bounded[field] = [".".join(map(str, since)) if since else None,
                                      ".".join(map(str, until)) if until else None]
            if bounded:
                entry["classes"][name] = bounded
        out["libraries"][lib] = entry
        if lib == "transformers":  # a TRL config keyword that TrainingArguments has is decided by transformers
            out["training_arguments_fields"] = sorted({f for i in range(len(versions))
                                                       for f in api_versions._fields_at(table, "TrainingArguments", i)})
    return out


def main() -> None:
    OUT.write_text(json.dumps(build(), sort_keys=True, separators=(",", ":")) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    main()
