"""The `trainlint` command as users run it: a real subprocess, real files, exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EAGER = '''from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")
MAX_SEQ_LENGTH = 4096
'''
CLEAN = '''from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="sdpa")
MAX_SEQ_LENGTH = 4096
'''


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "eager.py").write_text(EAGER)
    (tmp_path / "clean.py").write_text(CLEAN)
    (tmp_path / "notes.py").write_text("print('unrelated')\n")
    return tmp_path


def test_findings_exit_1_with_ruff_style_lines_and_a_summary(project):
    r = run("check", ".", cwd=project)
    assert r.returncode == 1, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("eager.py:2:73: TL101 eager attention at sequence length 4,096")
    assert lines[-2:] == ["Found 1 error in 3 files checked.", "[*] 1 fixable with the `--fix` option."]


def test_clean_files_exit_0(project):
    r = run("check", "clean.py", "notes.py", cwd=project)
    assert r.returncode == 0 and "All checks passed!" in r.stdout


def test_default_path_is_the_current_directory(project):
    assert run("check", cwd=project).returncode == 1


def test_missing_path_exits_2_with_one_line(project):
    r = run("check", "nope.py", cwd=project)
    assert r.returncode == 2
    assert r.stderr.strip() == "trainlint: error: nope.py: no such file or directory"


def test_json_output_uses_ruffs_field_names(project):
    r = run("check", "--output-format", "json", cwd=project)
    data = json.loads(r.stdout)
    assert data == [{
        "code": "TL101",
        "message": data[0]["message"],
        "filename": "eager.py",
        "location": {"row": 2, "column": 73},
        "end_location": {"row": 2, "column": 100},
        "fix": {"applicability": "safe", "message": 'Set attn_implementation="sdpa"',
                "edits": [{"content": 'attn_implementation="sdpa"', "location": {"row": 2, "column": 73},
                           "end_location": {"row": 2, "column": 100}}]},
        "url": "https://github.com/trainlint/trainlint/blob/main/rules/TL101.md",
        "noqa_row": 2,
        "cell": None,
    }]


def test_select_ignore_and_extend_select_by_prefix(project):
    assert run("check", "--select", "TL3", cwd=project).returncode == 0
    assert run("check", "--ignore", "TL1", cwd=project).returncode == 0
    assert run("check", "--select", "TL3", "--extend-select", "TL101", cwd=project).returncode == 1
    assert run("check", "--ignore", "TL", "--select", "TL101", cwd=project).returncode == 1  # more specific wins


def test_bad_code_is_a_usage_error(project):
    r = run("check", "--select", "E501", cwd=project)
    assert r.returncode == 2 and "not a trainlint rule code" in r.stderr


def test_exit_zero_quiet_and_statistics(project):
    r = run("check", "--exit-zero", "--quiet", cwd=project)
    assert r.returncode == 0 and r.stdout.strip().count("\n") == 0 and "Found" not in r.stdout
    r = run("check", "--statistics", cwd=project)
    assert r.stdout.strip() == "1\tTL101\teager-attention-at-long-context"


def test_verbose_prints_versions_and_model_specs(project):
    r = run("check", "-v", "eager.py", cwd=project)
    assert "eager.py: transformers " in r.stderr
    assert "meta-llama/Llama-3.1-8B (llama): vocab 128,256" in r.stderr


def test_config_in_pyproject_is_used_and_bad_keys_exit_2(project):
    (project / "pyproject.toml").write_text('[tool.trainlint]\nignore = ["TL101"]\n')
    assert run("check", cwd=project).returncode == 0
    (project / "pyproject.toml").write_text('[tool.trainlint]\nignroe = ["TL101"]\n')
    r = run("check", cwd=project)
    assert r.returncode == 2 and "unknown key `ignroe`" in r.stderr
    (project / "pyproject.toml").write_text('[tool.trainlint]\nlong-context = "big"\n')
    assert run("check", cwd=project).returncode == 2
    (project / "pyproject.toml").write_text('[tool.trainlint]\ngpu = "GTX-9000"\n')
    assert run("check", cwd=project).returncode == 2


def test_explicit_config_and_per_file_ignores(project):
    cfg = project / "lint.toml"
    cfg.write_text('[per-file-ignores]\n"eager.py" = ["TL101"]\n')
    assert run("check", "--config", "lint.toml", cwd=project).returncode == 0
    assert run("check", "--config", "missing.toml", cwd=project).returncode == 2


def test_exclude_and_skipped_directories(project):
    for d in (".venv", "build", "node_modules", "sub"):
        (project / d).mkdir()
        (project / d / "x.py").write_text(EAGER)
    (project / "pyproject.toml").write_text('[tool.trainlint]\nexclude = ["sub/**"]\n')
    r = run("check", "--statistics", cwd=project)
    assert r.stdout.strip().startswith("1\t")
    # an excluded file named explicitly is still linted, unless --force-exclude (pre-commit)
    assert run("check", "sub/x.py", cwd=project).returncode == 1
    assert run("check", "--force-exclude", "sub/x.py", cwd=project).returncode == 0


def test_syntax_error_is_tl001_and_other_files_are_still_linted(project):
    (project / "broken.py").write_text("from transformers import Trainer\ndef f(:\n    pass\n")
    r = run("check", cwd=project)
    assert r.returncode == 1
    assert "broken.py:2:7: TL001 syntax error" in r.stdout
    assert "eager.py:2:73: TL101" in r.stdout
    assert "Traceback" not in r.stderr


def test_binary_and_undecodable_files_are_tl002(project):
    (project / "blob.py").write_bytes(b"\x00\x01\x02ELF")
    (project / "bad.py").write_bytes(b"from transformers import Trainer\nx = '\xff\xfe'\n")
    r = run("check", cwd=project)
    assert "blob.py:1:1: TL002 cannot lint this file: binary file" in r.stdout
    assert "bad.py:2:6: TL002 cannot lint this file: not valid utf-8" in r.stdout
    assert "eager.py:2:73: TL101" in r.stdout and "Traceback" not in r.stderr


def test_latin1_coding_cookie_is_honoured(project):
    src = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + EAGER
    (project / "latin.py").write_bytes(src.encode("latin-1"))
    r = run("check", "latin.py", cwd=project)
    assert r.returncode == 1 and "latin.py:4:73: TL101" in r.stdout


def test_rule_prints_its_page_and_all_lists_codes(project):
    r = run("rule", "TL101", cwd=project)
    assert r.returncode == 0 and r.stdout.startswith("# TL101 eager-attention-at-long-context")
    r = run("rule", "--all", cwd=project)
    assert "TL101\teager-attention-at-long-context" in r.stdout and "TL301\t" in r.stdout
    assert run("rule", "TL999", cwd=project).returncode == 2


def test_rule_prints_a_tl0xx_page_too(project):
    r = run("rule", "TL001", cwd=project)
    assert r.returncode == 0 and r.stdout.startswith("# TL001 syntax-error\n")
    assert "## When it does not fire" in r.stdout


def test_help_lists_the_rule_command_whole(project):
    lines = [line.split() for line in run("--help", cwd=project).stdout.splitlines()]
    (rule_line,) = [" ".join(words[1:]) for words in lines if words[:1] == ["rule"]]
    assert rule_line == "Print a rule's page (`trainlint rule TL101`), or list every rule."


def test_version(project):
    r = run("--version", cwd=project)
    assert r.returncode == 0 and "trainlint, version" in r.stdout
