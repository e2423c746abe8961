"""The environment a repository declares for its runs (requirements files, pyproject / setup.py dependencies, a conda
environment, a Dockerfile's install lines, a notebook's or script's `pip install` lines), read as text: which
packages it names. Never what is installed next to trainlint (that is trainlint's environment, not the run's).

The files are versions.py's PIN_FILES (the same files the version pins come from), plus `requirements/*.txt` and
Dockerfiles, walked up from the script's folder to the repository root (the folder holding `.git`). Installation
notes (README, INSTALL, shell scripts, Makefiles) declare nothing but may say "pip install flash-attn" by hand: a
package they name counts as present, so a rule that asks "is it absent?" stays silent on them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from trainlint.knowledge.versions import PIN_FILES

_EXTRA_FILES = ("requirements/*.txt", "Dockerfile*", "*.dockerfile", "docker/Dockerfile*")
_NOTES = ("README*", "INSTALL*", "*.sh", "Makefile")
# Base images known to ship no training extras: what a Dockerfile FROM anything else brings is not known (NVIDIA's
# PyTorch containers and axolotl's images ship flash-attn), so such a Dockerfile leaves the environment unknown.
_BARE_IMAGES = re.compile(r"^(?:docker\.io/)?(?:library/)?(?:python|ubuntu|debian|alpine|nvidia/cuda|"
                          r"continuumio/miniconda3|mambaorg/micromamba|pytorch/pytorch)(?::|$|\s)", re.I)
_MAX_BYTES = 400_000


@dataclass(frozen=True)
class Environment:
    """What the repository declares. `files`: the declaring files (a script's own install lines: its display name);
    `texts`: each declaring file's text; `notes`: installation notes' texts, which declare nothing but can name a
    package installed by hand."""

    files: tuple[str, ...]
    texts: tuple[str, ...]
    notes: tuple[tuple[str, str], ...] = ()

    def names(self, pattern: re.Pattern[str], notes: bool = True) -> str | None:
        """The first declaring file (or, with `notes`, installation note) whose text matches `pattern`, else None."""
        for where, text in tuple(zip(self.files, self.texts)) + (self.notes if notes else ()):
            if pattern.search(text):
                return where
        return None

    @property
    def where(self) -> str:
        return " and ".join(self.files[:3]) + (f" (+{len(self.files) - 3} more)" if len(self.files) > 3 else "")


def _read(path: Path) -> str | None:
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _declares(path: Path, text: str) -> bool | None:
    """Whether a file declares packages (True), declares none (False: a pyproject with only tool settings), or
    leaves the environment unknown (None: a Dockerfile built on an image with its own packages)."""
    name = path.name.lower()
    if name.startswith("requirements") or path.parent.name == "requirements":
        return any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines())
    if name == "pyproject.toml":
        return bool(re.search(r"^\s*(?:dependencies\s*=|\[tool\.poetry\.dependencies\]|\[project\.optional-"
                              r"dependencies\])", text, re.M))
    if name in ("setup.py", "setup.cfg"):
        return "install_requires" in text
    if name.startswith("environment."):
        return bool(re.search(r"^dependencies\s*:", text, re.M))
    if "dockerfile" in name:
        images = re.findall(r"^\s*FROM\s+(?:--\S+\s+)*(\S+)", text, re.M | re.I)
        stages = set(re.findall(r"^\s*FROM\s+.*\bAS\s+(\S+)", text, re.M | re.I))
        if any(not _BARE_IMAGES.match(image) and image not in stages for image in images):
            return None
        return bool(re.search(r"\b(?:pip3?|uv pip|conda|mamba)\s+install\b", text))
    return False


def _walk(directory: Path) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], bool]:
    """(declaring files with texts, notes with texts, whether something leaves the environment unknown) from
    `directory` up to its repository root. Not cached: only a load that asks for a package a rule checks reads it."""
    declared: list[tuple[str, str]] = []
    notes: list[tuple[str, str]] = []
    unknown = False
    for folder in (directory, *directory.parents):
        seen: set[Path] = set()
        for pattern in PIN_FILES + _EXTRA_FILES:
            for path in sorted(folder.glob(pattern)):
                if path in seen or not path.is_file():
                    continue
                seen.add(path)
                text = _read(path)
                if text is None:
                    continue
                says = _declares(path, text)
                if says is None:
                    unknown = True
                elif says:
                    declared.append((str(path), text))
        for pattern in _NOTES:
            for path in sorted(folder.glob(pattern)):
                text = _read(path) if path.is_file() else None
                if text is not None:
                    notes.append((str(path), text))
        if (folder / ".git").exists():
            root = folder
            break
    else:
        root = directory

    def shown(pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        # as the repository names them: "requirements.txt", "docker/Dockerfile"
        return tuple((os.path.relpath(path, root), text) for path, text in pairs)

    return shown(declared), shown(notes), unknown


_PIP_LINE = re.compile(r"(?:pip3?|uv\s+pip|uv\s+add)\s+install\b[^\n]*|uv\s+add\b[^\n]*")


def declared_environment(directory: Path, script_text: str = "", script_name: str = "") -> Environment | None:
    """The environment the repository around `directory` declares, with the script's own `pip install` lines (a
    notebook's `!pip install` cells are comments of its source, notebook.py); None when nothing is declared or
    something declared is not readable (a Dockerfile on an image with its own packages): nothing can be known."""
    declared, notes, unknown = _walk(directory.resolve())
    if unknown:
        return None
    own = _PIP_LINE.findall(script_text)
    files = tuple(path for path, _ in declared) + ((script_name,) if own else ())
    texts = tuple(text for _, text in declared) + (("\n".join(own),) if own else ())
    if not files:
        return None
    return Environment(files, texts, notes)


# flash-attn's distribution names and import name, in requirements, extras (`axolotl[flash-attn]`), wheel URLs
# (`flash_attn-2.7.4+cu12...whl`) and install lines.
FLASH_ATTN = re.compile(r"flash[-_]?attn|flash-attention", re.I)
# The `kernels` package (huggingface/kernels) as a requirement, or a transformers extra that installs it (METADATA
# `Requires-Dist: kernels; extra == ...`: 4.57.6 hub-kernels / integrations / all / dev / dev-torch; 5.20.0 kernels /
# integrations / all / dev; 5.25.0 a core requirement). Read in declaring files only (`names(..., notes=False)`).
KERNELS = re.compile(r"^\s*['\"]?kernels(?![\w-])|(?<![\w.-])kernels\s*[=<>~]=?|\binstall\b[^\n]*\skernels(?![\w-])|"
                     r"transformers\s*\[[^\]]*\b(?:hub-kernels|kernels|integrations|all|dev|dev-torch)\b", re.I | re.M)


@lru_cache(maxsize=4096)
def environment_stamp(directory: Path) -> str:
    """The names, sizes and mtimes of the files `declared_environment` reads from `directory` up to its repository
    root: the result cache's key (runner.py), so adding flash-attn to requirements.txt re-lints. What lies above a
    folder is its parent's answer (cached), as in versions.project_pins."""
    stamp = []
    for pattern in PIN_FILES + _EXTRA_FILES + _NOTES:
        for path in sorted(directory.glob(pattern)):
            try:
                st = path.stat()
            except OSError:
                continue
            stamp.append(f"{path.name}:{st.st_size}:{st.st_mtime_ns}")
    if not (directory / ".git").exists() and directory.parent != directory:
        stamp.append(environment_stamp(directory.parent))
    return "|".join(stamp)
