"""Versions solved together: the release chosen for one library bounds another (knowledge/versions.py
RELEASE_REQUIRES), and the rules then judge the run on the release it can really run on.

Shapes: a repository that pins an old trl (or is trl itself) and asks transformers only for a lower bound, so the
newest transformers is in range but cannot run trl's trainers (Trainer(tokenizer=) is gone in 5.0.0)."""

from pathlib import Path

from conftest import codes
from trainlint.knowledge.versions import decide_versions, project_pins

DPO_SCRIPT = '''
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments
from trl import DPOTrainer

model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=None)
model_ref = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=None)
tokenizer = AutoTokenizer.from_pretrained("gpt2")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
trainer = DPOTrainer(model, model_ref, args=args, train_dataset=ds, tokenizer=tokenizer, max_length=512)
trainer.train()
'''


def _script(tmp_path: Path, requirements: str) -> Path:
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "requirements.txt").write_text(requirements)
    script = tmp_path / "train.py"
    script.write_text("")
    return script


def test_an_old_trl_keeps_transformers_below_5(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.8.6\ntransformers>=4.31.0\n"), (), {})
    assert v.trl.version == "0.8.6"
    assert v.transformers.version == "4.57.6"  # the newest 4.x: the newest release trl 0.8.6's trainers run on
    assert any("trl 0.8.6: needs transformers before 5.0.0" in n for n in v.notes)
    assert any("releases chosen for the other libraries" in n for n in v.notes)


def test_trl_0_12_passes_processing_class_so_transformers_5_stays(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.12.0\ntransformers>=4.31.0\n"), (), {})
    assert v.transformers.tuple[0] == 5  # the newest 5.x release read
    assert not any("needs transformers before" in n for n in v.notes)


def test_an_exact_pin_the_old_trl_cannot_run_on_is_a_conflict(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.9.6\ntransformers==5.0.0\n"), (), {})
    assert v.transformers.version == "5.0.0"  # an exact pin is kept, and reported
    assert [c.library for c in v.conflicts] == ["transformers"]
    assert "needs transformers before 5.0.0" in v.conflicts[0].uses[0]


def test_settings_override_wins(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.8.6\n"), (), {"transformers": "5.25.0"})
    assert v.transformers.version == "5.25.0" and v.transformers.source == "trainlint settings"


def test_tl501_judges_the_reference_model_on_the_transformers_trl_runs_on(lint):
    """torch_dtype=None loads fp32 on every 4.x release; on 5.x it would mean "auto" (the checkpoint's dtype)."""
    found = lint(DPO_SCRIPT, files={"requirements.txt": "trl==0.8.6\ntransformers>=4.31.0\n"})
    assert codes(found) == ["TL501"]
    assert "transformers 4.57.6 loads in fp32" in found[0][2]
    assert found[0][1] == 6  # the reference model: it never trains
