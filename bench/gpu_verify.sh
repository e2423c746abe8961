#!/usr/bin/env bash
# The one script to run on a lent CUDA machine (issue 17, item 4): `trainlint verify` on TL101 (eager vs SDPA at
# 4k and 8k), TL301, TL201 and TL401 with a ~1B Llama and ViT-base built from configs; writes bench/RESULTS.md
# and bench/RESULTS.json; then bench/gpu_cases.py on the shared GPU cases (bench/GPU_CASES.md/.json). The device machine reaches no network: carry a virtualenv with the verify extra
# (and liger-kernel for TL301's fixed run) or use one that is there. `--tiny` is the CPU dry run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
"$PY" -c "import torch, transformers, peft, trl, datasets" || { echo "needs the verify extra (torch, transformers, peft, trl, datasets)" >&2; exit 2; }
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
# Then the shared GPU configurations (../shared/gpu-truth/cases.json, issue 26 item 8): measured vs `trainlint
# estimate` side by side in GiB with the ±5% verdict, bench/GPU_CASES.md and .json (`--tiny`: the CPU dry run).
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
status=0
timeout "${GPU_VERIFY_TIMEOUT:-540}" "$PY" bench/gpu_verify.py "$@" || status=$?
CASES_ARGS=()
for a in "$@"; do [ "$a" = "--tiny" ] && CASES_ARGS+=(--tiny); done
timeout "${GPU_CASES_TIMEOUT:-1800}" "$PY" bench/gpu_cases.py ${CASES_ARGS[@]+"${CASES_ARGS[@]}"} || status=$?
exit "$status"
