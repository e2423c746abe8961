"""Fragmentation in verify's verdict (reserved vs allocated at the peak, the rerun with expandable segments) and
the device information every result records.

No GPU exists on this project's machines, so the decision is tested on numbers: the result dicts below stand in
for what the harness writes on CUDA (``peak_allocated``, ``reserved_at_peak``), with values chosen on both sides
of the threshold, and the rerun is a function that returns such a dict. That is the one stand-in in these tests;
the device information is recorded for real, by the real harness on this CPU."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata

import pytest

from trainlint.verify import fragmentation as frag
from trainlint.verify.run import text_report

GiB = 2**30


def cuda_run(allocated: int, reserved: int, **extra) -> dict:
    return {"device": "cuda:0 NVIDIA H100 80GB HBM3", "peak_allocated": allocated, "reserved_at_peak": reserved,
            "peak_reserved": reserved, "error": None, **extra}


def test_reserved_far_above_allocated_is_fragmentation_and_asks_for_a_rerun():
    row = frag.verdict("original", cuda_run(40 * GiB, 62 * GiB), {})
    assert row["fragmented"] is True and row["rerun"] is True
    assert row["unallocated"] == 22 * GiB and row["unallocated_share"] == pytest.approx(22 / 62, abs=1e-4)
    assert "fragmentation: 35% of the reserved memory unallocated" in row["note"]
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in row["note"]


@pytest.mark.parametrize("allocated, reserved", [
    (40 * GiB, 52 * GiB),  # 23% unallocated: the allocator's ordinary slack (5-30%)
    (40 * GiB, int(40 * GiB / 0.70)),  # exactly 30%: not over the threshold
    (100 * 2**20, 600 * 2**20),  # 83% unallocated but 500 MiB: a small run's whole segments, not a shortage
])
def test_ordinary_allocator_slack_is_not_fragmentation(allocated, reserved):
    row = frag.verdict("original", cuda_run(allocated, reserved), {})
    assert (row["fragmented"], row["rerun"]) == (False, False)
    assert "within what the caching allocator ordinarily keeps" in row["note"]


def test_the_threshold_is_share_and_absolute_size_together():
    just = int(frag.MIN_BYTES / frag.SHARE) + 2**20  # a gap of just over 512 MiB at just over 30%
    assert frag.Fragmentation(just - frag.MIN_BYTES - 2**20, just).fragmented is True
    assert frag.Fragmentation(just - frag.MIN_BYTES + 2**20, just).fragmented is False


def test_a_cpu_run_or_a_run_without_counters_has_no_fragmentation_row():
    assert frag.verdict("original", {"device": "cpu", "peak_allocated": 10, "reserved_at_peak": None}, {}) is None
    assert frag.verdict("original", cuda_run(None, None), {}) is None
    # an older result without reserved_at_peak falls back to the run's overall max_memory_reserved
    assert frag.of_run({"device": "cuda:0 X", "peak_allocated": 5, "peak_reserved": 9}) == frag.Fragmentation(5, 9)


def test_only_the_fragmented_run_is_rerun_once_and_the_row_shows_the_difference():
    calls = []

    def rerun(label):
        calls.append(label)
        return cuda_run(40 * GiB, 43 * GiB)  # stand-in for the rerun's result with expandable segments

    runs = {"original": cuda_run(40 * GiB, 62 * GiB), "fixed": cuda_run(20 * GiB, 22 * GiB), "absent": None}
    rows = frag.check_runs(runs, {}, rerun)
    assert calls == ["original"]
    assert [r["run"] for r in rows] == ["original", "fixed"]
    orig, fixed = rows
    assert orig["with_expandable_segments"] == {"allocated_at_peak": 40 * GiB, "reserved_at_peak": 43 * GiB,
                                                "unallocated_share": round(3 / 43, 4)}
    assert orig["note"].endswith("reserved 19.0 GiB lower (7% unallocated); set it for this run")
    assert fixed["fragmented"] is False and "with_expandable_segments" not in fixed


def test_no_rerun_when_expandable_segments_are_already_on():
    env = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512, expandable_segments:True"}
    rows = frag.check_runs({"original": cuda_run(40 * GiB, 62 * GiB)}, env, lambda label: pytest.fail("reran"))
    assert rows[0]["fragmented"] is True and rows[0]["rerun"] is False
    assert "expandable segments do not cure" in rows[0]["note"]


def test_a_rerun_that_fails_is_said_and_the_rerun_env_keeps_other_settings():
    rows = frag.check_runs({"original": cuda_run(40 * GiB, 62 * GiB)}, {},
                           lambda label: {"device": "cuda:0 X", "error": {"type": "OutOfMemoryError"}})
    assert rows[0]["with_expandable_segments"] is None
    assert rows[0]["note"].endswith("the rerun did not complete (OutOfMemoryError)")
    env = frag.rerun_env({"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512,expandable_segments:False", "X": "1"})
    assert env == {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:512,expandable_segments:True", "X": "1"}


def test_the_text_report_prints_the_fragmentation_and_the_device_versions():
    row = frag.compare(frag.verdict("original", cuda_run(40 * GiB, 62 * GiB), {}), cuda_run(40 * GiB, 43 * GiB))
    run = {"peak_allocated": 40 * GiB, "step1_peak": None, "steady_peak": None, "error": None, "predicted": None}
    report = {"script": "train.py", "steps": 3, "device": "cuda:0 NVIDIA H100 80GB HBM3", "seconds": 1.0,
              "device_info": {"kind": "cuda", "name": "NVIDIA H100 80GB HBM3", "driver": "550.54.15",
                              "torch_cuda": "12.4", "torch": "2.13.0", "python": "3.11.9"},
              "launch": {"launcher": None, "args": [], "fixed_args": [], "notes": []}, "fixes_applied": [],
              "runs": {"original": run, "fixed": run}, "diagnostics": [], "fragmentation": [row]}
    text = text_report(report)
    assert "  NVIDIA H100 80GB HBM3: driver 550.54.15, CUDA 12.4, torch 2.13.0, Python 3.11.9\n" in text
    assert "  original run: reserved 62.0 GiB vs allocated 40.0 GiB at the peak: fragmentation: 35%" in text


def test_the_harness_records_the_cpu_device_and_versions_for_real(tmp_path):
    torch = pytest.importorskip("torch")
    script = tmp_path / "one_step.py"
    script.write_text("import torch\nw = torch.nn.Parameter(torch.ones(256))\nopt = torch.optim.SGD([w], lr=0.1)\n"
                      "for _ in range(5):\n    (w * 2).sum().backward()\n    opt.step()\n    opt.zero_grad()\n")
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "trainlint.verify.harness", "--script", str(script), "--steps", "2",
                           "--out", str(out), "--workdir", str(tmp_path / "w"), "--device", "cpu"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert (r["steps"], r["device"], r["reserved_at_peak"]) == (2, "cpu", None)
    info = r["device_info"]
    assert info["kind"] == "cpu" and info["torch"] == torch.__version__ == metadata.version("torch")
    assert info["torch_cuda"] == torch.version.cuda and info["driver"] is None
    assert info["python"] == platform.python_version() and info["cpu_count"] == os.cpu_count()
    assert info["total_memory"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert info["libraries"]["torch"] == torch.__version__
    assert info["libraries"].get("transformers") == metadata.version("transformers")
    assert info["pytorch_cuda_alloc_conf"] == os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    assert frag.verdict("original", r, {}) is None  # no allocator counters on CPU: no fragmentation claim


CUDA_STUB = """
import sys, torch
resets = [0]
allocated = [1000, 9000, 3000, 2000]  # per window: setup, step 1, step 2, after the steps
reserved = [1000, 12000, 15000, 15000]
torch.cuda.is_available = lambda: True
torch.cuda.current_device = lambda: 0
torch.cuda.get_device_name = lambda *a, **k: "Stub GPU"
torch.cuda.max_memory_allocated = lambda *a, **k: allocated[min(resets[0], 3)]
torch.cuda.max_memory_reserved = lambda *a, **k: reserved[min(resets[0], 3)]
torch.cuda.reset_peak_memory_stats = lambda *a, **k: resets.__setitem__(0, resets[0] + 1)
from trainlint.verify.harness import main
sys.exit(main(sys.argv[1:]))
"""


def test_reserved_at_peak_is_the_reserved_of_the_window_holding_the_allocated_peak(tmp_path):
    """torch.cuda's counters are stubbed here (no GPU; the second stand-in, for the harness's bookkeeping of
    what the decision reads): step 1 holds the allocated peak (9000 B) while step 2 reserves the most."""
    launcher = tmp_path / "stub.py"
    launcher.write_text(CUDA_STUB)
    script = tmp_path / "one_step.py"
    script.write_text("import torch\nw = torch.nn.Parameter(torch.ones(4))\nopt = torch.optim.SGD([w], lr=0.1)\n"
                      "for _ in range(5):\n    (w * 2).sum().backward()\n    opt.step()\n")
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(launcher), "--script", str(script), "--steps", "2", "--out", str(out),
                           "--workdir", str(tmp_path / "w"), "--device", "cuda"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert (r["step_peaks"], r["step_reserved"]) == ([9000, 3000], [12000, 15000])
    assert (r["peak_allocated"], r["reserved_at_peak"], r["peak_reserved"]) == (9000, 12000, 15000)
    assert r["device_info"]["kind"] == "cuda" and r["device_info"]["name"] == "Stub GPU"
    assert r["device_info"]["total_memory"] is None  # the stub has no device properties: recorded as unknown
