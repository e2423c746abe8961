"""Image tokens per sample for the Qwen-VL families (issue 28 part 1): the processor's resize arithmetic against
transformers' own `smart_resize`, the checkpoints' 16,384-token ceiling, and what the estimate's sequence takes
from them (run/vision.py, planning.py)."""

from __future__ import annotations

import ast
import math
import random
import textwrap
from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.knowledge.vision_towers import CHECKPOINT_PROCESSORS, CLASS_DEFAULT_MAX_PIXELS, ImageProcessor
from trainlint.launch.discover import clear_caches
from trainlint.lint import lint_file
from trainlint.planning import Overrides, plan_for
from trainlint.run import resolve


def transformers_smart_resize():
    """transformers' own `smart_resize`, taken from the installed release's source (its module imports
    torchvision, which this environment does not have; the function itself needs only math)."""
    transformers = pytest.importorskip("transformers")
    path = Path(transformers.__file__).parent / "models" / "qwen2_vl" / "image_processing_qwen2_vl.py"
    fn = next(n for n in ast.parse(path.read_text()).body
              if isinstance(n, ast.FunctionDef) and n.name == "smart_resize")
    namespace = {"math": math}
    exec(compile(ast.Module([fn], []), str(path), "exec"), namespace)
    return namespace["smart_resize"]


