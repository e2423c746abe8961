"""python-fire entry points (issue 25, "finding the code"): `fire.Fire(main)` makes main's parameters the command
line (`--model_name x`, `--model-name=x`), with main's defaults as the documented run; main may be defined in the
entry script or imported from the repository's package (a thin `scripts/run_sft.py`), and the package module may
also be run with `-m`. Fixtures in the shape of repositories that train with fire (a `src/` package, thin scripts,
shell launchers)."""

from __future__ import annotations

from pathlib import Path

from test_launch import findings, git, run

SFT = """\
import fire
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def main(model_name: str = "meta-llama/Llama-3.1-8B", seq_len: int = 1024, batch: int = 4, attn="eager"):
    model = AutoModelForCausalLM.from_pretrained(model_name, attn_implementation=attn)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=batch, use_liger_kernel=True)
    enc = tokenizer(texts, max_length=seq_len, truncation=True)
    Trainer(model=model, args=args, train_dataset=ds).train()


if __name__ == "__main__":
    fire.Fire(main)
"""

THIN = """\
from fire import Fire

from mypkg.training.sft import main

if __name__ == "__main__":
    Fire(main)
"""


def repo(tmp_path: Path, launchers: dict[str, str]) -> Path:
    pkg = tmp_path / "src" / "mypkg" / "training"
    pkg.mkdir(parents=True)
    (tmp_path / "src" / "mypkg" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "sft.py").write_text(SFT)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run_sft.py").write_text(THIN)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mypkg"\nversion = "0.1"\n\n'
                                             '[tool.setuptools.packages.find]\nwhere = ["src"]\n')
    for name, text in launchers.items():
        (tmp_path / name).write_text(text)
    git("init", "-q", cwd=tmp_path)
    git("add", "-A", cwd=tmp_path)
    return tmp_path


def tl101(tmp_path: Path, target: str) -> list[dict]:
    return [d for d in findings(run("check", "--output-format", "json", "--no-cache", target, cwd=tmp_path))
            if d["code"] == "TL101"]


def test_defaults_of_a_fire_entry_are_the_documented_run(tmp_path):
    root = repo(tmp_path, {})
    assert tl101(root, "src/mypkg/training/sft.py") == []  # 1,024 tokens: short
    (root / "src/mypkg/training/sft.py").write_text(SFT.replace("seq_len: int = 1024", "seq_len: int = 8192"))
    found = tl101(root, "src/mypkg/training/sft.py")
    assert len(found) == 1 and "sequence length 8,192" in found[0]["message"]
    assert "batch 4 x 32 heads" in found[0]["message"]  # Llama-3.1-8B, main's defaults


def test_a_launcher_sets_the_parameters_by_name_hyphens_included(tmp_path):
    root = repo(tmp_path, {"train.sh": "#!/bin/bash\npython src/mypkg/training/sft.py --model-name Qwen/Qwen2.5-7B "
                                       "--seq_len=4096 --batch 2\n"})
    found = tl101(root, "src/mypkg/training/sft.py")
    assert len(found) == 1
    message = found[0]["message"]
    assert "sequence length 4,096" in message and "batch 2 x 28 heads" in message  # Qwen2.5-7B: 28 heads
    assert "train.sh:2" in message


def test_a_launch_that_chooses_sdpa_is_quiet(tmp_path):
    root = repo(tmp_path, {"train.sh": "#!/bin/bash\npython src/mypkg/training/sft.py --seq_len 8192 --attn sdpa\n"})
    assert tl101(root, "src/mypkg/training/sft.py") == []


def test_fire_of_an_imported_main_in_a_thin_script(tmp_path):
    root = repo(tmp_path, {"train.sh": "#!/bin/bash\npython scripts/run_sft.py --model_name Qwen/Qwen2.5-7B "
                                       "--seq_len 4096 --batch 2\n"})
    found = tl101(root, "scripts/run_sft.py")
    assert len(found) == 1
    assert found[0]["filename"] == "src/mypkg/training/sft.py"  # the load, in the package module
    assert "batch 2 x 28 heads x 4,096^2" in found[0]["message"]


def test_a_module_run_with_dash_m(tmp_path):
    root = repo(tmp_path, {"train.sh": "#!/bin/bash\ntorchrun --nproc_per_node 8 -m mypkg.training.sft "
                                       "--model_name Qwen/Qwen2.5-7B --seq_len 4096 --batch 2\n"})
    found = tl101(root, "src/mypkg/training/sft.py")
    assert len(found) == 1 and "batch 2 x 28 heads" in found[0]["message"]


def test_a_required_parameter_without_a_launch_is_unknown(tmp_path):
    root = repo(tmp_path, {})
    (root / "src/mypkg/training/sft.py").write_text(SFT.replace('model_name: str = "meta-llama/Llama-3.1-8B"',
                                                                "model_name: str").replace("1024", "8192"))
    found = tl101(root, "src/mypkg/training/sft.py")  # eager at 8,192 is still certain; the model is not
    assert len(found) == 1 and "model size unknown" in found[0]["message"] and "GiB" not in found[0]["message"]


def test_fire_of_something_else_is_not_read(tmp_path):
    root = repo(tmp_path, {})
    (root / "scripts" / "cli.py").write_text("import fire\n\nif __name__ == '__main__':\n"
                                             "    fire.Fire({'train': lambda: None})\n    fire.Fire()\n")
    r = run("check", "--output-format", "json", "--no-cache", "scripts/cli.py", cwd=root)
    assert r.returncode == 0, r.stderr
