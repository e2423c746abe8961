"""Which expanded commands launch Python, and how each launcher's own options are read (tables from their parsers).

Input: the fields of one simple command after expansion. Prefixes that only change how a command runs (`nohup`,
`env A=1`, `uv run`, `srun ...`) are peeled off; what remains is matched against the launch forms. Whether an
option takes a value comes from the launcher's real argument parser (cited at each table): guessing it wrong
would swallow the script path or hand a flag's neighbour to the wrong owner.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field

from trainlint.launch.shell_words import Field, slice_piece

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")


def normalise(name: str) -> str:
    return name.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Options:
    """One parser's options. `values`: canonical names that take a value (None: every option not a flag
    does, as in a parser whose only other action is `store`). `aliases`: spelled name -> canonical."""

    flags: frozenset[str]
    values: frozenset[str] | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    abbrev: bool = False  # argparse's allow_abbrev: an unambiguous prefix of a long option is that option
    counts: dict[str, int] = field(default_factory=dict)  # options taking two values (`--mca key value`)

    def resolve(self, spelled: str) -> tuple[str, bool | None]:
        """(canonical name, takes a value); None for the second when the parser does not know the option."""
        n = normalise(spelled)
        n = self.aliases.get(n, n)
        if n in self.flags:
            return n, False
        if self.values is None or n in self.values:
            return n, True
        if self.abbrev and spelled.startswith("--"):
            names = self.flags | self.values | set(self.aliases)
            hits = {self.aliases.get(k, k) for k in names if k.startswith(n)}
            if len(hits) == 1:
                hit = hits.pop()
                return hit, hit not in self.flags
        return n, None


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# torch 2.13.0, torch/distributed/run.py get_args_parser(): `action=check_env` options are flags (nargs=0),
# `action=env` ones take a value; each is spelled with dashes and with underscores. torch.distributed.launch
# adds --use-env / --use_env (torch/distributed/launch.py). argparse's default allow_abbrev applies.
TORCHRUN = Options(
    flags=_set("standalone module no_python run_path virtual_local_rank use_env"),
    values=_set("nnodes nproc_per_node rdzv_backend rdzv_endpoint rdzv_id rdzv_conf max_restarts monitor_interval "
                "start_method event_log_handler role log_dir redirects tee local_ranks_filter "
                "duplicate_stdout_filters duplicate_stderr_filters node_rank master_addr master_port local_addr "
                "logs_specs numa_binding signals_to_handle shutdown_timeout"),
    aliases={"m": "module", "r": "redirects", "t": "tee"}, abbrev=True)

# accelerate 1.15.0, accelerate/commands/launch.py launch_command_parser(): the `store_true` options below are
# flags; every other option is a plain store (one value). Its CustomArgumentParser takes `-` or `_` in names
# and sets allow_abbrev=False.
ACCELERATE = Options(
    flags=_set("quiet cpu multi_gpu tpu enable_cpu_affinity dynamo_use_fullgraph dynamo_use_dynamic "
               "dynamo_use_regional_compilation use_deepspeed use_fsdp use_parallelism_config use_megatron_lm "
               "same_network module no_python tpu_cluster no_tpu_cluster tpu_use_sudo downcast_bf16 "
               "fp8_use_autocast_during_eval debug help"),
    aliases={"q": "quiet", "m": "module", "t": "tee", "h": "help"})

# deepspeed 0.19.8, deepspeed/launcher/runner.py parse_args(): store_true flags below, the rest take one value;
# --num_accelerators is the same option as --num_gpus (dest num_gpus). Plain argparse: allow_abbrev applies.
DEEPSPEED = Options(
    flags=_set("module no_python no_local_rank no_ssh no_ssh_check force_multi save_pid bind_cores_to_rank quiet"),
    values=_set("hostfile include exclude num_nodes num_gpus master_port master_addr node_rank launcher "
                "launcher_args enable_each_rank_log autotuning bind_core_list ssh_port venv_script log_level"),
    aliases={"H": "hostfile", "i": "include", "e": "exclude", "q": "quiet", "num_accelerators": "num_gpus"},
    abbrev=True)

# Slurm srun(1) and sbatch(1) manual pages (Slurm 23.x): options with an *optional* argument (`--exclusive`,
# `--kill-on-bad-exit`, ...) take one only in the `--opt=value` form, so they count as flags here.
_SLURM_SHORT = {"A": "account", "B": "extra_node_info", "C": "constraint", "D": "chdir", "G": "gpus", "H": "hold",
                "I": "immediate", "J": "job_name", "K": "kill_on_bad_exit", "L": "licenses", "M": "clusters",
                "N": "nodes", "O": "overcommit", "Q": "quiet", "S": "core_spec", "T": "threads", "W": "wait",
                "X": "disable_status", "Z": "no_allocate", "a": "array", "b": "begin", "c": "cpus_per_task",
                "d": "dependency", "e": "error", "E": "preserve_env", "F": "nodefile", "h": "help", "i": "input",
                "k": "no_kill", "l": "label", "m": "distribution", "n": "ntasks", "o": "output", "p": "partition",
                "q": "qos", "r": "relative", "s": "oversubscribe", "t": "time", "u": "unbuffered", "v": "verbose",
                "w": "nodelist", "x": "exclude"}
SRUN = Options(
    flags=_set("contiguous disable_status exact exclusive hold immediate kill_on_bad_exit label multi_prog "
               "no_allocate no_kill overcommit overlap oversubscribe preserve_env pty quiet reboot spread_job "
               "test_only unbuffered verbose whole use_min_nodes nice bcast propagate resv_ports x11 send_libs "
               "help usage version"),
    aliases={k: v for k, v in _SLURM_SHORT.items() if k != "W"} | {"W": "wait"})
SBATCH = Options(
    flags=_set("contiguous exclusive hold overcommit oversubscribe parsable quiet reboot requeue no_requeue "
               "spread_job test_only use_min_nodes verbose wait no_kill ignore_pbs get_user_env help usage "
               "version"),
    aliases=_SLURM_SHORT)

# Open MPI 4 mpirun(1) and MPICH Hydra mpiexec(1): single-dash long options; a few take two words.
MPIRUN = Options(
    flags=_set("allow_run_as_root oversubscribe report_bindings display_map display_allocation tag_output "
               "timestamp_output merge_stderr_to_stdout quiet verbose V noprefix genvall genvnone envall envnone "
               "nolocal use_hwthread_cpus bind_to_core bind_to_socket bynode byslot hetero_nodes xml debug "
               "help"),
    aliases={"q": "quiet", "v": "verbose", "h": "help", "n": "np", "c": "np", "N": "npernode", "H": "host",
             "hosts": "host", "machinefile": "hostfile", "f": "hostfile", "ppn": "npernode", "wd": "wdir"},
    counts={"mca": 2, "gmca": 2, "genv": 2, "env": 2})

# Commands that only change how the next one runs. (value options, flag options, positional words before the
# command, option that changes directory). From each tool's --help / manual page (coreutils 9, util-linux 2.38,
# numactl 2, uv 0.5 `uv run`, conda 24 `conda run`, apptainer 1 `exec`).
_WRAPPERS: dict[str, tuple[Options, int]] = {
    "nohup": (Options(frozenset(), frozenset()), 0),
    "exec": (Options(_set("c l"), _set("a")), 0),
    "time": (Options(_set("p v q a portability verbose quiet append"), _set("o f output format")), 0),
    "command": (Options(_set("p"), frozenset()), 0),
    "builtin": (Options(frozenset(), frozenset()), 0),
    "env": (Options(_set("i ignore_environment 0 null v debug"), _set("u unset C chdir S split_string"),
                    {"C": "chdir", "u": "unset", "S": "split_string"}), 0),
    "nice": (Options(frozenset(), _set("n adjustment")), 0),
    "ionice": (Options(_set("t ignore"), _set("c n class classdata")), 0),
    "stdbuf": (Options(frozenset(), _set("i o e input output error")), 0),
    "timeout": (Options(_set("preserve_status foreground v verbose"), _set("s k signal kill_after")), 1),
    "taskset": (Options(_set("a all_tasks c cpu_list"), frozenset()), 1),
    "numactl": (Options(_set("l localalloc a all s show H hardware"),
                        _set("i interleave N cpunodebind m membind C physcpubind p preferred preferred_many")), 0),
}
_RUNNERS: dict[tuple[str, str], tuple[Options, int]] = {
    ("uv", "run"): (Options(
        _set("frozen locked no_sync isolated all_extras no_dev dev only_dev all_groups no_default_groups active "
             "no_active no_project script s gui_script module m exact all_packages no_editable no_env_file quiet q "
             "verbose v offline no_cache n native_tls no_progress no_config no_python_downloads reinstall upgrade "
             "U refresh compile_bytecode no_build_isolation no_build no_binary no_index no_sources "
             "managed_python no_managed_python"),
        _set("with with_editable with_requirements python p extra group only_group no_group package env_file "
             "directory project index default_index index_url extra_index_url find_links f index_strategy "
             "keyring_provider resolution prerelease exclude_newer link_mode config_setting C cache_dir "
             "config_file color allow_insecure_host no_extra"),
        {"m": "module", "s": "script", "p": "python", "q": "quiet", "v": "verbose"}), 0),
    ("conda", "run"): (Options(_set("no_capture_output live_stream v verbose q quiet"), _set("n name p prefix cwd"),
                               {"n": "name", "p": "prefix"}), 0),
    ("apptainer", "exec"): (Options(
        _set("nv nvccli rocm cleanenv e containall C contain c writable w fakeroot f no_home userns u no_init "
             "writable_tmpfs"),
        _set("B bind env home H pwd overlay o env_file W workdir S scratch mount security"), {"B": "bind"}), 1),
}
for _tool in ("poetry", "pipenv", "pdm", "hatch", "rye", "pixi"):
    _RUNNERS[(_tool, "run")] = (Options(frozenset(), None), 0)
_RUNNERS[("mamba", "run")] = _RUNNERS[("micromamba", "run")] = _RUNNERS[("conda", "run")]
_RUNNERS[("singularity", "exec")] = _RUNNERS[("apptainer", "exec")]
_JOBS = {"srun": SRUN, "mpirun": MPIRUN, "mpiexec": MPIRUN, "orterun": MPIRUN}
_SHELLS = frozenset(("bash", "sh", "zsh", "dash", "ksh"))
_CHDIR = frozenset(("chdir", "directory", "cwd", "pwd", "wdir"))  # options that set the command's directory
LAUNCHER_MODULES = {"torch.distributed.run": ("torchrun", TORCHRUN),
                    "torch.distributed.launch": ("torch.distributed.launch", TORCHRUN),
                    "accelerate.commands.launch": ("accelerate launch", ACCELERATE),
                    "deepspeed.launcher.runner": ("deepspeed", DEEPSPEED)}
# `python -m X` for these runs a tool, not training (`python -m pip install ...`).
_TOOL_MODULES = _set("pip venv virtualenv ensurepip http pytest unittest doctest pydoc timeit json site build "
                     "twine pre_commit black ruff isort flake8 mypy pylint jupyter notebook ipykernel nltk spacy "
                     "huggingface_hub wandb tensorboard uv poetry conda pipx")


def base(text: str | None) -> str:
    return posixpath.basename(text) if text else ""


def is_python(text: str | None) -> bool:
    return bool(text) and bool(_PYTHON.fullmatch(base(text)))


def looks_like_command(text: str | None) -> bool:
    b = base(text)
    return bool(b) and (is_python(b) or b.endswith(".py") or b in _WRAPPERS or b in _JOBS or b in _SHELLS
                        or b in ("torchrun", "deepspeed", "accelerate", "accelerate-launch", "uv", "conda", "sbatch",
                                 "llamafactory-cli", "lmf")
                        or any(b == k[0] for k in _RUNNERS))


@dataclass
class Peeled:
    job: list[tuple[str, list]] = field(default_factory=list)  # [("srun", [(name, Field | None)])]
    env: list[tuple[str, Field]] = field(default_factory=list)  # `env A=1`
    chdir: Field | None = None
    rest: list[Field] = field(default_factory=list)
    nested: list[Field] | None = None  # `bash -c STRING`, `eval ...`, `sbatch --wrap=...`: the string's fields
    positional: list[Field] = field(default_factory=list)  # `bash -c STRING name arg1 arg2`
    module: bool = False  # `uv run -m pkg`


def read_options(fields: list[Field], i: int, table: Options, stop_at_command: bool = True) -> tuple[list, int]:
    """Options from fields[i] on, argparse style; stops at the first word that is not an option."""
    opts: list[tuple[str, Field | None]] = []
    while i < len(fields):
        f = fields[i]
        t = f.text
        if t is None:
            split = f.after("=")
            if split is None or not split[0].startswith("-"):
                opts.append(("", f))  # unknown words here may hold any option (`torchrun $DIST_ARGS train.py`)
                i += 1
                continue
            t = split[0] + "=?"  # `--master_port=$PORT`: a known option with an unknown value
        if t == "--":
            return opts, i + 1
        if not t.startswith("-") or t == "-" or re.fullmatch(r"-\d+(\.\d+)?", t):
            return opts, i
        value: Field | None = None
        spelled = t
        if "=" in t:
            split = f.after("=")
            if split:
                spelled, value = split
        elif not t.startswith("--") and len(t) > 2 and t[1] in table.aliases and \
                table.resolve("-" + t[1])[1] and not table.resolve(t)[1] is not None:
            spelled, value = t[:2], _from_char(f, 2)  # `-Hhostfile`, `-n8`
        name, takes = table.resolve(spelled)
        if takes is None:  # not in the table: a flag when a command follows, else it takes the next word
            takes = value is None and i + 1 < len(fields) and not (stop_at_command and
                                                                    looks_like_command(fields[i + 1].text))
        if takes and value is None:
            count = table.counts.get(name, 1)
            if i + count < len(fields):
                value = fields[i + 1]
            i += count
        opts.append((name, value))
        i += 1
    return opts, i


def _from_char(f: Field, k: int) -> Field:
    out, pos = [], 0
    for p in f.pieces:
        t = p.text or ""
        if pos + len(t) <= k and p.text is not None:
            pos += len(t)
            continue
        out.append(slice_piece(p, max(0, k - pos), len(t)) if p.text is not None else p)
        pos += len(t)
    return Field(out)


def peel(fields: list[Field]) -> Peeled:
    """Take off wrappers and job launchers in front of the command."""
    out = Peeled()
    i = 0
    while i < len(fields):
        b = base(fields[i].text)
        nxt = fields[i + 1].text if i + 1 < len(fields) else None
        if b in _JOBS:
            opts, i = read_options(fields, i + 1, _JOBS[b])
            out.job.append((b, opts))
            for name, value in opts:
                if name in _CHDIR and value is not None:  # `srun --chdir`, `mpirun -wdir`
                    out.chdir = value
            continue
        if b == "command" and nxt in ("-v", "-V"):
            return Peeled()
        if b in _WRAPPERS or (b, nxt) in _RUNNERS:
            table, positional = _WRAPPERS[b] if b in _WRAPPERS else _RUNNERS[(b, nxt)]
            opts, i = read_options(fields, i + (1 if b in _WRAPPERS else 2), table)
            for name, value in opts:
                if name in _CHDIR and value is not None:
                    out.chdir = value
                if name == "split_string":
                    return Peeled()
                if name == "module" and b == "uv":
                    out.module = True
            if b == "env":
                while i < len(fields) and fields[i].text and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", fields[i].text):
                    split = fields[i].after("=")
                    if split:
                        out.env.append(split)
                    i += 1
            i += positional
            continue
        if b in _SHELLS and i + 1 < len(fields):
            j = i + 1
            while j < len(fields) and (fields[j].text or "").startswith("-") and "c" not in (fields[j].text or "") \
                    and not (fields[j].text or "").startswith("--"):
                j += 1
            flag = fields[j].text if j < len(fields) else None
            if flag and flag.startswith("-") and not flag.startswith("--") and "c" in flag and j + 1 < len(fields):
                out.nested, out.positional = [fields[j + 1]], fields[j + 2:]
                return out
        if b == "eval":
            out.nested = fields[i + 1:]
            return out
        if b == "sbatch":
            opts, _ = read_options(fields, i + 1, SBATCH)
            wrap = next((v for n, v in opts if n == "wrap"), None)
            if wrap is not None:
                out.job.append(("sbatch", [(n, v) for n, v in opts if n != "wrap"]))
                out.nested = [wrap]
                return out
            return Peeled()
        break
    out.rest = fields[i:]
    return out


@dataclass
class Launch:
    launcher: str
    script: Field | None
    module: str | None
    options: list  # [(name, Field | None)]
    args: list[Field]


def launch(fields: list[Field], module_first: bool = False) -> Launch | None:
    """The launch form of an expanded command (wrappers already peeled), or None when it runs no Python."""
    if not fields:
        return None
    if module_first:  # `uv run -m pkg.train`
        return _module("python", fields[0].text, [], fields[1:])
    name = fields[0].text
    b = base(name)
    if is_python(name):
        return python(fields)
    if b == "torchrun":
        return argparse_launch("torchrun", TORCHRUN, fields, 1)
    if b == "deepspeed":
        return argparse_launch("deepspeed", DEEPSPEED, fields, 1)
    if b == "accelerate" and len(fields) > 1 and fields[1].text == "launch":
        return argparse_launch("accelerate launch", ACCELERATE, fields, 2)
    if b == "accelerate-launch":
        return argparse_launch("accelerate launch", ACCELERATE, fields, 1)
    if b in ("llamafactory-cli", "lmf") and len(fields) > 1 and fields[1].text == "train":
        # LLaMA-Factory's own trainer run: a config file and `key=value` overrides, or HfArgumentParser flags
        # (llamafactory/hparams/parser.py read_args); frameworks/cli.py reads it as a framework config
        return Launch("llamafactory-cli train", None, None, [], fields[2:])
    if name and name.endswith(".py") and b != "setup.py":  # `./train.py`: its shebang runs Python
        return Launch("python", fields[0], None, [], fields[1:])
    return None


def python(fields: list[Field]) -> Launch | None:
    """`python [-u -O -X opt -W arg ...] (script | -m module) args`: CPython's own option rules."""
    opts: list[tuple[str, Field | None]] = []
    i = 1
    while i < len(fields):
        f = fields[i]
        t = f.text
        if t is None and i + 1 < len(fields) and (fields[i + 1].text or "").endswith(".py"):
            opts.append(("", f))  # `python $PYFLAGS train.py`: unknown words before the script
            i += 1
            continue
        if t is None or not t.startswith("-") or t == "-":
            break
        if t == "--":
            i += 1
            break
        if t.startswith("--"):
            if t in ("--help", "--version", "--help-env", "--help-xoptions", "--help-all"):
                return None
            if t == "--check-hash-based-pycs" and i + 1 < len(fields):
                opts.append((normalise(t), fields[i + 1]))
                i += 2
                continue
            opts.append((normalise(t), None))
            i += 1
            continue
        for k in range(1, len(t)):
            ch = t[k]
            if ch in "cmWX":
                value = _from_char(f, k + 1) if k + 1 < len(t) else (fields[i + 1] if i + 1 < len(fields) else None)
                if k + 1 >= len(t):
                    i += 1
                if ch == "c" or value is None:
                    return None  # `python -c "..."` runs inline code, not a training script
                if ch == "m":
                    return _module("python", value.text, opts, fields[i + 1:])
                opts.append((ch, value))
                break
            if ch in "hV":
                return None
            opts.append((ch, None))
        i += 1
    if i >= len(fields):
        return None
    script = fields[i]
    if script.text is not None and (not script.text.endswith((".py", ".pyw")) or base(script.text) == "setup.py"):
        return None
    return Launch("python", script, None, opts, fields[i + 1:])


def _module(launcher: str, module: str | None, opts: list, rest: list[Field]) -> Launch | None:
    if not module:
        return None
    if module in LAUNCHER_MODULES:
        label, table = LAUNCHER_MODULES[module]
        return argparse_launch(label, table, rest, 0)
    if module.split(".")[0] in _TOOL_MODULES or module == "torch.utils.collect_env":
        return None
    return Launch(launcher, None, module, opts, rest)


def argparse_launch(label: str, table: Options, fields: list[Field], i: int) -> Launch | None:
    opts, i = read_options(fields, i, table, stop_at_command=False)
    names = {n for n, _ in opts}
    if "help" in names or i >= len(fields):
        return None
    script = fields[i]
    if "module" in names:
        if script.text is None:
            return None
        return Launch(label, None, script.text, opts, fields[i + 1:])
    if script.text is not None and not script.text.endswith(".py"):
        return None  # `--no_python` with an executable, or not Python at all
    return Launch(label, script, None, opts, fields[i + 1:])
