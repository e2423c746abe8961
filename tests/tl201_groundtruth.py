"""Run a TL201 ground-truth fixture script and return what it observed.

The scripts in tests/fixtures/tl201/ train a tiny model built from a config on CPU and end with one line
``TL201_GROUND_TRUTH {json}`` holding ``adapter_grad_ok``, ``error``, ``lora_params`` and ``lora_ok``.
No tests live here; the TL201 tests import ``run_ground_truth``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MARKER = "TL201_GROUND_TRUTH "
FIXTURE_DIR = Path(__file__).parent / "fixtures" / "tl201"


def run_ground_truth(script_path: Path, python: str = sys.executable, timeout: float = 120) -> dict:
    """Run ``script_path`` in a subprocess (offline, CPU only, in a temp cwd) and parse its marker line."""
    script_path = Path(script_path).resolve()
    env = dict(os.environ)
    env.update(
        {
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": "",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    with tempfile.TemporaryDirectory(prefix="tl201_") as cwd:
        env["TMPDIR"] = cwd  # the Trainer scripts' tempfile.mkdtemp() output dirs are removed with it
        try:
            proc = subprocess.run(
                [python, str(script_path)],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            raise AssertionError(
                f"{script_path.name}: timed out after {timeout}s\n--- stderr tail ---\n{stderr[-3000:]}"
            ) from None

    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        raise AssertionError(
            f"{script_path.name}: no {MARKER.strip()} line (exit code {proc.returncode})\n"
            f"--- stdout tail ---\n{proc.stdout[-1500:]}\n--- stderr tail ---\n{proc.stderr[-3000:]}"
        )
    try:
        result = json.loads(lines[-1][len(MARKER) :])
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{script_path.name}: unparsable marker line {lines[-1]!r}: {exc}") from None
    missing = {"adapter_grad_ok", "error", "lora_params"} - result.keys()
    if missing:
        raise AssertionError(f"{script_path.name}: marker line lacks keys {sorted(missing)}: {lines[-1]!r}")
    return result
