# The configuration bench/measure_vlm_llava.py measures: LLaVA-1.5-7B in bf16, LoRA r=16 on q/k/v/o_proj (the names
# reach CLIP's attention too), gradient checkpointing (non-reentrant), one sample per step, one 336 px image (576
# image tokens) and 512 text tokens. bench/vlm_accuracy.py --llava varies the targets and checkpointing from this plan
# to the measured rows.
import torch
from peft import LoraConfig
from transformers import AutoProcessor, LlavaForConditionalGeneration
from trl import SFTConfig, SFTTrainer

model = LlavaForConditionalGeneration.from_pretrained("llava-hf/llava-1.5-7b-hf", dtype=torch.bfloat16)
processor = AutoProcessor.from_pretrained("llava-hf/llava-1.5-7b-hf")
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=None, gradient_checkpointing=True,
                 gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch_fused")
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config)
trainer.train()
