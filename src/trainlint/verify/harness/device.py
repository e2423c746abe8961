"""What the run ran on, recorded in the result (``device_info``) so a measured number can be compared only with
numbers from the same card, driver and library versions. Only what exists is recorded; the rest is null."""

from __future__ import annotations

import os
import platform

LIBRARIES = ("torch", "transformers", "peft", "trl", "accelerate", "liger-kernel", "bitsandbytes")


def device_info(torch, memory) -> dict:
    """CUDA: device name, compute capability, total memory, driver, the CUDA runtime torch was built with. CPU:
    processor, core count, physical memory. Both: torch / library / Python versions and the allocator setting."""
    info: dict = {
        "kind": memory.kind,
        "torch": getattr(torch, "__version__", None),
        "torch_cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "libraries": _library_versions(),
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "name": None, "driver": None, "total_memory": None,
    }
    if memory.kind == "cuda":
        info.update(_cuda(torch, memory))
    else:
        info.update(name=platform.processor() or platform.machine() or None, cpu_count=os.cpu_count(),
                    total_memory=_physical_memory())
    return info


def _cuda(torch, memory) -> dict:
    out: dict = {"driver": memory.driver_version()}
    try:
        index = torch.cuda.current_device()
        out["index"] = index
        out["name"] = torch.cuda.get_device_name(index)
    except Exception:
        return out
    try:
        props = torch.cuda.get_device_properties(index)
        out["total_memory"] = int(props.total_memory)
        out["capability"] = f"{props.major}.{props.minor}"
    except Exception:
        pass
    return out


def _physical_memory() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _library_versions() -> dict:
    """Installed distributions, read from their metadata (importing them here would change what the script
    imports first)."""
    from importlib import metadata

    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        except Exception:
            continue
    return out


def device_label(torch, memory) -> str:
    if memory.kind == "cuda":
        index = torch.cuda.current_device()
        return f"cuda:{index} {torch.cuda.get_device_name(index)}"
    return "cpu"


