"""A corpus of odd inputs: each gets a diagnostic or is skipped with a reason, the others in the same
run are still linted, no traceback, exit codes stay 0/1/2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EAGER = ('from transformers import AutoModelForCausalLM\n'
         'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")\n'
         'MAX_LEN = 4096\n')


def run(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    files = {
        "syntax_error.py": b"from transformers import Trainer\nTrainer(\n",
        "python2.py": b"from transformers import Trainer\nprint 'hello'\n",
        "bom.py": b"\xef\xbb\xbf" + EAGER.encode(),
        "crlf.py": EAGER.replace("\n", "\r\n").encode(),
        "mixed_newlines.py": EAGER.replace("\n", "\r\n", 1).encode(),
        "tabs.py": b"from transformers import AutoModelForCausalLM\nif True:\n\tmodel = AutoModelForCausalLM."
                   b"from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='eager')\nMAX_LEN = 4096\n",
        "latin1.py": ("# -*- coding: latin-1 -*-\n# \xe9t\xe9\n" + EAGER).encode("latin-1"),
        "non_utf8.py": b"from transformers import Trainer\ns = '\xe9t\xe9'\n",
        "binary.py": bytes(range(256)) * 4,
        "empty.py": b"",
        "nested.py": b"from transformers import Trainer\nx = " + b"[" * 150 + b"]" * 150 + b"\n",
        "too_nested.py": b"from transformers import Trainer\nx = " + b"(" * 1000 + b")" * 1000 + b"\n",
        "bad_cookie.py": b"# -*- coding: klingon -*-\nfrom transformers import Trainer\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    # the 5 MB file takes minutes through LibCST here; a short limit keeps this run quick
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nper-file-timeout = 3\n")
    big = "from transformers import TrainingArguments\n" + "".join(
        f"args_{i} = TrainingArguments(output_dir='o{i}', per_device_train_batch_size={i % 8 + 1})\n"
        for i in range(62_000))
    (tmp_path / "big.py").write_text(big)
    assert (tmp_path / "big.py").stat().st_size > 5_000_000
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "self").symlink_to(loop, target_is_directory=True)
    (loop / "ok.py").write_text(EAGER)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "does-not-exist.py")
    return tmp_path


def test_every_odd_file_gets_a_diagnostic_or_a_reason_and_the_rest_is_linted(corpus):
    r = run(".", cwd=corpus)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr and r.stderr == ""
    out = r.stdout
    expected = [
        "syntax_error.py:2:8: TL001 syntax error",
        "python2.py:2:1: TL001 syntax error",
        "non_utf8.py:2:6: TL002 cannot lint this file: not valid utf-8",
        "binary.py:1:1: TL002 cannot lint this file: binary file",
        "too_nested.py:2:",  # the tokenizer's nesting limit
        "bad_cookie.py:1:1: TL002 cannot lint this file:",
        "dangling.py:1:1: TL002 cannot lint this file: cannot read file",
        "big.py:1:1: TL003 not linted: took longer than the per-file time limit",
    ]
    for line in expected:
        assert line in out, line
    # linted normally, positions intact: BOM, CRLF, mixed newlines, tabs, a latin-1 cookie, a symlink loop
    for line in ("bom.py:2:73: TL101", "crlf.py:2:73: TL101", "mixed_newlines.py:2:73: TL101",
                 "tabs.py:3:74: TL101", "latin1.py:4:73: TL101", "loop/ok.py:2:73: TL101"):
        assert line in out, line
    assert not [line for line in out.splitlines() if line.startswith(("empty.py", "nested.py"))]


def test_time_limit_is_configurable(tmp_path):
    src = "from transformers import TrainingArguments\n" + "".join(
        f"a{i} = TrainingArguments(output_dir='o', per_device_train_batch_size={i % 8 + 1})\n" for i in range(3000))
    (tmp_path / "gen.py").write_text(src)
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nper-file-timeout = 0.05\n")
    assert "gen.py:1:1: TL003 not linted: took longer than the per-file time limit (0.05 s" in run(cwd=tmp_path).stdout
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nper-file-timeout = 300\n")
    r = run(cwd=tmp_path)
    assert r.returncode == 0 and "TL003" not in r.stdout


def test_verbose_gives_the_reason_a_file_was_skipped(corpus):
    r = run("-v", "empty.py", "nested.py", cwd=corpus)
    assert "empty.py: skipped: mentions none of the APIs trainlint checks" in r.stderr
    assert "nested.py: skipped: calls none of the APIs trainlint checks" in r.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode; cannot exist here")
def test_permission_denied(tmp_path):
    path = tmp_path / "secret.py"
    path.write_text(EAGER)
    path.chmod(0)
    r = run(".", cwd=tmp_path)
    assert "secret.py:1:1: TL002 cannot lint this file: permission denied" in r.stdout


def test_the_per_file_limit_counts_cpu_time_not_waiting(tmp_path):
    # a busy machine makes a file wait for a core: waiting is not the file's cost (issue 25: TL003 under load)
    import time

    from trainlint.lint import _deadline, _Timeout

    with _deadline(0.2, wall=5.0):
        time.sleep(0.5)  # waiting, no CPU: within the limit
    with pytest.raises(_Timeout):
        with _deadline(0.2, wall=5.0):
            while True:  # computing: stopped after 0.2 s of CPU
                pass
    with pytest.raises(_Timeout):
        with _deadline(5.0, wall=0.3):
            time.sleep(2)  # a stall is still bounded by the wall clock
