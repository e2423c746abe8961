"""Decide which transformers / trl / peft versions a script runs against, without importing them.

Per file, first match wins: trainlint settings; pins in the project nearest the file; `pip install`
lines inside the script; a notebook's recorded installs; the newest release trainlint knows that the file's calls and
the other libraries' releases admit. What is installed next to trainlint is not consulted: it is trainlint's
environment (pre-commit, CI), not the run's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

LIBRARIES = ("transformers", "trl", "peft")
# The newest releases whose behaviour trainlint's rules were checked against (installed sources).
NEWEST_KNOWN = {"transformers": "5.25.0", "trl": "1.16.0", "peft": "0.21.2"}
# Minor releases, oldest first, used to answer a range pin ("transformers<5") with the newest match.
_KNOWN_MINORS = {
    "transformers": [f"4.{m}.0" for m in range(20, 58)] + [f"5.{m}.0" for m in range(0, 26)],
    "trl": [f"0.{m}.0" for m in range(1, 30)] + [f"1.{m}.0" for m in range(0, 17)],
    "peft": [f"0.{m}.0" for m in range(1, 22)],
}
PIN_FILES = ("requirements*.txt", "pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")


def parse_version(text: str) -> tuple[int, ...]:
    """'4.57.6' -> (4, 57, 6); '5.0.0rc1' -> (5, 0, 0). Never raises; junk gives ()."""
    parts = []
    for piece in text.strip().split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.end() != len(piece):
            break
    return tuple(parts)


_PRE_RE = re.compile(r"^\s*\d+(?:\.\d+)*[-_.]?(a|alpha|b|beta|c|rc|pre|preview|dev)[-_.]?(\d*)", re.I)


def pre_release(text: str) -> tuple[str, int] | None:
    """'5.0.0rc1' -> ("rc", 1); '5.0.0.dev0' -> ("dev", 0); a final release -> None (PEP 440 spellings)."""
    m = _PRE_RE.match(text)
    if not m:
        return None
    kind = m.group(1).lower()
    kind = {"alpha": "a", "beta": "b", "c": "rc", "pre": "rc", "preview": "rc"}.get(kind, kind)
    return kind, int(m.group(2) or 0)


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


@lru_cache(maxsize=65536)
def satisfies(version: str, spec: str) -> bool:
    """A small PEP 440 subset: ==, !=, >=, <=, >, <, ~=, ===, and wildcards in ==."""
    v = parse_version(version)
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        m = re.match(r"(===|==|!=|>=|<=|~=|>|<)\s*(.+)", clause)
        if not m:
            return False
        op, target = m.groups()
        if op in ("==", "===", "!=") and target.endswith(".*"):
            prefix = parse_version(target[:-2])
            ok = v[: len(prefix)] == prefix
            if (op == "!=") == ok:
                return False
            continue
        t = parse_version(target)
        c = _cmp(v, t)
        ok = {
            "==": c == 0, "===": c == 0, "!=": c != 0, ">=": c >= 0, "<=": c <= 0, ">": c > 0, "<": c < 0,
            "~=": c >= 0 and v[: max(len(t) - 1, 1)] == t[: max(len(t) - 1, 1)],
        }[op]
        if not ok:
            return False
    return True


def resolve_spec(library: str, spec: str, installed: str | None) -> str | None:
    """The version a pin selects: its exact version, else the installed one if it fits, else the
    newest known minor release that fits."""
    exact = re.fullmatch(r"\s*===?\s*([\w.]+)\s*", spec)
    if exact:
        return exact.group(1)
    if installed and satisfies(installed, spec):
        return installed
    for candidate in _candidates(library):  # every release read, newest first: `<4.47.0` is 4.46.3, not 4.46.0
        if satisfies(candidate, spec):
            return candidate
    return None


@dataclass(frozen=True)
class LibraryVersion:
    name: str
    version: str
    source: str  # why this version was assumed
    # what another library's chosen release made of it, when that moved it off its own first choice ("trl 0.12.2
    # requires transformers<4.47.0"): findings name it (rules/base.py). Not part of equality, as `source`'s wording.
    bounded_by: str = field(default="", compare=False)

    @property
    def tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)

    def at_least(self, *minimum: int) -> bool:
        """Release-number comparison: a pre-release of X counts as X here; rules whose fact changed during X's
        development ask `pre` (5.0.0rc1 is not 5.0.0: libraries.gc_reentrant_default)."""
        return _cmp(self.tuple, tuple(minimum)) >= 0

    @property
    def pre(self) -> tuple[str, int] | None:
        """("rc", 1) for 5.0.0rc1, ("dev", 0) for 5.0.0.dev0 (a snapshot of any commit before the release)."""
        return pre_release(self.version)


@dataclass(frozen=True)
class Conflict:
    """A pinned version that calls in the file cannot run on (api_versions.Bound.against)."""

    library: str
    version: str
    source: str  # where the version came from
    uses: tuple[str, ...]  # Evidence.describe() of each use that rules it out
    line: int  # the first such use
    # how many of `uses` are what another chosen release requires (RELEASE_REQUIRES, its wheel's Requires-Dist), not
    # the file's own calls: they come last in `uses`
    requirements: int = 0


@dataclass(frozen=True)
class Versions:
    transformers: LibraryVersion
    trl: LibraryVersion
    peft: LibraryVersion
    # what the file's own calls said about its versions (for --verbose), and pins they contradict; not part of
    # equality: rules and caches key on the versions themselves
    notes: tuple[str, ...] = field(default=(), compare=False)
    conflicts: tuple[Conflict, ...] = field(default=(), compare=False)

    def all(self) -> tuple[LibraryVersion, ...]:
        return (self.transformers, self.trl, self.peft)


_REQ_RE = re.compile(r"""^\s*['"]?(transformers|trl|peft|accelerate|liger[-_]kernel)(?:\[[^\]]*\])?\s*((?:[=<>!~]=?=?\s*[\w.*]+\s*,?\s*)+)""",
                     re.M | re.I)