@pytest.mark.parametrize("family", sorted(CHECKPOINT_PROCESSORS))
def test_image_tokens_match_transformers_smart_resize(family):
    smart_resize = transformers_smart_resize()
    p = CHECKPOINT_PROCESSORS[family]
    rng = random.Random(0)
    checked = 0
    for _ in range(3000):
        h, w = rng.randint(10, 9000), rng.randint(10, 9000)
        try:
            hh, ww = smart_resize(h, w, factor=p.factor, min_pixels=p.min_pixels, max_pixels=p.max_pixels)
        except ValueError:  # aspect ratio over 200
            continue
        checked += 1
        assert p.tokens(h, w) == (hh // p.factor) * (ww // p.factor), (family, h, w)
    assert checked > 2900


def test_worked_examples():
    q25, q3 = CHECKPOINT_PROCESSORS["Qwen2.5-VL"], CHECKPOINT_PROCESSORS["Qwen3-VL"]
    assert q25.factor == 28 and q3.factor == 32
    assert q25.max_tokens() == q3.max_tokens() == 16384  # 12,845,056 / 28^2 and 16,777,216 / 32^2
    assert q25.tokens(448, 448) == 256  # 16 x 16 groups of 2 x 2 patches of 14 pixels
    assert q25.tokens(1080, 1920) == 39 * 69 == 2691  # 1092 x 1932 after rounding to multiples of 28
    assert q3.tokens(1080, 1920) == 34 * 60 == 2040
    assert q25.tokens(8192, 8192) == 16384  # shrunk to max_pixels
    assert q25.tokens(20, 20) == 4  # grown to min_pixels = 56 x 56
    # a processor built without a checkpoint keeps the class default: 1,280 tokens
    assert ImageProcessor(14, 2, 3136, CLASS_DEFAULT_MAX_PIXELS, "class").max_tokens() == 1280


def run_of(tmp_path: Path, source: str, transformers: str = "5.25.0"):
    (tmp_path / "requirements.txt").write_text(f"transformers=={transformers}\ntrl==1.16.0\npeft==0.17.1\n")
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    project_pins.cache_clear()
    clear_caches()
    ctx = lint_file(script, Settings(root=tmp_path), set()).context
    return resolve(ctx)


# Qwen2-VL-Finetune / TRL VLM-SFT style: the processor from the checkpoint, optionally with min/max pixels
SCRIPT = '''
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoProcessor, {cls}
from trl import SFTConfig, SFTTrainer

model = {cls}.from_pretrained("{model_id}", dtype=torch.bfloat16)
processor = AutoProcessor.from_pretrained("{model_id}"{processor})
model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, gradient_checkpointing=True, max_length={max_length})
SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=processor).train()
'''


def script(processor="", max_length="None", cls="Qwen2_5_VLForConditionalGeneration",
           model_id="Qwen/Qwen2.5-VL-7B-Instruct"):
    return SCRIPT.format(processor=processor, max_length=max_length, cls=cls, model_id=model_id)


def test_no_max_length_and_the_checkpoints_processor_is_16386_tokens_assumed(tmp_path):
    run = run_of(tmp_path, script())
    images = run.images
    assert images.value.per_sample == 16386 and not images.certain
    plan, _, notes, unknown = plan_for(run.ctx, Overrides())
    assert plan.seq == 16386 and "sequence length" not in unknown
    assert any("up to 16,384 per image (the checkpoint's preprocessor_config.json max_pixels=12845056" in n
               for n in notes)
    assert any("1 image per sample assumed" in n for n in notes)


def test_the_processors_max_pixels_decides(tmp_path):
    run = run_of(tmp_path, script(processor=", min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28"))
    assert run.images.value.per_image == 1282
    assert run.images.span.line == 8
    plan = plan_for(run.ctx, Overrides())[0]
    assert plan.seq == 1282


def test_qwen3_vl_uses_patch_16(tmp_path):
    run = run_of(tmp_path, script(cls="Qwen3VLForConditionalGeneration", model_id="Qwen/Qwen3-VL-8B-Instruct",
                                  processor=", max_pixels=1024 * 32 * 32"))
    assert run.images.value.family == "Qwen3-VL" and run.images.value.per_image == 1026


def test_an_unreadable_max_pixels_is_not_guessed(tmp_path):
    run = run_of(tmp_path, script(processor=", max_pixels=MAX_PIXELS"))
    assert run.images.value is None
    assert "not readable" in run.images.notes[0]


def test_a_max_length_bounds_text_and_images_together(tmp_path):
    run = run_of(tmp_path, script(max_length="2048"))
    plan, _, notes, _ = plan_for(run.ctx, Overrides())
    assert plan.seq == 2048
    assert any("max length 2,048 is shorter than one image's 16,386 tokens" in n for n in notes)


def test_a_text_model_has_no_image_tokens(tmp_path):
    run = run_of(tmp_path, script(cls="AutoModelForCausalLM", model_id="Qwen/Qwen2.5-7B-Instruct",
                                  max_length="2048"))
    assert run.images.value is None
    notes = plan_for(run.ctx, Overrides())[2]
    assert not any("image" in n for n in notes)


# -- the catalog's vision towers ------------------------------------------------------------------------------

@pytest.mark.parametrize("model_id", ["Qwen/Qwen2-VL-7B-Instruct", "Qwen/Qwen2.5-VL-7B-Instruct",
                                      "Qwen/Qwen2.5-VL-3B-Instruct"])
def test_the_catalogs_vision_tower_counts_are_the_towers_built_from_their_geometry(model_id):
    import json

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    root = Path(__file__).resolve().parents[1]
    entry = next(e for e in json.loads((root / "src/trainlint/knowledge/models.json").read_text())["models"]
                 if e["id"] == model_id)
    v = entry["vision"]
    with torch.device("meta"):
        if entry["model_type"] == "qwen2_vl":
            from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel as Tower
            cfg = transformers.Qwen2VLVisionConfig(depth=v["depth"], embed_dim=v["hidden_size"], mlp_ratio=4,
                                                   num_heads=v["num_heads"], hidden_size=v["out_hidden_size"],
                                                   patch_size=v["patch_size"])
        else:
            from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
                Qwen2_5_VisionTransformerPretrainedModel as Tower)
            cfg = transformers.Qwen2_5_VLVisionConfig(depth=v["depth"], hidden_size=v["hidden_size"],
                                                      intermediate_size=3420, num_heads=v["num_heads"],
                                                      out_hidden_size=v["out_hidden_size"],
                                                      patch_size=v["patch_size"], window_size=v["window_size"],
                                                      fullatt_block_indexes=v["fullatt_block_indexes"])
        tower = Tower(cfg)
    assert sum(p.numel() for p in tower.parameters()) == v["num_parameters"]
    assert sum(p.numel() for p in tower.blocks.parameters()) == v["blocks_parameters"]
    assert entry["hidden_size"] == v["out_hidden_size"]  # the merger projects into the text decoder's width


