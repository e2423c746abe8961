# The configuration bench/measure_vlm.py measures (TRL's VLM SFT example shape): Qwen2.5-VL-7B-Instruct in bf16, LoRA
# r=16 on the text attention, gradient checkpointing (non-reentrant), one sample per step, the processor's
# max_pixels at the checkpoint's default (16,384 tokens for an image that reaches it). bench/vlm_accuracy.py varies
# the images, the targets and checkpointing from this plan to the measured rows.
import torch
from peft import LoraConfig
from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration
from trl import SFTConfig, SFTTrainer

model = Qwen2_5_VLForConditionalGeneration.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct", dtype=torch.bfloat16)
processor = AutoProcessor.from_pretrained("Qwen/Qwen2.5-VL-7B-Instruct")
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=None, gradient_checkpointing=True,
                 gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch_fused")
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config)
trainer.train()
