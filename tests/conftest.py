"""Shared helpers: write a script into a temporary project and lint it with the real engine."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest
from ci_skips import pytest_runtest_makereport, pytest_terminal_summary  # noqa: F401 (hooks: CI=true fails avoidable skips)

from trainlint.config import Settings, from_table
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import enabled_codes, lint_file

ROOT = Path(__file__).resolve().parents[1]


def _test_pins() -> dict[str, str]:
    """The exact pins of pyproject.toml's `test` extra: the releases the ground-truth tests run against."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pins = {}
    for requirement in extra["test"]:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([0-9][\w.]*)", requirement.split(";")[0].strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


PINNED = _test_pins()


def installed(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name).split("+")[0]
    except metadata.PackageNotFoundError:
        return None


def pinned_installed(*names: str) -> bool:
    """Whether each named library is installed at its test pin."""
    return all(installed(n) == PINNED[n] for n in names)


@pytest.fixture
def lint(tmp_path: Path, monkeypatch):
    """lint(source, files={name: text}, settings={...}) -> list of (code, line, message)."""
    monkeypatch.chdir(tmp_path)

    def run(source: str, files: dict[str, str] | None = None, settings: dict | None = None, name: str = "train.py"):
        for rel, text in (files or {}).items():
            target = tmp_path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text))
        script = tmp_path / name
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(textwrap.dedent(source))
        project_pins.cache_clear()  # pins are cached per directory for the life of a process
        clear_caches()  # and launchers per repository
        s = from_table(settings or {}, tmp_path, "test") if settings else Settings(root=tmp_path)
        result = lint_file(script, s, enabled_codes(s))
        return [(d.code, d.span.line, d.message) for d in result.diagnostics]

    return run


# Llama-3.2-1B at batch 8 x 2,048 without checkpointing: ~35.7 GiB, over a 24 GiB card, ~12.9 GiB with checkpointing
# (the worked example of rules/TL202.md); TL202/TL701's tests and the GPU-from-launch tests judge it.
LLAMA_1B = '''
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="bfloat16")
data = tokenizer(["..."], max_length=2048, truncation=True)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True, use_liger_kernel=True)
trainer = Trainer(model=model, args=args)
'''


def codes(found) -> list[str]:
    return [c for c, _, _ in found]


def save_tiny_llama(path: Path, vocab_size: int = 256, max_position_embeddings: int = 2048) -> None:
    """A 2-layer, 64-wide Llama built from a config (seed 0) and saved where a script loads it: the tests' model."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=max_position_embeddings)).save_pretrained(path)
