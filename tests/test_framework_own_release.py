"""A framework config inside a checkout of the framework itself (axolotl's and LLaMA-Factory's examples/) is read
with the framework's own version at that commit, not the newest release read; keys of a release older than any read
are not judged (TL007), and --verbose says so."""

from __future__ import annotations

import pytest

from test_launch import findings, run

CONFIG = """\
base_model: NousResearch/Llama-2-7b-hf
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
sequence_len: 2048
micro_batch_size: 1
gradient_accumulation_steps: 4
num_epochs: 1
learning_rate: 0.0002
flash_attention: true
debug:
"""


@pytest.mark.parametrize("version, judged", [
    ("0.4.0", False),  # older than any release read
    ("0.18.5", False),  # between two releases read: judged by neither
    ("0.19.0", True),
])
def test_the_checkouts_own_version_decides(tmp_path, version, judged):
    (tmp_path / "setup.py").write_text(f'from setuptools import setup\nsetup(name="axolotl", version="{version}")\n')
    (tmp_path / "examples" / "llama-2").mkdir(parents=True)
    (tmp_path / "examples" / "llama-2" / "lora.yml").write_text(CONFIG)
    data = findings(run("check", "--output-format", "json", "--no-cache", "examples/llama-2/lora.yml", cwd=tmp_path))
    tl007 = [d for d in data if d["code"] == "TL007"]
    assert bool(tl007) is judged
    if judged:
        assert tl007[0]["message"].startswith("debug is not an axolotl 0.19.0 config key")
    r = run("check", "-v", "--no-cache", "examples/llama-2/lora.yml", cwd=tmp_path)
    if judged:
        assert "axolotl 0.19.0 config (the repository is axolotl 0.19.0 itself)" in r.stderr
    else:
        assert f"axolotl {version}'s config keys were not read (releases read: 0.12.0, 0.18.0, 0.19.0): TL007 not checked" \
            in r.stderr
        assert f"the repository is axolotl {version} itself; semantics of" in r.stderr


def test_another_projects_setup_py_is_not_the_framework(tmp_path):
    (tmp_path / "setup.py").write_text('from setuptools import setup\nsetup(name="mytrainer", version="0.4.0")\n')
    (tmp_path / "lora.yml").write_text(CONFIG)
    r = run("check", "-v", "--no-cache", "lora.yml", cwd=tmp_path)
    assert "the repository is axolotl" not in r.stderr


def test_a_version_read_from_the_packages_dunder_version(tmp_path):
    # axolotl 0.12's setup.py: `version=get_package_version()`, which reads src/axolotl/__init__.py
    (tmp_path / "setup.py").write_text('from setuptools import setup\n\n\ndef get_package_version():\n'
                                      '    return "x"\n\n\nsetup(name="axolotl", version=get_package_version())\n')
    (tmp_path / "src" / "axolotl").mkdir(parents=True)
    (tmp_path / "src" / "axolotl" / "__init__.py").write_text('"""pkg"""\n\n__version__ = "0.12.0"\n')
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "lora.yml").write_text(CONFIG)
    r = run("check", "-v", "--no-cache", "examples/lora.yml", cwd=tmp_path)
    assert "axolotl 0.12.0 config (the repository is axolotl 0.12.0 itself)" in r.stderr
    data = findings(run("check", "--output-format", "json", "--no-cache", "examples/lora.yml", cwd=tmp_path))
    assert [d["message"].split(":")[0] for d in data if d["code"] == "TL007"] == \
        ["debug is not an axolotl 0.12.0 config key"]
