#!/usr/bin/env bash
# On a CUDA machine: verify three flagged scripts with a ~1B Llama and ViT-base built from configs,
# writing bench/RESULTS.md. Installs the verify extra first if needed.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import torch, transformers, peft" 2>/dev/null || pip install -q -e ".[verify]"
python bench/gpu_verify.py "$@"
