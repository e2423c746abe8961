"""The GPU catalog: memory sizes by name, as the driver reports them (MiB), each with where the figure comes from.

A table only: knowledge/gpus.py parses and prints names against it, knowledge/gpu_types.py maps the GPU type
names launches write onto it.
"""

from __future__ import annotations


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
