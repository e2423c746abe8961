"""verify decides from what each rule declares (`verifies`, codes.VERIFY_KINDS; `category`, codes.CATEGORIES) and
from the finding's structured data, never from a code or its message: a new rule that declares `verifies="memory"`
is verified with no edit to verify/."""

from __future__ import annotations

import pytest

from trainlint.codes import CATEGORIES, META_RULES, VERIFY_KINDS, RuleInfo
from trainlint.config import Settings
from trainlint.diagnostics import Diagnostic, Span
from trainlint.rules import REGISTRY
from trainlint.rules.base import rule
from trainlint.verify.run import VERIFY_CHECKS, RunResult, verdicts, verified_codes, verifies


def _ok(peak: int, **data) -> RunResult:
    return RunResult("run", {"ok": True, "peak_allocated": peak, **data})


@pytest.fixture
def declare():
    """Register rules for one test (as a new rule module would) and take them out after it."""
    added: list[str] = []

    def make(code: str, **kw):
        rule(code, f"new-rule-{code.lower()}", consumer="test", summary="s", fix_hint="h", fix="safe", **kw)(
            lambda self, ctx: ())
        added.append(code)
        return REGISTRY[code]

    yield make
    for code in added:
        REGISTRY.pop(code, None)


def test_every_declared_kind_has_a_check_and_every_fixable_rule_declares_one():
    assert set(VERIFY_CHECKS) == set(VERIFY_KINDS)
    for code, found in REGISTRY.items():
        assert found.verifies is None or found.verifies in VERIFY_KINDS, code
        if found.fix != "none":  # a fix verify could apply: it must know what to check of the fixed run
            assert found.verifies is not None, code
        assert verifies(code) == found.verifies
    assert {REGISTRY[c].verifies for c in ("TL101", "TL201", "TL401")} == {"memory", "adapter-grads",
                                                                            "samples-per-step"}


def test_a_new_memory_rule_is_verified_with_no_edit_to_verify(declare):
    declare("TL998", verifies="memory")
    declare("TL997")  # declares nothing for verify: its applied fix is not judged
    found = [Diagnostic("TL998", "new-rule-tl998", "m", "train.py", Span.point(3)),
             Diagnostic("TL997", "new-rule-tl997", "m", "train.py", Span.point(4))]
    rows = verdicts(found, found, _ok(100), _ok(40), (None, None), "cpu")
    assert [(r["verdict"], r["measured_saving"]) for r in rows] == [("confirmed", 60), ("not measurable here", None)]
    assert rows[0]["note"] == "memory went down; no static prediction to compare with"
    assert "declares nothing" in rows[1]["note"]
    rows = verdicts(found[:1], found[:1], _ok(100), _ok(120), (None, None), "cpu")
    assert rows[0]["verdict"] == "not confirmed" and rows[0]["note"] == "the fixed run did not use less memory"


def test_a_declaration_is_checked_when_it_is_made():
    with pytest.raises(ValueError, match="verifies must be one of"):
        RuleInfo("TL996", "x", "c", "s", "h", verifies="speed")
    with pytest.raises(ValueError, match="category must be one of"):
        RuleInfo("TL996", "x", "c", "s", "h", category="other")


def test_the_samples_per_step_check_reads_the_findings_data_not_its_message(declare):
    declare("TL995", verifies="samples-per-step")
    with_data = Diagnostic("TL995", "n", "says nothing of the batch", "train.py", Span.point(3),
                           data={"effective_batch": 16})
    only_message = Diagnostic("TL995", "n", "set gradient_accumulation_steps=8 to keep 16", "train.py",
                              Span.point(3))
    original, fixed = _ok(100, samples_per_step=[8, 8]), _ok(100, samples_per_step=[16, 16])
    [row] = verdicts([with_data], [with_data], original, fixed, (None, None), "cpu")
    assert row["verdict"] == "confirmed" and "16 after the fix (8 before)" in row["note"]
    [row] = verdicts([only_message], [only_message], original, fixed, (None, None), "cpu")
    assert row["verdict"] == "not confirmed"
    [row] = verdicts([with_data], [with_data], original, _ok(100, samples_per_step=[8, 16]), (None, None), "cpu")
    assert row["verdict"] == "not confirmed"


def test_the_adapter_check_confirms_a_fix_that_rescues_a_failed_run(declare):
    declare("TL994", verifies="adapter-grads")
    d = Diagnostic("TL994", "n", "m", "train.py", Span.point(3))
    failed = RunResult("original", {"ok": False, "adapter_grad_ok": False, "error": {"type": "RuntimeError"}})
    [row] = verdicts([d], [d], failed, _ok(10, adapter_grad_ok=True), (None, None), "cpu")
    assert row["verdict"] == "confirmed" and "the original run failed" in row["note"]
    [row] = verdicts([d], [d], failed, _ok(10, adapter_grad_ok=False), (None, None), "cpu")
    assert row["verdict"] == "not confirmed" and row["note"] == "the original run did not complete"


def test_verify_leaves_out_the_codes_of_files_it_could_not_check(tmp_path):
    codes = verified_codes(Settings(root=tmp_path))
    unchecked = {c for c, info in META_RULES.items() if info.category == "unchecked"}
    assert unchecked == {"TL001", "TL002", "TL003", "TL004"}
    assert not codes & unchecked
    assert {"TL005", "TL009", "TL101", "TL401"} <= codes  # launch inputs and rules stay
    assert {info.category for info in META_RULES.values()} <= set(CATEGORIES)
    assert {r.category for r in REGISTRY.values()} == {"rule"}


def test_simulating_an_architecture_the_simulation_cannot_build_is_a_one_line_error(tmp_path):
    """The supervised `verify --simulate` path: a model type outside simulate.SIMULATED_TYPES (GPT-NeoX here, read
    from its local config.json) is refused with exit 2 and one line, not a traceback."""
    import json
    import subprocess
    import sys

    pytest.importorskip("torch")
    (tmp_path / "neox").mkdir()
    (tmp_path / "neox" / "config.json").write_text(json.dumps({
        "model_type": "gpt_neox", "vocab_size": 50304, "hidden_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 8, "intermediate_size": 2048, "dtype": "bfloat16"}))
    (tmp_path / "sim.py").write_text(
        "from torch.utils.data import DataLoader\n"
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('./neox', attn_implementation='eager')\n"
        "MAX_LEN = 2048\n"
        "loader = DataLoader(dataset, batch_size=2)\n")
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--simulate", "sim.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert r.stderr.startswith("trainlint: error: cannot simulate sim.py: simulation supports llama")
    assert "this model is gpt_neox" in r.stderr and len(r.stderr.strip().splitlines()) == 1
