"""Versions from API usage (knowledge/api_versions.py): bounds from keywords and imports, the newest release that
accepts the file, conflicts with pins (TL009), notebook outputs as evidence, and --verbose."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import codes

from trainlint.knowledge import api_versions

OLD_SFT = '''
from transformers import AutoModelForCausalLM, TrainingArguments
from trl import SFTTrainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Meta-Llama-3-8B")
args = TrainingArguments(output_dir="o", per_device_train_batch_size=2)
trainer = SFTTrainer(model=model, args=args, tokenizer=tok, dataset_text_field="text", max_seq_length=4096)
'''


def test_unpinned_old_sft_script_is_linted_on_the_newest_trl_that_accepts_it(lint):
    found = lint(OLD_SFT, settings={"select": ["TL"]})
    # trl 0.12.2 is the newest release with SFTTrainer(dataset_text_field=): its SFT loss is unfused, so TL301
    # fires (on the installed trl 1.16 it would be chunked and quiet)
    assert [(c, line) for c, line, _ in found] == [("TL301", 7)]
    assert "SFTTrainer in TRL 0.12.2" in found[0][2]


def test_the_same_script_without_old_keywords_stays_on_the_installed_trl(lint):
    src = OLD_SFT.replace(', tokenizer=tok, dataset_text_field="text", max_seq_length=4096', "")
    assert codes(lint(src)) == []


@pytest.mark.parametrize("pin,conflict", [("0.12.2", False), ("0.13.0", True)])
def test_a_pin_the_calls_cannot_run_on_is_reported(lint, pin, conflict):
    found = lint(OLD_SFT, files={"requirements.txt": f"trl=={pin}\n"})
    assert ("TL009" in codes(found)) is conflict
    if conflict:
        message = next(m for c, _, m in found if c == "TL009")
        assert message.startswith("trl 0.13.0 (pinned trl==0.13.0 in ")
        assert "SFTTrainer(dataset_text_field=) (line 7) removed in 0.13.0" in message
        assert "the rules assume 0.13.0" in message
        assert [line for c, line, _ in found if c == "TL009"] == [7]


@pytest.mark.parametrize("keyword,pin,conflict", [
    ("evaluation_strategy", "4.50.3", False), ("evaluation_strategy", "4.51.0", True),  # arguments.json
    ("eval_strategy", "4.41.0", False), ("eval_strategy", "4.40.2", True),
    ("warmup_ratio", "5.14.1", False), ("warmup_ratio", "5.15.0", True),
    ("no_cuda", "4.57.6", False), ("no_cuda", "5.0.0", True),
])
def test_training_arguments_keywords_from_the_field_table(lint, keyword, pin, conflict):
    src = f'''
    from transformers import TrainingArguments
    args = TrainingArguments(output_dir="o", {keyword}=0.1)
    '''
    found = lint(src, files={"requirements.txt": f"transformers=={pin}\n"})
    assert codes(found) == (["TL009"] if conflict else [])


@pytest.mark.parametrize("pin,conflict", [("0.25.1", False), ("0.26.2", True)])
def test_imports_bound_the_version(lint, pin, conflict):
    src = '''
    from trl import SFTTrainer, setup_chat_format
    trainer = SFTTrainer(model=model)
    '''
    found = lint(src, files={"requirements.txt": f"trl=={pin}\n"})
    assert codes(found) == (["TL009"] if conflict else [])
    if conflict:
        assert found[0][1] == 2


@pytest.mark.parametrize("pin,conflict", [("4.57.6", False), ("5.0.0", True)])
def test_load_in_4bit_keyword_is_gone_in_5(lint, pin, conflict):
    src = '''
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", load_in_4bit=True)
    '''
    assert codes(lint(src, files={"requirements.txt": f"transformers=={pin}\n"})) == (["TL009"] if conflict else [])


def test_soft_facts_steer_but_never_conflict(lint):
    src = '''
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="bfloat16")
    '''
    assert lint(src, files={"requirements.txt": "transformers==4.50.3\n"}) == []  # dtype= is swallowed there


def test_unknown_keywords_are_not_bounds():
    assert api_versions.field_range("transformers", "TrainingArguments", "no_such_field") is None
    assert api_versions.field_range("transformers", "TrainingArguments", "output_dir") is None  # in every release
    assert api_versions.scan_field_range("transformers", "TrainingArguments", "output_dir")[:2] == (None, None)
    since, until, _ = api_versions.field_range("trl", "SFTConfig", "max_seq_length")
    # SFTConfig is new in trl 0.9.2 (sft_config.py), the oldest release read is 0.7.0: its first release bounds it
    assert since == (0, 9, 2) and until == (0, 20, 0)


def _notebook(path: Path, outputs_text: str) -> Path:
    cells = [
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": ["!pip install trl transformers\n"],
         "outputs": [{"output_type": "stream", "name": "stdout", "text": [outputs_text]}]},
        {"cell_type": "code", "metadata": {}, "execution_count": 2, "outputs": [],
         "source": ["from trl import SFTConfig, SFTTrainer\n",
                    "trainer = SFTTrainer(model=\"meta-llama/Llama-3.1-8B\",\n",
                    "                     args=SFTConfig(output_dir=\"o\", max_length=4096, per_device_train_batch_size=2))\n"]},
    ]
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}
    path.write_text(json.dumps(nb))
    return path


def _check(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", str(path), "--no-cache", *extra],
                          capture_output=True, text=True, cwd=path.parent, timeout=120)


def test_notebook_outputs_count_as_installed_versions(tmp_path: Path):
    nb = _notebook(tmp_path / "sft.ipynb", "Successfully installed tokenizers-0.19.1 transformers-4.44.2 trl-0.19.1\n")
    out = _check(nb, "--verbose")
    assert "trl 0.19.1 (installed per the stored output of cell 1 (`Successfully installed trl-0.19.1`))" in out.stdout + out.stderr
    # TRL 0.19.1's SFT loss is not chunked: TL301 on the 128k vocabulary
    assert "cell 2:2:11: TL301 SFTTrainer in TRL 0.19.1" in out.stdout


def test_notebook_without_install_output_keeps_the_installed_trl(tmp_path: Path):
    nb = _notebook(tmp_path / "sft.ipynb", "Requirement already satisfied: trl\n")
    out = _check(nb)
    assert "TL301" not in out.stdout  # trl 1.16 chunks the SFT loss


def test_verbose_prints_the_bound_and_why(tmp_path: Path):
    script = tmp_path / "train.py"
    script.write_text(OLD_SFT)
    out = _check(script, "--verbose")
    text = out.stdout + out.stderr
    assert "trl 0.12.2 (not pinned: the newest release known that accepts this file's calls (trl < 0.13.0))" in text
    assert "trl: this file's calls bound it to < 0.13.0" in text
    assert "SFTTrainer(dataset_text_field=) (line 7): removed in 0.13.0 (trl 0.12.2 sft_trainer.py" in text


def test_the_committed_index_is_what_the_generator_writes():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "gen_api_fields.py"
    spec = importlib.util.spec_from_file_location("gen_api_fields", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    committed = json.loads(gen.OUT.read_text())
    assert committed == json.loads(json.dumps(gen.build()))
    # and the index agrees with arguments.json read directly
    for lib, cls, field in (("transformers", "TrainingArguments", "evaluation_strategy"), ("trl", "SFTConfig", "max_length")):
        assert api_versions.field_range(lib, cls, field)[:2] == api_versions.scan_field_range(lib, cls, field)[:2]


@pytest.mark.parametrize("spec,version,conflict", [
    (">=0.7", "0.12.2", False),  # a range: the newest release in it that runs the calls, not a conflict
    (">=0.13", "1.16.0", True),  # nothing in the range runs them: the range's own pick (the installed trl), reported
    ("==0.13.0", "0.13.0", True),  # an exact pin is taken at its word
])
def test_a_range_pin_resolves_to_the_newest_release_in_it_that_runs_the_calls(lint, spec, version, conflict):
    found = lint(OLD_SFT, files={"requirements.txt": f"trl{spec}\n"}, settings={"select": ["TL"]})
    assert ("TL009" in codes(found)) is conflict
    if not conflict:
        assert [(c, line) for c, line, _ in found] == [("TL301", 7)]
        assert "SFTTrainer in TRL 0.12.2" in found[0][2]
    else:
        assert next(m for c, _, m in found if c == "TL009").startswith(f"trl {version}")


@pytest.mark.parametrize("pin,conflict", [("4.45.2", False), ("4.46.0", True)])
def test_the_transformers_deepspeed_shim_bounds_transformers(lint, pin, conflict):
    # transformers/deepspeed.py is in the 4.45.2 wheel and not in 4.46.0's (FastChat's LoRA scripts import it)
    src = '''
    from transformers import Trainer, deepspeed
    trainer = Trainer(model=model)
    '''
    found = lint(src, files={"requirements.txt": f"transformers=={pin}\n"})
    assert codes(found) == (["TL009"] if conflict else [])


SUBCLASS = '''
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainer, Seq2SeqTrainingArguments


class SummaryTrainer(Seq2SeqTrainer):
{body}


model = AutoModelForSeq2SeqLM.from_pretrained("google/flan-t5-large")
args = Seq2SeqTrainingArguments("out", per_device_train_batch_size=8)
trainer = SummaryTrainer(model=model, args=args, tokenizer=tok)
'''
_PASS = "    pass"
_OWN_INIT = ("    def __init__(self, *args, tokenizer=None, **kwargs):\n"
             "        super().__init__(*args, processing_class=tokenizer, **kwargs)")
_FORWARDS = ("    def __init__(self, *args, **kwargs):\n"
             "        super().__init__(*args, **kwargs)")
_CLOSED = ("    def __init__(self, model, args):\n"
           "        super().__init__(model=model, args=args)")


@pytest.mark.parametrize("body,bounded", [(_PASS, True), (_FORWARDS, True), (_OWN_INIT, False), (_CLOSED, False)])
def test_a_local_subclass_call_bounds_its_base_library(lint, body, bounded):
    # Seq2SeqTrainer(tokenizer=) through the repository's own subclass: transformers 5.0.0 has no such keyword
    source = SUBCLASS.format(body=body)
    found = lint(source, files={"requirements.txt": "transformers==5.0.0\n"})
    tl009 = [(line, m) for c, line, m in found if c == "TL009"]
    if bounded:
        line = source.splitlines().index("trainer = SummaryTrainer(model=model, args=args, tokenizer=tok)") + 1
        assert [at for at, _ in tl009] == [line]
        assert f"Seq2SeqTrainer(tokenizer=) through SummaryTrainer (line {line}) removed in 5.0.0" in tl009[0][1]
    else:  # its own __init__ takes tokenizer itself, or never hands keywords on
        assert tl009 == []


def test_unpinned_the_subclass_call_picks_the_newest_release_that_accepts_it(tmp_path):
    (tmp_path / "train.py").write_text(SUBCLASS.format(body=_PASS).lstrip("\n"))
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "-v", "--no-cache", "train.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert "train.py: transformers 4.57.6 (not pinned: the newest release known that accepts this file's calls " \
           "(transformers < 5.0.0))" in r.stderr
    assert "Seq2SeqTrainer(tokenizer=) through SummaryTrainer (line 10): removed in 5.0.0" in r.stderr
    (tmp_path / "train.py").write_text(SUBCLASS.format(body=_PASS).replace("tokenizer=tok", "processing_class=tok"))
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "-v", "--no-cache", "train.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert "train.py: transformers 5.25.0 (not pinned: the newest release known that accepts this file's calls " \
           "(transformers >= 4.46.0))" in r.stderr
