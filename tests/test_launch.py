"""Scripts checked as they are launched: real repository layouts (written for the tests, in the shapes of
FastChat, TRL recipes, Qwen, a JSON args file, Slurm), copied into a temporary git repository and linted
with the real `trainlint` command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LAYOUTS = Path(__file__).parent / "fixtures" / "launch" / "layouts"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def layout(name: str, tmp_path: Path) -> Path:
    repo = tmp_path / name
    shutil.copytree(LAYOUTS / name, repo)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "init", cwd=repo)
    return repo


def findings(r: subprocess.CompletedProcess) -> list[dict]:
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def short(data: list[dict]) -> list[tuple[str, str, int, int]]:
    return [(d["code"], d["filename"], d["location"]["row"], d["location"]["column"]) for d in data]


def test_fastchat_style_deepspeed_launcher_turns_on_the_lora_checkpointing_trap(tmp_path):
    repo = layout("fastchat_lora", tmp_path)
    # (TL501, the base loaded in fp32 on transformers 4.46.3 under --bf16 True, is tested in test_tl501_frozen_fp32)
    data = findings(run("check", "--output-format", "json", "--ignore", "TL501", ".", cwd=repo))
    # reported where `--gradient_checkpointing True` is written; the non-reentrant launcher and the script
    # nothing launches (defaults: checkpointing off) are silent
    assert short(data) == [("TL201", "scripts/train_lora.sh", 14, 30)]
    (d,) = data
    assert d["end_location"] == {"row": 14, "column": 34}
    assert d["message"].startswith("chatlora/train/train_lora.py: LoRA with reentrant checkpointing")
    assert "transformers 4.46.3's reentrant default" in d["message"]
    assert [(r["filename"], r["location"]["row"], r["message"]) for r in d["related"]] == [
        ("chatlora/train/train_lora.py", 45, "the script this value reaches"),
        ("scripts/train_lora.sh", 3, "launched here")]
    # the fix belongs in the script (it holds for every launch): it says which file it edits
    assert (d["fix"]["file"], d["fix"]["message"]) == ("chatlora/train/train_lora.py",
                                                       "Call model.enable_input_require_grads() after get_peft_model")


def test_trl_recipe_read_through_a_readme_launch_reports_on_the_yaml_key(tmp_path):
    repo = layout("trl_recipe", tmp_path)
    data = findings(run("check", "--output-format", "json", ".", cwd=repo))
    assert short(data) == [("TL101", "recipes/llama3/sft_eager.yaml", 4, 22)]
    assert "eager attention at sequence length 8,192" in data[0]["message"]
    assert "batch 1 x 32 heads" in data[0]["message"]  # per_device_train_batch_size: 1 from the recipe
    assert [r["filename"] for r in data[0]["related"]] == ["sft.py", "README.md"]


def test_qwen_style_torchrun_launcher_with_shell_variables(tmp_path):
    repo = layout("qwen_full", tmp_path)
    data = findings(run("check", "--output-format", "json", ".", cwd=repo))
    # the model id is the deciding value: reported at MODEL="Qwen/Qwen2-7B"; the launcher that passes
    # --use_liger_kernel True is silent
    assert short(data) == [("TL301", "finetune/finetune_ds.sh", 5, 8)]
    assert "[2 x 8,192 x 152,064] logits" in data[0]["message"]


def test_json_args_file_named_in_the_readme(tmp_path):
    repo = layout("json_args", tmp_path)
    data = findings(run("check", "--output-format", "json", ".", cwd=repo))
    assert short(data) == [("TL101", "configs/run.json", 3, 28)]
    # use_liger_kernel: true in the JSON: no TL301 although the vocabulary is 128k


def test_slurm_script_launching_through_srun_torchrun(tmp_path):
    repo = layout("slurm", tmp_path)
    data = findings(run("check", "--output-format", "json", ".", cwd=repo))
    assert short(data) == [("TL101", "launch.slurm", 9, 44)]  # `--attn eager`; --liger is store_true: no TL301


@pytest.mark.parametrize("name, expected", [
    ("fastchat_lora", []),  # the trap needs --gradient_checkpointing, which is off by default
    ("trl_recipe", []),  # ModelConfig.model_name_or_path defaults to None: model unknown, nothing claimed
    # the dataclass default Qwen/Qwen-7B is in the catalog now (151,936 vocab, cited config.json transcription):
    # Trainer's default use_liger_kernel=False, batch 8 x model_max_length 8,192: unfused cross-entropy
    ("qwen_full", [("TL301", "finetune.py", 30, 15)]),
    ("json_args", [("TL301", "train.py", 25, 5)]),  # use_liger_kernel defaults to False; the JSON turned it on
    ("slurm", [("TL301", "train.py", 22, 1)]),  # --liger is a store_true flag: off unless launched with it
])
def test_the_same_scripts_without_their_launchers_are_checked_under_their_defaults(tmp_path, name, expected):
    repo = layout(name, tmp_path)
    assert short(findings(run("check", "--no-launches", "--output-format", "json", ".", cwd=repo))) == expected


def test_explicit_command_line_after_a_double_dash(tmp_path):
    repo = layout("slurm", tmp_path)
    r = run("check", "--no-cache", "train.py", "--", "--max_seq_length", "8192", "--attn", "eager", cwd=repo)
    assert r.returncode == 1
    assert r.stdout.startswith("train.py:19:58: TL101 eager attention at sequence length 8,192")
    assert "TL301" in r.stdout  # --liger not given here
    r = run("check", "--no-cache", "train.py", "--", "--max_seq_length", "8192", "--liger", cwd=repo)
    assert r.returncode == 0, r.stdout  # sdpa by default, Liger on


def test_check_a_launcher_or_a_recipe_explicitly(tmp_path):
    repo = layout("fastchat_lora", tmp_path)
    r = run("check", "scripts/train_lora_nonreentrant.sh", cwd=repo)
    assert r.returncode == 0, r.stdout
    r = run("check", "scripts/train_lora.sh", cwd=repo)
    assert r.returncode == 1 and "scripts/train_lora.sh:14:30: TL201" in r.stdout
    repo = layout("trl_recipe", tmp_path)
    r = run("check", "recipes/llama3/sft_eager.yaml", cwd=repo)
    assert r.returncode == 1 and "recipes/llama3/sft_eager.yaml:4:22: TL101" in r.stdout
    r = run("check", "recipes/llama3/sft_sdpa.yaml", cwd=repo)
    assert r.returncode == 0, r.stdout


def test_verbose_says_where_each_value_came_from(tmp_path):
    repo = layout("fastchat_lora", tmp_path)
    r = run("check", "-v", "--no-cache", "chatlora/train/train_lora.py", cwd=repo)
    assert "chatlora/train/train_lora.py: launch: scripts/train_lora.sh:3" in r.stderr
    assert "chatlora/train/train_lora.py:   per_device_train_batch_size 2 from scripts/train_lora.sh:10" in r.stderr
    assert "chatlora/train/train_lora.py:   data_path unknown from scripts/train_lora.sh:7" in r.stderr


def test_estimate_under_a_launcher_uses_its_batch_length_and_processes(tmp_path):
    repo = layout("qwen_full", tmp_path)
    r = run("estimate", "finetune/finetune_ds.sh", "--format", "json", cwd=repo)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    text = json.dumps(data)
    assert "launch finetune/finetune_ds.sh:10" in text
    assert "per_device_train_batch_size=2 (finetune/finetune_ds.sh:15)" in text
    assert "model_name_or_path='Qwen/Qwen2-7B' (finetune/finetune_ds.sh:5)" in text


def test_batch_shrunk_in_a_launcher_against_the_git_base(tmp_path):
    repo = layout("fastchat_lora", tmp_path)
    launcher = repo / "scripts" / "train_lora.sh"
    launcher.write_text(launcher.read_text().replace("--per_device_train_batch_size 2", "--per_device_train_batch_size 1"))
    data = findings(run("check", "--output-format", "json", "--select", "TL401", ".", cwd=repo))
    assert short(data) == [("TL401", "scripts/train_lora.sh", 10, 35)]
    assert "per_device_train_batch_size 2 -> 1 but gradient_accumulation_steps stays 8: effective batch per device " \
           "16 -> 8" in data[0]["message"]
    launcher.write_text(launcher.read_text().replace("--gradient_accumulation_steps 8", "--gradient_accumulation_steps 16"))
    assert findings(run("check", "--output-format", "json", "--select", "TL401", ".", cwd=repo)) == []


WRITTEN = [
    "%%writefile train.py\n",
    "from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser\n",
    "from transformers import AutoModelForCausalLM\n",
    "\n",
    "parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))\n",
    "script_args, training_args, model_args = parser.parse_args_and_config()\n",
    "model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,\n",
    "                                             attn_implementation=model_args.attn_implementation)\n",
    "SFTTrainer(model=model, args=training_args).train()\n",
]
LAUNCH = [
    "!accelerate launch --num_processes 1 train.py \\\n",
    "    --model_name_or_path meta-llama/Llama-3.1-8B --attn_implementation eager \\\n",
    "    --max_length {length} --output_dir out\n",
]


def notebook(path: Path, *sources: list[str]) -> Path:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# SFT\n"]}]
    cells += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": s}
              for s in sources]
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1))
    return path


def test_notebook_writes_its_script_and_launches_it(tmp_path):
    launch = [line.replace("{length}", "16384") for line in LAUNCH]
    notebook(tmp_path / "sft.ipynb", ["!pip install -q trl peft\n"], WRITTEN, launch)
    (d,) = findings(run("check", "--output-format", "json", "sft.ipynb", cwd=tmp_path))
    assert (d["code"], d["filename"], d["cell"], d["location"], d["end_location"]) == (
        "TL101", "sft.ipynb", 4, {"row": 2, "column": 72}, {"row": 2, "column": 77})
    assert launch[1][71:76] == "eager"  # the span is the launch line's value, in the cell's own coordinates
    assert d["message"].startswith("train.py: eager attention at sequence length 16,384")
    assert "batch 8 x 32 heads" in d["message"]  # SFTConfig's per_device_train_batch_size default


def test_notebook_launch_lines_with_ipython_substitutions_stay_unknown(tmp_path):
    launch = [line.replace("{length}", "{max_len}") for line in LAUNCH]
    notebook(tmp_path / "sft.ipynb", WRITTEN, ["max_len = 16384\n"], launch)
    # `{max_len}` is filled in by IPython at run time: the length is not known, SFTConfig's default 1024 is
    # not used either (the flag is given), so nothing is claimed about attention
    assert findings(run("check", "--output-format", "json", "sft.ipynb", cwd=tmp_path)) == []


def test_a_written_script_nothing_launches_is_checked_under_its_defaults(tmp_path):
    notebook(tmp_path / "sft.ipynb", WRITTEN)
    assert findings(run("check", "--output-format", "json", "sft.ipynb", cwd=tmp_path)) == []


def test_fix_rewrites_the_value_where_the_launch_writes_it(tmp_path):
    repo = layout("trl_recipe", tmp_path)
    recipe = repo / "recipes" / "llama3" / "sft_eager.yaml"
    before = recipe.read_text()
    r = run("check", "--diff", ".", cwd=repo)
    assert r.returncode == 1 and "-attn_implementation: eager\n+attn_implementation: sdpa\n" in r.stdout
    assert recipe.read_text() == before  # --diff writes nothing
    r = run("check", "--fix", ".", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recipe.read_text() == before.replace("attn_implementation: eager", "attn_implementation: sdpa")
    # the comment and every other line are kept byte for byte
    assert recipe.read_text().splitlines()[0] == "# Llama 3.1 8B, LoRA, long context"


def test_fix_in_a_json_args_file_keeps_its_quotes_and_a_shell_word_stays_plain(tmp_path):
    repo = layout("json_args", tmp_path)
    assert run("check", "--fix", ".", cwd=repo).returncode == 0
    assert '"attn_implementation": "sdpa",' in (repo / "configs" / "run.json").read_text()
    repo = layout("slurm", tmp_path)
    assert run("check", "--fix", ".", cwd=repo).returncode == 0
    assert "train.py --max_seq_length 16384 --attn sdpa --batch_size 1 --liger\n" in (repo / "launch.slurm").read_text()


def test_a_launch_decided_trap_whose_fix_belongs_in_the_script(tmp_path):
    repo = layout("fastchat_lora", tmp_path)
    r = run("check", "--fix", "--show-fixes", "--ignore", "TL501", ".", cwd=repo)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "scripts/train_lora.sh:14:30: TL201 Call model.enable_input_require_grads() after get_peft_model" in r.stdout
    script = (repo / "chatlora" / "train" / "train_lora.py").read_text()
    assert "    model = get_peft_model(model, lora_config)\n    model.enable_input_require_grads()\n" in script
    assert (repo / "scripts" / "train_lora.sh").read_text() == (LAYOUTS / "fastchat_lora" / "scripts" /
                                                               "train_lora.sh").read_text()


def test_batch_shrink_fix_raises_the_launchers_accumulation(tmp_path):
    repo = layout("fastchat_lora", tmp_path)
    launcher = repo / "scripts" / "train_lora.sh"
    launcher.write_text(launcher.read_text().replace("--per_device_train_batch_size 2", "--per_device_train_batch_size 1"))
    assert run("check", "--select", "TL401", "--fix", ".", cwd=repo).returncode == 0
    assert "--per_device_train_batch_size 1 \\\n    --gradient_accumulation_steps 16 \\\n" in launcher.read_text()


def test_a_library_older_than_any_release_read_keeps_its_stable_fields(tmp_path):
    # transformers 4.31 (before the oldest release trainlint read, 4.36): per_device_train_batch_size and
    # gradient_checkpointing are the same in 4.36 and 5.24, so the launch's values are read
    repo = layout("fastchat_lora", tmp_path)
    (repo / "requirements.txt").write_text("transformers==4.31.0\npeft==0.4.0\n")
    r = run("check", "-v", "--no-cache", "chatlora/train/train_lora.py", cwd=repo)
    assert "per_device_train_batch_size 2 from scripts/train_lora.sh:10" in r.stderr
    assert "scripts/train_lora.sh:14:30: TL201" in r.stdout
    # and 4.31 has no SDPA default: eager at the launch's 2,048 tokens
    assert "chatlora/train/train_lora.py:38:13: TL101 eager attention at sequence length 2,048" in r.stdout


def test_estimate_a_readme_launch_with_an_accelerate_zero3_config(tmp_path):
    repo = layout("trl_recipe", tmp_path)
    r = run("estimate", "README.md", "--format", "json", cwd=repo)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    # the recipe's LoRA (through get_peft_config), the accelerate config's ZeRO-3 over its 8 processes
    assert data["plan"] == ("LoRA r=16 on all-linear, 16-bit weights, batch 1 x 8,192 tokens, eager attention, "
                            "checkpointing on, TRL chunked loss, adamw_torch_fused, zero3 over 8 GPU(s)")
    # the recipe sets no optim: the Trainer's default for the targeted transformers, named as an assumption
    assert any(a.startswith("optim not set: transformers ") and "default adamw_torch_fused" in a
               for a in data["assumptions"]), data["assumptions"]
    assert "zero3 from the launch's accelerate DeepSpeed config (recipes/accelerate/zero3.yaml:8)" in data["assumptions"]


def test_check_judges_the_fit_over_the_launchs_processes_as_estimate_does(tmp_path):
    # the same README launch: ZeRO-3 over the accelerate config's 8 processes. `check --gpu` sizes the run per GPU
    # as `estimate` does (it used to assume one process and say ~64 GiB)
    repo = layout("trl_recipe", tmp_path)
    r = run("estimate", "README.md", "--gpu", "32GB", cwd=repo)
    # (38.9 before the frozen-RMSNorm correction: a frozen norm weight keeps no 16-bit normalised output, issue 26)
    assert "= peak                                                   38.7 GiB" in r.stdout, r.stdout
    r = run("check", "--no-cache", "--gpu", "32GB", ".", cwd=repo)
    # the fixed run: `estimate` with sdpa in the recipe says 6.5 GiB, plus the CUDA context (8.5 before TRL >= 1.15's
    # fused LM head was billed as its backward's working set instead of a flat 4 GiB: memory.estimate
    # fused_head_train_bytes)
    assert "this alone makes the run fit the 32 GiB GPU: ~39.4 GiB -> ~7.1 GiB" in r.stdout, r.stdout
    r = run("check", "--no-cache", "--gpu", "40GB", "--select", "TL701", ".", cwd=repo)
    assert "TL701" not in r.stdout  # 38.9 GiB + the CUDA context fits 40 GiB


def test_sarif_related_locations_are_valid_sarif(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parent / "data" / "report" / "sarif-schema-2.1.0.json").read_text())
    repo = layout("fastchat_lora", tmp_path)
    r = run("check", "--output-format", "sarif", "--ignore", "TL501", ".", cwd=repo)
    log = json.loads(r.stdout)
    jsonschema.Draft4Validator(schema).validate(log)
    (result,) = log["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "scripts/train_lora.sh"
    assert [(x["physicalLocation"]["artifactLocation"]["uri"], x["message"]["text"])
            for x in result["relatedLocations"]] == [("chatlora/train/train_lora.py", "the script this value reaches"),
                                                     ("scripts/train_lora.sh", "launched here")]


def test_notebook_percent_run_launches_the_written_script(tmp_path):
    line = "%run train.py --model_name_or_path meta-llama/Llama-3.1-8B --attn_implementation eager --max_length 16384\n"
    notebook(tmp_path / "sft.ipynb", WRITTEN, [line])
    (d,) = findings(run("check", "--output-format", "json", "sft.ipynb", cwd=tmp_path))
    assert (d["code"], d["cell"], d["location"]) == ("TL101", 3, {"row": 1, "column": line.index("eager") + 1})


# A load chosen by a comparison on a parameter (`if "70B" in config.model_name:`): the launch (or the default, when
# no launch sets it) decides the branch, so the other load is not part of the run.
COMPARED = '''
from dataclasses import dataclass, field

import transformers
import trl


@dataclass
class TrainingConfig:
    model_name: str = field(default="Qwen/Qwen2.5-7B-Instruct")
    block_size: int = field(default=4096)


def train():
    parser = transformers.HfArgumentParser((TrainingConfig, trl.SFTConfig))
    config, args = parser.parse_args_into_dataclasses()
    if "70B" in config.model_name:
        model = transformers.AutoModelForCausalLM.from_pretrained(config.model_name, attn_implementation="eager")
    else:
        model = transformers.AutoModelForCausalLM.from_pretrained(config.model_name)
    args.max_seq_length = config.block_size
    trainer = trl.SFTTrainer(model, args=args)
    trainer.train()


if __name__ == "__main__":
    train()
'''


def _compared_repo(tmp_path: Path, launcher: str | None) -> Path:
    repo = tmp_path / "repo"
    (repo / "train").mkdir(parents=True)
    (repo / "train" / "sft.py").write_text(COMPARED)
    (repo / "requirements.txt").write_text("transformers==4.46.1\ntrl==0.12.0\n")
    if launcher is not None:
        (repo / "train" / "sft.sh").write_text(launcher)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "init", cwd=repo)
    return repo


def test_a_comparison_on_the_default_decides_which_load_runs(tmp_path):
    repo = _compared_repo(tmp_path, None)
    data = findings(run("check", "--no-cache", "--output-format", "json", "train/sft.py", cwd=repo))
    # the else branch's model: TL301 (TRL 0.12 computes the full logits); the eager load does not run (no TL101)
    assert [d["code"] for d in data] == ["TL301"]
    assert "152,064-token vocabulary" in data[0]["message"] and "[8 x 4,096 x 152,064]" in data[0]["message"]


def test_a_comparison_on_a_launched_value_decides_which_load_runs(tmp_path):
    repo = _compared_repo(tmp_path, "torchrun --nproc-per-node 8 train/sft.py \\\n"
                                    "  --model_name meta-llama/Meta-Llama-3-70B --block_size 4096 \\\n"
                                    "  --per_device_train_batch_size 1 --output_dir out\n")
    data = findings(run("check", "--no-cache", "--output-format", "json", "train/sft.py", cwd=repo))
    assert sorted(d["code"] for d in data) == ["TL101", "TL301"]  # the 70B branch: eager attention at 4,096
    tl101 = next(d for d in data if d["code"] == "TL101")
    assert tl101["filename"] == "train/sft.py" and tl101["location"]["row"] == 18


def test_comparisons_evaluate_like_python():
    from trainlint.facts.model import Compare
    from trainlint.facts.values import UNKNOWN, Value, known

    def same(v: Value) -> Value:
        return v

    assert Compare("in", known("70B"), known("meta-llama/Meta-Llama-3-70B")).resolve(same).value is True
    assert Compare("not in", known("70B"), known("Qwen/Qwen2.5-7B")).resolve(same).value is True
    assert Compare("==", known("lora"), known("full")).resolve(same).value is False
    assert Compare("is", known(None), known(None)).resolve(same).value is True
    assert Compare("in", known(1), known(2)).resolve(same).unknown  # Python raises TypeError: unknown, not a guess
    assert Compare("==", UNKNOWN, known("x")).resolve(same).unknown


def test_a_launch_cut_short_by_backslash_space_is_reported_not_used(tmp_path):
    script = ("from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n"
              "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n"
              "model = AutoModelForCausalLM.from_pretrained('gpt2')\n"
              "Trainer(model=model, args=args).train()\n")
    (tmp_path / "train.py").write_text(script)
    git("init", "-q", cwd=tmp_path)
    # bash ends the command at `\ ` (passing " "): the flags below run as a command of their own
    launcher = ("torchrun --nproc_per_node 2 train.py \\\n    --gradient_checkpointing True \\ \n"
                "    --per_device_train_batch_size 64\n")
    (tmp_path / "run.sh").write_text(launcher)
    data = findings(run("check", "--output-format", "json", "--no-cache", "-v", ".", cwd=tmp_path))
    assert short(data)[:1] == [("TL005", "run.sh", 2, 35)] and "a blank follows this backslash" in data[0]["message"]
    r = run("check", "--no-cache", "-v", "train.py", cwd=tmp_path)
    assert "run.sh" not in r.stderr  # not a launch of train.py: its defaults are used instead
    (tmp_path / "run.sh").write_text(launcher.replace("\\ \n", "\\\n"))
    assert "run.sh" in run("check", "--no-cache", "-v", "train.py", cwd=tmp_path).stderr  # (and written right, it is)


# A script that documents its own command lines in its module docstring (TRL's examples/scripts do): those commands
# are launches, read at their lines; the prose around them is not shell and is never reported.
DOCUMENTED = '''"""
Fine-tune a model. Don't forget to log in first; python is needed.