def _pins_in_text(text: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for name, spec in _REQ_RE.findall(text):
        pins.setdefault(name.lower().replace("_", "-"), re.sub(r"\s+", "", spec).rstrip(","))
    return pins


def _caret(spec: str) -> str:
    """Poetry's ^X.Y: >=X.Y,<next significant release."""
    v = parse_version(spec)
    if not v:
        return spec
    bump = next((i for i, part in enumerate(v) if part != 0), len(v) - 1)
    upper = list(v[: bump + 1])
    upper[-1] += 1
    return f">={'.'.join(map(str, v))},<{'.'.join(map(str, upper))}"


def _pins_in_file(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    if path.name == "pyproject.toml":
        pins = _pins_in_text("\n".join(re.findall(r"""["']([^"'\n]+)["']""", text)))
        for name, spec in re.findall(r"""^\s*(transformers|trl|peft|accelerate)\s*=\s*["']([^"']+)["']""", text, re.M):
            spec = spec.strip()
            if spec.startswith("^"):
                spec = _caret(spec[1:])
            elif spec.startswith("~") and not spec.startswith("~="):
                spec = "~=" + spec[1:]
            elif spec and spec[0].isdigit():
                spec = "==" + spec
            if spec != "*":
                pins.setdefault(name, spec)
        return pins
    if path.suffix == ".py":
        text = "\n".join(re.findall(r"""["']([^"'\n]+)["']""", text))
    return _pins_in_text(text)


@lru_cache(maxsize=4096)
def project_pins(directory: Path) -> tuple[tuple[str, str, str], ...]:
    """(library, spec, file) for the nearest pins, walking up from `directory`. What lies above a folder
    is its parent's answer (cached), so a tree of many folders globs each folder once, not once per file
    below it: the nearest pin still wins, in the same order."""
    found: dict[str, tuple[str, str]] = {}
    own = _own_library(directory)
    if own is not None:
        found[own[0]] = (f"=={own[1]}", f"{own[2]} (the repository is {own[0]} itself)")
    for pattern in PIN_FILES:
        for candidate in sorted(directory.glob(pattern)):
            for name, spec in _pins_in_file(candidate).items():
                if own is not None and name == own[0]:
                    continue
                if name in found and found[name][0] != spec:
                    # two files of one project pin the same library: the run needs both (`transformers>=4.46.0` in
                    # requirements.txt and `transformers<4.47.0` in setup.py)
                    found[name] = (f"{found[name][0]},{spec}", f"{found[name][1]} and {candidate}")
                else:
                    found.setdefault(name, (spec, str(candidate)))
    if not ((directory / ".git").exists() or all(lib in found for lib in LIBRARIES)) and \
            directory.parent != directory:
        for name, spec, where in project_pins(directory.parent):
            found.setdefault(name, (spec, where))
    return tuple((name, spec, where) for name, (spec, where) in found.items())


_VERSION_RE = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)


def _own_library(directory: Path) -> tuple[str, str, str] | None:
    """(library, version, file) when `directory` is the source of transformers, trl or peft itself (a setup.py or
    pyproject.toml naming it, its `__version__` in <name>/__init__.py or src/<name>/__init__.py): scripts there run
    against that very version."""
    named = None
    for meta in ("setup.py", "pyproject.toml"):
        try:
            text = (directory / meta).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = re.search(r"""\bname\s*=\s*["'](transformers|trl|peft)["']""", text)
        if m:
            named = m.group(1)
            break
    if named is None:
        return None
    for init in (directory / named / "__init__.py", directory / "src" / named / "__init__.py"):
        try:
            m = _VERSION_RE.search(init.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        if m and parse_version(m.group(1)):
            return named, m.group(1), str(init)
    try:  # a dynamic version read from a VERSION file (trl from 1.x: pyproject `dynamic = ["version"]`)
        text = (directory / "VERSION").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    return (named, text, str(directory / "VERSION")) if re.fullmatch(r"\d+(\.\d+)+(\.?(dev|rc)\d+)?", text) else None


@lru_cache(maxsize=8)
def installed_version(library: str) -> str | None:
    """`importlib.metadata.version(library)`, or None when it is not installed. The common case (plain
    directories on sys.path, a .dist-info with METADATA) is read directly: importing importlib.metadata
    (email, zipfile, csv ...) costs more than the rest of a cached one-file run."""
    found = _scan_dist_info(library)
    if found is not _UNSURE:
        return found
    from importlib import metadata

    try:
        return metadata.version(library)
    except metadata.PackageNotFoundError:
        return None


_UNSURE = object()


def _scan_dist_info(library: str):
    """What importlib.metadata's path finder would find first (same sys.path order, same listdir order,
    same name normalisation), or _UNSURE wherever it would look somewhere this does not (zips, eggs,
    other finders)."""
    import sys
    from importlib.machinery import PathFinder

    if any(getattr(f, "find_distributions", None) is not None and f is not PathFinder for f in sys.meta_path):
        return _UNSURE
    wanted = re.sub(r"[-_.]+", "-", library).lower().replace("-", "_")
    for entry in sys.path:
        root = entry or "."
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.isfile(root) or root.lower().endswith(".egg"):
                return _UNSURE  # a zip on the path
            continue
        if os.path.basename(root).lower().endswith(".egg"):
            return _UNSURE
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")) and \
                    re.sub(r"[-_.]+", "-", low.rpartition(".")[0].partition("-")[0]).replace("-", "_") == wanted:
                return _version_in(os.path.join(root, child))
    return None


def _version_in(info: str):
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(info, name), encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        break  # end of the headers
                    key, sep, value = line.partition(":")
                    if sep and key.lower() == "version":  # (header names are case-insensitive)
                        return value.strip()
        except (OSError, UnicodeDecodeError):
            continue
        return _UNSURE
    return _UNSURE


# The last patch release of each line read from the wheels below the oldest release in arguments.json, so a bound
# like "transformers < 4.36" picks a release that exists (the trl ones are in arguments.json since it reads trl
# from 0.7.0; kept, they change nothing).
_OLDER_RELEASES = {"trl": ("0.7.11", "0.8.6", "0.9.6", "0.10.1", "0.11.4"),
                   "transformers": ("4.33.3", "4.34.1", "4.35.2")}


def _candidates(library: str) -> list[str]:
    """Known releases of `library`, newest first."""
    found = set(_KNOWN_MINORS.get(library, ())) | set(_OLDER_RELEASES.get(library, ())) | {NEWEST_KNOWN[library]}
    if library in ("transformers", "trl"):
        from trainlint.knowledge.releases import released

        found |= set(released(library))
    return sorted(found, key=parse_version, reverse=True)


# A release of one library that cannot run on some releases of another, though its metadata allows them
# (library, its releases [since, until), the other library, the other's releases it needs [since, until), why).
# Read in the wheels: every trl release up to 0.11.4 has Trainer subclasses that pass `tokenizer=` to
# `transformers.Trainer.__init__` (trl 0.8.6 dpo_trainer.py:389, sft_trainer.py:329; 0.11.4 dpo_trainer.py:828,
# sft_trainer.py:407); 0.12.0 passes `processing_class=` (dpo_trainer.py:646). transformers 4.57.6 trainer.py:409
# keeps `tokenizer` as `@deprecate_kwarg(..., version="5.0.0")`; 5.0.0's Trainer.__init__ has no such parameter, so
# those trainers raise TypeError there. trl's setup.py asks only `transformers>=4.31.0` (0.8.6).
RELEASE_REQUIRES: tuple[tuple[str, tuple[int, ...] | None, tuple[int, ...] | None, str, tuple[int, ...] | None,
                              tuple[int, ...] | None, str], ...] = (
    ("trl", None, (0, 12), "transformers", None, (5,),
     "trl < 0.12's trainers pass Trainer(tokenizer=) (trl 0.11.4 dpo_trainer.py:828), which transformers 5.0.0 "
     "removed (4.57.6 trainer.py:409 deprecate_kwarg version=\"5.0.0\")"),
    # trl 0.12.0 on pass `processing_class=` to Trainer.__init__ (0.12.2 sft_trainer.py:414, dpo_trainer.py:646), a
    # parameter from transformers 4.46.0 (4.45.2's Trainer.__init__ has `tokenizer` and no **kwargs: TypeError).
    # trl 0.12.2's wheel asks only `transformers<4.47.0` (its METADATA; 0.12.0 and 0.12.1 ask `>=4.46.0`), so the
    # metadata alone would let it run on 4.45.
    ("trl", (0, 12), None, "transformers", (4, 46), None,
     "trl >= 0.12's trainers pass Trainer(processing_class=) (trl 0.12.2 sft_trainer.py:414), which transformers "
     "4.46.0 added (4.45.2 trainer.py Trainer.__init__ takes tokenizer=)"),
)
# trl first: its release bounds transformers (RELEASE_REQUIRES)
_DECISION_ORDER = ("trl", "transformers", "peft")


V = tuple[int, ...]


@dataclass(frozen=True)
class Evidence:
    """One use in the script and the range of releases it allows."""

    library: str
    what: str  # "SFTTrainer(dataset_text_field=)"
    line: int
    since: V | None
    until: V | None
    source: str
    strict: bool = True

    def allows(self, version: str) -> bool:
        v = parse_version(version)
        return (self.since is None or _cmp(v, self.since) >= 0) and (self.until is None or _cmp(v, self.until) < 0)

    def brief(self) -> str:
        return self.describe().split(" (", 2)[0] + f" (line {self.line}) " + self._range()

    def _range(self) -> str:
        lo = f"from {_show(self.since)}" if self.since else ""
        hi = f"removed in {_show(self.until)}" if self.until else ""
        return " and ".join(p for p in (lo, hi) if p)

    def describe(self) -> str:
        lo = f"from {_show(self.since)}" if self.since else ""
        hi = f"removed in {_show(self.until)}" if self.until else ""
        return f"{self.what} (line {self.line}): {' and '.join(p for p in (lo, hi) if p)} ({self.source})"


def _show(v: V) -> str:
    return ".".join(map(str, v + (0,) * (3 - len(v))))


@dataclass(frozen=True)
class Bound:
    library: str
    evidence: tuple[Evidence, ...]

    def allows(self, version: str, strict_only: bool = False) -> bool:
        return all(e.allows(version) for e in self.evidence if e.strict or not strict_only)

    def against(self, version: str) -> tuple[Evidence, ...]:
        """The strict uses that cannot run on `version`."""
        return tuple(e for e in self.evidence if e.strict and not e.allows(version))

    def describe(self) -> str:
        lo = max((e.since for e in self.evidence if e.since), default=None, key=lambda v: v + (0,) * 4)
        hi = min((e.until for e in self.evidence if e.until), default=None, key=lambda v: v + (0,) * 4)
        parts = ([f">= {_show(lo)}"] if lo else []) + ([f"< {_show(hi)}"] if hi else [])
        return f"{self.library} {', '.join(parts) or 'any'}"


@dataclass(frozen=True)
class ReleaseRequirement(Evidence):
    """A bound on one library implied by the release chosen for another: Evidence whose "use" is that release
    (line 1: it is written in no line of the file)."""

    def brief(self) -> str:
        return f"{self.what}: needs {self.library} {self._span()}"

    def describe(self) -> str:
        return f"{self.what}: needs {self.library} {self._span()} ({self.source})"

    def _span(self) -> str:
        return " and ".join(p for p in (f"from {_show(self.since)}" if self.since else "",
                                        f"before {_show(self.until)}" if self.until else "") if p)


@dataclass(frozen=True)
class MetadataRequirement(Evidence):
    """A bound on one library written in the wheel of the release chosen for another (its METADATA
    `Requires-Dist`, knowledge/requires_dist.json): `spec` as written, so `!=` and `<=` keep their meaning."""

    spec: str = ""

    def allows(self, version: str) -> bool:
        return satisfies(version, self.spec)

    def brief(self) -> str:
        return f"{self.what} requires {self.library}{self.spec}"

    def describe(self) -> str:
        return f"{self.brief()} ({self.source})"


@lru_cache(maxsize=1)
def _requires_dist() -> dict:
    """requires_dist.json (scripts/gen_requires_dist.py): {library: {release: {other library: spec}}}."""
    import json

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "requires_dist.json")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)["requires"]


