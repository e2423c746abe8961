# The text-only Qwen3 configuration bench/measure_qwen3_text.py measures (Qwen3's per-head q_norm / k_norm):
# Qwen3-8B in bf16, one sequence of 2,048 tokens per step; tests/test_estimate.py puts each measured row's shape
# (LoRA r=16 on q/k/v/o_proj or full fine-tuning, checkpointing or not) on this plan.
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-8B", dtype=torch.bfloat16)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=1)
trainer = Trainer(model=model, args=args, train_dataset=dataset)
trainer.train()
