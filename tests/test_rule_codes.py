"""trainlint.codes lists the rule codes without importing the rules (a fully cached run needs no more): it must
be exactly what the rule modules register, and importing it must not import them."""

from __future__ import annotations

import subprocess
import sys

from trainlint.codes import RULE_CODES
from trainlint.rules import REGISTRY


def test_the_light_table_is_the_registry():
    assert tuple(sorted(RULE_CODES)) == tuple(sorted(REGISTRY))


def test_a_fully_cached_run_imports_no_rule_and_no_libcst(tmp_path):
    (tmp_path / "t.py").write_text("from transformers import TrainingArguments\n"
                                   "args = TrainingArguments(output_dir='o', per_device_train_batch_size=2)\n")
    probe = ("import sys\nfrom trainlint.cli import main\n"
             "try:\n    main(['check', 't.py'])\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in sys.modules if m.startswith(('trainlint.rules', 'libcst', 'trainlint.lint'))))")
    subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