def metadata_requires(library: str, version: str) -> dict[str, str]:
    """What `library`'s release `version` requires of transformers / trl / peft (its wheel's METADATA); a release not
    read answers with the nearest release read below it on the same minor line, else nothing (no bound)."""
    table = _requires_dist().get(library, {})
    if version in table:
        return table[version]
    v = parse_version(version)
    same_line = [r for r in table if parse_version(r)[:2] == v[:2] and _cmp(parse_version(r), v) <= 0]
    return table[max(same_line, key=parse_version)] if same_line else {}


def requirements_of(decided: dict) -> dict[str, list[Evidence]]:
    """What the releases in `decided` ({library: version}) require of each other library: RELEASE_REQUIRES (what the
    release's code cannot run on) and the wheels' Requires-Dist (what pip enforces)."""
    out: dict[str, list[Evidence]] = {}
    for lib, chosen in decided.items():
        v = parse_version(chosen)
        for owner, since, until, other, o_since, o_until, why in RELEASE_REQUIRES:
            if owner == lib and (since is None or _cmp(v, since) >= 0) and (until is None or _cmp(v, until) < 0):
                out.setdefault(other, []).append(ReleaseRequirement(other, f"{lib} {chosen}", 1, o_since, o_until, why))
        for other, spec in metadata_requires(lib, chosen).items():
            if spec and other != lib:
                out.setdefault(other, []).append(MetadataRequirement(
                    other, f"{lib} {chosen}", 1, None, None,
                    f"{lib} {chosen} METADATA Requires-Dist: {other}{spec} (knowledge/requires_dist.json)", spec=spec))
    return out


