"""Lint every .py file of the installed torch, transformers, peft, trl and accelerate packages (thousands
of real files): no traceback, every file accounted for. Marked slow; CI runs it (the README's test
command runs everything)."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

PACKAGES = ("torch", "transformers", "peft", "trl", "accelerate")


@pytest.mark.slow
def test_installed_training_libraries_lint_without_a_traceback(tmp_path):
    purelib = Path(sysconfig.get_paths()["purelib"])
    roots = [purelib / p for p in PACKAGES if (purelib / p).is_dir()]
    if len(roots) < len(PACKAGES):
        pytest.skip("the test extra installs torch, transformers, peft, trl and accelerate")
    files = sum(1 for r in roots for _ in r.rglob("*.py"))
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--exit-zero", "--output-format",
                        "json-lines", *map(str, roots)], cwd=tmp_path, capture_output=True, text=True, timeout=3000)
    elapsed = time.perf_counter() - start
    with pytest.MonkeyPatch.context():
        print(f"\nlinted {files} files of {', '.join(PACKAGES)} in {elapsed:.0f} s "
              f"({files / elapsed:.0f} files/s); {len(r.stdout.splitlines())} findings")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr == ""
