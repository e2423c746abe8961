"""The real `pre-commit` tool runs trainlint's hook from this checkout (`pre-commit try-repo`), in a
temporary git repository: the hook environment installs this package from the local checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRE_COMMIT = shutil.which("pre-commit") or str(Path(sys.executable).with_name("pre-commit"))

pytestmark = pytest.mark.skipif(not Path(PRE_COMMIT).exists(), reason="pre-commit is in the test extra")


@pytest.fixture(scope="module")
def hook_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    return tmp_path


def try_repo(repo: Path, home: Path, *files: str, hook: str = "trainlint") -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.run([PRE_COMMIT, "try-repo", str(ROOT), hook, "--files", *files], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=900)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_hook_fails_a_commit_with_eager_attention_at_long_context(repo, hook_home):
    (repo / "train.py").write_text(
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='eager')\n"
        "MAX_SEQ_LENGTH = 8192\n")
    git(repo, "add", "train.py")
    r = try_repo(repo, hook_home, "train.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "train.py:2:73: TL101 eager attention at sequence length 8,192" in r.stdout


def test_hook_fails_a_staged_batch_shrink_against_head(repo, hook_home):
    path = repo / "sft.py"
    path.write_text("from trl import SFTConfig\ncfg = SFTConfig(output_dir='o', per_device_train_batch_size=8)\n")
    git(repo, "add", "sft.py")
    git(repo, "commit", "-qm", "first")
    path.write_text(path.read_text().replace("=8)", "=2)"))
    git(repo, "add", "sft.py")
    r = try_repo(repo, hook_home, "sft.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "TL401 per_device_train_batch_size 8 -> 2 but gradient_accumulation_steps stays 1" in r.stdout


def test_hook_passes_a_clean_script(repo, hook_home):
    (repo / "ok.py").write_text(
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='sdpa')\n"
        "MAX_SEQ_LENGTH = 8192\n")
    git(repo, "add", "ok.py")
    r = try_repo(repo, hook_home, "ok.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout


def test_hook_relints_the_script_a_staged_launcher_runs(repo, hook_home):
    (repo / "train.py").write_text(
        "from transformers import HfArgumentParser, TrainingArguments\n"
        "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n")
    launcher = repo / "run.sh"
    launcher.write_text("torchrun --nproc_per_node 8 train.py \\\n    --per_device_train_batch_size 8 \\\n"
                        "    --gradient_accumulation_steps 2\n")
    git(repo, "add", "train.py", "run.sh")
    git(repo, "commit", "-qm", "first")
    launcher.write_text(launcher.read_text().replace("batch_size 8", "batch_size 4"))
    git(repo, "add", "run.sh")
    r = try_repo(repo, hook_home, "run.sh")  # only the launcher is staged: the hook lints what it launches
    assert r.returncode == 1, r.stdout + r.stderr
    assert "run.sh:2:35: TL401 train.py: per_device_train_batch_size 8 -> 4 but gradient_accumulation_steps " \
           "stays 2" in r.stdout


# --- trainlint-estimate: the does-it-fit gate alone (TL701) -----------------------------------------------

def _tl701_registered() -> bool:
    from trainlint.rules import REGISTRY

    return "TL701" in REGISTRY


needs_tl701 = pytest.mark.skipif(not _tl701_registered(), reason=(
    "TL701 (run-does-not-fit) is not registered in this checkout: it is written on the `rules` branch; "
    "re-run after merging it (try-repo installs the committed checkout)"))
FULL_FINETUNE = (
    "from transformers import AutoModelForCausalLM\n"
    "from trl import SFTConfig, SFTTrainer\n"
    "model = AutoModelForCausalLM.from_pretrained('{model}', attn_implementation='sdpa')\n"
    "args = SFTConfig(output_dir='o', per_device_train_batch_size={batch}, max_length=1024, bf16=True)\n"
    "SFTTrainer(model=model, args=args).train()\n")


def _gpu(repo: Path, gpu: str = "24GB") -> None:
    (repo / "pyproject.toml").write_text(f'[tool.trainlint]\ngpu = "{gpu}"\n')
    git(repo, "add", "pyproject.toml")


@needs_tl701
def test_estimate_hook_fails_a_staged_script_that_does_not_fit_the_configured_gpu(repo, hook_home):
    _gpu(repo)
    (repo / "sft.py").write_text(FULL_FINETUNE.format(model="meta-llama/Llama-3.1-8B", batch=1))
    git(repo, "add", "sft.py")
    r = try_repo(repo, hook_home, "sft.py", hook="trainlint-estimate")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "sft.py:5:1: TL701 " in r.stdout and "does not fit" in r.stdout


@needs_tl701
def test_estimate_hook_passes_a_run_that_fits_whatever_else_is_found(repo, hook_home):
    _gpu(repo)
    path = repo / "sft.py"
    path.write_text(FULL_FINETUNE.format(model="HuggingFaceTB/SmolLM2-135M", batch=8))
    git(repo, "add", "sft.py")
    git(repo, "commit", "-qm", "first")
    path.write_text(FULL_FINETUNE.format(model="HuggingFaceTB/SmolLM2-135M", batch=2))  # TL401, not a fit problem
    git(repo, "add", "sft.py")
    r = try_repo(repo, hook_home, "sft.py", hook="trainlint-estimate")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout
    full = try_repo(repo, hook_home, "sft.py")  # the full hook does report the shrunk batch
    assert full.returncode == 1 and "TL401" in full.stdout, full.stdout + full.stderr


@needs_tl701
def test_estimate_hook_fails_a_staged_recipe_that_makes_the_run_too_big(repo, hook_home):
    _gpu(repo)
    (repo / "sft.py").write_text(
        "from transformers import AutoModelForCausalLM\n"
        "from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser\n"
        "model_args, args = TrlParser((ModelConfig, SFTConfig)).parse_args_and_config()\n"
        "model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, attn_implementation='sdpa')\n"
        "SFTTrainer(model=model, args=args).train()\n")
    (repo / "train.sh").write_text("python sft.py --config recipe.yaml\n")
    recipe = repo / "recipe.yaml"
    recipe.write_text("model_name_or_path: HuggingFaceTB/SmolLM2-135M\noutput_dir: out\n"
                      "per_device_train_batch_size: 1\nmax_length: 1024\nbf16: true\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "first")
    assert try_repo(repo, hook_home, "recipe.yaml", hook="trainlint-estimate").returncode == 0
    recipe.write_text(recipe.read_text().replace("HuggingFaceTB/SmolLM2-135M", "meta-llama/Llama-3.1-8B"))
    git(repo, "add", "recipe.yaml")  # only the recipe is staged: the hook checks the script it configures
    r = try_repo(repo, hook_home, "recipe.yaml", hook="trainlint-estimate")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "sft.py:5:1: TL701 " in r.stdout and "launched by train.sh:1" in r.stdout
