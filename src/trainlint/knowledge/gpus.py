"""GPU memory sizes by name, as the vendors publish them (GiB of device memory)."""

from __future__ import annotations

import re

GIB = 1024**3

# Published device memory; usable memory is a little less (CUDA context, reserved pages).
GPUS = {
    "T4": 16, "L4": 24, "A10G": 24, "A10": 24, "V100-16GB": 16, "V100-32GB": 32, "V100": 32,
    "RTX-3090": 24, "RTX-4090": 24, "RTX-5090": 32, "A6000": 48, "L40S": 48, "A100-40GB": 40, "A100-80GB": 80,
    "A100": 80, "H100": 80, "H100-80GB": 80, "H200": 141, "B200": 180, "MI300X": 192,
}


def parse_gpu(text: str) -> tuple[str, int]:
    """'A100-80GB' -> ('A100-80GB', bytes); '24GB' / '24GiB' / '24G' -> ('24GB', bytes)."""
    key = text.strip().upper().replace(" ", "-").replace("_", "-")
    for name, gib in GPUS.items():
        if name.upper() == key:
            return name, gib * GIB
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*-?(GB|GIB|G)", key)
    if m:
        return f"{m.group(1)}GB", int(float(m.group(1)) * GIB)
    raise ValueError(f"unknown GPU {text!r}: give a size such as 24GB or one of {', '.join(GPUS)}")
