"""axolotl's vision-language keys (issue 28 item 4): `processor_type` (the model loaded with
AutoModelForImageTextToText and a processor), `image_size` (every image resized before the processor),
`freeze_mm_modules` (the tower's parameters, its adapters included, frozen after the model is built), and the LoRA
targets over the tower; and the estimate those configs get."""

from __future__ import annotations

from pathlib import Path

from trainlint.config import Settings
from trainlint.knowledge import frameworks as K
from trainlint.knowledge import vision_towers
from trainlint.lint import lint_file
from trainlint.memory import vision
from trainlint.planning import Overrides, plan_for

# the shape of axolotl's examples/qwen2_5-vl/lora-7b.yaml, written here
CONFIG = """base_model: {model}
processor_type: AutoProcessor
skip_prepare_dataset: true
remove_unused_columns: false
chat_template: qwen2_vl
datasets:
  - path: some/vision-dataset
    type: chat_template
output_dir: ./outputs/out
adapter: lora
sequence_len: 8192
lora_r: 32
lora_alpha: 16
{targets}
micro_batch_size: 1
bf16: true
gradient_checkpointing: true
{extra}"""
TEXT_REGEX = r"lora_target_modules: 'model.language_model.layers.[\d]+.(mlp|self_attn).(up|down|gate|q|k|v|o)_proj'"


def _context(tmp_path: Path, model="Qwen/Qwen2.5-VL-7B-Instruct", targets=TEXT_REGEX, extra=""):
    config = tmp_path / "vl.yaml"
    config.write_text(CONFIG.format(model=model, targets=targets, extra=extra))
    return lint_file(config, Settings(root=tmp_path), set()).context


def _plan(tmp_path: Path, **kw):
    return plan_for(_context(tmp_path, **kw), Overrides())[0]


def test_processor_type_loads_the_vision_model_and_its_processor(tmp_path):
    ctx = _context(tmp_path)
    assert [m.class_name for m in ctx.facts.models] == ["AutoModelForImageTextToText"]
    processor = [c for c in ctx.facts.calls if c.short == "from_pretrained" and c.receiver == "AutoProcessor"]
    assert len(processor) == 1 and processor[0].span.line == 2
    # without image_size the checkpoint's processor decides: up to 16,384 tokens for one image
    plan = _plan(tmp_path)
    assert plan.vision.patches == 4 * 16384 and plan.vision.trained == "frozen"
    # axolotl's own enable_input_require_grads is not LLaMA-Factory's checkpoint function: the hooked tower stays
    # checkpointed (main kept every block's tensors here: 92 GiB on axolotl's examples/qwen2_5-vl/lora-7b.yaml)
    assert plan.vision.hooked and plan.vision.checkpointed
    text = tmp_path / "text.yaml"
    text.write_text(CONFIG.format(model="Qwen/Qwen2.5-7B-Instruct", targets=TEXT_REGEX, extra="").replace(
        "processor_type: AutoProcessor\n", ""))
    ctx = lint_file(text, Settings(root=tmp_path), set()).context
    assert [m.class_name for m in ctx.facts.models] == ["AutoModelForCausalLM"]
    assert not any(c.receiver == "AutoProcessor" for c in ctx.facts.calls)


def test_image_size_resizes_every_image_before_the_processor(tmp_path):
    # an int is a padded square of that side: 512 x 512 px, at most 262,144 / 28^2 = 334 tokens of 4 patches
    assert _plan(tmp_path, extra="image_size: 512\n").vision.patches == 4 * (512 * 512 // 784)
    assert _plan(tmp_path, extra="image_size: [448, 896]\n").vision.patches == 4 * (448 * 896 // 784)
    # not an image size: the processor's own
    assert _plan(tmp_path, extra="image_size: true\n").vision.patches == 4 * 16384


def test_lora_target_linear_adapts_the_tower_and_freeze_mm_modules_freezes_it(tmp_path):
    adapted = _plan(tmp_path, targets="lora_target_linear: true", extra="image_size: 512\n").vision
    assert adapted.trained == "lora" and adapted.adapted == vision_towers.FAMILIES[1].blocks
    frozen = _plan(tmp_path, targets="lora_target_linear: true", extra="image_size: 512\nfreeze_mm_modules: true\n")
    assert frozen.vision.trained == "frozen" and not frozen.vision.merger_adapted
    assert vision.activation_bytes(replace_hooked(frozen.vision), 1, 2, 32) == 0


def replace_hooked(v):
    from dataclasses import replace

    return replace(v, hooked=False)


def test_freeze_mm_modules_excludes_every_tower_path_axolotl_names():
    for fam in vision_towers.FAMILIES:
        assert vision_towers.adapted_blocks(fam, "all-linear", K.AXOLOTL_MM_EXCLUDE) == [], fam.name
    assert not vision_towers.adapted_blocks(vision_towers.FAMILIES[0], ["q_proj"], K.AXOLOTL_MM_EXCLUDE)
    assert vision_towers.merger_excluded(K.AXOLOTL_MM_EXCLUDE)


def test_an_axolotl_llava_config_counts_the_clip_tower(tmp_path):
    plan = _plan(tmp_path, model="llava-hf/llava-1.5-7b-hf", targets="lora_target_modules: [q_proj, v_proj]")
    assert plan.vision.tower.kind == "clip" and plan.vision.patches == 577
    assert plan.vision.adapted == ("self_attn.q_proj", "self_attn.v_proj")


def test_a_scripts_own_enable_input_require_grads_is_not_llamafactorys_checkpointing(tmp_path):
    # the LLaMA-Factory branch (a hooked frozen tower keeps every block's tensors) was taken for any call named
    # enable_input_require_grads; a script's own call leaves the tower checkpointed
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom peft import LoraConfig, get_peft_model\n"
        "from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration, Trainer, TrainingArguments\n\n"
        "model = Qwen2_5_VLForConditionalGeneration.from_pretrained('Qwen/Qwen2.5-VL-7B-Instruct', "
        "dtype=torch.bfloat16)\nprocessor = AutoProcessor.from_pretrained('Qwen/Qwen2.5-VL-7B-Instruct')\n"
        "model = get_peft_model(model, LoraConfig(r=16, target_modules=['q_proj', 'v_proj']))\n"
        "model.enable_input_require_grads()\n"
        "args = TrainingArguments(output_dir='o', per_device_train_batch_size=1, gradient_checkpointing=True)\n"
        "Trainer(model=model, args=args, train_dataset=ds).train()\n")
    (tmp_path / "requirements.txt").write_text("transformers==5.25.0\n")
    ctx = lint_file(script, Settings(root=tmp_path), set()).context
    plan = plan_for(ctx, Overrides())[0]
    assert plan.vision.hooked and plan.vision.checkpointed