# Full training
python examples/sft.py \\
    --model_name_or_path Qwen/Qwen2-0.5B \\
    --per_device_train_batch_size 2 \\
    --output_dir out
"""
from transformers import AutoModelForCausalLM
from trl import ModelConfig, SFTConfig, SFTTrainer, TrlParser

parser = TrlParser((SFTConfig, ModelConfig))
training_args, model_args = parser.parse_args_and_config()
trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args)
trainer.train()
'''


def test_commands_in_the_module_docstring_are_launches(tmp_path):
    repo = tmp_path / "repo"
    (repo / "examples").mkdir(parents=True)
    (repo / "examples" / "sft.py").write_text(DOCUMENTED)
    (repo / "requirements.txt").write_text("trl==0.12.2\ntransformers==4.46.3\n")
    git("init", "-q", cwd=repo)
    data = findings(run("check", "--no-cache", "--output-format", "json", "examples/sft.py", cwd=repo))
    assert [d["code"] for d in data] == ["TL301"]
    assert "151,936-token vocabulary" in data[0]["message"] and "[2 x " in data[0]["message"]
    assert data[0]["filename"] == "examples/sft.py"
    r = run("check", "--no-cache", "--verbose", "examples/sft.py", cwd=repo)
    assert "per_device_train_batch_size 2 from examples/sft.py:7" in r.stderr + r.stdout
    assert "TL005" not in r.stdout  # the prose ("Don't ...") is not read as shell


def test_the_repository_that_is_the_library_runs_its_own_version(tmp_path):
    from trainlint.knowledge.versions import decide_versions, project_pins

    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "__init__.py").write_text('__version__ = "0.12.2"\n')
    (tmp_path / "setup.py").write_text('from setuptools import setup\nREQUIRED = ["transformers<4.47.0"]\n'
                                      'setup(name="trl", install_requires=REQUIRED)\n')
    (tmp_path / "requirements.txt").write_text("transformers>=4.46.0\n")
    (tmp_path / ".git").mkdir()
    project_pins.cache_clear()
    v = decide_versions(tmp_path / "train.py", (), {})
    assert v.trl.version == "0.12.2" and "the repository is trl itself" in v.trl.source
    # both files pin transformers: the run needs both bounds, and gets the newest release read inside them
    assert v.transformers.version == "4.46.3" and "requirements.txt and" in v.transformers.source
    project_pins.cache_clear()


def test_a_library_repository_with_a_dynamic_version_reads_its_version_file(tmp_path):
    from trainlint.knowledge.versions import decide_versions, project_pins

    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "__init__.py").write_text('from importlib.metadata import version\n__version__ = version("trl")\n')
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "trl"\ndynamic = ["version"]\n')
    (tmp_path / "VERSION").write_text("1.9.0\n")
    (tmp_path / ".git").mkdir()
    project_pins.cache_clear()
    v = decide_versions(tmp_path / "trl" / "scripts" / "sft.py", (), {})
    assert v.trl.version == "1.9.0" and v.trl.source.endswith("VERSION (the repository is trl itself)")
    project_pins.cache_clear()
