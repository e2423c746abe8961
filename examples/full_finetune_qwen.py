"""Full fine-tuning of Qwen2.5-7B with the plain transformers Trainer.

trainlint flags TL301 here: the default loss materialises batch x seq x 152,064 logits, and an fp32 copy.
"""

import argparse

from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="Qwen/Qwen2.5-7B")
parser.add_argument("--block_size", type=int, default=4096)
parser.add_argument("--batch_size", type=int, default=4)
args = parser.parse_args()

tokenizer = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model, dtype="bfloat16", attn_implementation="sdpa")


def tokenize(batch):
    return tokenizer(batch["text"], truncation=True, max_length=args.block_size)


dataset = load_dataset("text", data_files="corpus.txt")["train"].map(tokenize, batched=True)
training_args = TrainingArguments(
    output_dir="out/qwen-full",
    per_device_train_batch_size=args.batch_size,
    gradient_accumulation_steps=4,
    gradient_checkpointing=True,
    bf16=True,
)
Trainer(
    model=model,
    args=training_args,
    train_dataset=dataset,
    data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
).train()
