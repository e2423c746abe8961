"""Byte units and the one formatter every memory figure is printed with (GiB, as nvidia-smi and torch.cuda report).

At the bottom of the layers: the knowledge tables (GPU sizes) and the memory arithmetic both print through it.
`trainlint.memory` re-exports these names.
"""

from __future__ import annotations

GIB = 1024**3
MIB = 1024**2


def fmt_bytes(n: float) -> str:
    """Every memory figure trainlint prints, in binary units as nvidia-smi and torch.cuda report them: from 1 GiB up
    in GiB with one decimal ('24.0 GiB', '1,649.3 GiB'); below it in MiB, then KiB, one decimal under 10 and whole
    above ('320 MiB', '1.5 MiB'); under 1 KiB in bytes."""
    for scale, unit in ((GIB, "GiB"), (MIB, "MiB"), (1024, "KiB")):
        if n >= scale:
            value = n / scale
            return f"{value:,.1f} {unit}" if value < 10 or unit == "GiB" else f"{value:,.0f} {unit}"
    return f"{int(n)} B"
