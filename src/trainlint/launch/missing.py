"""What a launcher names that is not there, decided so that a finding means a broken launch of this repository.

- A script it runs (TL006): reported when the repository shows the script is its own: the folder the script would
  be in is in the repository, or a file of that name is (a moved script: the finding names it). A script under a
  folder the repository does not have (another repository's checkout, a dataset's own tool, a folder the run
  creates) is not this repository's to check: it is skipped, with a `--verbose` note.
- A config it passes (TL005): only a word the launch reads as a config (an args file or recipe before the first
  option, or the value of a `--config...` / `--deepspeed` / `--recipe` / `--fsdp...` option), not a data file or an
  output (`--save_path x.json`), and not one the launcher creates, downloads or tests for first (Invocation.made).
  A relative path after a `cd` to an unknown folder cannot be looked up, so it is not reported either.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from trainlint.launch.model import Invocation, Word

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
# An option whose value the program writes: `--save_path`, `--output_dir`, `--out-file`, `--dst`, `--result-upload-file`
_OUTPUT = re.compile(r"(?:^|_)(?:out|output|outputs|save|dump|write|dst|dest|upload|log|logging)(?:_|$)")
_CONFIG = re.compile(r"config|deepspeed|recipe|fsdp|args_file")


def option_name(text: str) -> str:
    """`--Output-File=x` -> `output_file`."""
    return text.lstrip("-").split("=", 1)[0].replace("-", "_").lower()


def is_output_option(name: str) -> bool:
    return bool(_OUTPUT.search(name))


def _is_option(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not text[1:2].isdigit()


def output_words(inv: Invocation) -> list[Word]:
    """The values of the invocation's output options (every word up to the next option: `--out a.json b.json`)."""
    out, governing = [], None
    for word in inv.args:
        text = word.text or ""
        if _is_option(text):
            governing = option_name(text)
            if "=" in text and is_output_option(governing):
                out.append(Word(text.split("=", 1)[1], word.span, word.raw))
            continue
        if governing is not None and is_output_option(governing):
            out.append(word)
    return out


def config_words(inv: Invocation) -> list[Word]:
    """The words of the invocation the launch reads as config files (see the module docstring)."""
    out, governing = [], None
    for word in inv.args:
        text = word.text or ""
        if _is_option(text):
            governing = option_name(text)
            continue
        if governing is None or (_CONFIG.search(governing) and not is_output_option(governing)):
            out.append(word)
    for name, word in inv.options:
        if word is not None and _CONFIG.search(name) and not is_output_option(name):
            out.append(word)
    return [w for w in out if w.text and w.text.endswith(CONFIG_SUFFIXES) and "=" not in w.text]


def made_before(inv: Invocation, text: str) -> bool:
    """The launcher creates, downloads or tests for this path before the command runs (Invocation.made)."""
    path = posixpath.normpath(posixpath.join(inv.cwd or "", text))
    return any(path == m or (m.endswith("/") and path.startswith(m)) for m in inv.made)


def missing_configs(inv: Invocation, launcher: Path, root: Path) -> list[Word]:
    """Config words that name no file, looked up where the command runs (after its `cd`) and at the root."""
    if inv.cwd is None:
        bases = [root]
    elif inv.cwd:
        bases = [launcher.parent / inv.cwd, root / inv.cwd, root]
    else:
        bases = [launcher.parent, root]
    out = []
    for word in config_words(inv):
        rel = Path(word.text)
        if rel.is_absolute():
            if not rel.is_file():
                out.append(word)
            continue
        if inv.cwd is None or made_before(inv, word.text):
            continue
        if not any((b / rel).is_file() for b in bases):
            out.append(word)
    return out


def script_verdict(inv: Invocation, launcher: Path, root: Path, text: str, tree: tuple[Path, ...]) -> tuple[str, str]:
    """For a launched `.py` that does not exist: ("TL006", what to add to the message), or ("skip", why).

    A run in a folder that is not in the repository (a `cd` into a dataset's folder) runs what is there, not the
    repository's: skipped. Otherwise the script is the repository's when its folder is, or when a file of that
    name is elsewhere in the tree (a moved script, named in the message); a script under a folder the repository
    does not have (another repository's checkout) is skipped."""
    rel = Path(inv.script.text)
    if rel.is_absolute():
        return "TL006", ""
    if made_before(inv, inv.script.text):
        return "skip", "the launcher creates or downloads it first"
    if inv.cwd is None:
        return "skip", "it runs after a `cd` to a folder not known here"
    bases = [launcher.parent / inv.cwd, root / inv.cwd] if inv.cwd else [launcher.parent, root]
    if not any(b.is_dir() for b in bases):
        return "skip", f"it runs in {inv.cwd}/, a folder that is not in this repository"
    same_name = [p for p in tree if p.name == rel.name]
    hint = ""
    if same_name:
        best = max(same_name, key=lambda p: _common_tail(p, rel))
        hint = f"; {best.relative_to(root).as_posix()} has that name (moved?)"
    if hint or any((b / rel).parent.is_dir() for b in bases):
        return "TL006", hint
    folder = posixpath.normpath(posixpath.join(inv.cwd, rel.parent.as_posix()))
    why = f"the folder {folder}/ is not in this repository"
    url = re.search(r"[\w+.-]+://\S*/" + re.escape(rel.parts[0]) + r"(?:\.git)?\b", text)
    if url:
        why += f"; the launcher names {url.group().rstrip('.,;)')}"
    return "skip", why


def _common_tail(path: Path, rel: Path) -> int:
    n = 0
    for a, b in zip(reversed(path.parts), reversed(rel.parts)):
        if a != b:
            break
        n += 1
    return n
