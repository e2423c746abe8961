# The configuration bench/measure_vlm_idefics3.py measures: Idefics3-8B-Llama3 in bf16, LoRA r=16 on q/k/v/o_proj (the
# names reach the SigLIP tower's q/k/v_proj too), gradient checkpointing (non-reentrant), one sample per step, one
# image split into 4 x 4 tiles of 364 px plus the global image (17 tiles through the tower, 676 patches each; 2,913
# image-prompt tokens in the text) and 512 text tokens. bench/vlm_accuracy.py --idefics3 varies checkpointing.
import torch
from peft import LoraConfig
from transformers import AutoProcessor, Idefics3ForConditionalGeneration
from trl import SFTConfig, SFTTrainer

model = Idefics3ForConditionalGeneration.from_pretrained("HuggingFaceM4/Idefics3-8B-Llama3", dtype=torch.bfloat16,
                                                         attn_implementation="sdpa")
processor = AutoProcessor.from_pretrained("HuggingFaceM4/Idefics3-8B-Llama3")
peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
args = SFTConfig(output_dir="out", per_device_train_batch_size=1, max_length=None, gradient_checkpointing=True,
                 gradient_checkpointing_kwargs={"use_reentrant": False}, optim="adamw_torch_fused")
trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=processor, peft_config=peft_config)
trainer.train()
