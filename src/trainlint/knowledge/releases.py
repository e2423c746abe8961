"""The releases read: the small api_fields.json index (scripts/gen_api_fields.py) of the bounded argument fields and
of every release of transformers / trl read into arguments.json.

Its own module so that versions.py (which release applies) and api_versions.py (which releases a script's calls
run on) both read it without importing each other.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache


@lru_cache(maxsize=1)
def api_index() -> dict:
    """api_fields.json (scripts/gen_api_fields.py): the bounded fields only, a small file to load."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api_fields.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def released(lib: str) -> tuple[str, ...]:
    """Every release of `lib` read in arguments.json, oldest first (from the small index)."""
    return tuple(api_index()["libraries"].get(lib, {}).get("releases", ()))
