"""The shortcuts the start-up and the cache key take give what the general code they replace gives."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

import pytest

from trainlint.knowledge.versions import _UNSURE, _scan_dist_info


@pytest.mark.parametrize("name", ["transformers", "trl", "peft", "torch", "libcst", "click", "PyYAML",
                                  "typing-extensions", "typing_extensions", "trainlint", "no-such-distribution"])
def test_installed_version_reads_what_importlib_metadata_reads(name):
    try:
        expected = metadata.version(name)
    except metadata.PackageNotFoundError:
        expected = None
    found = _scan_dist_info(name)
    assert found is _UNSURE or found == expected


def test_a_one_file_check_does_not_import_importlib_metadata(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("from transformers import AutoModelForCausalLM\n"
                      "m = AutoModelForCausalLM.from_pretrained('x/y', attn_implementation='eager')\n")
    probe = ("import sys\nfrom trainlint.cli import main\ntry:\n    main(['check', '--no-cache', sys.argv[1]])\n"
             "except SystemExit:\n    pass\nprint('LOADED', sorted(m for m in sys.modules if m.startswith("
             "('importlib.metadata', 'trainlint.verify', 'trainlint.memory.estimate', 'trainlint.report.estimate',"
             " 'trainlint.planning', 'trainlint.fix'))))\n")
    r = subprocess.run([sys.executable, "-c", probe, str(script)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert "LOADED []" in r.stdout, r.stdout + r.stderr[-2000:]
