"""QLoRA on Mistral-7B with TRL: SDPA attention, TRL's chunked loss, a 32k vocabulary. Nothing to flag."""

from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, BitsAndBytesConfig
from trl import SFTConfig, SFTTrainer

bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True)
model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", quantization_config=bnb,
                                             attn_implementation="sdpa")
trainer = SFTTrainer(
    model=model,
    args=SFTConfig(output_dir="out/qlora", max_length=2048, per_device_train_batch_size=2),
    train_dataset=load_dataset("trl-lib/Capybara", split="train"),
    peft_config=LoraConfig(r=16, target_modules="all-linear", task_type="CAUSAL_LM"),
)
trainer.train()
