"""GPU memory sizes by name, as the driver reports them (MiB), printed in GiB everywhere (memory.fmt_bytes).

A "24GB" card is not 24 x 10^9 usable bytes: nvidia-smi reports a T4 as 15,360 MiB (15.0 GiB), an H100 80GB as
81,559 MiB. Sizes typed by the user (`--gpu 48GB`, `gpu = "48GiB"`) are read as GiB and printed as "48 GiB".
"""

from __future__ import annotations

import re

from trainlint.memory import GIB, MIB, fmt_bytes

_MODAL = "nvidia-smi totals listed in github.com/modal-labs/modal-client pull request #2797"
_VENDOR = "vendor's published size, read as GiB (no driver reading seen)"


def _smi(issue: str) -> str:
    return f"nvidia-smi's total in the output quoted in github.com/{issue}"


# name -> (MiB the driver reports, where the figure comes from)
GPUS: dict[str, tuple[int, str]] = {
    "T4": (15_360, _MODAL), "L4": (23_034, _MODAL), "A10": (23_028, _MODAL),
    "A10G": (23_028, _smi("NVIDIA/DCGM issue #232")),
    "V100-16GB": (16 * 1024, _VENDOR), "V100-32GB": (32 * 1024, _VENDOR), "V100": (32 * 1024, _VENDOR),
    "RTX-3090": (24_576, _smi("noonghunna/club-3090 issue #1128")),
    "RTX-4090": (24_564, _smi("RLinf/RLinf issue #255")),
    "RTX-5090": (32_607, _smi("noonghunna/club-3090 issue #1261")),
    "A6000": (48 * 1024, _VENDOR), "L40S": (46_068, _MODAL),
    "A100-40GB": (40_960, _MODAL), "A100-80GB": (81_920, _MODAL), "A100": (81_920, _MODAL),
    "H100": (81_559, _MODAL + "; also in github.com/wilicc/gpu-burn issue #114 and NVIDIA/nccl issue #1264 (SXM); "
             "no PCIe card's total seen, taken to be the same 80 GB"),
    "H100-80GB": (81_559, _MODAL),
    "H100-NVL": (95_330, "NVML's total, 99,961,274,368 bytes, for an NVIDIA H100 NVL in "
                 "github.com/fastfetch-cli/fastfetch issue #1658 (vendor: 94 GB)"),
    "H200": (143_771, "nvidia-smi on the H200 of ../shared/gpu-truth/README.md (driver 580.159.04)"),
    "B200": (183_359, _smi("NVIDIA/TensorRT-LLM issue #10278")),
    "MI300X": (196_592, "8 x 25,767,706,624 bytes, the memory bank of each of its 8 CPX partitions in "
               "github.com/ROCm/legacy-rocm-build issue #4750 (no whole-GPU reading seen; vendor: 192 GB)"),
}
# spellings the catalog names and the launch type names (gpu_types.py) do not cover, compacted as _compact does
_ALIASES = {"H100SXM": "H100", "H100SXM5": "H100", "H100PCIE": "H100", "H10080GBHBM3": "H100",
            "RTXA6000": "A6000"}


def _compact(text: str) -> str:
    """'NVIDIA GeForce RTX 4090' -> 'RTX4090', 'a100 80gb' -> 'A10080GB': case, spaces and dashes do not count."""
    return re.sub(r"^(NVIDIA|AMD)?(GEFORCE|TESLA|INSTINCT)?", "", re.sub(r"[^A-Z0-9]", "", text.upper()))


def parse_gpu(text: str) -> tuple[str, int]:
    """'T4' -> ('T4', 15,360 MiB in bytes); 'rtx 4090', '4090', 'A100 80GB' -> their catalog entry;
    '24GB' / '24GiB' / '24G' -> ('24 GiB', 24 GiB in bytes)."""
    from trainlint.knowledge.gpu_types import gpu_of_type

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
