"""The model catalog: its generator, lookups, derivative names, user-declared models, heads, GPU sizes."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from trainlint.config import ConfigError, from_table
from trainlint.knowledge.gpus import GIB, parse_gpu
from trainlint.memory import fmt_bytes
from trainlint.knowledge.heads import computes_vocab_logits, head_for
from trainlint.knowledge.models import catalog_ids, lookup_model

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_catalog", ROOT / "scripts" / "build_catalog.py")
build_catalog = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_catalog)

SMALL_LITGPT = '''
from copy import deepcopy
from dataclasses import dataclass

@dataclass
class Config:
    name: str = ""
    n_layer: int = 16
    n_embd: int = 4096
    vocab_size: int = 50254
    padding_multiple: int = 512
    padded_vocab_size: int | None = None
    norm_class_name: str = "LayerNorm"
    n_head: int = 32
    head_size: int | None = None
    n_query_groups: int | None = None
    attn_bias: bool = False
    intermediate_size: int | None = None
    moe_intermediate_size: int | None = None
    bias: bool = True
    mlp_class_name: str = "GptNeoxMLP"
    n_expert: int = 0
    n_expert_per_token: int = 0
    block_size: int = 4096
    lm_head_bias: bool = False

configs = []
llama = [
    # https://huggingface.co/meta-llama/Meta-Llama-3.1-8B/blob/main/config.json
    dict(name="Meta-Llama-3.1-8B{}", hf_config=dict(org="meta-llama", name="Meta-Llama-3.1-8B{}"), block_size=131072,
         vocab_size=128000, padded_vocab_size=128256, n_layer=32, n_head=32, n_query_groups=8, bias=False,
         norm_class_name="RMSNorm", mlp_class_name="LLaMAMLP", intermediate_size=14336),
]
for c in llama:
    for kind in ("", "-Instruct"):
        copy = deepcopy(c)
        copy["name"] = c["name"].format(kind)
        copy["hf_config"]["name"] = c["hf_config"]["name"].format(kind)
        configs.append(copy)
name_to_config = {config["name"]: config for config in configs}
'''


def _wheel(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        for member, text in files.items():
            z.writestr(member, text)
    return path


def test_generator_reads_a_litgpt_config_py_templates_and_defaults(tmp_path):
    wheel = _wheel(tmp_path, "litgpt-9.9.9-py3-none-any.whl", {"litgpt/config.py": SMALL_LITGPT})
    extracted = build_catalog.extract(wheel, None)["litgpt"]
    assert extracted["version"] == "9.9.9"
    names = [c["hf_config"]["name"] for c in extracted["configs"]]
    assert names == ["Meta-Llama-3.1-8B", "Meta-Llama-3.1-8B-Instruct"]
    g = build_catalog.litgpt_geometry(extracted["defaults"], extracted["configs"][1])
    assert (g["padded_vocab_size"], g["n_embd"], g["head_size"], g["n_query_groups"]) == (128256, 4096, 128, 8)


@pytest.mark.parametrize("ident, tied, published", [
    # published totals from ../shared/research/model-geometry-sources.md
    ("meta-llama/Meta-Llama-3.1-8B", False, 8_030_261_248),
    ("Qwen/Qwen2.5-7B", False, 7_615_616_512),
    ("mistralai/Mistral-7B-v0.1", False, 7_241_732_096),
])
def test_parameter_formula_matches_published_totals(ident, tied, published):
    extracted = json.loads((ROOT / "scripts/catalog/extracted.json").read_text())["litgpt"]
    raw = next(c for c in extracted["configs"] if f"{c['hf_config']['org']}/{c['hf_config']['name']}" == ident)
    assert build_catalog.litgpt_params(build_catalog.litgpt_geometry(extracted["defaults"], raw), tied) == published


def test_gpt2_formula_matches_the_published_total():
    g = {"vocab_size": 50257, "hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072}
    assert build_catalog.gpt2_params(g, 1024) == 124_439_808


def test_generator_reads_llm_analysis_files(tmp_path):
    files = {"llm_analysis/model_configs/facebook_opt-125m.json": json.dumps(
        {"name": "facebook_opt-125m", "num_layers": 12, "n_head": 12, "hidden_dim": 768, "vocab_size": 50272,
         "max_seq_len": 2048, "ffn_embed_dim": 3072, "model_type": "opt"})}
    wheel = _wheel(tmp_path, "llm_analysis-0.0.1-py3-none-any.whl", files)
    extracted = build_catalog.extract(None, wheel)
    curated = {"entries": [], "litgpt_model_types": [], "tie": [["^facebook/opt", True, "OPTConfig default"]],
               "llm_analysis_ids": {"facebook_opt-125m": "facebook/opt-125m"},
               "llm_analysis_model_types": [["^opt$", "opt", "OPTForCausalLM"]]}
    out = build_catalog.build(extracted, curated)["models"]
    assert [(e["id"], e["hidden_size"], e["num_hidden_layers"], e["tie_word_embeddings"]) for e in out] == [
        ("facebook/opt-125m", 768, 12, True)]
    assert out[0]["source"].startswith("llm-analysis==0.0.1 llm_analysis/model_configs/facebook_opt-125m.json")


def test_a_disagreement_between_sources_is_reported_and_the_curated_value_kept():
    curated = {"entries": [{"id": "a/m", "aliases": [], "vocab_size": 10, "hidden_size": 4, "source": "x", "note": ""}],
               "litgpt_model_types": [], "tie": [], "llm_analysis_ids": {"m": "a/m"},
               "llm_analysis_model_types": [["^opt$", "opt", None]]}
    extracted = {"llm_analysis": {"version": "1", "files": {"m": {
        "num_layers": 1, "n_head": 1, "hidden_dim": 8, "vocab_size": 10, "ffn_embed_dim": 4, "model_type": "opt"}}}}
    log: list[str] = []
    out = build_catalog.build(extracted, curated, log)["models"]
    assert out[0]["hidden_size"] == 4 and log == ["a/m: llm-analysis==1 llm_analysis/model_configs/m.json differs "
                                                  "from the entry kept on hidden_size 8 vs 4"]


def test_committed_catalog_is_what_the_generator_builds_from_the_committed_sources():
    # The wheels themselves are not committed; scripts/catalog/extracted.json is what was read from them.
    result = subprocess.run([sys.executable, str(ROOT / "scripts/build_catalog.py"), "--check"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr


def test_catalog_resolves_at_least_400_ids_each_with_a_source():
    ids = catalog_ids()
    data = json.loads((ROOT / "src/trainlint/knowledge/models.json").read_text())["models"]
    every = [i for e in data for i in (e["id"], *e["aliases"])]
    assert len(ids) == len(data) and len(every) >= 400
    assert all(e["source"] for e in data)
    assert all(lookup_model(i, Path("/nonexistent")) is not None for i in every)


def test_litgpt_vocab_is_the_padded_width():
    spec = lookup_model("meta-llama/Meta-Llama-3.1-8B-Instruct", Path("/nonexistent"))
    assert spec.vocab_size == 128_256 and spec.num_parameters == 8_030_261_248


@pytest.mark.parametrize("ident, base", [
    ("NousResearch/Llama-2-7b-hf", None),  # an alias in the catalog: exact
    ("unsloth/llama-3-8b-bnb-4bit", "meta-llama/Llama-3-8B"),
    ("TheBloke/Llama-2-7B-Chat-GPTQ", "meta-llama/Llama-2-7b-chat-hf"),
    ("someone/phi-1_5-finetuned-sql", "microsoft/phi-1_5"),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "Qwen/Qwen2.5-7B-Instruct"),
])
def test_derivative_names_resolve_to_their_base(ident, base):
    spec = lookup_model(ident, Path("/nonexistent"))
    assert spec is not None and spec.id == ident
    if base is None:
        assert spec.assumed_from is None
    else:
        assert spec.assumed_from.startswith(f"assumed the geometry of {base} from the name")


@pytest.mark.parametrize("ident", ["x/llama-2-7b-and-mistral-7b-v0.1-merge", "me/my-model", "x/gpt2xl-ish"])
def test_ambiguous_or_unrelated_names_stay_unknown(ident):
    assert lookup_model(ident, Path("/nonexistent")) is None


@pytest.mark.parametrize("path, base", [
    ("/home/u/model/LLM-Research/Meta-Llama-3___1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B-Instruct"),  # ModelScope
    ("./checkpoints/Qwen2.5-7B-Instruct/", "Qwen/Qwen2.5-7B-Instruct"),
])
def test_a_local_path_that_is_not_here_is_named_by_its_last_folder(path, base):
    spec = lookup_model(path, Path("/nonexistent"))
    assert spec is not None and spec.id == path
    assert spec.assumed_from.startswith(f"assumed the geometry of {base} from the name of the path's last folder")
    assert "is not here" in spec.assumed_from


def test_a_path_whose_last_folder_names_nothing_stays_unknown(tmp_path):
    assert lookup_model("/data/run-17/checkpoint-500", tmp_path) is None
    assert lookup_model("/data/models/final", tmp_path) is None


def test_verbose_says_the_geometry_was_assumed_from_the_name(tmp_path):
    script = tmp_path / "train.py"
    script.write_text('from transformers import AutoModelForCausalLM\n'
                      'model = AutoModelForCausalLM.from_pretrained("someone/phi-1_5-finetuned-sql")\n')
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--verbose", str(script)], capture_output=True,
                         text=True, cwd=tmp_path)
    assert ("model at line 2: someone/phi-1_5-finetuned-sql: assumed the geometry of microsoft/phi-1_5 from the name "
            "(it embeds 'phi-1_5')") in out.stdout + out.stderr


def test_declared_models_map_a_private_id_to_a_catalog_id_or_a_config(tmp_path):
    (tmp_path / "ckpt.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 1000, "hidden_size": 64,
                                                    "num_hidden_layers": 2, "num_attention_heads": 4}))
    settings = from_table({"models": {"acme/private-8b": "meta-llama/Llama-3.1-8B", "./out/ft": "ckpt.json"}},
                          tmp_path, "pyproject.toml")
    spec = lookup_model("acme/private-8b", tmp_path, None, settings.models, tmp_path)
    assert spec.vocab_size == 128_256 and "declared in [tool.trainlint.models]" in spec.assumed_from
    local = lookup_model("out/ft", tmp_path, None, settings.models, tmp_path)
    assert (local.vocab_size, local.hidden_size) == (1000, 64)
    assert lookup_model("acme/private-8b", tmp_path) is None  # without the declaration: unknown


def test_a_declared_target_that_is_neither_a_catalog_id_nor_a_config_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="neither a catalog id"):
        from_table({"models": {"acme/x": "acme/not-a-model"}}, tmp_path, "pyproject.toml")


@pytest.mark.parametrize("cls, vocab", [
    ("AutoModelForCausalLM", True), ("AutoModelForSeq2SeqLM", True), ("BertForMaskedLM", True),
    ("T5ForConditionalGeneration", True), ("GPT2LMHeadModel", True),
    ("AutoModelForSequenceClassification", False), ("AutoModelForTokenClassification", False),
    ("AutoModelForQuestionAnswering", False), ("AutoModel", False), ("AutoModelForImageClassification", False),
    ("AutoModelForAudioClassification", False), ("MyOwnWrapper", True),
])
def test_head_from_the_loading_class(cls, vocab):
    assert computes_vocab_logits(cls) is vocab


def test_sequence_classification_logits_are_per_example_token_classification_per_token():
    assert head_for("AutoModelForSequenceClassification").per_token is False
    assert head_for("AutoModelForTokenClassification").per_token is True


@pytest.mark.parametrize("text, name, gib", [("T4", "T4", 15.0), ("48GB", "48 GiB", 48.0), ("24GiB", "24 GiB", 24.0),
                                             ("H100", "H100", 81_559 / 1024)])
def test_gpu_sizes_are_driver_mib_printed_in_gib(text, name, gib):
    got_name, size = parse_gpu(text)
    assert got_name == name and size == pytest.approx(gib * GIB)


@pytest.mark.parametrize("text, name", [
    ("RTX4090", "RTX-4090"), ("rtx-4090", "RTX-4090"), ("RTX 4090", "RTX-4090"), ("4090", "RTX-4090"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"), ("RTX 3090", "RTX-3090"), ("3090", "RTX-3090"), ("5090", "RTX-5090"),
    ("A100 80GB", "A100-80GB"), ("A100-80GB", "A100-80GB"), ("a100_80gb", "A100-80GB"), ("a100 40gb", "A100-40GB"),
    ("nvidia_a100-sxm4-80gb", "A100-80GB"), ("a100", "A100"), ("H100-SXM", "H100"), ("H100 PCIe", "H100"),
    ("h100", "H100"), ("h100 80gb", "H100-80GB"), ("H100 NVL", "H100-NVL"), ("L4", "L4"), ("t4", "T4"),
    ("Tesla T4", "T4"), ("A10G", "A10G"), ("a10", "A10"), ("L40S", "L40S"), ("h200", "H200"), ("B200", "B200"),
    ("MI300X", "MI300X"), ("AMD Instinct MI300X", "MI300X"), ("RTX A6000", "A6000"),
])
def test_gpu_names_as_people_write_them(text, name):
    assert parse_gpu(text)[0] == name


@pytest.mark.parametrize("name, mib", [("RTX-4090", 24_564), ("RTX-3090", 24_576), ("A10G", 23_028),
                                       ("H200", 143_771), ("B200", 183_359), ("L4", 23_034)])
def test_gpu_capacity_is_the_driver_total_cited(name, mib):
    from trainlint.knowledge.gpus import GPUS

    assert parse_gpu(name)[1] == mib * 1024**2 and GPUS[name][1]  # every entry says where its figure comes from


@pytest.mark.parametrize("text", ["GH200", "GTX-9000", "a100 sxm4", "4080"])
def test_unknown_gpu_is_an_error_listing_the_known_names(text):
    with pytest.raises(ValueError, match=r"unknown GPU .*one of T4, L4, .*RTX-4090.*MI300X"):
        parse_gpu(text)


def test_one_formatter_prints_gib_and_small_figures_in_mib():
    # GiB from 1 GiB up, one decimal; MiB below (one decimal under 10); KiB below that
    assert fmt_bytes(15_360 * 1024**2) == "15.0 GiB" and fmt_bytes(15.5 * GIB) == "15.5 GiB"
    assert fmt_bytes(1_649.25 * GIB) == "1,649.2 GiB" and fmt_bytes(GIB) == "1.0 GiB"
    assert fmt_bytes(GIB - 1024**2) == "1,023 MiB" and fmt_bytes(128_256 * 12) == "1.5 MiB"
    assert fmt_bytes(4 * 1024) == "4.0 KiB" and fmt_bytes(512) == "512 B"


CLASSIFIER = '''
from transformers import {cls}, TrainingArguments, Trainer

model = {cls}.from_pretrained("microsoft/deberta-v3-base"{extra})
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True)
enc = tokenizer(texts, max_length=4096, truncation=True)
trainer = Trainer(model=model, args=args, train_dataset=ds)
'''


def test_tl301_does_not_fire_on_a_sequence_classifier_over_a_large_vocabulary(lint):
    # deberta-v3-base has a 128,100-token vocabulary, but its classification head emits num_labels logits
    assert lint(CLASSIFIER.format(cls="AutoModelForSequenceClassification", extra=", num_labels=3"),
                settings={"large-vocab": 100_000}) == []


def test_tl301_still_fires_on_the_masked_lm_head_of_the_same_checkpoint(lint):
    found = lint(CLASSIFIER.format(cls="AutoModelForMaskedLM", extra=""), settings={"large-vocab": 100_000})
    assert [(c, line) for c, line, _ in found] == [("TL301", 7)] and "128,100-token vocabulary" in found[0][2]


def test_estimate_logits_row_uses_num_labels_for_a_classifier(tmp_path):
    from trainlint.memory import loss_peak_bytes

    script = tmp_path / "train.py"
    script.write_text(CLASSIFIER.format(cls="AutoModelForSequenceClassification", extra=", num_labels=3"))
    out = subprocess.run([sys.executable, "-m", "trainlint", "estimate", str(script), "--format", "json"],
                         capture_output=True, text=True, cwd=tmp_path)
    data = json.loads(out.stdout)
    assert data["consumers"]["logits"] == loss_peak_bytes(8, 1, 3, 2, trainable_head=True, softcap=False)


def test_image_classification_on_an_unknown_checkpoint_still_knows_its_input(tmp_path):
    script = tmp_path / "train.py"
    script.write_text('from transformers import AutoModelForImageClassification\n'
                      'model = AutoModelForImageClassification.from_pretrained("acme/private-vit")\n')
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--verbose", str(script)], capture_output=True,
                         text=True, cwd=tmp_path)
    # before: "model unknown"; now the class's main input (pixel_values, what TL201 asks) is kept
    assert "model at line 2: AutoModelForImageClassification (?)" in out.stdout + out.stderr
    assert "from class name only" in out.stdout + out.stderr
