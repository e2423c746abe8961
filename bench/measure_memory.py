#!/usr/bin/env python3
"""Regenerate bench/estimate_measurements.json: real architectures trained on CPU under MemTracker.

The measurement code lives in the package (trainlint.verify.measure), where `trainlint verify --simulate`
uses it too. Run from the repository root:

    .venv/bin/python bench/measure_memory.py [--only NAME_SUBSTRING] [--check-fake] [--list]
"""

from trainlint.verify.measure import main

if __name__ == "__main__":
    raise SystemExit(main())
