"""The cheap first look at a YAML file's bytes: could it be an axolotl or LLaMA-Factory training config?

Discovery asks this of every `.yml` / `.yaml` in the tree, so it reads only the head of the file and imports
nothing; launch/framework_config.py decides for real on the loaded keys.
"""

from __future__ import annotations

import re
from pathlib import Path

# Cheap first look at the bytes (discovery reads only files that pass both): the model key of either, and a
# top-level key only their training configs have (a TRL recipe or an accelerate config has neither).
LOOKS_LIKE = re.compile(rb"(?m)^(?:base_model|model_name_or_path)\s*:")
MARKER = re.compile(rb"(?m)^(?:sequence_len|micro_batch_size|adapter|sample_packing|plugins|lora_r|stage"
                    rb"|finetuning_type|template|cutoff_len)\s*:")


def looks_like(head: bytes) -> bool:
    return LOOKS_LIKE.search(head) is not None and MARKER.search(head) is not None


def looks_like_config(path: Path, head: bytes | None = None) -> bool:
    """Cheap: the bytes have a top-level `base_model:` or `model_name_or_path:` (discovery reads only those)."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    if head is None:
        try:
            with open(path, "rb") as f:
                head = f.read(256 * 1024)
        except OSError:
            return False
    return looks_like(head)
