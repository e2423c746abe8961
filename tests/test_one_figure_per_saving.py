"""One figure per saving (issue 26): for TL101 and TL301 the rule's message, `estimate`'s lever and
`verify --simulate`'s predicted saving are the same number (memory.estimate.fix_saving). Ground truth: the
tool's own three outputs on one script, compared with each other; the figure itself is checked against the
arithmetic (the peak with and without the fix)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from trainlint.memory import fmt_bytes
from trainlint.memory.estimate import estimate

# A Llama geometry with a 128,256-token vocabulary (TL301) at 2,048 tokens with eager attention (TL101), no
# checkpointing, so both fixes lower the peak; from a local config.json, small enough to simulate in seconds.
CONFIG = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 512, "num_hidden_layers": 4,
          "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1376, "dtype": "bfloat16"}
SCRIPT = '''
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("./sim-llama")
model = AutoModelForCausalLM.from_pretrained("./sim-llama", attn_implementation="eager")
data = tokenizer(["..."], max_length=2048, truncation=True)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16=True)
trainer = Trainer(model=model, args=args, train_dataset=data)
trainer.train()
'''
FIX_WORDS = {"TL101": "SDPA", "TL301": "a fused loss"}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("one_figure")
    (root / "sim-llama").mkdir()
    (root / "sim-llama" / "config.json").write_text(json.dumps(CONFIG))
    (root / "train.py").write_text(textwrap.dedent(SCRIPT))
    return root


def trainlint(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=project, capture_output=True, text=True,
                          timeout=600)


def message_figures(project: Path) -> dict[str, str]:
    found = json.loads(trainlint(project, "check", "train.py", "--output-format", "json", "--no-cache").stdout)
    figures = {}
    for d in found:
        if d["code"] in FIX_WORDS:
            m = re.search(rf"~([\d.,]+ [KMG]iB) off this run's peak with {FIX_WORDS[d['code']]}", d["message"])
            assert m, d["message"]
            figures[d["code"]] = m.group(1)
    return figures


def lever_savings(project: Path) -> dict[str, int]:
    data = json.loads(trainlint(project, "estimate", "train.py", "--format", "json").stdout)
    return {lv["code"]: lv["saves"] for lv in data["levers"] if lv["code"]}


def test_message_and_lever_print_the_same_saving_and_it_is_the_peak_difference(project):
    figures, levers = message_figures(project), lever_savings(project)
    assert sorted(figures) == ["TL101", "TL301"] and set(levers) >= {"TL101", "TL301"}
    for code in ("TL101", "TL301"):
        assert figures[code] == fmt_bytes(levers[code]), code
    # the figure is what the fix takes off the peak: re-estimate the run with the fix's change
    from trainlint.config import Settings
    from trainlint.lint import enabled_codes, lint_file
    from trainlint.planning import Overrides, plan_for

    settings = Settings(root=project)
    plan = plan_for(lint_file(project / "train.py", settings, enabled_codes(settings)).context, Overrides())[0]
    assert levers["TL101"] == estimate(plan).peak - estimate(replace(plan, attention="sdpa")).peak > 0
    assert levers["TL301"] == estimate(plan).peak - estimate(replace(plan, loss="liger")).peak > 0


def test_verify_simulate_predicts_the_same_saving_as_the_message_and_the_lever(project):
    pytest.importorskip("torch")
    figures, levers = message_figures(project), lever_savings(project)
    r = trainlint(project, "verify", "--simulate", "--format", "json", "train.py")
    assert r.returncode == 0, r.stderr
    predicted = {d["code"]: d["predicted_saving"] for d in json.loads(r.stdout)["diagnostics"]}
    for code in ("TL101", "TL301"):
        assert predicted[code] == levers[code] > 0, code
        assert fmt_bytes(predicted[code]) == figures[code]