# -- TL101 judges the image tokens when no max length is set --------------------------------------------------

EAGER_VLM = '''
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration, Trainer, TrainingArguments

model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
    "Qwen/Qwen2.5-VL-7B-Instruct", torch_dtype=torch.bfloat16, attn_implementation="eager")
processor = AutoProcessor.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct"{processor})
model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
args = TrainingArguments(output_dir="out", per_device_train_batch_size=1, gradient_checkpointing=True)
Trainer(model=model, args=args, train_dataset=ds).train()
'''


def test_eager_attention_on_a_vlm_without_max_length_is_judged_at_its_image_tokens(lint):
    found = lint(EAGER_VLM.format(processor=""), settings={"select": ["TL101"]})
    assert [(c, line) for c, line, _ in found] == [("TL101", 7)]  # the attn_implementation keyword
    assert "eager attention at sequence length 16,386" in found[0][2]
    assert "assuming Qwen2.5-VL image tokens: up to 16,384 per image" in found[0][2]


def test_the_assumed_image_tokens_are_hidden_by_certain_only(lint):
    assert lint(EAGER_VLM.format(processor=""), settings={"select": ["TL101"], "certain-only": True}) == []


def test_a_small_max_pixels_keeps_tl101_quiet(lint):
    # 256 tokens per image: under the long-context threshold
    found = lint(EAGER_VLM.format(processor=", max_pixels=256 * 28 * 28"), settings={"select": ["TL101"]})
    assert found == []


# -- images per sample from the script's own message template (issue 28 item 3) -------------------------------

COLLATE = '''

def collate_fn(examples):
    messages = [
        {{"role": "user", "content": [{parts}{{"type": "text", "text": ex["question"]}}]}}
        for ex in examples
    ]
    return processor.apply_chat_template(messages, tokenize=True, return_dict=True, return_tensors="pt")
'''


@pytest.mark.parametrize("parts, images", [
    ('{"type": "image"}, ', 1),
    ('{"type": "image", "image": ex["before"]}, {"type": "image", "image": ex["after"]}, ', 2),
    ("{'type': 'image'}, {'type': 'image'}, {'type': 'image'}, ", 3),
])
def test_the_message_template_says_how_many_images_a_sample_carries(tmp_path, parts, images):
    run = run_of(tmp_path, script(processor=", max_pixels=1280 * 28 * 28") + COLLATE.format(parts=parts))
    assert run.images.value.images == images and run.images.value.per_sample == images * 1282
    plan, _, notes, _ = plan_for(run.ctx, Overrides())
    assert plan.seq == images * 1282 and plan.vision.patches == images * 4 * 1280
    line = next(i for i, text in enumerate(run.ctx.text.splitlines(), 1) if '"role": "user"' in text)
    assert any(f"per sample: the message content at line {line} lists {images}" in n for n in notes)


def test_a_list_of_other_dicts_is_not_an_image_count(tmp_path):
    parts = '{"type": "video"}, {"kind": "image"}, {"type": IMAGE}, '
    run = run_of(tmp_path, script() + COLLATE.format(parts=parts))
    assert run.images.value.images == 1
    assert any("1 image per sample assumed" in n for n in run.images.notes)


def test_a_tiled_family_multiplies_its_per_image_tokens_too(tmp_path):
    src = script(cls="LlavaForConditionalGeneration", model_id="llava-hf/llava-1.5-7b-hf") + COLLATE.format(
        parts='{"type": "image"}, {"type": "image"}, ')
    run = run_of(tmp_path, src)
    assert (run.images.value.family, run.images.value.images, run.images.value.per_sample) == ("LLaVA-1.5", 2, 1152)
    assert plan_for(run.ctx, Overrides())[0].vision.patches == 2 * 577