@dataclass
class _Choice:
    """One library's options: its versions in the order of preference, each with the reason it would be chosen and
    its rank (0: every call in the file runs on it; 1: only the strict ones do; 2: a call rules it out)."""

    library: str
    options: list[tuple[str, str, int]]
    fixed: bool = False  # trainlint settings: no conflict is looked for


def _choice(library: str, pin: tuple[str, str, str] | None, override: str | None, bound) -> _Choice:
    """pin: (spec, where, kind) with kind "pinned" / "installed" / "script"."""
    if override is not None:
        return _Choice(library, [(override, "trainlint settings", 0)], fixed=True)

    def rank(v: str) -> int:
        if bound is None or bound.allows(v):
            return 0
        return 1 if bound.allows(v, strict_only=True) else 2

    if pin is not None:
        spec, where, kind = pin
        exact = re.fullmatch(r"\s*===?\s*([\w.]+)\s*", spec)
        said = {"pinned": f"pinned {library}{spec} in {where}", "installed": f"installed per {where}",
                "script": f"`pip install {library}{spec}` in the script",
                "required": f"{where} requires {library}{spec}"}[kind]
        if exact:
            return _Choice(library, [(exact.group(1), said, rank(exact.group(1)))])
        in_range = [v for v in _candidates(library) if satisfies(v, spec)]
        if in_range:
            ordered = sorted(in_range, key=rank)  # stable: newest first within a rank
            return _Choice(library, [(v, said if v == in_range[0] else
                                      f"{said}: the newest release in that range that accepts this file's calls",
                                      rank(v)) for v in ordered])
    candidates = _candidates(library)
    newest = NEWEST_KNOWN[library]
    if bound is None:
        return _Choice(library, [(newest, "not pinned: the newest release known", 0)] +
                       [(v, "not pinned: the newest release known that the rest admits", 0)
                        for v in candidates if v != newest])
    ordered = sorted(candidates, key=rank)
    return _Choice(library, [(v, f"not pinned: the newest release known that accepts this file's calls "
                                 f"({bound.describe()})", rank(v)) for v in ordered])


