"""TL201 per adapted module group on vision-language models (issue 28): LoRA inside the vision tower's
checkpointed blocks under reentrant checkpointing, with only the text embeddings hooked.

Ground truth: every script in tests/fixtures/tl201_vision/ builds a tiny Qwen2-VL / Qwen2.5-VL / Qwen3-VL from a
config on CPU with the installed libraries (transformers 5.25.0, peft 0.21.2), runs one forward/backward with an
image, and reports the vision and text adapters' gradients separately. TL201 must fire exactly on the scripts
whose vision adapters got none. The same Qwen2-VL / Qwen2.5-VL scripts under transformers 4.57.1 (measured,
tests/fixtures/tl201_vision/OBSERVED.md) lose their vision adapters' gradient: the pinned-version tests below.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import codes

import trainlint
from tl201_groundtruth import run_ground_truth
from trainlint.config import Settings
from trainlint.knowledge import vision_towers
from trainlint.lint import enabled_codes, lint_file

VISION_DIR = Path(__file__).parent / "fixtures" / "tl201_vision"
SCRIPTS = sorted(VISION_DIR.glob("*.py"))


@pytest.fixture
def lint(lint):
    return lambda src, files=None: lint(src, files=files, settings={"select": ["TL201"]})


def tl201(script: Path) -> list:
    s = Settings(root=script.parent)
    return [d for d in lint_file(script, s, enabled_codes(s, select=("TL201",))).diagnostics if d.code == "TL201"]


# -- ground truth on CPU ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def observed() -> dict[str, dict]:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    workers = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        return dict(pool.map(lambda p: (p.name, run_ground_truth(p, timeout=300)), SCRIPTS))


def test_the_ground_truth_separates_the_vision_adapters_from_the_text_ones(observed):
    trap = observed["qwen3_vl_vision_lora_input_grads_gc_reentrant.py"]
    assert trap["error"] is None
    assert trap["vision"] == [0, 4]  # no vision adapter in the checkpointed blocks got a gradient
    assert trap["text"] == [8, 8]  # while every text adapter did
    assert observed["qwen3_vl_all_linear_input_grads_gc_reentrant.py"]["vision"] == [0, 16]
    assert observed["qwen3_vl_vision_lora_input_grads_gc_non_reentrant.py"]["vision"] == [4, 4]
    assert observed["qwen3_vl_vision_lora_patch_embed_hook_gc_reentrant.py"]["vision"] == [4, 4]
    assert observed["qwen3_vl_text_lora_input_grads_gc_reentrant.py"]["vision"] == [0, 0]
    # transformers 5.x hooks Qwen2-VL's and Qwen2.5-VL's patch embedding (their `_input_embed_layer`)
    assert observed["qwen2_5_vl_vision_lora_input_grads_gc_reentrant.py"]["vision"] == [8, 8]
    assert observed["qwen2_vl_vision_lora_input_grads_gc_reentrant.py"]["vision"] == [12, 12]
    # ... and every other family's tower (CLIP, SigLIP, Idefics3's, Mllama's): q_proj / v_proj name the vision
    # attention too, so these LoRA configs adapt the tower; 5.25.0 gives every vision adapter its gradient
    for family, blocks in (("llava", 8), ("paligemma", 8), ("gemma3", 8), ("idefics3", 8), ("smolvlm", 8),
                           ("mllama", 12)):
        result = observed[f"{family}_vision_lora_input_grads_gc_reentrant.py"]
        assert result["error"] is None and result["vision"] == [blocks, blocks], (family, result)


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_tl201_fires_exactly_where_the_vision_adapters_get_no_gradient(script, observed):
    result = observed[script.name]
    trapped = not result["adapter_grad_ok"]
    found = tl201(script)
    assert bool(found) is trapped, f"{script.name}: observed {result}, TL201: {[d.message for d in found]}"
    if trapped:
        message = found[0].message
        assert "LoRA adapters inside the Qwen3-VL vision tower" in message
        assert "visual.blocks.*.attn.qkv" in message
        assert 'gradient_checkpointing_kwargs={"use_reentrant": False}' in message
        assert "model.visual.patch_embed.register_forward_hook" in message
        assert found[0].span.line == next(i for i, line in enumerate(script.read_text().splitlines(), 1)
                                          if "gradient_checkpointing_enable(" in line)


# -- per transformers version: the same Qwen2.5-VL / Qwen2-VL scripts ---------------------------------------

@pytest.mark.parametrize("name", ["qwen2_5_vl_vision_lora_input_grads_gc_reentrant.py",
                                  "qwen2_vl_vision_lora_input_grads_gc_reentrant.py"])
@pytest.mark.parametrize("pin, fires", [("4.49.0", True), ("4.57.1", True), ("5.0.0", False), ("5.25.0", False)])
def test_qwen2_vl_vision_adapters_are_hooked_from_transformers_5(lint, name, pin, fires):
    src = (VISION_DIR / name).read_text()
    found = lint(src, files={"requirements.txt": f"transformers=={pin}\npeft==0.17.1\ntorch\n"})
    assert bool(codes(found)) is fires
    if fires:
        assert f"transformers {pin}'s enable_input_require_grads() hooks only get_input_embeddings()" in found[0][2]


# The other families, per transformers release (OBSERVED.md: the same fixtures measured with 4.54.1 and 4.57.1):
# their vision adapters lose the gradient on 4.x where the tower is checkpointed and only the text embeddings are
# hooked; Idefics3 / SmolVLM hook their vision embeddings themselves; Mllama's tower is not checkpointed from 4.55.
FAMILY_PINS = {
    "llava": {"4.45.0": True, "4.54.1": True, "4.57.1": True, "5.0.0": False, "5.25.0": False},
    "paligemma": {"4.45.0": True, "4.54.1": True, "4.57.1": True, "5.0.0": False, "5.25.0": False},
    "gemma3": {"4.50.3": True, "4.54.1": True, "4.57.1": True, "5.0.0": False, "5.25.0": False},
    "idefics3": {"4.46.3": False, "4.54.1": False, "4.57.1": False, "5.25.0": False},
    "smolvlm": {"4.50.3": False, "4.57.1": False, "5.25.0": False},
    "mllama": {"4.45.0": True, "4.54.1": True, "4.55.0": False, "4.57.1": False, "5.25.0": False},
}


@pytest.mark.parametrize("family, pin, fires", [(f, pin, fires) for f, pins in FAMILY_PINS.items()
                                                 for pin, fires in pins.items()])
def test_each_familys_vision_adapters_per_transformers_release(lint, family, pin, fires):
    src = (VISION_DIR / f"{family}_vision_lora_input_grads_gc_reentrant.py").read_text()
    found = lint(src, files={"requirements.txt": f"transformers=={pin}\npeft==0.17.1\ntorch\n"})
    assert bool(codes(found)) is fires, [m for _, _, m in found]
    if fires:
        assert f"transformers {pin}'s enable_input_require_grads() hooks only get_input_embeddings()" in found[0][2]
        assert "self_attn.q_proj" in found[0][2] and "self_attn.v_proj" in found[0][2]


def test_a_llava_message_names_its_tower_and_the_hook_that_fixes_it(lint):
    src = (VISION_DIR / "llava_vision_lora_input_grads_gc_reentrant.py").read_text()
    found = lint(src, files=PIN_4)
    assert codes(found) == ["TL201"]
    assert ("LoRA adapters inside the LLaVA vision tower (vision_tower.*.encoder.layers.*.self_attn.q_proj, "
            "vision_tower.*.encoder.layers.*.self_attn.v_proj) get no gradient") in found[0][2]
    assert "model.vision_tower.vision_model.embeddings.register_forward_hook(" in found[0][2]
    hooked = src.replace("model.enable_input_require_grads()\n", "model.enable_input_require_grads()\n"
                         "model.vision_tower.vision_model.embeddings.register_forward_hook("
                         "lambda m, i, o: o.requires_grad_(True))\n")
    assert codes(lint(hooked, files=PIN_4)) == []
    non_reentrant = src.replace('{"use_reentrant": True}', '{"use_reentrant": False}')
    assert codes(lint(non_reentrant, files=PIN_4)) == []
    text_only = src.replace('["q_proj", "v_proj"]', r'r".*language_model.*\.(q_proj|v_proj)"')
    assert codes(lint(text_only, files=PIN_4)) == []


@pytest.mark.parametrize("cls, model_id, fires", [
    ("AutoModelForCausalLM", "google/gemma-3-4b-it", True),  # the auto class loads Gemma3ForConditionalGeneration
    ("Gemma3ForCausalLM", "google/gemma-3-4b-it", False),  # the text model alone
    ("AutoModelForImageTextToText", "meta-llama/Llama-3.2-11B-Vision-Instruct", True),
    ("AutoModelForCausalLM", "meta-llama/Llama-3.2-11B-Vision-Instruct", False),  # MllamaForCausalLM: no tower
    ("AutoModelForImageTextToText", "llava-hf/llava-1.5-7b-hf", True),
    ("AutoModelForImageTextToText", "mistral-community/pixtral-12b", False),  # model_type llava, tower not read
    ("AutoModelForImageTextToText", "HuggingFaceTB/SmolVLM-256M-Instruct", False),  # hooks its own tower
])
def test_the_family_and_whether_the_class_loads_a_tower(lint, cls, model_id, fires):
    src = trainer_script(targets='["q_proj", "v_proj"]').replace("Qwen2_5_VLForConditionalGeneration", cls).replace(
        "Qwen/Qwen2.5-VL-7B-Instruct", model_id)
    assert bool(codes(lint(src, files={"requirements.txt": "transformers==4.54.1\npeft==0.17.1\n"}))) is fires


def test_qwen3_vl_is_not_hooked_by_any_checked_release(lint):
    src = (VISION_DIR / "qwen3_vl_vision_lora_input_grads_gc_reentrant.py").read_text()
    for pin in ("4.57.1", "5.0.0", "5.25.0"):
        assert codes(lint(src, files={"requirements.txt": f"transformers=={pin}\n"})) == ["TL201"], pin


def test_a_5_0_pre_release_is_not_judged(lint):
    src = (VISION_DIR / "qwen2_5_vl_vision_lora_input_grads_gc_reentrant.py").read_text()
    assert codes(lint(src, files={"requirements.txt": "transformers==5.0.0rc1\n"})) == []


# -- the shapes of real VLM fine-tuning repositories (static) ------------------------------------------------

# Qwen2-VL-Finetune style: from_pretrained by hub id, LoRA config with vision names, the Trainer enabling
# checkpointing from TrainingArguments, enable_input_require_grads() as the "fix".
TRAINER_SCRIPT = '''
import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen2_5_VLForConditionalGeneration, Trainer, TrainingArguments

model = Qwen2_5_VLForConditionalGeneration.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct", torch_dtype=torch.bfloat16)
lora_config = LoraConfig(
    r=64,
    lora_alpha=16,
    target_modules={targets},{extra}
    task_type="CAUSAL_LM",
)
model = get_peft_model(model, lora_config)
model.enable_input_require_grads()
args = TrainingArguments(
    output_dir="out",
    per_device_train_batch_size=1,
    gradient_checkpointing=True,{kwargs}
)
Trainer(model=model, args=args, train_dataset=train_ds).train()
'''
PIN_4 = {"requirements.txt": "transformers==4.57.1\npeft==0.17.1\n"}
VISION_AND_TEXT = '["q_proj", "k_proj", "v_proj", "o_proj", "qkv", "attn.proj"]'


def trainer_script(targets=VISION_AND_TEXT, extra="", kwargs=""):
    return TRAINER_SCRIPT.format(targets=targets, extra=extra, kwargs=kwargs)


def test_trainer_checkpointing_with_vision_lora_on_4x_fires_at_the_flag(lint):
    found = lint(trainer_script(), files=PIN_4)
    assert [(c, line) for c, line, _ in found] == [("TL201", 18)]
    message = found[0][2]
    assert "Qwen2.5-VL vision tower (visual.blocks.*.attn.qkv, visual.blocks.*.attn.proj)" in message
    assert "transformers 4.57.1's default (use_reentrant=True)" in message


def test_the_text_mlp_names_also_adapt_qwen2_5_vls_vision_mlp(lint):
    # Qwen2.5-VL's vision blocks use gate_proj / up_proj / down_proj like the text decoder's
    found = lint(trainer_script(targets='["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"]'), files=PIN_4)
    assert codes(found) == ["TL201"]
    assert "visual.blocks.*.mlp.gate_proj, visual.blocks.*.mlp.up_proj, visual.blocks.*.mlp.down_proj" in found[0][2]


def test_all_linear_adapts_the_tower(lint):
    assert codes(lint(trainer_script(targets='"all-linear"'), files=PIN_4)) == ["TL201"]


@pytest.mark.parametrize("targets, extra, kwargs", [
    ('["q_proj", "k_proj", "v_proj", "o_proj"]', "", ""),  # tower not targeted
    (VISION_AND_TEXT, "", '\n    gradient_checkpointing_kwargs={"use_reentrant": False},'),  # non-reentrant
    ('"all-linear"', '\n    exclude_modules=r".*visual.*",', ""),  # tower excluded
    (r'r"^(?!.*visual).*(q_proj|v_proj)"', "", ""),  # a regex that keeps out the tower
    ("TARGETS", "", ""),  # not readable: not guessed
])
def test_near_misses_stay_silent(lint, targets, extra, kwargs):
    assert codes(lint(trainer_script(targets, extra, kwargs), files=PIN_4)) == []


def test_a_script_hook_on_the_vision_input_is_the_fix(lint):
    src = trainer_script().replace(
        "model.enable_input_require_grads()\n",
        "model.enable_input_require_grads()\n"
        "model.base_model.model.visual.patch_embed.register_forward_hook(lambda m, i, o: o.requires_grad_(True))\n")
    assert codes(lint(src, files=PIN_4)) == []


def test_a_text_model_is_not_judged_as_a_vlm(lint):
    src = trainer_script().replace("Qwen2_5_VLForConditionalGeneration", "AutoModelForCausalLM").replace(
        "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct")
    assert codes(lint(src, files=PIN_4)) == []


def test_the_family_comes_from_the_hub_id_under_an_auto_class(lint):
    src = trainer_script().replace("Qwen2_5_VLForConditionalGeneration", "AutoModelForImageTextToText")
    found = lint(src, files=PIN_4)
    assert codes(found) == ["TL201"] and "Qwen2.5-VL vision tower" in found[0][2]


def test_the_fix_makes_checkpointing_non_reentrant(tmp_path):
    (tmp_path / "requirements.txt").write_text(PIN_4["requirements.txt"])
    (tmp_path / "train.py").write_text(trainer_script())
    env = {**os.environ, "PYTHONPATH": str(Path(trainlint.__file__).parents[1])}
    proc = subprocess.run([sys.executable, "-m", "trainlint", "check", "--select", "TL201", "--fix", "train.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "train.py").read_text() == trainer_script(
        kwargs='\n    gradient_checkpointing_kwargs={"use_reentrant": False},')


# -- the knowledge -------------------------------------------------------------------------------------------

def test_peft_target_matching_follows_peft():
    fam = vision_towers.family_of("Qwen2VLForConditionalGeneration", None)
    assert vision_towers.adapted_blocks(fam, ["qkv", "fc1"]) == ["attn.qkv", "mlp.fc1"]
    assert vision_towers.adapted_blocks(fam, ["proj"]) == ["attn.proj"]  # a suffix after a dot, not q_proj
    assert vision_towers.adapted_blocks(fam, ["q_proj", "v_proj"]) == []
    assert vision_towers.adapted_blocks(fam, r".*visual\.blocks.*\.qkv") == ["attn.qkv"]
    assert vision_towers.adapted_blocks(fam, ["qkv"], ["visual.blocks.0.attn.qkv"]) == ["attn.qkv"]  # block 1 on
    assert vision_towers.adapted_blocks(fam, None) is None
    assert vision_towers.family_of(None, "Qwen/Qwen3-VL-30B-A3B-Instruct").name == "Qwen3-VL"
    assert vision_towers.family_of(None, "Qwen/Qwen2.5-7B-Instruct") is None
    llava = vision_towers.family_of(None, None, "llava")
    # CLIP's attention Linears share the text decoder's q_proj / v_proj names; a regex sees each release's path
    assert vision_towers.adapted_blocks(llava, ["q_proj", "v_proj"]) == ["self_attn.q_proj", "self_attn.v_proj"]
    assert vision_towers.adapted_blocks(llava, ["o_proj", "gate_proj"]) == []  # the text's names only
    for path in ("vision_tower.vision_model.encoder", "model.vision_tower.vision_model.encoder",
                 "model.vision_tower.encoder"):
        assert vision_towers.adapted_blocks(llava, rf"{re.escape(path)}\.layers\.\d+\.mlp\.fc1") == ["mlp.fc1"]
    mllama = vision_towers.family_of("MllamaForConditionalGeneration", None)
    assert vision_towers.adapted_blocks(mllama, ["o_proj"]) == ["self_attn.o_proj"]
    assert vision_towers.family_of("MllamaForCausalLM", "meta-llama/Llama-3.2-11B-Vision") is None


@pytest.mark.parametrize("kwargs, fires", [
    ("", False),  # transformers 5.x's Trainer checkpoints non-reentrant by default
    ('\n    gradient_checkpointing_kwargs={"use_reentrant": True},', True),
])
def test_qwen3_vl_under_the_5x_trainer(lint, kwargs, fires):
    src = trainer_script(targets='["q_proj", "v_proj", "qkv"]', kwargs=kwargs).replace(
        "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration").replace(
        "Qwen/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen3-VL-8B-Instruct")
    found = lint(src, files={"requirements.txt": "transformers==5.25.0\npeft==0.17.1\n"})
    assert codes(found) == (["TL201"] if fires else [])
    if fires:
        assert "but Qwen3-VL's vision model exposes none" in found[0][2]


def test_a_llamafactory_qwen3_vl_config_with_the_tower_unfrozen_is_not_flagged(tmp_path):
    # LLaMA-Factory's own checkpoint function marks every checkpointed block's inputs, vision blocks included
    # (rules/TL201.md, Framework configs); found on realrepos-dev (examples/train_lora/qwen3vl_lora_sft.yaml)
    (tmp_path / "requirements.txt").write_text("transformers==4.57.1\npeft==0.17.1\n")
    config = tmp_path / "qwen3vl_lora_sft.yaml"
    config.write_text("model_name_or_path: Qwen/Qwen3-VL-4B-Instruct\nimage_max_pixels: 262144\nstage: sft\n"
                      "do_train: true\nfinetuning_type: lora\nlora_rank: 8\nlora_target: all\n"
                      "freeze_vision_tower: false\ndataset: mllm_demo\ntemplate: qwen3_vl_nothink\ncutoff_len: 2048\n"
                      "output_dir: saves/out\nper_device_train_batch_size: 1\nbf16: true\n")
    s = Settings(root=tmp_path)
    found = lint_file(config, s, enabled_codes(s, select=("TL201",))).diagnostics
    assert [d.code for d in found if d.code == "TL201"] == []


# -- axolotl configs (issue 28: "a Qwen3-VL-MoE LoRA config is missed") -------------------------------------------

AXOLOTL = """base_model: {model}
processor_type: AutoProcessor
skip_prepare_dataset: true
remove_unused_columns: false
datasets:
  - path: some/vision-dataset
    type: chat_template
