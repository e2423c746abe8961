"""The start-up shortcuts of the command line: the compiled-code cache for dataclass methods (trainlint/_dccache.py)
and the hash constructors that avoid loading OpenSSL (trainlint/_hash.py)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint import _dccache, _hash

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

CLASS_SOURCE = """
from dataclasses import dataclass, field

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 2
    tags: tuple = field(default_factory=tuple)

@dataclass(order=True)
class Version:
    major: int
    minor: int = 0
"""


def _build(module_name: str) -> dict:
    namespace = {"__name__": module_name}
    sys.modules[module_name] = type(sys)(module_name)
    sys.modules[module_name].__dict__.update(namespace)
    try:
        exec(compile(CLASS_SOURCE, f"<{module_name}>", "exec"), sys.modules[module_name].__dict__)
        return dict(sys.modules[module_name].__dict__)
    finally:
        del sys.modules[module_name]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "pycache" / "dataclass-code.marshal"
    _dccache.install(str(path))
    try:
        yield path
    finally:
        _dccache.uninstall()
        _dccache._cache.clear()
        _dccache._added = 0


def _same_behaviour(a: dict, b: dict) -> None:
    pa, pb = a["Point"](1), b["Point"](1)
    assert repr(pa).replace(pa.__class__.__qualname__, "P") == repr(pb).replace(pb.__class__.__qualname__, "P")
    assert (pa.x, pa.y, pa.tags) == (pb.x, pb.y, pb.tags) == (1, 2, ())
    assert pa == a["Point"](1) and pa != a["Point"](1, 3)
    assert hash(pa) == hash(a["Point"](1))
    for p in (pa, pb):
        with pytest.raises(dataclasses.FrozenInstanceError):
            p.x = 5
    assert a["Version"](1, 2) < a["Version"](1, 3) and b["Version"](2) > b["Version"](1, 9)
    assert [f.name for f in dataclasses.fields(a["Point"])] == [f.name for f in dataclasses.fields(b["Point"])]


def test_cached_methods_behave_like_compiled_ones(cache):
    plain = _build("userlib_probe")  # not a cached package: compiled as usual, nothing recorded
    assert _dccache._added == 0
    first = _build("trainlint._probe_first")
    recorded = _dccache._added
    # one exec per generated method up to 3.12 (__init__, __repr__, __eq__, __setattr__, __delattr__, __hash__, the
    # order methods); from 3.13 dataclasses builds each class's methods in one exec (_FuncBuilder.add_fns_to_class)
    assert recorded >= (2 if sys.version_info >= (3, 13) else 6)
    _dccache.save()
    assert cache.exists() and _dccache._added == 0

    _dccache.uninstall()
    _dccache.install(str(cache))
    assert len(_dccache._cache) == recorded
    second = _build("trainlint._probe_second")  # every method from the cache: nothing compiled
    assert _dccache._added == 0
    _same_behaviour(plain, first)
    _same_behaviour(plain, second)


def test_nothing_written_without_bytecode_writing(cache, monkeypatch):
    _build("trainlint._probe_nowrite")
    assert _dccache._added
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _dccache.save()
    assert not cache.exists()


@pytest.mark.parametrize("content", [b"", b"\x00garbage\xff" * 10, b"\xe3" + os.urandom(64)])
def test_a_file_that_does_not_load_is_ignored(tmp_path, content, monkeypatch):
    path = tmp_path / "dataclass-code.marshal"
    path.write_bytes(content)
    assert _dccache.load(str(path)) == {}
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    _dccache.install(str(path))
    try:
        built = _build("trainlint._probe_corrupt")
        _same_behaviour(built, _build("userlib_probe2"))
        _dccache.save()
    finally:
        _dccache.uninstall()
        _dccache._cache.clear()
        _dccache._added = 0
    assert len(_dccache.load(str(path))) >= (2 if sys.version_info >= (3, 13) else 6)  # rewritten whole


def test_a_marshalled_non_code_value_is_dropped(tmp_path):
    import marshal

    path = tmp_path / "c.marshal"
    path.write_bytes(marshal.dumps({"def f(): pass": 3, 4: compile("x = 1", "<s>", "exec")}))
    assert _dccache.load(str(path)) == {}


# The patch leans on how `dataclasses` builds methods (exec through its module's globals), which changes between
# releases: this is run under every CPython 3.10-3.13 found on the machine, stdlib only (trainlint/__init__ and
# _dccache import nothing else), and checks that the cache is used at all and that classes built from it behave
# as plain ones.
_PROBE = r"""
import dataclasses, os, sys, tempfile
from trainlint import _dccache

SOURCE = %r

def build(name):
    module = type(sys)(name)
    sys.modules[name] = module
    exec(compile(SOURCE, "<" + name + ">", "exec"), module.__dict__)
    return module.__dict__

def same(a, b):
    pa, pb = a["Point"](1), b["Point"](1)
    assert repr(pa).replace("Point", "P") == repr(pb).replace("Point", "P"), (repr(pa), repr(pb))
    assert (pb.x, pb.y, pb.tags) == (1, 2, ()) and pb == b["Point"](1) and pb != b["Point"](1, 3)
    assert hash(pb) == hash(b["Point"](1)) == hash(pa)
    try:
        pb.x = 5
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("not frozen")
    assert b["Version"](1, 2) < b["Version"](1, 3) and b["Version"](2) > b["Version"](1, 9)
    assert [f.name for f in dataclasses.fields(a["Point"])] == [f.name for f in dataclasses.fields(b["Point"])]
    import inspect
    assert str(inspect.signature(a["Point"])) == str(inspect.signature(b["Point"]))

