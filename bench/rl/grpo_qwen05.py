# The GRPO configuration bench/measure_rl.py measures (open-r1 grpo.py shape): Qwen2.5-0.5B in bf16, full
# fine-tuning, 4 completions per micro-batch, 2 micro-batches per generation round, prompts of 256 and completions
# of 512 tokens, beta=0.04 (a reference model), HF generate.
import torch
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype=torch.bfloat16)
args = GRPOConfig(output_dir="out", per_device_train_batch_size=4, steps_per_generation=2, num_generations=4,
                  max_prompt_length=256, max_completion_length=512, beta=0.04, gradient_checkpointing=True,
                  optim="adamw_torch_fused")
trainer = GRPOTrainer(model=model, reward_funcs=[accuracy_reward], args=args, train_dataset=dataset)
trainer.train()
