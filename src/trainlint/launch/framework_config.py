"""Is a YAML file an axolotl or a LLaMA-Factory training config? Decided by its top-level keys alone.

axolotl (0.19.0 utils/schemas/model.py): `base_model` is required. Ludwig also writes `base_model:` but has
`input_features` / `output_features` and `model_type: llm`; a launcher config (axolotl's cloud/*.yaml) has no
`base_model`. So: `base_model` (a string) and one of the keys an axolotl training config sets.
LLaMA-Factory (0.9.5 hparams/*.py): `model_name_or_path` plus its own keys (`stage`, `finetuning_type`, `template`,
`cutoff_len`, `dataset`); a TRL / alignment-handbook recipe shares `model_name_or_path` but has none of
`stage` / `finetuning_type` / `template` / `cutoff_len`. An inference or merge config (`export_dir`,
`infer_backend`, no `do_train`) is not a training run.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainlint.knowledge.frameworks import AXOLOTL, LLAMAFACTORY
from trainlint.launch.configs import read_config
from trainlint.launch.model import ConfigReading
from trainlint.sniff import looks_like_config

_AXOLOTL_MARKERS = frozenset({"sequence_len", "micro_batch_size", "datasets", "adapter", "gradient_accumulation_steps",
                              "num_epochs", "sample_packing", "plugins", "rl", "lora_r", "batch_size"})
_LUDWIG = frozenset({"input_features", "output_features"})
_LF_MARKERS = frozenset({"stage", "finetuning_type", "template", "cutoff_len"})
_LF_NOT_TRAINING = frozenset({"export_dir", "infer_backend"})
def framework_of(reading: ConfigReading) -> str | None:
    top = {e.key: e.value for e in reading.top_level()}
    if isinstance(top.get("base_model"), str) and top.keys() & _AXOLOTL_MARKERS and not top.keys() & _LUDWIG:
        return AXOLOTL
    if isinstance(top.get("model_name_or_path"), str) and len(top.keys() & _LF_MARKERS) >= 2:
        if top.keys() & _LF_NOT_TRAINING and not top.get("do_train"):
            return None
        return LLAMAFACTORY
    return None


def is_framework_config(path: Path) -> bool:
    """A file given by name: it looks like one, and it loads as one (or does not load at all: then it is linted
    for its TL005)."""
    if not looks_like_config(path):
        return False
    reading = read_config(path)
    return framework_of(reading) is not None or not reading.entries
