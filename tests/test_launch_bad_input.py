"""Launchers and configs that cannot be read: a TL005 / TL006 on that file, never a traceback, and every
other file (the script they launch included) still linted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
(training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="sdpa")
Trainer(model=model, args=training_args).train()
"""


def check(repo: Path, *args: str) -> list[tuple[str, str, int, int, str]]:
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", "json", *args],
                       cwd=repo, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return [(d["code"], d["filename"], d["location"]["row"], d["location"]["column"], d["message"])
            for d in json.loads(r.stdout)]


def repo_with(tmp_path: Path, files: dict[str, bytes | str]) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "train.py").write_text(SCRIPT)
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    return tmp_path


def test_unterminated_quote_is_reported_and_the_rest_of_the_line_is_read(tmp_path):
    repo = repo_with(tmp_path, {"quote.sh": 'python train.py --use_liger_kernel True --run_name "oops\n'})
    found = check(repo, ".")
    assert [f[:4] for f in found] == [("TL005", "quote.sh", 1, 52)]
    assert "unterminated \"" in found[0][4]


def test_circular_source_is_reported_on_both_files(tmp_path):
    repo = repo_with(tmp_path, {"a.sh": "source b.sh\npython train.py --use_liger_kernel True\n",
                                "b.sh": "source a.sh\n"})
    found = check(repo, ".")
    assert [f[:2] for f in found] == [("TL005", "a.sh"), ("TL005", "b.sh")]
    assert "circular source: a.sh -> b.sh -> a.sh" in found[0][4]


def test_binary_launcher_is_reported_not_read(tmp_path):
    repo = repo_with(tmp_path, {"bin.sh": b"\x00\x01\x02binary", "ok.sh": "python train.py --use_liger_kernel True\n"})
    assert [f[:2] for f in check(repo, ".")] == [("TL005", "bin.sh")]


def test_a_launched_script_that_does_not_exist(tmp_path):
    (tmp_path / "src").mkdir()  # the folder it runs in is the repository's: the script is missing from it
    repo = repo_with(tmp_path, {"run.sh": "cd src\npython missing.py --x 1\n", "src/prepare.py": "print(1)\n"})
    found = check(repo, ".")
    assert [f[:4] for f in found[:1]] == [("TL006", "run.sh", 2, 8)]
    assert "missing.py, which does not exist (looked in the launcher's folder after its cd" in found[0][4]


def test_configs_a_launch_passes_that_do_not_load_are_reported_in_the_config(tmp_path):
    repo = repo_with(tmp_path, {"cfg.sh": "python train.py --use_liger_kernel True --deepspeed ds.json\n"
                                          "python train.py --use_liger_kernel True --deepspeed gone.json\n",
                                "ds.json": '{"zero_optimization": {"stage": 3,}}\n'})
    found = check(repo, ".")
    assert [f[:4] for f in found] == [("TL005", "cfg.sh", 2, 53), ("TL005", "ds.json", 1, 34)]
    assert "passes gone.json, which does not exist" in found[0][4]
    assert "trailing comma" in found[1][4] and "(cfg.sh passes it)" in found[1][4]


def test_a_recipe_that_is_not_yaml(tmp_path):
    (tmp_path / "sft.py").write_text(
        "from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser\n"
        "script_args, training_args, model_args = TrlParser((ScriptArguments, SFTConfig, ModelConfig))"
        ".parse_args_and_config()\n"
        "SFTTrainer(model=model_args.model_name_or_path, args=training_args).train()\n")
    repo = repo_with(tmp_path, {"run.sh": "accelerate launch sft.py --config recipe.yaml\n",
                                "recipe.yaml": "model_name_or_path: [Qwen/Qwen2-7B\n"})
    found = check(repo, ".")
    # train.py, launched by nothing, is still checked (under its defaults: unfused loss on Llama 3's vocabulary)
    assert [f[:2] for f in found] == [("TL005", "recipe.yaml"), ("TL301", "train.py")]
    assert "YAML error" in found[0][4]


