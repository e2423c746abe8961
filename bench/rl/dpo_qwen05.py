# The DPO configuration bench/measure_rl.py measures (TRL examples/scripts/dpo.py shape): Qwen2.5-0.5B in bf16,
# full fine-tuning, 2 pairs x 1,024 tokens, checkpointing, the reference model built by the trainer; evaluated
# every 100 steps at the default per_device_eval_batch_size (8 pairs).
import torch
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.bfloat16)
args = DPOConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024, gradient_checkpointing=True,
                 optim="adamw_torch_fused", eval_strategy="steps", eval_steps=100)
trainer = DPOTrainer(model=model, args=args, train_dataset=dataset, eval_dataset=eval_dataset)
trainer.train()
