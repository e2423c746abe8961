"""`trainlint check` never imports torch / transformers / peft / trl, and never runs the user's code."""

import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "transformers", "peft", "trl", "accelerate", "datasets")


def test_check_imports_no_training_library(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "import peft, trl\n"
        "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='eager')\n"
        "Trainer(model=model, args=TrainingArguments(output_dir='o', max_steps=1)).train()\n"
        "MAX_LEN = 4096\n")
    probe = (
        "import sys\n"
        "from trainlint.cli import main\n"
        "try:\n"
        f"    main(['check', {str(script)!r}])\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print('HEAVY', heavy, 'EXIT', code)\n"
    )
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True, timeout=120)
    assert "HEAVY [] EXIT 1" in r.stdout, r.stdout + r.stderr[-2000:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in r.stderr.splitlines() if "|" in line}
    assert not imported & set(HEAVY)


def test_linting_never_executes_the_script(tmp_path: Path):
    marker = tmp_path / "executed"
    script = tmp_path / "evil.py"
    script.write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from transformers import AutoModelForCausalLM\n"
        "m = AutoModelForCausalLM.from_pretrained('x/y', trust_remote_code=True)\n")
    subprocess.run([sys.executable, "-m", "trainlint", "check", str(script)], capture_output=True, timeout=120)
    assert not marker.exists()