def test_a_script_of_another_repository_is_a_verbose_note_once_not_a_finding(tmp_path):
    loop = ("# clone https://github.com/org/evaltool into the top level first\n"
            "for task in a b c d; do\n"
            "  python evaltool/harness/launch.py --task $task\n"
            "done\n"
            "python evaltool/harness/launch.py --task e\n"
            "cd data/bench\n"
            "python score.py\n")
    (tmp_path / "src").mkdir()
    repo = repo_with(tmp_path, {"eval.sh": loop, "moved.sh": "python src/old/train_tool.py\n",
                                "src/train_tool.py": "print(1)\n"})
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", "json", "-v",
                        "."], cwd=repo, capture_output=True, text=True, timeout=120)
    found = [(d["code"], d["filename"], d["location"]["row"]) for d in json.loads(r.stdout)]
    assert ("TL006", "moved.sh", 1) in found  # the repository has that script elsewhere: a stale path
    assert [f for f in found if f[1] == "eval.sh"] == []
    notes = [line for line in r.stderr.splitlines() if "not checked" in line]
    assert notes == [
        "eval.sh: not checked: python runs evaltool/harness/launch.py (lines 3, 5), which is not this repository's "
        "(the folder evaltool/harness/ is not in this repository; the launcher names https://github.com/org/evaltool)",
        "eval.sh: not checked: python runs score.py (line 7), which is not this repository's (it runs in "
        "data/bench/, a folder that is not in this repository)"]
    moved = next(d for d in json.loads(r.stdout) if d["filename"] == "moved.sh")
    assert "src/train_tool.py has that name (moved?)" in moved["message"]


def test_a_missing_config_in_a_loop_is_one_finding(tmp_path):
    (tmp_path / "cfg").mkdir()
    repo = repo_with(tmp_path, {"sweep.sh": "for z in 2 3; do\n"
                                            "  python train.py --use_liger_kernel True --deepspeed cfg/zero$z.json\n"
                                            "done\n"})
    found = check(repo, ".")
    assert [f[:4] for f in found] == [("TL005", "sweep.sh", 2, 55)]
    assert found[0][4] == ("python passes cfg/zero2.json, which does not exist (and 1 more value of this word: it "
                           "runs in a loop or more than once)")


def test_files_the_launcher_writes_or_fetches_are_not_missing_configs(tmp_path):
    script = ("wget -P cfg https://example.org/files/zero3.json\n"
              "curl -L -o cfg/acc.yaml https://example.org/acc.yaml\n"
              "huggingface-cli download org/recipes sft.yaml --local-dir recipes\n"
              "if [ ! -f made.json ]; then\n"
              "  python prepare.py --output_file made.json\n"
              "fi\n"
              "python train.py --use_liger_kernel True --deepspeed cfg/zero3.json --config_file cfg/acc.yaml "
              "--recipe recipes/sft.yaml --args_file made.json --save_path stats.json --data_path train.json\n"
              "python train.py --use_liger_kernel True --deepspeed cfg/absent.json\n")
    repo = repo_with(tmp_path, {"fetch.sh": script, "prepare.py": "print(1)\n"})
    found = check(repo, ".")
    # only the config that nothing makes; a data file and an output are not configs
    assert [(f[0], f[1], f[2]) for f in found] == [("TL005", "fetch.sh", 8)]
    assert "cfg/absent.json" in found[0][4]


def test_a_config_is_looked_up_after_the_cd_from_the_root(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "exp" / "cfg").mkdir(parents=True)
    (tmp_path / "exp" / "train.py").write_text(SCRIPT)
    (tmp_path / "exp" / "cfg" / "ds.json").write_text('{"zero_optimization": {"stage": 3,}}\n')
    repo = repo_with(tmp_path, {"scripts/run.sh": "cd exp\npython train.py --deepspeed cfg/ds.json\n"})
    found = check(repo, ".")
    # found from the root after `cd exp` (run as `bash scripts/run.sh` there), so it is read: a JSON error, not missing
    assert [(f[0], f[1]) for f in found if f[0] == "TL005"] == [("TL005", "exp/cfg/ds.json")]


def test_a_vendored_projects_scripts_folder_runs_from_the_project(tmp_path):
    """`vendor/proj/scripts/finetune.sh` runs `torchrun finetune.py ...` and the script is `vendor/proj/finetune.py`:
    the project's convention is to run its launchers from its own folder (neither the launcher's folder nor the
    repository's root holds it). Not a missing script, and the launch reaches the script."""
    (tmp_path / "vendor" / "proj" / "scripts").mkdir(parents=True)
    repo = repo_with(tmp_path, {
        "vendor/proj/scripts/finetune.sh": "torchrun --nproc_per_node 2 finetune.py --use_liger_kernel False "
                                           "--output_dir out --ds cfg/ds.json\n",
        "vendor/proj/finetune.py": SCRIPT})
    found = check(repo, ".")
    assert not any(f[0] == "TL006" for f in found), found
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "-v", "vendor/proj/finetune.py"],
                       cwd=repo, capture_output=True, text=True, timeout=120)
    assert "launch: vendor/proj/scripts/finetune.sh:1" in r.stderr, r.stderr
