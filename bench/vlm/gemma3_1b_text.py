# The text-only Gemma 3 configuration bench/measure_gemma3_text.py measures (gemma3_text: Gemma 3's block without a
# tower): Gemma-3-1B-it in bf16, two sequences of 1,024 tokens per step, no checkpointing; full fine-tuning, and LoRA
# r=16 on q/k/v/o_proj in the measured variant (tests/test_estimate.py puts each row's shape on this plan).
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("google/gemma-3-1b-it", dtype=torch.bfloat16)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=2)
trainer = Trainer(model=model, args=args, train_dataset=dataset)
trainer.train()