def _first(choice: _Choice, needs: list[Evidence], worst: int) -> tuple[str, str, int] | None:
    """The first option of `choice` that the other releases' requirements admit, of rank <= worst."""
    for option in choice.options:
        if option[2] <= worst and all(e.allows(option[0]) for e in needs):
            return option
    return None


def _solve(choices: dict[str, _Choice]) -> tuple[dict[str, tuple[str, str, int]], list[str]]:
    """One release per library satisfying every pin, the file's calls and the releases' requirements of each other,
    preferring (in this order) trl's first option, then transformers', then peft's: trl's release bounds
    transformers (it is what the training code calls into), and an unpinned trl is the newest whose requirements
    admit the transformers the project pins. Falls back to each library's first option where nothing satisfies
    everything; what is left unsatisfied is reported as a conflict by the caller. Returns the picks and notes."""
    trl, tf, peft = choices["trl"], choices["transformers"], choices["peft"]
    notes: list[str] = []
    for worst in (1, 2):
        for t in trl.options:
            if t[2] > worst:
                continue
            pick_tf = _first(tf, requirements_of({"trl": t[0]}).get("transformers", []), worst)
            if pick_tf is None:
                continue
            decided = {"trl": t[0], "transformers": pick_tf[0]}
            needs = requirements_of(decided)
            pick_peft = _first(peft, needs.get("peft", []), worst)
            if pick_peft is not None and all(e.allows(pick_tf[0]) for e in requirements_of(
                    {"peft": pick_peft[0]}).get("transformers", [])) and \
                    all(e.allows(t[0]) for e in requirements_of({"peft": pick_peft[0], "transformers": pick_tf[0]})
                        .get("trl", [])):
                return {"trl": t, "transformers": pick_tf, "peft": pick_peft}, notes
            # peft alone cannot be satisfied with this pair: look for a peft compatible with it, any rank
            compatible = [p for p in peft.options if all(e.allows(p[0]) for e in needs.get("peft", [])) and
                          all(e.allows(pick_tf[0]) for e in requirements_of({"peft": p[0]}).get("transformers", []))]
            if compatible:
                return {"trl": t, "transformers": pick_tf, "peft": compatible[0]}, notes
    notes.append("no set of transformers / trl / peft releases satisfies every pin, call and requirement together: "
                 "each library keeps its own first choice")
    return {lib: c.options[0] for lib, c in choices.items()}, notes


