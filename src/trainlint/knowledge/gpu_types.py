"""GPU type names as launches write them (`#SBATCH --gres=gpu:a100_80gb:1`, `--constraint=l4`) mapped to the
GPU catalog (knowledge/gpu_table.py), only when the name leaves one memory size possible.

A Slurm type is whatever the cluster's admin wrote in gres.conf (or what `AutoDetect=nvml` derived from the
device name: `nvidia_a100-sxm4-80gb`, `tesla_t4`, `nvidia_h100_80gb_hbm3`), so the name is all there is to go on.
A family sold with more than one memory size is ambiguous without a size in the name:
- A100: 40 GB and 80 GB (both in GPUS; Modal's nvidia-smi totals list 40,960 and 81,920 MiB).
- V100: 16 GB and 32 GB.
- H100: 80 GB (SXM5 and PCIe) and 94 GB (H100 NVL, "2 x 94GB (188GB)" in AnandTech's "NVIDIA Announces H100
  NVL" specification table, www.anandtech.com/show/18780, March 2023, which lists the H100 PCIe and SXM at 80GB).
An ambiguous or unknown name maps to no GPU: the rules that judge the fit stay silent rather than guess.
"""

from __future__ import annotations

import re

from trainlint.knowledge.gpu_table import GPUS

# family token -> GPUS name (one memory size), or {size in GB (or "nvl"): GPUS name} when several exist
_FAMILIES: dict[str, str | dict[str, str]] = {
    "t4": "T4", "l4": "L4", "a10": "A10", "a10g": "A10G", "l40s": "L40S", "a6000": "A6000",
    "3090": "RTX-3090", "4090": "RTX-4090", "5090": "RTX-5090", "h200": "H200", "b200": "B200", "mi300x": "MI300X",
    "a100": {"40": "A100-40GB", "80": "A100-80GB"},
    "v100": {"16": "V100-16GB", "32": "V100-32GB"},
    "h100": {"80": "H100-80GB", "94": "H100-NVL", "nvl": "H100-NVL"},
}
# words a type name carries besides the family and the size (vendor, product line, form factor, memory kind)
_FILLER = frozenset("nvidia tesla geforce rtx gpu sxm sxm2 sxm3 sxm4 sxm5 pcie hbm2 hbm2e hbm3 hbm3e".split())
# architecture names: a constraint naming one leaves every model (and memory size) of it possible
_ARCHITECTURES = frozenset("kepler maxwell pascal volta turing ampere ada lovelace hopper blackwell".split())
_SIZE = re.compile(r"(\d+)gb?")  # "80gb", "80g"
_MIG = re.compile(r"[1-8]g")  # a MIG slice profile ("3g.40gb": compute slices, then memory): not the whole GPU


def _tokens(text: str) -> list[str]:
    key = text.strip().lower()
    key = re.sub(r"^rtx(?=\d{4}$)", "", key)  # "rtx3090"
    out = []
    for tok in re.split(r"[-_.\s]+", key):
        m = re.fullmatch(r"(rtx)(\d{4})", tok)
        out.extend(m.groups() if m else [tok] if tok else [])
    return out


def gpu_of_type(text: str) -> tuple[str | None, str]:
    """('A100-80GB', '') for a name that leaves one memory size; (None, why) otherwise. The why is '' when
    the name is not about a GPU model at all (a constraint such as `ib` or `skylake`)."""
    tokens = _tokens(text)
    families = [t for t in tokens if t in _FAMILIES]
    if not families:
        if any(t in _ARCHITECTURES for t in tokens):
            return None, f"`{text}` names an architecture, not a GPU model (its models differ in memory)"
        return None, ""
    if len(set(families)) > 1:
        return None, f"`{text}` names more than one GPU"
    family = families[0]
    rest = [t for t in tokens if t != family and t not in _FILLER]
    if any(_MIG.fullmatch(t) for t in rest) and sum(bool(_SIZE.fullmatch(t)) for t in rest) > 1:
        return None, f"`{text}` is a MIG slice, not a whole GPU"
    sizes = [m.group(1) for t in rest if (m := _SIZE.fullmatch(t))]
    others = [t for t in rest if not _SIZE.fullmatch(t)]
    entry = _FAMILIES[family]
    if isinstance(entry, str):
        if others or (sizes and not _same_size(entry, sizes)):
            return None, f"`{text}`: GPU type not known to trainlint"
        return entry, ""
    keys = sizes + [t for t in others if t in entry]
    unknown = [t for t in others if t not in entry]
    names = {entry[k] for k in keys if k in entry}
    if unknown or len(names) != 1 or any(k not in entry for k in keys):
        if not keys and not unknown:
            sold = " and ".join(f"{k} GB" for k in entry if k.isdigit())
            return None, f"`{text}` is ambiguous: the {family.upper()} is sold with {sold} of memory"
        return None, f"`{text}`: GPU type not known to trainlint"
    return names.pop(), ""


def _same_size(name: str, sizes: list[str]) -> bool:
    """`l4_24gb`: the size written agrees with the model's (GB as sold, within rounding of the MiB figure)."""
    mib = GPUS[name][0]
    return all(abs(int(s) * 1000**3 / 1024**2 - mib) / mib < 0.12 for s in sizes)
