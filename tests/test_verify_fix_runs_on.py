"""verify decides from the rule's declaration (`fix_runs_on`), not from its code, whether a fix can be measured on
the device at hand."""

from __future__ import annotations

from trainlint.diagnostics import Diagnostic, Span
from trainlint.rules import REGISTRY
from trainlint.verify.run import RunResult, fix_runs_on, verdicts


def _diag(code: str) -> Diagnostic:
    return Diagnostic(code, REGISTRY[code].name, "m", "train.py", Span.point(3, 1))


def _ok(peak: int) -> RunResult:
    return RunResult("run", {"ok": True, "peak_allocated": peak})


def test_the_fused_loss_fix_declares_that_it_runs_on_cuda_and_attention_does_not():
    assert REGISTRY["TL301"].fix_runs_on == fix_runs_on("TL301") == "CUDA"
    assert fix_runs_on("TL101") is None and fix_runs_on("TL999") is None


def test_a_cuda_only_fix_is_not_measured_on_the_cpu_and_a_portable_one_is():
    found = [_diag("TL301"), _diag("TL101")]
    rows = verdicts(found, found, _ok(100), _ok(40), (None, None), "cpu")
    assert [r["verdict"] for r in rows] == ["not measurable here", "confirmed"]
    assert "needs a CUDA GPU" in rows[0]["note"]


def test_a_fix_whose_package_is_missing_is_not_measurable():
    found = [_diag("TL301")]
    fixed = RunResult("fixed", {"ok": False, "error": {"type": "ImportError", "message": "liger-kernel is not "
                                                                                          "available"}})
    [row] = verdicts(found, found, _ok(100), fixed, (None, None), "cuda:0")
    assert row["verdict"] == "not measurable here" and "liger-kernel is not available" in row["note"]