def decide_versions(path: Path, script_pins: tuple[tuple[str, str], ...], overrides: dict[str, str],
                    bounds: dict | None = None, observed: tuple[tuple[str, str, str], ...] = (),
                    required: tuple[tuple[str, str, str], ...] = ()) -> Versions:
    """`bounds`: api_versions.bounds() of the file; `observed`: (library, "==X", where) read from what the file
    shows was installed (a notebook's stored `Successfully installed ...` output); `required`: (library, spec, who)
    what a framework the file imports and the project pins requires ("axolotl 0.12.0 (pinned ...)": its wheel's
    pins, knowledge/frameworks.py LIBRARY_PINS), after the script's own pins.

    Every library's source of a version, first match wins: trainlint settings; pins in the project nearest the file;
    what the notebook shows installed; `pip install` lines in the script; nothing (any release). The versions are
    then solved together (_solve): each pin and range, the file's calls (api_versions) and what each chosen release
    requires of the others (RELEASE_REQUIRES, its wheel's Requires-Dist) at once. What happens to be installed next
    to trainlint (a pre-commit or CI environment) is not what the run will use and is never consulted."""
    pins = {name: (spec, where, "pinned") for name, spec, where in project_pins(path.resolve().parent)
            if name in LIBRARIES}  # (accelerate and liger-kernel are pinned_release's)
    for name, spec, where in observed:
        if name in LIBRARIES:
            pins.setdefault(name, (spec, where, "installed"))
    for name, spec in script_pins:
        if name in LIBRARIES:
            pins.setdefault(name, (spec, "the script", "script"))
    for name, spec, who in required:
        if name in LIBRARIES:
            pins.setdefault(name, (spec, who, "required"))
    for name in list(pins):  # a pin no known release satisfies gives way to the next source, as before
        spec = pins[name][0]
        if not re.fullmatch(r"\s*===?\s*([\w.]+)\s*", spec) and resolve_spec(name, spec, None) is None:
            later = [(s, w, k) for n, s, w in observed if n == name and pins[name][2] == "pinned"] + \
                [(s, "the script", "script") for n, s in script_pins if n == name and pins[name][2] != "script"]
            if later:
                pins[name] = later[0]
            else:
                del pins[name]
    bounds = dict(bounds or {})
    choices = {lib: _choice(lib, pins.get(lib), overrides.get(lib), bounds.get(lib)) for lib in LIBRARIES}
    picks, notes = _solve(choices)
    chosen = {lib: pick[0] for lib, pick in picks.items()}
    out, conflicts = {}, []
    for library in _DECISION_ORDER:
        version, source, _ = picks[library]
        others = {lib: v for lib, v in chosen.items() if lib != library}
        needs = requirements_of(others).get(library, [])
        own = bounds.get(library)
        bound = Bound(library, tuple(own.evidence if own is not None else ()) + tuple(needs)) \
            if own is not None or needs else None
        if bound is not None:
            by = " and ".join(w for w, has in (
                ("this file's calls", own is not None),
                ("the releases chosen for the other libraries", bool(needs))) if has)
            notes.append(f"{library}: {by} bound it to {_bound_text(bound)}")
            notes.extend(f"  {e.describe()}" for e in bound.evidence)
        first = choices[library].options[0][0]
        bounded_by = ""
        if version != first and not choices[library].fixed:
            bounded_by = _passed_over(library, first, needs, chosen)
            source = f"{source}; {bounded_by}" if bounded_by else source
        lv = LibraryVersion(library, version, source, bounded_by)
        if bound is not None and not choices[library].fixed:
            against = bound.against(version)
            if against:
                calls = [e for e in against if e not in needs]
                required = [e for e in against if e in needs]
                conflicts.append(Conflict(library, version, source, tuple(e.brief() for e in calls + required),
                                          min(e.line for e in calls) if calls else 1, len(required)))
                notes.append(f"{library} {version} ({source}) conflicts with the calls above: kept")
        if _cmp(lv.tuple, parse_version(NEWEST_KNOWN[library])) > 0:
            # every rule's version test is "at least X", and the argument tables answer with the nearest release read
            # at or below: a newer release gets the newest behaviour known (scripts/refresh_knowledge.py reads it)
            lv = LibraryVersion(library, version, f"{source}; newer than the knowledge (read up to "
                                                  f"{NEWEST_KNOWN[library]}): the newest known behaviour applies",
                                bounded_by)
        out[library] = lv
    return Versions(**out, notes=tuple(notes), conflicts=tuple(conflicts))


