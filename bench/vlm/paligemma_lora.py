# The configuration bench/measure_vlm_paligemma.py measures: PaliGemma-3B-pt-224 in bf16, LoRA r=16 on q/k/v/o_proj
# (the names reach SigLIP's q/k/v_proj too), gradient checkpointing (non-reentrant), one sample per step, one 224 px
# image (256 patches in the tower, 256 image tokens in the text) and 512 text tokens. bench/vlm_accuracy.py
# --paligemma varies checkpointing.
import torch
from peft import LoraConfig
from transformers import AutoProcessor, PaliGemmaForConditionalGeneration
from trl import SFTConfig, SFTTrainer

model = PaliGemmaForConditionalGeneration.from_pretrained("google/paligemma-3b-pt-224", dtype=torch.bfloat16,
                                                          attn_implementation="sdpa")
processor = AutoProcessor.from_pretrained("google/paligemma-3b-pt-224")
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=None, gradient_checkpointing=True,
                 gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch_fused")
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config)
trainer.train()
