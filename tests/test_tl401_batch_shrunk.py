"""TL401 against real temporary git repositories: init, commit, edit, stage, rename, detached HEAD."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.lint import enabled_codes, lint_file

SCRIPT = '''
from transformers import TrainingArguments, Trainer

BATCH = {batch}
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=BATCH,{accum}
)
'''


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "t@example.com")
    git(tmp_path, "config", "user.name", "t")
    return tmp_path


def write(repo: Path, name: str, batch: int, accum: int | None = None) -> Path:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = f"\n    gradient_accumulation_steps={accum}," if accum is not None else ""
    path.write_text(textwrap.dedent(SCRIPT.format(batch=batch, accum=extra)))
    return path


def commit(repo: Path, message: str = "c") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def tl401(path: Path, diff_base: str = "HEAD"):
    s = Settings(root=path.parent, diff_base=diff_base)
    return [(d.span.line, d.message) for d in lint_file(path, s, enabled_codes(s, select=("TL401",))).diagnostics]


def test_batch_shrunk_with_accumulation_unchanged_is_flagged(repo):
    path = write(repo, "train.py", 8)
    commit(repo)
    write(repo, "train.py", 2)
    git(repo, "add", "train.py")  # staged, as pre-commit sees it
    assert tl401(path) == [(7, "per_device_train_batch_size 8 -> 2 but gradient_accumulation_steps stays 1: "
                               "effective batch per device 8 -> 2; set gradient_accumulation_steps=4 to keep 8")]


def test_accumulation_raised_but_not_enough_is_flagged(repo):
    path = write(repo, "train.py", 8, 2)
    commit(repo)
    write(repo, "train.py", 2, 4)
    (line, message), = tl401(path)
    assert message.startswith("per_device_train_batch_size 8 -> 2 but gradient_accumulation_steps 2 -> 4: "
                              "effective batch per device 16 -> 8; set gradient_accumulation_steps=8 to keep 16")


def test_accumulation_raised_enough_is_quiet(repo):
    path = write(repo, "train.py", 8)
    commit(repo)
    write(repo, "train.py", 2, 4)
    assert tl401(path) == []


def test_batch_grew_or_other_fields_changed_is_quiet(repo):
    path = write(repo, "train.py", 4)
    commit(repo)
    write(repo, "train.py", 8)
    assert tl401(path) == []
    path.write_text(path.read_text().replace('output_dir="out"', 'output_dir="out2", learning_rate=1e-4'))
    assert tl401(path) == []


def test_default_batch_of_8_counts_as_the_old_value(repo):
    path = repo / "train.py"
    path.write_text("from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o')\n")
    commit(repo)
    path.write_text("from transformers import TrainingArguments\n"
                    "args = TrainingArguments(output_dir='o', per_device_train_batch_size=3)\n")
    (_, message), = tl401(path)
    assert "8 -> 3" in message and "no integer gradient_accumulation_steps keeps 8 at batch 3; 3 gives 9" in message


def test_new_file_no_git_and_unparsable_base_are_quiet(repo, tmp_path_factory):
    path = write(repo, "new.py", 2)
    assert tl401(path) == []  # not in HEAD (there is no HEAD yet)
    outside = tmp_path_factory.mktemp("nogit")
    assert tl401(write(outside, "train.py", 2)) == []
    broken = repo / "broken.py"
    broken.write_text("def (:\n")
    commit(repo)
    write(repo, "broken.py", 2)
    assert tl401(broken) == []


def test_renamed_file_is_compared_with_its_old_name(repo):
    write(repo, "old_name.py", 8)
    commit(repo)
    git(repo, "mv", "old_name.py", "new_name.py")
    path = write(repo, "new_name.py", 2)
    git(repo, "add", "new_name.py")
    (_, message), = tl401(path)
    assert "8 -> 2" in message


def test_detached_head_and_diff_base(repo):
    path = write(repo, "train.py", 16)
    commit(repo, "first")
    write(repo, "train.py", 8, 2)
    commit(repo, "second")
    git(repo, "checkout", "-q", "--detach", "HEAD")
    write(repo, "train.py", 4, 2)
    (_, message), = tl401(path)
    assert "8 -> 4" in message and "effective batch per device 16 -> 8" in message
    (_, message), = tl401(path, diff_base="HEAD~1")
    assert "16 -> 4" in message and "effective batch per device 16 -> 8" in message


def test_values_resolved_through_constants_and_unknown_values_are_quiet(repo):
    path = repo / "train.py"
    path.write_text("import os\nfrom trl import SFTConfig\nBS = 8\ncfg = SFTConfig(output_dir='o', per_device_train_batch_size=BS)\n")
    commit(repo)
    path.write_text("import os\nfrom trl import SFTConfig\nBS = int(os.environ['BS'])\n"
                    "cfg = SFTConfig(output_dir='o', per_device_train_batch_size=BS)\n")
    assert tl401(path) == []
    path.write_text("import os\nfrom trl import SFTConfig\nBS = 8 // 4\ncfg = SFTConfig(output_dir='o', per_device_train_batch_size=BS)\n")
    assert "8 -> 2" in tl401(path)[0][1]


def test_manual_loop_dataloader_with_accelerator_accumulation(repo):
    src = ("from torch.utils.data import DataLoader\nfrom accelerate import Accelerator\n"
           "acc = Accelerator(gradient_accumulation_steps={ga})\nloader = DataLoader(ds, batch_size={bs}, shuffle=True)\n")
    path = repo / "loop.py"
    path.write_text(src.format(ga=1, bs=32))
    commit(repo)
    path.write_text(src.format(ga=2, bs=8))
    (line, message), = tl401(path)
    assert line == 4 and message == ("DataLoader batch_size 32 -> 8 but Accelerator gradient_accumulation_steps 1 -> 2: effective batch "
                                         "per device 32 -> 16; set Accelerator gradient_accumulation_steps=4 to keep 32")
    path.write_text(src.format(ga=4, bs=8))
    assert tl401(path) == []


def test_auto_find_batch_size_fires_without_history(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "t.py"
    path.write_text("from transformers import TrainingArguments\n"
                    "args = TrainingArguments(output_dir='o', auto_find_batch_size=True)\n")
    (line, message), = tl401(path)
    assert line == 2 and message.startswith("auto_find_batch_size=True: on each out-of-memory retry")