output_dir: ./outputs/out
adapter: lora
sequence_len: 4096
lora_r: 16
lora_alpha: 32
{targets}
micro_batch_size: 1
bf16: true
gradient_checkpointing: true
{extra}"""


def _axolotl(tmp_path, model="Qwen/Qwen3-VL-30B-A3B-Instruct", targets="lora_target_linear: true", extra="",
             pin=None):
    if pin:
        (tmp_path / "requirements.txt").write_text(f"transformers=={pin}\n")
    config = tmp_path / "vl.yaml"
    config.write_text(AXOLOTL.format(model=model, targets=targets, extra=extra))
    s = Settings(root=tmp_path)
    return [d for d in lint_file(config, s, enabled_codes(s, select=("TL201",))).diagnostics if d.code == "TL201"]


def test_an_axolotl_qwen3_vl_moe_config_with_the_tower_targeted_is_flagged_at_its_checkpointing_key(tmp_path):
    found = _axolotl(tmp_path)
    assert len(found) == 1 and found[0].span.line == 16  # gradient_checkpointing: true (axolotl's reentrant default)
    message = found[0].message
    assert "LoRA adapters inside the Qwen3-VL vision tower (visual.blocks.*.attn.qkv" in message
    assert "set gradient_checkpointing_kwargs: {use_reentrant: false}" in message
    assert "set freeze_mm_modules: true" in message and "register_forward_hook" not in message
    assert found[0].fix is None  # no YAML edit is offered for this finding


@pytest.mark.parametrize("targets, extra", [
    ("lora_target_linear: true", "freeze_mm_modules: true\n"),  # the tower's adapters frozen
    ("lora_target_linear: true", "gradient_checkpointing_kwargs:\n  use_reentrant: false\n"),
    (r"lora_target_modules: 'model.language_model.layers.[\d]+.(mlp|self_attn).(up|down|gate|q|k|v|o)_proj'", ""),
])
def test_axolotl_near_misses_stay_silent(tmp_path, targets, extra):
    assert _axolotl(tmp_path, targets=targets, extra=extra) == []


def test_an_axolotl_llava_config_follows_the_transformers_release(tmp_path):
    targets = "lora_target_modules: [q_proj, v_proj]"
    for pin, found in (("4.57.1", 1), ("5.25.0", 0)):
        (tmp_path / pin).mkdir()
        assert len(_axolotl(tmp_path / pin, "llava-hf/llava-1.5-7b-hf", targets, pin=pin)) == found, pin
