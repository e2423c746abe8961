"""`trainlint verify` on launch-aware targets: a launcher, a TRL recipe (through the launcher that passes it) and
a JSON args file, run for real on CPU with a tiny Llama built from a config. The fixed run gets the fixes of the
values the launch writes, applied to temporary copies: the user's files stay as they were, byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import save_tiny_llama

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

HF_SCRIPT = '''
import sys
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, HfArgumentParser


@dataclass
class Args:
    model: str = "missing-model"
    attn_implementation: str = "sdpa"
    seq_len: int = 128


parser = HfArgumentParser(Args)
if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
    (args,) = parser.parse_json_file(sys.argv[1])
else:
    (args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=args.attn_implementation)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(torch.randint(0, 256, (64, args.seq_len)), batch_size=1)
for input_ids in loader:
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
'''

TRL_SCRIPT = '''
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM
from trl import ModelConfig, SFTConfig, TrlParser

parser = TrlParser((SFTConfig, ModelConfig))
training_args, model_args = parser.parse_args_and_config()
model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                             attn_implementation=model_args.attn_implementation)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(torch.randint(0, 256, (64, training_args.max_length)),
                    batch_size=training_args.per_device_train_batch_size)
for input_ids in loader:
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
'''

FILES = {
    "train.py": HF_SCRIPT,
    "trl_train.py": TRL_SCRIPT,
    "args.json": '{\n  "model": "./tiny-llama",\n  "attn_implementation": "eager",\n  "seq_len": 2048\n}\n',
    "recipes/sft.yaml": "model_name_or_path: ./tiny-llama\nattn_implementation: eager  # the trap\nmax_length: 2048\n"
                        "output_dir: user-output\nper_device_train_batch_size: 1\nuse_cpu: true\nbf16: false\n",
    "scripts/run_flags.sh": "cd ..\npython train.py --model ./tiny-llama --attn_implementation eager --seq_len 2048\n",
    "scripts/run_json.sh": "cd ..\npython train.py args.json\n",
    "scripts/run_trl.sh": "cd ..\npython trl_train.py --config recipes/sft.yaml\n",
    "recipes/unused.yaml": "attn_implementation: eager\n",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("verify_targets")
    save_tiny_llama(root / "tiny-llama")
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def verify(project: Path, *args: str) -> tuple[int, dict, str]:
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--device", "cpu", "--format", "json",
                        "--steps", "2", *args], cwd=project, capture_output=True, text=True, timeout=900)
    try:
        data = json.loads(r.stdout)
    except ValueError:
        data = {}
    return r.returncode, data, r.stderr


def verify_confirmed(project: Path, where: str, *args: str) -> dict:
    """Verify `args`; TL101 (decided by the value at `where`) is confirmed, and no file of the project changed."""
    before = snapshot(project)
    code, data, err = verify(project, *args)
    assert code == 0, err
    d, = data["diagnostics"]
    assert (d["code"], d["file"], d["verdict"]) == ("TL101", where, "confirmed"), d
    assert d["measured_saving"] > 200_000_000 and d["predicted_saving"] > 200_000_000  # 2 x 4 x 2048^2 scores
    assert data["runs"]["original"]["steps"] == data["runs"]["fixed"]["steps"] == 2
    assert snapshot(project) == before  # nothing written: not the launch files, not output_dir, no copy beside them
    return data


def test_a_recipe_runs_through_its_launcher_and_the_fixed_run_reads_a_fixed_copy(project):
    data = verify_confirmed(project, "recipes/sft.yaml", "recipes/sft.yaml")
    launch = data["launch"]
    assert launch["launcher"] == str(project / "scripts" / "run_trl.sh")
    assert launch["config"] == str(project / "recipes" / "sft.yaml")
    assert launch["args"] == ["--config", "recipes/sft.yaml"]
    flag, copy = launch["fixed_args"]
    assert flag == "--config" and copy.endswith("/sft.yaml") and not copy.startswith(str(project))
    assert launch["fixed_files"] == [str(project / "recipes" / "sft.yaml")]
    assert data["fixes_applied"] == ['TL101 recipes/sft.yaml:2: Set attn_implementation="sdpa" in recipes/sft.yaml']
    assert not Path(copy).exists()  # the copies went with verify's work directory


def test_a_json_args_file_runs_through_its_launcher_with_the_fixed_value(project):
    data = verify_confirmed(project, "args.json", "args.json")
    assert data["launch"]["launcher"] == str(project / "scripts" / "run_json.sh")
    assert data["launch"]["args"] == ["args.json"] and data["launch"]["fixed_args"][0].endswith("/args.json")


def test_a_launcher_whose_line_holds_the_trap_gets_its_flag_fixed_in_the_fixed_run(project):
    launch = verify_confirmed(project, "scripts/run_flags.sh", "scripts/run_flags.sh")["launch"]
    assert launch["args"] == ["--model", "./tiny-llama", "--attn_implementation", "eager", "--seq_len", "2048"]
    assert launch["fixed_args"] == ["--model", "./tiny-llama", "--attn_implementation", "sdpa", "--seq_len", "2048"]
    assert launch["fixed_files"] == [str(project / "scripts" / "run_flags.sh")] and launch["notes"] == []


def test_a_script_with_explicit_arguments_is_linted_and_fixed_under_them(project):
    data = verify_confirmed(project, "args.json", "train.py", "--", "args.json")
    assert data["launch"]["launcher"] is None and data["launch"]["fixed_args"][0].endswith("/args.json")


def test_a_config_no_launcher_passes_is_a_one_line_error(project):
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--device", "cpu", "recipes/unused.yaml"],
                       cwd=project, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("trainlint: error: recipes/unused.yaml: no launcher in its repository passes this "
                               "file")
