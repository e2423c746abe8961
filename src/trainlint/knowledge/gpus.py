"""GPU memory sizes by name, as the driver reports them (MiB), printed in GiB everywhere.

A "24GB" card is not 24 x 10^9 usable bytes: nvidia-smi reports a T4 as 15,360 MiB (15.0 GiB), an H100 80GB as
81,559 MiB. Sizes typed by the user (`--gpu 48GB`, `gpu = "48GiB"`) are read as GiB and printed as "48 GiB".
"""

from __future__ import annotations

import re

GIB = 1024**3
MIB = 1024**2

_MODAL = "nvidia-smi totals listed in github.com/modal-labs/modal-client pull request #2797"
_VENDOR = "vendor's published size, read as GiB (no driver reading seen)"
# name -> (MiB the driver reports, where the figure comes from)
GPUS: dict[str, tuple[int, str]] = {
    "T4": (15_360, _MODAL), "L4": (23_034, _MODAL), "A10": (23_028, _MODAL),
    "A10G": (24 * 1024, _VENDOR), "V100-16GB": (16 * 1024, _VENDOR), "V100-32GB": (32 * 1024, _VENDOR),
    "V100": (32 * 1024, _VENDOR), "RTX-3090": (24 * 1024, _VENDOR), "RTX-4090": (24 * 1024, _VENDOR),
    "RTX-5090": (32 * 1024, _VENDOR), "A6000": (48 * 1024, _VENDOR), "L40S": (46_068, _MODAL),
    "A100-40GB": (40_960, _MODAL), "A100-80GB": (81_920, _MODAL), "A100": (81_920, _MODAL),
    "H100": (81_559, _MODAL + "; also 81559MiB in nvidia-smi output in github.com/wilicc/gpu-burn issue #114"),
    "H100-80GB": (81_559, _MODAL),
    "H100-NVL": (94 * 1024, _VENDOR + ": 94GB per GPU, AnandTech's H100 NVL specification table, www.anandtech.com/show/18780"),
    "H200": (141 * 1024, _VENDOR), "B200": (180 * 1024, _VENDOR),
    "MI300X": (192 * 1024, _VENDOR),
}


def fmt_gib(n: float) -> str:
    """Device memory in GiB: 16106127360 -> '15 GiB', 15.5 GiB -> '15.5 GiB', 48 GiB -> '48 GiB'."""
    value = n / GIB
    return f"{value:,.0f} GiB" if abs(value - round(value)) < 0.05 and value >= 10 else f"{value:,.1f} GiB"


def parse_gpu(text: str) -> tuple[str, int]:
    """'T4' -> ('T4', 15,360 MiB in bytes); '24GB' / '24GiB' / '24G' -> ('24 GiB', 24 GiB in bytes)."""
    key = text.strip().upper().replace(" ", "-").replace("_", "-")
    for name, (mib, _) in GPUS.items():
        if name.upper() == key:
            return name, mib * MIB
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*-?(GB|GIB|G)", key)
    if m:
        size = float(m.group(1))
        return f"{m.group(1)} GiB", int(size * GIB)
    raise ValueError(f"unknown GPU {text!r}: give a size in GiB such as 24GB or one of {', '.join(GPUS)}")


def describe_gpu(name: str, capacity: int) -> str:
    """'T4 (15.0 GiB)', or just '48 GiB' when the user gave a size."""
    return name if name.endswith("GiB") else f"{name} ({fmt_gib(capacity)})"
