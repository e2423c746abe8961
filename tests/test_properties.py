"""Property-based: on generated valid Python programs (hypothesmith), `check` never raises, and `--fix`
output always re-parses and is a fixed point."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

hypothesmith = pytest.importorskip("hypothesmith")
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning")  # generated code is odd on purpose

from trainlint.config import Settings  # noqa: E402
from trainlint.fix import apply_edits  # noqa: E402
from trainlint.lint import enabled_codes, lint_text  # noqa: E402

# Appended to each generated program so it passes the relevance checks and exercises facts, rules and fixes.
TAIL = '''
from transformers import AutoModelForCausalLM, TrainingArguments, Trainer
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")
args = TrainingArguments(output_dir="o", per_device_train_batch_size=4)
MAX_LEN = 4096
Trainer(model=model, args=args).train()
'''

PROGRAMS = hypothesmith.from_grammar().filter(lambda src: _parses(src))


def _parses(src: str) -> bool:
    try:
        ast.parse(src)
        cst.parse_module(src)
    except Exception:  # noqa: BLE001 - the generator sometimes emits code one of the parsers rejects
        return False
    return True


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    root = tmp_path_factory.mktemp("prop")
    s = Settings(root=root)
    return root / "gen.py", s, enabled_codes(s)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                                 HealthCheck.function_scoped_fixture])
@given(src=PROGRAMS, with_tail=st.booleans())
def test_check_never_raises_and_fixes_reparse_to_a_fixed_point(env, src, with_tail):
    path, s, codes = env
    text = src + ("\n" if not src.endswith("\n") else "") + TAIL if with_tail else src
    result = lint_text(path, text, s, codes)  # must not raise
    fixable = [d for d in result.diagnostics if d.fix]
    if not fixable:
        return
    fixed, applied = apply_edits(text, fixable)
    cst.parse_module(fixed)  # re-parses
    ast.parse(fixed)
    again = [d for d in lint_text(path, fixed, s, codes).diagnostics if d.fix]
    assert again == [], "fixing a second time would change the file again"


_BLOCKS = [  # (indent, text, is a plain statement a magic may stand in for)
    ("", "import os", True), ("", "if os.environ.get('COLAB_'):", False), ("    ", "x = 1", True),
    ("    ", "y = 2", True), ("", "else:", False), ("    ", "x = 3", True), ("", "for i in range(2):", False),
    ("    ", "z = i", True), ("    ", "if i:", False), ("        ", "w = i", True), ("", "def f():", False),
    ("    ", "return 1", True), ("", "done = True", True),
]
_MAGICS = ["!pip install -q unsloth", "%env TOKENIZERS_PARALLELISM=false", "!nvidia-smi", "%matplotlib inline",
           "%cd /content", "!echo 'a b' | tee log.txt"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(replace=st.lists(st.booleans(), min_size=len(_BLOCKS), max_size=len(_BLOCKS)),
       magics=st.lists(st.sampled_from(_MAGICS), min_size=len(_BLOCKS), max_size=len(_BLOCKS)))
def test_shell_lines_and_magics_anywhere_in_blocks_keep_the_notebook_python(tmp_path, replace, magics):
    import json

    from trainlint.config import Settings
    from trainlint.lint import enabled_codes, lint_file

    lines = [f"{indent}{magic if swap and plain else text}\n"
             for (indent, text, plain), swap, magic in zip(_BLOCKS, replace, magics)]
    cells = [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": lines},
             {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [], "source": [
                 "from transformers import AutoModelForCausalLM\n", "MAX_SEQ_LENGTH = 8192\n",
                 "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='eager')\n"]}]
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    settings_ = Settings(root=tmp_path)
    found = lint_file(path, settings_, enabled_codes(settings_)).diagnostics
    assert [(d.code, d.cell, d.span.line, d.span.col) for d in found] == [("TL101", 2, 3, 73)], found
