"""GPU memory sizes by name, as the driver reports them (MiB), printed in GiB everywhere (units.fmt_bytes).

A "24GB" card is not 24 x 10^9 usable bytes: nvidia-smi reports a T4 as 15,360 MiB (15.0 GiB), an H100 80GB as
81,559 MiB. Sizes typed by the user (`--gpu 48GB`, `gpu = "48GiB"`) are read as GiB and printed as "48 GiB".
"""

from __future__ import annotations

import re

from trainlint.knowledge.gpu_table import GPUS  # (also re-exported: the catalog's users import it from here)
from trainlint.knowledge.gpu_types import gpu_of_type
from trainlint.units import GIB, MIB, fmt_bytes

# spellings the catalog names and the launch type names (gpu_types.py) do not cover, compacted as _compact does
_ALIASES = {"H100SXM": "H100", "H100SXM5": "H100", "H100PCIE": "H100", "H10080GBHBM3": "H100",
            "RTXA6000": "A6000"}


def _compact(text: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'RTX4090', 'a100 80gb' -> 'A10080GB': case, spaces and dashes do not count."""
    return re.sub(r"^(NVIDIA|AMD)?(GEFORCE|TESLA|INSTINCT)?", "", re.sub(r"[^A-Z0-9]", "", text.upper()))


def parse_gpu(text: str) -> tuple[str, int]:
    """'T4' -> ('T4', 15,360 MiB in bytes); 'rtx 4090', '4090', 'A100 80GB' -> their catalog entry;
    '24GB' / '24GiB' / '24G' -> ('24 GiB', 24 GiB in bytes)."""
    compact = _compact(text)
    name = next((n for n in GPUS if _compact(n) == compact), None) or _ALIASES.get(compact)
    why = ""
    if name is None:
        name, why = gpu_of_type(text)  # "4090", "nvidia_a100-sxm4-80gb": as launches write GPU types
    if name is not None:
        return name, GPUS[name][0] * MIB
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(GB|GIB|G)", re.sub(r"[\s_-]", "", text.upper()))
    if m:
        return f"{m.group(1)} GiB", int(float(m.group(1)) * GIB)
    raise ValueError(f"unknown GPU {text!r}{': ' + why.split(': ', 1)[-1] if why else ''}: give a size in GiB "
                     f"such as 24GB or one of {', '.join(GPUS)}")


def describe_gpu(name: str, capacity: int) -> str:
    """'T4 (15.0 GiB)', or just '48 GiB' when the user gave a size."""
    return name if name.endswith("GiB") else f"{name} ({fmt_bytes(capacity)})"
