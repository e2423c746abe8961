# The configuration bench/measure_vlm_qwen3.py measures: Qwen3-VL-8B-Instruct in bf16, LoRA r=16 on the text attention,
# gradient checkpointing (non-reentrant), one sample per step, max_pixels = 1280 * 32 * 32 (1,280 tokens for an image
# that reaches it, 5,120 patches through the tower). bench/vlm_accuracy.py --qwen3 varies the targets and
# checkpointing from this plan to the measured rows.
import torch
from peft import LoraConfig
from transformers import AutoProcessor, Qwen3VLForConditionalGeneration
from trl import SFTConfig, SFTTrainer

model = Qwen3VLForConditionalGeneration.from_pretrained("Qwen/Qwen3-VL-8B-Instruct", dtype=torch.bfloat16)
processor = AutoProcessor.from_pretrained("Qwen/Qwen3-VL-8B-Instruct", max_pixels=1280 * 32 * 32)
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=None, gradient_checkpointing=True,
                 gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch_fused")
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config)
trainer.train()
