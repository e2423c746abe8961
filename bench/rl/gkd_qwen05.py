# The GKD configuration bench/measure_rl.py measures (GKD): a Qwen2.5-0.5B student distilled from a
# Qwen2.5-0.5B-shaped teacher, 2 x 1,024 tokens (prompts of 512, 512 new tokens), checkpointing on, bf16; evaluated
# every 100 steps at per_device_eval_batch_size 8 (GKD["eval_batch"]).
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from trl.experimental.gkd import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16")
teacher = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", dtype="bfloat16")
ds = load_dataset("trl-lib/chatbot_arena_completions")
args = GKDConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024, max_new_tokens=512,
                 gradient_checkpointing=True, bf16=True, optim="adamw_torch_fused", eval_strategy="steps",
                 eval_steps=100, per_device_eval_batch_size=8)
trainer = GKDTrainer(model=model, teacher_model=teacher, args=args, train_dataset=ds["train"],
                     eval_dataset=ds["test"])
trainer.train()
