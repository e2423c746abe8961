"""Supervised fine-tuning of Llama-3.1-8B on long documents (TRL, LoRA).

trainlint flags TL101 here: eager attention at 8,192 tokens keeps a 32-head score matrix per layer.
"""

import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

MODEL_ID = "meta-llama/Llama-3.1-8B-Instruct"
MAX_LEN = 8192

tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
model = AutoModelForCausalLM.from_pretrained(
    MODEL_ID,
    dtype=torch.bfloat16,
    attn_implementation="eager",  # copied from an old notebook
)

config = SFTConfig(
    output_dir="out/llama3-longdoc",
    max_length=MAX_LEN,
    per_device_train_batch_size=2,
    gradient_accumulation_steps=8,
    learning_rate=1e-4,
    bf16=True,
)
trainer = SFTTrainer(
    model=model,
    args=config,
    train_dataset=load_dataset("json", data_files="longdocs.jsonl")["train"],
    processing_class=tokenizer,
    peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"),
)
trainer.train()
