"""--fix / --unsafe-fixes / --diff: edits keep formatting, files are never corrupted, fixing twice is a no-op."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


EAGER = '''from transformers import AutoModelForCausalLM, TrainingArguments, Trainer

model = AutoModelForCausalLM.from_pretrained(
    "meta-llama/Llama-3.1-8B",
    attn_implementation="eager",  # keep this comment
)
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=4,  # small
)
enc = tokenizer(texts, max_length=8192, truncation=True)
Trainer(model=model, args=args, train_dataset=ds).train()
'''


def test_safe_fix_edits_only_the_value_and_keeps_comments(tmp_path):
    (tmp_path / "t.py").write_text(EAGER)
    r = run("--fix", "t.py", cwd=tmp_path)
    assert r.returncode == 1  # TL301's fix is unsafe, so TL301 remains
    assert (tmp_path / "t.py").read_text() == EAGER.replace('attn_implementation="eager",  # keep',
                                                           'attn_implementation="sdpa",  # keep')
    assert "TL301" in r.stdout and "TL101" not in r.stdout


def test_unsafe_fixes_add_a_keyword_in_the_calls_style_and_fixing_twice_changes_nothing(tmp_path):
    path = tmp_path / "t.py"
    path.write_text(EAGER)
    assert run("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path).returncode == 0
    once = path.read_text()
    assert "    per_device_train_batch_size=4,  # small\n    use_liger_kernel=True,\n)" in once
    assert run("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path).returncode == 0
    assert path.read_text() == once


def test_diff_prints_and_writes_nothing(tmp_path):
    path = tmp_path / "t.py"
    path.write_text(EAGER)
    r = run("--diff", "t.py", cwd=tmp_path)
    assert r.returncode == 1
    assert '-    attn_implementation="eager",  # keep this comment' in r.stdout
    assert '+    attn_implementation="sdpa",  # keep this comment' in r.stdout
    assert path.read_text() == EAGER
    path.write_text(EAGER.replace('"eager"', '"sdpa"'))
    assert run("--diff", "t.py", cwd=tmp_path).returncode == 0


def test_missing_keyword_is_added_inline(tmp_path):
    src = ('from transformers import AutoModelForCausalLM\n'
           'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", output_attentions=True)\n'
           'MAX_LEN = 4096\n')
    (tmp_path / "t.py").write_text(src)
    assert run("--fix", "t.py", cwd=tmp_path).returncode == 1  # replacing output_attentions is unsafe
    assert run("--fix", "--unsafe-fixes", "t.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "t.py").read_text() == src.replace("output_attentions=True", 'attn_implementation="sdpa"')


def test_value_from_a_constant_is_edited_where_it_is_defined(tmp_path):
    src = ('from transformers import AutoModelForCausalLM\nATTN = "eager"\nMAX_LEN = 4096\n'
           'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation=ATTN)\n')
    (tmp_path / "t.py").write_text(src)
    assert run("--fix", "t.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "t.py").read_text() == src.replace('ATTN = "eager"', 'ATTN = "sdpa"')


def test_crlf_bom_latin1_and_file_mode_are_kept(tmp_path):
    src = ('# -*- coding: latin-1 -*-\r\n# caf\xe9\r\nfrom transformers import AutoModelForCausalLM\r\n'
           'model = AutoModelForCausalLM.from_pretrained("google/gemma-2-9b")\r\nMAX_LEN = 4096\r\n')
    latin = tmp_path / "latin.py"
    latin.write_bytes(src.encode("latin-1"))
    os.chmod(latin, 0o751)
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + EAGER.encode())
    assert run("--fix", "--unsafe-fixes", ".", cwd=tmp_path).returncode == 0
    fixed = latin.read_bytes()
    assert fixed == src.replace('"google/gemma-2-9b")', '"google/gemma-2-9b", attn_implementation="flex_attention")'
                                ).encode("latin-1")
    assert stat.S_IMODE(latin.stat().st_mode) == 0o751
    assert bom.read_bytes().startswith(b"\xef\xbb\xbf") and b'attn_implementation="sdpa"' in bom.read_bytes()
    assert not list(tmp_path.glob("*.tmp"))


def test_tl201_fix_inserts_the_hook_after_get_peft_model(tmp_path):
    src = ('# pip install transformers==4.57.6\nfrom peft import LoraConfig, get_peft_model\n'
           'from transformers import AutoModelForCausalLM\n\n'
           'def main():\n'
           '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")\n'
           '    model = get_peft_model(model, LoraConfig(r=8))\n'
           '    model.gradient_checkpointing_enable()\n')
    (tmp_path / "t.py").write_text(src)
    assert run("--fix", "t.py", cwd=tmp_path).returncode == 0
    assert (tmp_path / "t.py").read_text() == src.replace(
        "LoraConfig(r=8))\n", "LoraConfig(r=8))\n    model.enable_input_require_grads()\n")


def test_tl401_fix_sets_accumulation_to_keep_the_effective_batch(tmp_path):
    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@e.x")
    git("config", "user.name", "t")
    path = tmp_path / "t.py"
    path.write_text("from transformers import TrainingArguments\nGA = 1\n"
                    "args = TrainingArguments(output_dir='o', per_device_train_batch_size=8, gradient_accumulation_steps=GA)\n")
    git("add", "-A")
    git("commit", "-qm", "c")
    path.write_text(path.read_text().replace("per_device_train_batch_size=8", "per_device_train_batch_size=2"))
    assert run("--fix", "t.py", cwd=tmp_path).returncode == 0
    assert "GA = 4\n" in path.read_text()


def test_json_output_carries_fixes(tmp_path):
    (tmp_path / "t.py").write_text(EAGER)
    import json

    data = json.loads(run("--output-format", "json", "t.py", cwd=tmp_path).stdout)
    by_code = {d["code"]: d["fix"] for d in data}
    assert by_code["TL101"]["applicability"] == "safe"
    assert by_code["TL301"] == {
        "applicability": "unsafe", "message": "Set use_liger_kernel=True (needs liger-kernel and a CUDA GPU)",
        "edits": [{"content": "    use_liger_kernel=True,\n", "location": {"row": 10, "column": 1},
                   "end_location": {"row": 10, "column": 1}}]}


def test_a_fix_that_would_break_the_file_is_not_written(tmp_path, monkeypatch):
    from trainlint import fix as fixmod
    from trainlint.config import Settings
    from trainlint.lint import enabled_codes

    path = tmp_path / "t.py"
    path.write_text(EAGER)
    real = fixmod.apply_edits

    def broken(text, diags):
        new, applied = real(text, diags)
        return new + "\n)(\n", applied

    monkeypatch.setattr(fixmod, "apply_edits", broken)
    s = Settings(root=tmp_path)
    outcome = fixmod.plan_fixes(path, s, enabled_codes(s), unsafe=True)
    assert outcome.new_text is None and "invalid Python" in outcome.error
    assert path.read_text() == EAGER


def test_old_mac_newlines_and_form_feeds_keep_positions_right(tmp_path):
    # found by the hypothesmith property test: bare \r line breaks shifted every edit
    src = ("#\r#\x0c\rfrom transformers import AutoModelForCausalLM\r"
           'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")\r'
           "MAX_LEN = 4096\r")
    path = tmp_path / "cr.py"
    path.write_bytes(src.encode())
    r = run("--fix", "cr.py", cwd=tmp_path)
    assert r.returncode == 0, r.stdout
    assert path.read_bytes() == src.replace('"eager"', '"sdpa"').encode()


def test_value_from_an_argparse_default_is_edited_at_the_default(tmp_path):
    src = ('import argparse\nfrom transformers import AutoModelForCausalLM\n'
           'p = argparse.ArgumentParser()\np.add_argument("--attn", default="eager")\n'
           'p.add_argument("--max_seq_length", type=int, default=4096)\nargs = p.parse_args()\n'
           'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation=args.attn)\n')
    (tmp_path / "t.py").write_text(src)
    r = run("--fix", "--show-fixes", "t.py", cwd=tmp_path)
    assert r.returncode == 0 and "(argparse default)" in r.stdout
    assert (tmp_path / "t.py").read_text() == src.replace('default="eager"', 'default="sdpa"')


LLAMA_LONG = '''from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation='eager')
MAX_SEQ_LENGTH = 8192
'''
GEMMA2_LONG = '''from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained("google/gemma-2-9b", attn_implementation="eager")
MAX_SEQ_LENGTH = 8192
'''


@pytest.mark.parametrize("pin, script, fixed, message", [
    # attn_implementation does not exist before 4.36 (4.35.2 modeling_utils.py has no such keyword)
    ("transformers==4.34.0", LLAMA_LONG, None, "attn_implementation needs transformers >= 4.36 and this file "
                                               "targets 4.34.0"),
    ("transformers==4.36.0", LLAMA_LONG, "attn_implementation='sdpa'", ""),  # the literal's own quotes
    # Gemma 2's softcap: flex_attention, accepted from 4.47.0
    ("transformers==4.43.0", GEMMA2_LONG, None, "flex_attention needs transformers >= 4.47; this file targets "
                                                "4.43.0, so no fix is offered"),
    ("transformers==4.47.0", GEMMA2_LONG, 'attn_implementation="flex_attention"', ""),
])
def test_fixes_are_offered_only_for_the_versions_the_file_targets(tmp_path, pin, script, fixed, message):
    (tmp_path / "requirements.txt").write_text(pin + "\n")
    (tmp_path / "train.py").write_text(script)
    r = run("--no-cache", "--fix", "--unsafe-fixes", "train.py", cwd=tmp_path)
    text = (tmp_path / "train.py").read_text()
    if fixed is None:
        assert message in r.stdout
        assert text == script and r.returncode == 1
    else:
        assert fixed in text and r.returncode == 0, (r.stdout, text)


TRAINER_QWEN = '''from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B", dtype="bfloat16")
args = TrainingArguments(output_dir="o", per_device_train_batch_size=2)
Trainer(model=model, args=args).train()
MAX_SEQ_LENGTH = 4096
'''


def test_the_liger_fix_needs_a_transformers_with_the_field(tmp_path):
    (tmp_path / "train.py").write_text(TRAINER_QWEN)
    (tmp_path / "requirements.txt").write_text("transformers==4.44.2\n")  # use_liger_kernel arrived in 4.45.0
    r = run("--no-cache", "--fix", "--unsafe-fixes", "train.py", cwd=tmp_path)
    assert "use_liger_kernel needs transformers >= 4.45 and this file targets 4.44.2" in r.stdout
    assert (tmp_path / "train.py").read_text() == TRAINER_QWEN
    (tmp_path / "requirements.txt").write_text("transformers==4.45.0\n")
    assert run("--no-cache", "--fix", "--unsafe-fixes", "train.py", cwd=tmp_path).returncode == 0
    assert "use_liger_kernel=True" in (tmp_path / "train.py").read_text()


LORA_TRAINER = '''from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
args = TrainingArguments(output_dir="o", gradient_checkpointing=True)
Trainer(model=get_peft_model(model, LoraConfig(r=8)), args=args).train()
'''


@pytest.mark.parametrize("pin, fixed", [
    ("transformers==4.34.1", False),  # no gradient_checkpointing_kwargs before 4.35.0
    ("transformers==4.46.3", True),
])
def test_the_non_reentrant_kwargs_fix_needs_transformers_4_35(tmp_path, pin, fixed):
    (tmp_path / "train.py").write_text(LORA_TRAINER)
    (tmp_path / "requirements.txt").write_text(pin + "\npeft==0.13.2\n")
    r = run("--no-cache", "--select", "TL201", "--fix", "train.py", cwd=tmp_path)
    text = (tmp_path / "train.py").read_text()
    assert ('gradient_checkpointing_kwargs={"use_reentrant": False}' in text) is fixed, r.stdout
    assert (r.returncode == 0) is fixed
