"""Shell launchers read statically: the Python training commands a .sh / .slurm file or a README block runs.

The public face of the shell reader. It imports nothing heavy: the lexer and the walker (shell_lex, shell_parse,
shell_words, shell_expand, shell_run, shell_forms) load on the first launcher read, so trainlint starts as fast
when no launcher exists.

What a Word means, for the layer that binds arguments:
- text: the word after quote removal and expansion of what the file itself sets; None when it depends on
  anything else ($1, $@, an unset variable, $(cmd), a glob, a README placeholder), with `note` saying why. A
  known text can carry a note too: the default of `${VAR:-d}` when VAR is not set in the file (or only by the
  caller, through a shell option parser), a SLURM_* value taken from the #SBATCH header.
- span / raw: the token as written in the command (`$MODEL`, `"${ARGS[@]}"`, `$training_commands`): every word a
  token expands to shares that token's span. For `--opt=value` options the value has its own span.
- origin: where the value is written when the word is one variable's value written in one place in this file
  (the `8` of `GPUS_PER_NODE=8`, a word of a heredoc, a `for` list item, a function's call argument); None for
  literals, mixed words and values from other files.
- Invocation.cwd: after `cd`, `pushd`, `env -C`, `srun --chdir`; `cd "$(dirname "$0")"` resolves against the
  launcher's own path as given. job_options: srun / mpirun / sbatch --wrap options (innermost first), then the
  #SBATCH header lines. An entry named "" in options / job_options is a word whose value is unknown (it may be
  any option, so defaults are not safe to assume).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from trainlint.launch.model import Invocation, ShellReading, Word

LAUNCHER_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
_SHELLS = frozenset(("sh", "bash", "zsh", "dash", "ksh"))
_JOB_PREFIXES = frozenset(("srun", "mpirun", "mpiexec", "orterun", "sbatch"))


def read_shell(text: str, file: Path, read: Callable[[Path], str | None] | None = None) -> ShellReading:
    """Every command in `text` that runs a Python script or module, as bash would run it (nothing is executed).

    `read` loads a file named by `source` / `.` (relative to `file`'s folder); without it, or when it returns
    None, what that file sets is unknown. Unreadable input yields LaunchProblems, never an exception.
    """
    from trainlint.launch.shell_run import Reader

    reader = Reader(file, read)
    reader.feed(text)
    invocations, problems = reader.result()
    return ShellReading(invocations, problems)


def read_markdown(text: str, file: Path) -> ShellReading:
    """The launches in a Markdown file's fenced shell blocks, with spans in the Markdown file."""
    from trainlint.launch.markdown import read_markdown as read

    return read(text, file)


def looks_like_launcher(path: Path, head: bytes) -> bool:
    """A shell script by its name (.sh .bash .slurm .sbatch) or by a shell shebang in its first bytes."""
    if path.suffix.lower() in LAUNCHER_SUFFIXES:
        return True
    if not head.startswith(b"#!"):
        return False
    words = head[2:].split(b"\n", 1)[0].decode("latin-1").split()
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    if program == "env":  # `#!/usr/bin/env bash`, `#!/usr/bin/env -S bash -e`
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        program = rest[0].rsplit("/", 1)[-1] if rest else ""
    return program in _SHELLS


def cut_short(inv: Invocation) -> bool:
    """The command's line ends in a backslash and a blank: bash passes the blank as one more argument (`" "`) and
    ends the command there, so the lines meant as its continuation are not part of it. Such a command is not the
    launch as written (the reader reports it, TL005), so no script is checked under it."""
    return bool(inv.args) and inv.args[-1].raw in ("\\ ", "\\\t")


def world_size(inv: Invocation) -> int | None:
    """How many processes the command starts, when the launch states it with literals; None otherwise.

    torchrun / torch.distributed.launch: nproc_per_node x nnodes (their defaults are 1 and 1; `auto`, `gpu` or
    an elastic range like `1:4` is None). deepspeed: the GPUs of --include, else num_gpus x num_nodes (no
    --num_gpus: every GPU of the machine, None). accelerate launch: num_processes (absent: its config file
    decides, which the caller reads). python: 1, or the task count of an srun / mpirun in front of it. Words
    whose value is unknown among the launcher's options (`torchrun $DIST_ARGS train.py`) make a default unsafe.
    """
    words = inv.launcher.split()
    prefixes = []
    while words and words[0] in _JOB_PREFIXES:
        prefixes.append(words.pop(0))
    core = " ".join(words)
    unknown_words = any(name == "" for name, _ in inv.options)
    env = dict(inv.env)
    if core in ("torchrun", "torch.distributed.launch"):
        nproc = inv.option("nproc_per_node") if inv.has_option("nproc_per_node") else env.get("PET_NPROC_PER_NODE")
        nnodes = inv.option("nnodes") if inv.has_option("nnodes") else env.get("PET_NNODES")
        if unknown_words and (nproc is None or nnodes is None):
            return None
        per_node = 1 if nproc is None else _count(nproc)
        nodes = 1 if nnodes is None else _nnodes(nnodes)
        return per_node * nodes if per_node and nodes else None
    if core == "deepspeed":
        if inv.has_option("exclude"):
            return None
        if inv.has_option("include"):
            return _include(inv.option("include"))
        if inv.has_option("num_gpus"):
            gpus = _count(inv.option("num_gpus"))
        elif not unknown_words and env.get("CUDA_VISIBLE_DEVICES") and env["CUDA_VISIBLE_DEVICES"].text:
            gpus = len([d for d in env["CUDA_VISIBLE_DEVICES"].text.split(",") if d.strip()])
        else:
            return None
        if inv.has_option("num_nodes"):
            nodes = _count(inv.option("num_nodes"))
        else:
            nodes = None if unknown_words or inv.has_option("hostfile") else 1
        return gpus * nodes if gpus and nodes else None
    if core == "accelerate launch":
        return _count(inv.option("num_processes"))
    if core == "python":
        tasks = [p for p in prefixes if p != "sbatch"]  # `sbatch --wrap` runs its command once
        if not tasks:
            return 1
        if any(name == "" for name, _ in inv.job_options):
            return None
        if tasks[-1] == "srun":
            if inv.job_option("ntasks") is not None:
                return _count(inv.job_option("ntasks"))
            nodes = _count(inv.job_option("nodes")) if inv.job_option("nodes") is not None else 1
            per_node = inv.job_option("ntasks_per_node")
            if per_node is None:
                return nodes
            tasks = _count(per_node)
            return tasks * nodes if tasks and nodes else None
        if tasks[-1] in ("mpirun", "mpiexec", "orterun"):
            return _count(inv.job_option("np"))
    return None


def _count(word: Word | None) -> int | None:
    if word is None or word.text is None or not word.text.strip().isdigit():
        return None
    n = int(word.text)
    return n if n > 0 else None


def _nnodes(word: Word | None) -> int | None:
    """`2` or `2:2`; an elastic range (`1:4`) is not a fixed count."""
    if word is None or word.text is None:
        return None
    low, _, high = word.text.partition(":")
    if high and high != low:
        return None
    return _count(Word(low, word.span))


def _include(word: Word | None) -> int | None:
    """deepspeed --include `host:0,1@host2:2`: each host with its slots (runner.py parse_node_config_list)."""
    if word is None or not word.text:
        return None
    slots: dict[str, set[str]] = {}
    for node in word.text.split("@"):
        host, sep, ids = node.partition(":")
        if not sep or not ids:
            return None  # a whole host: as many GPUs as it has
        slots.setdefault(host, set()).update(i.strip() for i in ids.split(",") if i.strip())
    return sum(len(s) for s in slots.values()) or None
