# The configuration bench/measure_vlm_gemma3.py measures: Gemma-3-4B-it in bf16, LoRA r=16 on q/k/v/o_proj (the names
# reach SigLIP's q/k/v_proj too), gradient checkpointing (non-reentrant), one sample per step, one 896 px image
# (4,096 patches in the tower, 256 image tokens in the text) and 512 text tokens. bench/vlm_accuracy.py --gemma3
# varies the targets and checkpointing from this plan to the measured rows.
import torch
from peft import LoraConfig
from transformers import AutoProcessor, Gemma3ForConditionalGeneration
from trl import SFTConfig, SFTTrainer

model = Gemma3ForConditionalGeneration.from_pretrained("google/gemma-3-4b-it", dtype=torch.bfloat16,
                                                       attn_implementation="sdpa")
processor = AutoProcessor.from_pretrained("google/gemma-3-4b-it")
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=None, gradient_checkpointing=True,
                 gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch_fused")
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config)
trainer.train()