plain = build("userlib_probe")
path = os.path.join(tempfile.mkdtemp(), "dc.marshal")
sys.dont_write_bytecode = False
_dccache.install(path)
assert dataclasses.exec is _dccache._exec
build("userlib_probe_2")
assert _dccache._added == 0, "a class outside trainlint/libcst/click went through the cache"
first = build("trainlint._probe_first")
recorded = _dccache._added
assert recorded >= 2, "dataclasses no longer execs through its module's globals: the cache is never used"
_dccache.save()
_dccache.uninstall()
_dccache.install(path)
assert len(_dccache._cache) == recorded
second = build("trainlint._probe_second")
assert _dccache._added == 0, "the second build compiled again: the cache missed"
same(plain, first)
same(plain, second)
print("ok", "%%d.%%d" %% sys.version_info[:2], recorded)
""" % CLASS_SOURCE


def _interpreters() -> dict[str, str]:
    """CPython 3.10-3.13 on this machine (PATH, /usr/bin, /usr/local/bin, pyenv's, uv's), one per minor version."""
    import glob
    import shutil

    found = {f"{sys.version_info[0]}.{sys.version_info[1]}": sys.executable}
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for minor in range(10, 14):
        version = f"3.{minor}"
        candidates = [shutil.which(f"python{version}"), f"/usr/bin/python{version}", f"/usr/local/bin/python{version}",
                      *sorted(glob.glob(os.path.join(pyenv, "versions", f"{version}.*", "bin", f"python{version}")))]
        if shutil.which("uv"):
            r = subprocess.run(["uv", "python", "find", "--no-python-downloads", version], capture_output=True,
                               text=True)
            candidates.append(r.stdout.strip() if r.returncode == 0 else None)
        for exe in candidates:
            if version not in found and exe and os.access(exe, os.X_OK):
                r = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                   capture_output=True, text=True)
                if r.stdout.strip() == version:
                    found[version] = exe
    return found


def test_the_cache_works_on_every_python_here(tmp_path):
    """Every CPython 3.10-3.13 present: the cache is used, hit on the second build, and the classes behave the same.
    (Which were present is in the assertion message when one fails.)"""
    pythons = _interpreters()
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in pythons
    results = {}
    for version, exe in sorted(pythons.items()):
        r = subprocess.run([exe, "-c", _PROBE], capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONDONTWRITEBYTECODE": "1"})
        results[version] = (exe, r.returncode, r.stdout.strip() or r.stderr.strip()[-1500:])
    failed = {v: res for v, res in results.items() if res[1] != 0 or not res[2].startswith("ok")}
    assert not failed, f"pythons found: {sorted(pythons)}; failed: {failed}"


def _cli(cache: Path, *args: str) -> subprocess.CompletedProcess:
    code = ("import sys; from trainlint import _dccache; _dccache.install(sys.argv.pop(1)); "
            "from trainlint.cli import main; sys.argv[0] = 'trainlint'; main()")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO / "src")
    return subprocess.run([sys.executable, "-c", code, str(cache), *args], capture_output=True, text=True, env=env,
                          cwd=REPO)


def test_a_lint_run_from_the_cache_reports_the_same(tmp_path):
    cache = tmp_path / "dc.marshal"
    args = ("check", "--no-cache", "--output-format", "json", str(EXAMPLES))
    plain = subprocess.run([sys.executable, "-m", "trainlint", *args], capture_output=True, text=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO / "src"), "PYTHONDONTWRITEBYTECODE": "1"})
    filling = _cli(cache, *args)
    assert cache.exists(), filling.stderr
    entries = len(_dccache.load(str(cache)))
    assert entries > 200  # LibCST's node classes at least
    warm = _cli(cache, *args)
    assert warm.returncode == filling.returncode == plain.returncode == 1, warm.stderr
    assert warm.stdout == filling.stdout == plain.stdout
    assert '"code"' in warm.stdout
    assert len(_dccache.load(str(cache))) == entries  # nothing new compiled in the warm run


def test_entry_point_installs_the_cache():
    out = subprocess.run([sys.executable, "-c", "import sys, dataclasses; sys.argv = ['trainlint', '--version']\n"
                          "from trainlint.__main__ import run\ntry:\n    run()\nexcept SystemExit:\n    pass\n"
                          "from trainlint import _dccache; print(dataclasses.exec is _dccache._exec)"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert out.stdout.strip().endswith("True"), out.stderr


@pytest.mark.parametrize("data", [b"", b"abc", os.urandom(4096)])
def test_hashes_match_hashlib(data):
    assert _hash.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    h = _hash.sha1()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    assert h.hexdigest() == hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_cache_location(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", None)
    here = Path(_dccache.__file__).resolve().parent / "__pycache__"
    assert Path(_dccache.default_path()).parent == here  # the package folder is writable in the test venv
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    assert Path(_dccache.default_path()).parent == tmp_path / "prefix" / "trainlint"
    monkeypatch.setattr(sys, "pycache_prefix", None)
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # a read-only install
    monkeypatch.setattr(os.path, "exists", lambda p: False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Path(_dccache.default_path()).parent == tmp_path / "xdg" / "trainlint"
