"""What `trainlint verify TARGET` runs: a script with its arguments, and the launch those arguments come from.

A target is one of
* a script (``train.py [-- ARGS]``): run with ARGS, and linted under exactly that command line;
* a launcher (``scripts/train.sh``): its first invocation of a Python script, run with its arguments from the
  folder it runs in (after its ``cd``); linted under that launcher;
* a recipe or args file (``recipes/sft.yaml``, ``args.json``): the first invocation, in the repository's
  launchers, that passes it (a TRL ``--config`` recipe, HfArgumentParser's single JSON argument); run as that
  launcher's invocation;
* a framework config (axolotl, LLaMA-Factory): not yet. :func:`framework_target` is the seam: it returns the
  Target of a config its framework's own command runs (``axolotl train cfg.yaml``,
  ``llamafactory-cli train cfg.yaml``), or None for any other file; today it returns None, so such a config is
  treated as a recipe (and refused when no launcher passes it).

Only values trainlint can read statically are run: a word the launcher leaves to its caller (``$1``) is an
error, as in ``check``. Nothing here writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from trainlint.config import Settings

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
SCRIPT_SUFFIXES = (".py", ".ipynb")


class VerifyError(Exception):
    """A one-line reason verify cannot run; the CLI prints it and exits 2."""


@dataclass(frozen=True)
class Target:
    script: Path  # resolved
    launch_args: tuple[str, ...]  # the script's arguments as the launch passes them
    extra: tuple[str, ...]  # the caller's, after them
    cwd: Path | None  # where the run starts; None: the script's folder
    settings: Settings  # linted under this launch (launch_files / launch_args set)
    launcher: Path | None = None  # the launcher whose invocation is run
    config: Path | None = None  # the recipe / args file the caller named
    bases: tuple[Path, ...] = ()  # folders the launch's relative paths are read from, first match wins

    @property
    def args(self) -> tuple[str, ...]:
        return self.launch_args + self.extra

    @property
    def configs(self) -> frozenset[Path]:
        return frozenset({self.config}) if self.config else frozenset()


def framework_target(path: Path, extra: tuple[str, ...], settings: Settings) -> Target | None:
    """The seam for framework configs (axolotl, LLaMA-Factory; branch `frameworks` recognises them): the Target of
    a config that a framework's CLI runs, or None. Not implemented here: always None."""
    return None


def resolve(path: Path, extra: tuple[str, ...], settings: Settings) -> Target:
    """The Target of what the caller named; VerifyError (one line) when it cannot be run as read."""
    if path.suffix in SCRIPT_SUFFIXES:
        script = path.resolve()
        if not script.is_file():
            raise VerifyError(f"{script}: no such file")
        return Target(script, (), tuple(extra), None,
                      replace(settings, root=script.parent, launch_args=tuple(extra)), bases=(Path.cwd(), script.parent))
    if not path.is_file():
        raise VerifyError(f"{path}: no such file")
    config = None
    launcher = path
    if path.suffix in CONFIG_SUFFIXES:
        framework = framework_target(path, extra, settings)
        if framework is not None:
            return framework
        from trainlint.launch.discover import launchers_naming

        found = launchers_naming(path, settings)
        if not found:
            raise VerifyError(f"{path}: no launcher in its repository passes this file; verify the launcher, or the "
                              f"script with its arguments (trainlint verify train.py -- --config {path})")
        config, launcher = path.resolve(), found[0]
    from trainlint.launch.discover import repo_root

    script, args, cwd, launch_files = launch_command(launcher, settings,
                                                     configs=frozenset({config}) if config else frozenset())
    launch_settings = replace(settings, launch_files=launch_files, launch_configs=(str(config),) if config else (),
                              root=script.parent)
    cwd = cwd.resolve()
    return Target(script, tuple(args), tuple(extra), cwd, launch_settings, launcher.resolve(), config,
                  (cwd, repo_root(launcher, settings)))


def launch_command(launcher: Path, settings: Settings, text: str | None = None,
                   configs: frozenset[Path] = frozenset()) -> tuple[Path, list[str], Path, tuple[str, ...]]:
    """(script, its arguments, the folder it runs in, the launch files) of a launcher's first invocation of a
    Python script (that passes one of `configs`, when given), for `verify`; VerifyError when it launches none or a
    word is not known statically. `text`: the launcher read as this text (verify's fixed copy)."""
    from trainlint.discovery import display
    from trainlint.launch.discover import _names_config, read_launch_text, read_launcher, repo_root, target_of

    if not launcher.is_file():
        raise VerifyError(f"{launcher}: no such file")
    root = repo_root(launcher, settings)
    indexed = read_launcher(launcher) if text is None else read_launch_text(text, launcher)
    for inv in indexed.invocations:
        target = target_of(inv, launcher, root)
        if target is None or (configs and not _names_config(inv, launcher, root, set(configs))):
            continue
        unknown = [w for w in inv.args if w.text is None]
        if unknown:
            w = unknown[0]
            raise VerifyError(f"{display(launcher)}:{w.span.line}: {w.raw or 'a word'} is not known here "
                              f"({w.note or 'set when the launcher runs'}); pass the script and its arguments instead")
        base = launcher.parent / inv.cwd if inv.cwd else launcher.parent
        return target, [w.text for w in inv.args], base, (str(launcher.resolve()),)
    raise VerifyError(f"{display(launcher)} launches no Python script trainlint can find")
