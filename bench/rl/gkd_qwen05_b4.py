# The GKD configuration bench/measure_rl.py measures (GKD_B4): a Qwen2.5-0.5B student distilled from a
# Qwen2.5-0.5B-shaped teacher, 4 x 512 tokens (prompts of 384, 128 new tokens), checkpointing on, bf16.
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from trl.experimental.gkd import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16")
teacher = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16")
ds = load_dataset("trl-lib/chatbot_arena_completions")
args = GKDConfig(output_dir="out", per_device_train_batch_size=4, max_length=512, max_new_tokens=128,
                 gradient_checkpointing=True, bf16=True, optim="adamw_torch_fused")
trainer = GKDTrainer(model=model, teacher_model=teacher, args=args, train_dataset=ds["train"])
trainer.train()
