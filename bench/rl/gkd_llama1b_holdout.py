# The GKD configuration bench/measure_rl.py measures as the held-out shape (GKD_HOLDOUT): a Llama-3.2-1B student
# distilled from a Llama-3.2-1B-shaped teacher (128,256 vocabulary), 3 x 700 tokens (prompts of 500, 200 new
# tokens), checkpointing on, bf16; evaluated every 100 steps at per_device_eval_batch_size 5.
from datasets import load_dataset
from transformers import AutoModelForCausalLM
from trl.experimental.gkd import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="bfloat16")
teacher = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="bfloat16")
ds = load_dataset("trl-lib/chatbot_arena_completions")
args = GKDConfig(output_dir="out", per_device_train_batch_size=3, max_length=700, max_new_tokens=200,
                 gradient_checkpointing=True, bf16=True, optim="adamw_torch_fused", eval_strategy="steps",
                 eval_steps=100, per_device_eval_batch_size=5)
trainer = GKDTrainer(model=model, teacher_model=teacher, args=args, train_dataset=ds["train"],
                     eval_dataset=ds["test"])
trainer.train()
