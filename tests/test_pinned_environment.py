"""The pinned test environment (issue 24): one set of pins, a CI guard against avoidable skips, and the knowledge refresh.

Truth used: the files themselves (pyproject.toml, constraints-test.txt, README.md), the installed distributions, and
a real pytest run in a subprocess with the guard plugin (tests/ci_skips.py).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import PINNED, ROOT, installed, pinned_installed

from trainlint.knowledge.versions import NEWEST_KNOWN, decide_versions, project_pins

CONSTRAINTS = ROOT / "constraints-test.txt"
GROUND_TRUTH_LIBRARIES = ("torch", "transformers", "trl", "peft", "accelerate", "datasets")


def _constraints() -> dict[str, str]:
    out = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            out[name.lower().replace("_", "-")] = version
    return out


def _readme_command(marker: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"<!-- {marker} -->", 1)[1].split("```")[1].removeprefix("sh").strip()


def test_every_ground_truth_library_is_pinned_exactly_and_the_constraints_agree():
    constraints = _constraints()
    for lib in GROUND_TRUTH_LIBRARIES:
        assert lib in PINNED, f"{lib} is not pinned exactly in the test extra"
        assert constraints.get(lib) == PINNED[lib], f"{lib}: test extra {PINNED[lib]}, constraints {constraints.get(lib)}"


def test_the_readme_test_command_installs_with_the_constraints():
    command = _readme_command("test-command")
    assert '-e ".[test]" -c constraints-test.txt' in command and command.endswith("python -m pytest")
    assert f"torch=={PINNED['torch']}" in command  # the CPU wheel first, at the same pin


def test_every_constrained_package_in_this_environment_is_at_its_pin():
    """What the README's test command installs is what the constraints say (a fresh install is reproducible)."""
    if not pinned_installed("transformers", "trl"):
        pytest.skip("not the pinned test environment (run the README's test command)")
    wrong = {name: (version, installed(name)) for name, version in _constraints().items()
             if installed(name) is not None and installed(name) != version}
    assert not wrong, wrong


def test_the_knowledge_is_read_up_to_the_pinned_releases():
    """The tests run against the newest releases the tables know; a bump of the pins needs the refresh first."""
    for lib in ("transformers", "trl", "peft"):
        assert PINNED[lib] == NEWEST_KNOWN[lib], (lib, PINNED[lib], NEWEST_KNOWN[lib])


# ---------------------------------------------------------------------------------------------------------------
# The CI guard, run for real: pytest in a subprocess with the plugin
# ---------------------------------------------------------------------------------------------------------------

def _pytest(tmp_path: Path, body: str, ci: bool) -> subprocess.CompletedProcess:
    (tmp_path / "test_probe.py").write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    env["PYTHONPATH"] = str(ROOT / "tests")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "ci_skips", "-p", "no:cacheprovider", "-q",
                           "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


SKIPPING = '''
import pytest

@pytest.mark.skipif(True, reason="ground truth needs transformers 9.9.9 installed")
def test_marker():
    pass

def test_inline():
    pytest.skip("needs Chromium")

def test_passes():
    pass
'''


