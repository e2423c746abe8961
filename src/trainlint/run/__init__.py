"""The Run: one immutable, typed description of what will execute for one entry point under one launch.

Each decision lives in one module and carries where it was written and whether it is certain or assumed:
model.py (the trained model, geometry, LoRA), precision.py (load dtype, autocast), attention.py (implementation and
kernel), loss.py (loss path), eval.py (evaluation phase), components.py (reference / reward / value /
teacher models and the RL generation phase), checkpointing.py, batch.py, optimizer.py, parallel.py.
planning.py turns a Run into the estimator's Plan; rules read their decisions from it."""

from trainlint.run.decided import Decided
from trainlint.run.model import PlanError
from trainlint.run.resolve import Run, resolve

__all__ = ["Decided", "PlanError", "Run", "resolve"]
