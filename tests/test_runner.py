"""Repository scale: parallel workers with a stable output order, and the content-keyed cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trainlint.config import Settings
from trainlint.lint import enabled_codes
from trainlint.runner import run

EAGER = ('from transformers import AutoModelForCausalLM\n'
         'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")\n'
         'MAX_LEN = {n}\n')


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_parallel_output_is_identical_and_ordered(tmp_path):
    for i in range(40):
        (tmp_path / f"s{i:02d}.py").write_text(EAGER.format(n=2048 + i))
    one = cli("--no-cache", "-j", "1", cwd=tmp_path)
    two = cli("--no-cache", "-j", "2", cwd=tmp_path)
    assert one.returncode == two.returncode == 1
    assert one.stdout == two.stdout
    names = [line.split(":")[0] for line in one.stdout.splitlines() if line.startswith("s")]
    assert names == sorted(names) and len(names) == 40


def test_unchanged_files_come_from_the_cache_and_changed_ones_do_not(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text(EAGER.format(n=4096))
    b.write_text(EAGER.format(n=4096))
    s = Settings(root=tmp_path)
    codes = enabled_codes(s)
    first = run([a, b], s, codes)
    assert [o.cached for o in first] == [False, False]
    second = run([a, b], s, codes)
    assert [o.cached for o in second] == [True, True]
    assert [o.diagnostics for o in second] == [o.diagnostics for o in first]
    b.write_text(EAGER.format(n=1024))
    third = run([a, b], s, codes)
    assert [o.cached for o in third] == [True, False] and third[1].diagnostics == []
    assert [o.cached for o in run([a, b], s, codes, cache=False)] == [False, False]
    assert (tmp_path / ".trainlint_cache" / ".gitignore").read_text() == "*\n"


def test_a_new_git_base_invalidates_the_cache_for_tl401(tmp_path):
    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@e.x")
    git("config", "user.name", "t")
    (tmp_path / ".gitignore").write_text(".trainlint_cache/\n")
    path = tmp_path / "t.py"
    path.write_text("from trl import SFTConfig\ncfg = SFTConfig(output_dir='o', per_device_train_batch_size=8)\n")
    git("add", "-A")
    git("commit", "-qm", "one")
    path.write_text(path.read_text().replace("=8)", "=2)"))
    assert "TL401" in cli("t.py", cwd=tmp_path).stdout
    git("commit", "-qam", "two")  # the shrink is now the base: nothing to report, though the file is unchanged
    assert cli("t.py", cwd=tmp_path).returncode == 0


def test_a_changed_recipe_a_launcher_passes_invalidates_the_cache(tmp_path, monkeypatch):
    """The recipe is not a launcher (no index stamp covers it) and not the script: its change, even at the same
    size (a recipe staged alone in pre-commit), must still reach the script's result."""
    from trainlint.launch.discover import clear_caches

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    script = tmp_path / "sft.py"
    script.write_text(
        "from transformers import AutoModelForCausalLM\n"
        "from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser\n"
        "model_args, args = TrlParser((ModelConfig, SFTConfig)).parse_args_and_config()\n"
        "model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,\n"
        "                                             attn_implementation=model_args.attn_implementation)\n"
        "SFTTrainer(model=model, args=args).train()\n")
    (tmp_path / "train.sh").write_text("python sft.py --config recipes/sft.yaml\n")
    (tmp_path / "recipes").mkdir()
    recipe = tmp_path / "recipes" / "sft.yaml"
    recipe.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nattn_implementation: eager\nmax_length: 8192\n")
    s = Settings(root=tmp_path)
    codes = enabled_codes(s)
    (first,) = run([script], s, codes)
    assert [d.code for d in first.diagnostics] == ["TL101"] and not first.cached
    clear_caches()
    assert run([script], s, codes)[0].cached
    recipe.write_text(recipe.read_text().replace("eager", "sdpa "))  # the same size
    clear_caches()
    (after,) = run([script], s, codes)
    assert not after.cached and after.diagnostics == []


def test_auto_goes_parallel_only_for_enough_files_and_bytes_and_keeps_the_order(tmp_path):
    from trainlint.runner import PARALLEL_MIN_BYTES, PARALLEL_MIN_FILES, _workers

    assert _workers(None, PARALLEL_MIN_FILES - 1, 10 * PARALLEL_MIN_BYTES) == 1
    assert _workers(None, 10 * PARALLEL_MIN_FILES, PARALLEL_MIN_BYTES - 1) == 1
    assert _workers(None, PARALLEL_MIN_FILES, PARALLEL_MIN_BYTES) >= 1
    assert _workers(3, 2, 0) == 3 and _workers(3, 1, 10**9) == 1
    padding = "# " + "x" * 78 + "\n"
    for i in range(24):  # sizes out of order: the largest go first, the output stays in path order
        (tmp_path / f"s{i:02d}.py").write_text(EAGER.format(n=2048 + i) + padding * (((i * 7) % 24) * 200))
    auto = cli("--no-cache", cwd=tmp_path)
    one = cli("--no-cache", "-j", "1", cwd=tmp_path)
    assert auto.returncode == one.returncode == 1
    assert auto.stdout == one.stdout
    names = [line.split(":")[0] for line in auto.stdout.splitlines() if line.startswith("s")]
    assert names == sorted(names) and len(names) == 24