def test_outside_ci_skips_are_counted_and_explained(tmp_path):
    r = _pytest(tmp_path, SKIPPING, ci=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped: 2" in r.stdout
    assert "1 x ground truth needs transformers 9.9.9 installed" in r.stdout and "1 x needs Chromium" in r.stdout


def test_in_ci_an_avoidable_skip_fails(tmp_path):
    r = _pytest(tmp_path, SKIPPING, ci=True)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "CI=true and this test skipped: ground truth needs transformers 9.9.9 installed" in r.stdout
    assert "CI=true and this test skipped: needs Chromium" in r.stdout
    assert "1 passed" in r.stdout


def test_in_ci_the_root_permission_skip_is_allowed(tmp_path):
    r = _pytest(tmp_path, '''
        import pytest

        def test_mode():
            pytest.skip("root reads files whatever their mode; cannot exist here")
        ''', ci=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped: 1" in r.stdout


def test_ci_run_sets_ci_true():
    assert re.search(r"^export CI=true$", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), re.M)


# ---------------------------------------------------------------------------------------------------------------
# A release newer than the knowledge
# ---------------------------------------------------------------------------------------------------------------

def test_a_pin_newer_than_the_knowledge_is_named_so_and_gets_the_newest_behaviour(tmp_path):
    major, minor = (int(p) for p in NEWEST_KNOWN["transformers"].split(".")[:2])
    newer = f"{major}.{minor + 7}.0"
    (tmp_path / "requirements.txt").write_text(f"transformers=={newer}\n")
    project_pins.cache_clear()
    (tmp_path / "train.py").write_text(textwrap.dedent('''
        from transformers import AutoModelForCausalLM
        from trl import SFTConfig, SFTTrainer

        model = AutoModelForCausalLM.from_pretrained("google/gemma-2-9b")
        trainer = SFTTrainer(model=model, args=SFTConfig(output_dir="o", max_length=4096, per_device_train_batch_size=1))
        '''))
    chosen = decide_versions(tmp_path / "train.py", (), {}).transformers
    assert chosen.version == newer
    assert f"newer than the knowledge (read up to {NEWEST_KNOWN['transformers']})" in chosen.source
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--verbose", "--no-cache", "train.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert f"transformers {newer} (pinned transformers=={newer}" in r.stdout + r.stderr
    assert "newer than the knowledge" in r.stdout + r.stderr
    # the newest known behaviour: transformers 5 gives gemma2 eager attention (its soft-capping), so TL101 fires
    assert f"TL101 eager attention at sequence length 4,096 (gemma2 falls back to eager in transformers {newer}" in r.stdout
    (tmp_path / "requirements.txt").write_text(f"transformers=={NEWEST_KNOWN['transformers']}\n")
    project_pins.cache_clear()  # pins are cached per directory for the life of a process
    assert "newer than" not in decide_versions(tmp_path / "train.py", (), {}).transformers.source


# ---------------------------------------------------------------------------------------------------------------
# scripts/refresh_knowledge.py: its edits and its change report (the download itself needs the package index)
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def refresh():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module("refresh_knowledge")
    finally:
        sys.path.pop(0)


def test_refresh_appends_a_release_to_the_generator_list(refresh):
    text = 'A = 1\nTRANSFORMERS_VERSIONS = [\n    "5.23.0", "5.24.0",\n]\nTRL_VERSIONS = [\n    "1.16.0",\n]\n'
    out = refresh.add_to_release_list(text, "TRANSFORMERS_VERSIONS", "5.25.0")
    assert ast.literal_eval(out.split("TRANSFORMERS_VERSIONS = ")[1].split("\nTRL")[0]) == ["5.23.0", "5.24.0", "5.25.0"]
    assert out.endswith('TRL_VERSIONS = [\n    "1.16.0",\n]\n')


def test_refresh_moves_newest_known_and_the_known_minors(refresh):
    text = (ROOT / "src/trainlint/knowledge/versions.py").read_text(encoding="utf-8")
    out = refresh.set_newest_known(text, "transformers", "5.40.1")
    ns: dict = {}
    exec(out.split("PIN_FILES")[0].split("from pathlib import Path\n", 1)[1], ns)
    assert ns["NEWEST_KNOWN"]["transformers"] == "5.40.1"
    assert ns["NEWEST_KNOWN"]["trl"] == NEWEST_KNOWN["trl"]
    assert ns["_KNOWN_MINORS"]["transformers"][-1] == "5.40.0"
    assert ns["_KNOWN_MINORS"]["trl"][-1] == f"1.{int(NEWEST_KNOWN['trl'].split('.')[1])}.0"


def test_refresh_reports_what_a_rule_reads(refresh):
    before = {"classes": {"SFTConfig": {"fields": {"max_length": {"k": "int", "d": 1024}, "old_kw": {"k": "str"}}},
                          "Gone": {"fields": {}}}}
    after = {"classes": {"SFTConfig": {"fields": {"max_length": {"k": "int", "d": 2048}, "new_kw": {"k": "str"}},
                                       "post_init": ["x"]},
                         "New": {"fields": {}}}}
    lines = refresh.argument_changes(before, after)
    assert "SFTConfig.max_length: default 1024 -> 2048" in lines
    assert "SFTConfig: new keywords new_kw" in lines and "SFTConfig: keywords removed old_kw" in lines
    assert "new class New" in lines and "class removed: Gone" in lines
    assert any("__post_init__ changed" in line for line in lines)


def test_refresh_reads_architectures_and_their_attention_declarations(refresh, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    for root, folders in ((old, {"llama": True, "oldie": True}), (new, {"llama": True, "newbie": False})):
        for name, sdpa in folders.items():
            path = root / "transformers" / "models" / name / f"modeling_{name}.py"
            path.parent.mkdir(parents=True)
            path.write_text(f"class P:\n    _supports_sdpa = {sdpa}\n    _supports_flash_attn = True\n")
    lines = refresh.architecture_changes(old, new)
    assert any(line.startswith("new architecture newbie: _supports_sdpa false") and "eager by default" in line
               for line in lines)
    assert "architecture removed: oldie" in lines
    assert not any("llama" in line for line in lines)


def test_refresh_reads_lora_config_defaults(refresh, tmp_path):
    for name, r in (("old", 8), ("new", 16)):
        path = tmp_path / name / "peft" / "tuners" / "lora" / "config.py"
        path.parent.mkdir(parents=True)
        path.write_text(f"class LoraConfig:\n    r: int = field(default={r})\n    use_dora: bool = False\n")
    assert refresh.peft_changes(tmp_path / "old", tmp_path / "new") == ["LoraConfig.r: default 8 -> 16"]
