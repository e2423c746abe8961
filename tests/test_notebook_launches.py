"""A notebook launches the repository's own script (`!torchrun ./scripts/train.py --config recipe.yaml`), with a
recipe its `%%writefile` cell writes: the script is checked under that launch, and a finding decided by a value of
the written recipe lands in the notebook's cell, in the cell's coordinates (the shape of the FSDP + QLoRA notebooks
people publish beside their scripts)."""

from __future__ import annotations

import json
from pathlib import Path

from test_launch import findings, notebook, run

SCRIPT = """\
from dataclasses import dataclass, field
from transformers import AutoModelForCausalLM, TrainingArguments
from trl import SFTTrainer, TrlParser


@dataclass
class ScriptArguments:
    model_id: str = field(default=None, metadata={"help": "the model"})
    max_seq_length: int = field(default=512)


def main(script_args, training_args):
    model = AutoModelForCausalLM.from_pretrained(script_args.model_id, attn_implementation="sdpa")
    trainer = SFTTrainer(model=model, args=training_args, max_seq_length=script_args.max_seq_length)
    trainer.train()


if __name__ == "__main__":
    parser = TrlParser((ScriptArguments, TrainingArguments))
    script_args, training_args = parser.parse_args_and_config()
    main(script_args, training_args)
"""

RECIPE = [
    "%%writefile recipe.yaml\n",
    "# script parameters\n",
    'model_id: "meta-llama/Meta-Llama-3-70b"\n',
    "max_seq_length: 4096\n",
    "per_device_train_batch_size: 1\n",
    "output_dir: out\n",
]
LAUNCH = ["!ACCELERATE_USE_FSDP=1 torchrun --nproc_per_node=4 ./scripts/train.py --config recipe.yaml\n"]


def repo(tmp_path: Path, *cells: list[str]) -> Path:
    (tmp_path / "training" / "scripts").mkdir(parents=True)
    (tmp_path / "training" / "scripts" / "train.py").write_text(SCRIPT)
    notebook(tmp_path / "training" / "fsdp.ipynb", ['%pip install "trl==0.8.6"\n'], *cells)
    return tmp_path


def tl301(tmp_path: Path, target: str = "training/scripts/train.py") -> list[dict]:
    return [d for d in findings(run("check", "--output-format", "json", "--no-cache", target, cwd=tmp_path))
            if d["code"] == "TL301"]


def test_the_script_is_checked_under_the_notebooks_launch_and_its_written_recipe(tmp_path):
    repo(tmp_path, RECIPE, LAUNCH)
    (d,) = tl301(tmp_path)
    # the model is named only in the recipe the cell writes: the finding is on that key, in the cell (cell 3 of
    # the notebook: markdown, the install cell, the %%writefile cell), row 3, not in a file that does not exist
    assert (d["filename"], d["cell"], d["location"]) == ("training/fsdp.ipynb", 3, {"row": 3, "column": 11})
    assert d["fix"] is None
    assert d["message"].startswith("training/scripts/train.py: SFTTrainer")
    assert "128,256-token vocabulary" in d["message"] and "[1 x 4,096 x 128,256]" in d["message"]


def test_verbose_names_the_notebook_launch(tmp_path):
    repo(tmp_path, RECIPE, LAUNCH)
    r = run("check", "-v", "--no-cache", "training/scripts/train.py", cwd=tmp_path)
    assert "launch: training/fsdp.ipynb:cell 4:1 (values from training/fsdp.ipynb" in r.stderr, r.stderr
    assert "batch per device: 1" in r.stderr


def test_a_recipe_on_disk_wins_over_the_cell(tmp_path):
    repo(tmp_path, RECIPE, LAUNCH)
    (tmp_path / "training" / "recipe.yaml").write_text('model_id: "HuggingFaceTB/SmolLM2-135M"\n')
    # the file the user has is what a run reads now: a 49,152-token vocabulary, under TL301's threshold
    assert tl301(tmp_path) == []


def test_without_the_launch_the_script_runs_on_its_defaults(tmp_path):
    repo(tmp_path, RECIPE, ["print('no launch here')\n"])
    assert tl301(tmp_path) == []  # model_id defaults to None: unknown, nothing claimed


def test_a_broken_notebook_launches_nothing_and_is_reported_once(tmp_path):
    repo(tmp_path, RECIPE, LAUNCH)
    nb = tmp_path / "training" / "fsdp.ipynb"
    nb.write_text(nb.read_text()[:-40])  # cut short: not JSON
    r = run("check", "--output-format", "json", "--no-cache", ".", cwd=tmp_path)
    data = findings(r)
    assert "Traceback" not in r.stderr
    assert [(d["code"], d["filename"]) for d in data] == [("TL002", "training/fsdp.ipynb")]


def test_a_launching_notebook_is_found_by_a_whole_tree_check(tmp_path):
    repo(tmp_path, RECIPE, LAUNCH)
    data = findings(run("check", "--output-format", "json", "--no-cache", ".", cwd=tmp_path))
    assert [(d["code"], d["filename"], d["cell"]) for d in data] == [("TL301", "training/fsdp.ipynb", 3)]
    assert json.dumps(data).count("TL005") == 0


def test_the_discovery_index_sees_a_notebook_launch_added_and_removed(tmp_path):
    # cached runs (the discovery index between runs, launch/tree.py): a notebook is a launcher by its command lines
    repo(tmp_path, RECIPE, ["print('not yet')\n"])
    def run_cached():
        return [d for d in findings(run("check", "--output-format", "json", "training/scripts/train.py", cwd=tmp_path))
                if d["code"] == "TL301"]

    assert run_cached() == []
    notebook(tmp_path / "training" / "fsdp.ipynb", ['%pip install "trl==0.8.6"\n'], RECIPE, LAUNCH)
    assert [(d["filename"], d["cell"]) for d in run_cached()] == [("training/fsdp.ipynb", 3)]
    notebook(tmp_path / "training" / "fsdp.ipynb", ['%pip install "trl==0.8.6"\n'], RECIPE, ["print('gone')\n"])
    assert run_cached() == []
