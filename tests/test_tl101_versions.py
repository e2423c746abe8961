"""TL101 on transformers 4.36-4.57: the default attention per architecture and release line, read from the wheels'
`_supports_sdpa` flags (scripts/gen_attention_defaults.py -> knowledge/attention_defaults.json)."""

import pytest
from conftest import codes

from trainlint.knowledge import libraries
from trainlint.knowledge.versions import LibraryVersion

SCRIPT = '''
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("{model}")
enc = tokenizer(texts, max_length=4096, truncation=True)
batch_size = 2
'''


def lint_at(lint, model: str, version: str):
    return lint(SCRIPT.format(model=model), files={"requirements.txt": f"transformers=={version}\n"},
                settings={"select": ["TL101"]})


@pytest.mark.parametrize("model,version,flagged", [
    ("gpt2", "4.41.2", True),              # gpt2 declares _supports_sdpa from 4.42
    ("gpt2", "4.42.4", False),
    ("facebook/opt-1.3b", "4.45.2", True),  # OPT from 4.46
    ("facebook/opt-1.3b", "4.46.3", False),
    ("meta-llama/Llama-3.2-1B", "4.36.2", False),  # Llama has had it since SDPA became the default
])
def test_default_attention_per_release_line(lint, model, version, flagged):
    found = lint_at(lint, model, version)
    assert codes(found) == (["TL101"] if flagged else [])
    if flagged:
        assert f"does not declare _supports_sdpa in transformers {version}" in found[0][2]


def test_before_4_36_everything_is_eager(lint):
    found = lint_at(lint, "meta-llama/Llama-3.2-1B", "4.35.2")
    assert codes(found) == ["TL101"] and "(< 4.36)" in found[0][2]


def test_table_reads_each_line_and_unknown_is_none():
    v = lambda s: LibraryVersion("transformers", s, "")
    assert libraries.sdpa_supported("gpt2", v("4.40.2")) is False
    assert libraries.sdpa_supported("gpt2", v("4.42.0")) is True
    assert libraries.sdpa_supported("bloom", v("4.57.6")) is False
    assert libraries.sdpa_supported("no_such_model", v("4.57.6")) is None
    assert libraries.sdpa_supported("llava", v("4.40.2")) is None  # a property on composite models: not literal
    assert libraries.default_attention("gemma3_text", v("4.50.3")) == "sdpa"


def _generator():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "gen_attention_defaults.py"
    spec = importlib.util.spec_from_file_location("gen_attention_defaults", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generator_reads_class_flags(tmp_path):
    gen = _generator()
    src = "class APreTrainedModel(PreTrainedModel):\n    _supports_sdpa = True\n    _supports_flash_attn_2 = False\n"
    assert gen.flags_of(src, "_supports_sdpa") == "true"
    assert gen.flags_of(src, "_supports_flash_attn_2") == "false"
    assert gen.flags_of("class B:\n    pass\n", "_supports_sdpa") == "false"
    prop = "class C:\n    @property\n    def _supports_sdpa(self):\n        return self.lm._supports_sdpa\n"
    assert gen.flags_of(prop, "_supports_sdpa") == "unknown"
    # a wheel is read as a zip: one folder, one modeling file
    import zipfile
    wheel = tmp_path / "transformers-4.40.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("transformers/models/toy/modeling_toy.py", src)
        zf.writestr("transformers/models/toy/configuration_toy.py", "_supports_sdpa = True\n")
    version, folders = gen.read_wheel(wheel)
    assert version == "4.40.2" and folders == {"toy": {"sdpa": "true", "flash_attention_2": "false"}}
