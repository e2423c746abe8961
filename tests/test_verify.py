"""`trainlint verify` end to end on CPU: tiny real models saved next to small training scripts that
trainlint flags; each script runs twice (as written, and with the fixes) under the real harness."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from conftest import save_tiny_llama

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from transformers import ViTConfig, ViTForImageClassification

    root = tmp_path_factory.mktemp("verify_project")
    save_tiny_llama(root / "tiny-llama")
    ViTForImageClassification(ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32,
                                         intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         num_labels=3)).save_pretrained(root / "tiny-vit")
    return root


def write(project: Path, name: str, src: str) -> Path:
    path = project / name
    path.write_text(textwrap.dedent(src))
    return path


def verify(project: Path, *args: str, timeout: int = 600) -> tuple[int, dict, str]:
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--device", "cpu", "--format", "json", *args],
                       cwd=project, capture_output=True, text=True, timeout=timeout)
    try:
        data = json.loads(r.stdout)
    except ValueError:
        data = {}
    return r.returncode, data, r.stderr


EAGER = '''
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM

SEQ_LEN = 2048
model = AutoModelForCausalLM.from_pretrained("./tiny-llama", attn_implementation="eager")
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(torch.randint(0, 256, (64, SEQ_LEN)), batch_size=1)
for input_ids in loader:
    {body}
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
'''


def test_eager_vs_sdpa_saving_is_measured_and_tl101_confirmed(project):
    script = write(project, "eager.py", EAGER.format(body="pass"))
    code, data, err = verify(project, "eager.py", "--steps", "2")
    assert code == 0, err
    d, = data["diagnostics"]
    assert d["code"] == "TL101" and d["verdict"] == "confirmed", d
    # 2 layers x 4 heads x 2048^2 scores, fp32 weights: predicted 8 B per score per layer (+ the mask)
    assert d["predicted_saving"] > 200_000_000 and d["measured_saving"] > 200_000_000
    runs = data["runs"]
    assert runs["original"]["steps"] == runs["fixed"]["steps"] == 2
    assert runs["original"]["peak_allocated"] > runs["fixed"]["peak_allocated"]
    assert runs["original"]["predicted"]["peak"] > runs["fixed"]["predicted"]["peak"]
    assert 'attn_implementation="eager"' in script.read_text()  # the user's file is not touched


def test_tl201_silent_trap_is_confirmed_by_adapter_gradients(project):
    write(project, "vit.py", '''
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import ViTForImageClassification

    model = ViTForImageClassification.from_pretrained("./tiny-vit")
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], modules_to_save=["classifier"]))
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for step in range(100):
        loss = model(pixel_values=torch.randn(4, 3, 32, 32), labels=torch.randint(0, 3, (4,))).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ''')
    code, data, err = verify(project, "vit.py", "--steps", "1")
    assert code == 0, err
    assert data["runs"]["original"]["adapter_grad_ok"] is False
    assert data["runs"]["fixed"]["adapter_grad_ok"] is True
    d, = data["diagnostics"]
    assert (d["code"], d["verdict"]) == ("TL201", "confirmed")


def test_tl401_effective_batch_is_restored(project, tmp_path):
    def git(*a):
        subprocess.run(["git", *a], cwd=project, check=True, capture_output=True)

    src = '''
    import tempfile
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("./tiny-llama")
    ids = torch.randint(0, 256, (64, 32)).tolist()
    data = Dataset.from_dict({"input_ids": ids, "labels": ids})
    args = TrainingArguments(output_dir="user-output", per_device_train_batch_size=BATCH,
                             gradient_accumulation_steps=1, num_train_epochs=50, use_cpu=True, report_to="none")
    Trainer(model=model, args=args, train_dataset=data).train()
    '''
    if not (project / ".git").exists():
        git("init", "-q")
        git("config", "user.email", "t@e.x")
        git("config", "user.name", "t")
    write(project, "shrink.py", src.replace("BATCH", "8"))
    git("add", "shrink.py")
    git("commit", "-qm", "batch 8")
    write(project, "shrink.py", src.replace("BATCH", "2"))
    code, data, err = verify(project, "shrink.py", "--steps", "2", "--codes", "TL401")
    assert code == 0, err
    assert data["runs"]["original"]["samples_per_step"] == [2, 2]
    assert data["runs"]["fixed"]["samples_per_step"] == [8, 8]
    d, = data["diagnostics"]
    assert (d["code"], d["verdict"]) == ("TL401", "confirmed")
    assert not (project / "user-output").exists()  # verify never writes into the user's output_dir


def test_a_script_that_raises_shows_its_traceback_and_which_run_failed(project):
    write(project, "boom.py", EAGER.format(body='raise ValueError("boom from the script")'))
    code, data, err = verify(project, "boom.py", "--steps", "2")
    assert data["runs"]["original"]["error"]["type"] == "ValueError"
    assert "boom from the script" in data["runs"]["original"]["error"]["traceback_tail"]
    assert data["diagnostics"][0]["verdict"] == "not confirmed"
    assert "did not complete" in data["diagnostics"][0]["note"]
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--device", "cpu", "boom.py", "--steps", "1"],
                       cwd=project, capture_output=True, text=True, timeout=600)
    assert "original run failed" in r.stdout and "boom from the script" in r.stdout
    assert "Traceback (most recent call last)" not in r.stderr


def test_a_script_that_hangs_is_killed_with_its_whole_process_group(project):
    # The child carries a token unique to this test run, so no other process on the machine can match it.
    token = f"trainlint-hang-child-{uuid.uuid4().hex}"
    write(project, "hang.py", EAGER.format(
        body=f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', "
             f"'{token}']); time.sleep(3600)"))
    code, data, err = verify(project, "hang.py", "--steps", "1", "--timeout", "20", timeout=300)
    assert data["runs"]["original"]["timed_out"] is True
    left = subprocess.run(["pgrep", "-f", token], capture_output=True, text=True)
    if left.stdout.strip():
        subprocess.run(["pkill", "-f", token])
    assert left.stdout.strip() == "", "a child of the killed run is still alive"


def test_missing_script_and_missing_extra_are_one_line_errors(project, tmp_path):
    code, _, err = verify(project, "nope.py")
    assert code == 2 and err.strip().startswith("trainlint: error:") and "Traceback" not in err


def test_under_a_launcher_every_rank_runs_the_harness_and_the_maximum_is_reported(project):
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        pytest.skip("torchrun comes with torch")
    write(project, "ranks.py", EAGER.format(body="pass").replace("SEQ_LEN = 2048", "SEQ_LEN = 2048  # per rank"))
    code, data, err = verify(project, "ranks.py", "--steps", "1", "--launcher",
                             f"{torchrun} --nproc-per-node 2 --master-port 29517")
    assert code == 0, err
    run = data["runs"]["original"]
    assert run["ranks"] == 2 and run["max_peak_over_ranks"] >= run["peak_allocated"] > 0
    assert data["diagnostics"][0]["verdict"] == "confirmed"


def test_simulate_runs_the_full_size_architecture_under_fake_tensors(project):
    (project / "sim-llama").mkdir(exist_ok=True)
    (project / "sim-llama" / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": 32000, "hidden_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1376, "dtype": "bfloat16"}))
    write(project, "sim.py", '''
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained("./sim-llama", attn_implementation="eager")
    MAX_LEN = 2048
    loader = DataLoader(dataset, batch_size=2)
    ''')
    code, data, err = verify(project, "sim.py", "--simulate")
    assert code == 0, err
    orig, fixed = data["runs"]["original"], data["runs"]["fixed"]
    assert orig["simulated"]["peak"] > fixed["simulated"]["peak"]
    for run in (orig, fixed):  # the static estimate is within 25% of the simulated peak
        assert abs(run["predicted"]["peak"] - run["simulated"]["peak"]) <= 0.25 * run["simulated"]["peak"]
    d, = data["diagnostics"]
    assert (d["code"], d["verdict"]) == ("TL101", "confirmed")
    assert data["known_gaps"]


def test_ctrl_c_leaves_nothing_running(project):
    import os
    import signal
    import time

    write(project, "hang2.py", EAGER.format(body="import subprocess, time; subprocess.Popen(['sleep', '301']); "
                                                 "time.sleep(3600)"))
    proc = subprocess.Popen([sys.executable, "-m", "trainlint", "verify", "--device", "cpu", "hang2.py",
                             "--timeout", "300"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not subprocess.run(["pgrep", "-f", "sleep 301"], capture_output=True).stdout:
        time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", "sleep 301"], capture_output=True).stdout, "the run never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", "sleep 301"], capture_output=True).stdout == b""


LAUNCHED = '''
import argparse

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="missing-model")
parser.add_argument("--seq_len", type=int, default=128)
args = parser.parse_args()
model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="eager")
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
loader = DataLoader(torch.randint(0, 256, (64, args.seq_len)), batch_size=1)
for input_ids in loader:
    loss = model(input_ids=input_ids, labels=input_ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
'''


def test_verify_a_launcher_runs_its_script_with_the_launch_arguments_from_its_folder(project):
    write(project, "launched.py", LAUNCHED)
    (project / "scripts").mkdir(exist_ok=True)
    (project / "scripts" / "run.sh").write_text("cd ..\npython launched.py --model ./tiny-llama --seq_len 2048\n")
    code, data, err = verify(project, "scripts/run.sh", "--steps", "2")
    assert code == 0, err
    d, = data["diagnostics"]
    # the length that makes eager attention costly comes from the launcher; the fix is in the script
    assert d["code"] == "TL101" and d["verdict"] == "confirmed", d
    assert d["measured_saving"] > 200_000_000
    assert data["runs"]["original"]["steps"] == data["runs"]["fixed"]["steps"] == 2


def test_verify_refuses_a_launch_it_cannot_read_fully(project):
    write(project, "launched.py", LAUNCHED)
    (project / "scripts").mkdir(exist_ok=True)
    (project / "scripts" / "run_unknown.sh").write_text("cd ..\npython launched.py --model $1 --seq_len 2048\n")
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--device", "cpu", "scripts/run_unknown.sh"],
                       cwd=project, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert "scripts/run_unknown.sh:2: $1 is not known here" in r.stderr