def _passed_over(library: str, first: str, needs: list[Evidence], chosen: dict[str, str]) -> str:
    """Why `library` is not its first option `first`: what another chosen release requires of it, or what `first`
    requires of the others that their choice rules out."""
    binding = [e for e in needs if not e.allows(first)]
    if binding:
        return "; ".join(e.brief() for e in binding)
    own = [f"{other}{spec}" for other, spec in metadata_requires(library, first).items()
           if other in chosen and spec and not satisfies(chosen[other], spec)]
    if own:
        held = sorted({o.split("<")[0].split(">")[0].split("=")[0].split("!")[0].split("~")[0] for o in own})
        return f"{library} {first} requires {', '.join(own)}, which {' and '.join(f'{o} {chosen[o]}' for o in held)} " \
               f"rules out"
    return ""


def _bound_text(bound: Bound) -> str:
    ranged = Bound(bound.library, tuple(e for e in bound.evidence if not isinstance(e, MetadataRequirement)))
    text = ranged.describe().split(" ", 1)[1] if ranged.evidence else ""
    specs = [e.spec for e in bound.evidence if isinstance(e, MetadataRequirement)]
    return ", ".join(p for p in ([text] if text and text != "any" else []) + specs) or "any"


# accelerate: only the release lines a fact depends on (memory of FSDP2's fp32 upcast, planning.py); the newest is the
# test environment's pin
ACCELERATE_NEWEST = "1.16.0"
_ACCELERATE_MINORS = [f"0.{m}.0" for m in range(20, 35)] + [f"1.{m}.0" for m in range(0, 17)]


def pinned_release(directory: Path, library: str, releases, newest: str, unpinned: str) -> tuple[str, str]:
    """(release, why) of a library the run's other decisions do not bound (accelerate, liger-kernel): the project's
    pin (an exact one as written; a range: the newest of `releases`, oldest first, inside it), else `newest` with
    `unpinned` as the reason. What is installed next to trainlint is not the run's."""
    for name, spec, where in project_pins(directory.resolve()):
        if name != library:
            continue
        exact = re.fullmatch(r"\s*===?\s*([\w.]+)\s*", spec)
        if exact:
            return exact.group(1), f"pinned {library}{spec} in {where}"
        fits = [v for v in releases if satisfies(v, spec)]
        if fits:
            return fits[-1], f"pinned {library}{spec} in {where}: the newest release in that range"
    return newest, unpinned


def accelerate_release(directory: Path) -> tuple[str, str]:
    """(accelerate release, why) for a file in `directory` (pinned_release over the minor releases)."""
    return pinned_release(directory, "accelerate", _ACCELERATE_MINORS, ACCELERATE_NEWEST,
                          "not pinned: the newest release known")

