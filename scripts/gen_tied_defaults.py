"""Write src/trainlint/knowledge/tied_defaults.json: whether each architecture ties its input embedding and its LM
head when a config.json does not say (`tie_word_embeddings` left out, as Gemma-2's hub configs once did): the default
of its transformers config class, read by building the class with no arguments (transformers, the test extra).

    python scripts/gen_tied_defaults.py            # writes the file for the installed transformers

A class that cannot be built without arguments, or that keeps the flag only on a sub-config, is left out: the
estimate then counts the embedding as untied and says nothing it does not know.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src" / "trainlint" / "knowledge" / "tied_defaults.json"


def main() -> int:
    warnings.filterwarnings("ignore")
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    table = {}
    for model_type, class_name in sorted(CONFIG_MAPPING_NAMES.items()):
        try:
            value = getattr(getattr(transformers, class_name)(), "tie_word_embeddings", None)
        except Exception:  # noqa: BLE001  (a class that needs arguments: left out)
            continue
        if isinstance(value, bool):
            table[model_type] = value
    OUT.write_text(json.dumps({"transformers": transformers.__version__,
                               "generated_by": "scripts/gen_tied_defaults.py",
                               "defaults": table}, indent=1, sort_keys=True) + "\n")
    print(f"{OUT}: {len(table)} architectures (transformers {transformers.__version__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
