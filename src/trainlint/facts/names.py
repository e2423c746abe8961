"""The names the facts pass looks for: library classes, call names, keyword and variable names."""

import re

MODULE_SCOPE = "<module>"  # the scope of a file's module-level code (functions are named, classes "class X")

ARGS_CLASSES = {
    "TrainingArguments": "transformers",
    "Seq2SeqTrainingArguments": "transformers",
}
TRL_CONFIGS = {
    "SFTConfig", "DPOConfig", "GRPOConfig", "KTOConfig", "ORPOConfig", "CPOConfig", "RewardConfig",
    "RLOOConfig", "PPOConfig", "OnlineDPOConfig", "GKDConfig", "PRMConfig", "BCOConfig", "XPOConfig",
    "NashMDConfig", "DistillationConfig",
}
ARGS_CLASSES.update({name: "trl" for name in TRL_CONFIGS})
TRAINER_CLASSES = {"Trainer": "transformers", "Seq2SeqTrainer": "transformers"}
TRL_TRAINERS = {
    "SFTTrainer", "DPOTrainer", "GRPOTrainer", "KTOTrainer", "ORPOTrainer", "CPOTrainer", "RewardTrainer",
    "RLOOTrainer", "PPOTrainer", "OnlineDPOTrainer", "GKDTrainer", "PRMTrainer", "BCOTrainer", "XPOTrainer",
    "NashMDTrainer", "DistillationTrainer",
}
TRAINER_CLASSES.update({name: "trl" for name in TRL_TRAINERS})

# Calls recorded by their last name component. Anything else is skipped unless it carries a
# keyword in INTERESTING_KWARGS.
INTERESTING_SHORTS = {
    "from_pretrained", "from_config", "get_peft_model", "prepare_model_for_kbit_training", "add_adapter",
    "enable_input_require_grads", "gradient_checkpointing_enable", "activation_checkpointing_enable",
    "gradient_checkpointing_disable", "checkpoint", "checkpoint_sequential", "LoraConfig", "cross_entropy",
    "CrossEntropyLoss", "nll_loss", "log_softmax", "LogSoftmax", "DataLoader", "Accelerator", "add_argument", "HfArgumentParser",
    "_apply_liger_kernel_to_instance", "LigerFusedLinearCrossEntropyLoss", "cce_patch", "linear_cross_entropy",
    "BitsAndBytesConfig", "backward", "step", "train", "inject_adapter_in_model", "register_forward_hook",
    "DataCollatorWithFlattening",  # padding-free batches (TL104)
    "AdamW", "Adam", "SGD", "AdamW8bit", "Adam8bit", "PagedAdamW8bit", "PagedAdamW32bit", "PagedAdamW", "Adafactor",
    *ARGS_CLASSES, *TRAINER_CLASSES,
}
INTERESTING_KWARGS = {"labels", "max_length", "max_seq_length", "model_max_length", "block_size", "batch_size",
                      "use_reentrant", "gradient_accumulation_steps"}
MODEL_CLASS_RE = re.compile(r"^[A-Z][A-Za-z0-9_]*For[A-Z][A-Za-z0-9]*$")
CONFIG_CLASS_RE = re.compile(r"^[A-Z][A-Za-z0-9_]*Config$")
LIGER_APPLY_RE = re.compile(r"^apply_liger_kernel_to_\w+$")

SEQ_NAMES = {"max_seq_length", "max_seq_len", "max_length", "max_len", "seq_len", "seq_length",
             "sequence_length", "block_size", "context_length", "cutoff_len", "model_max_length"}
# not "train_batch_size": OpenRLHF and DeepSpeed use it for the global batch (all GPUs, all micro-steps)
BATCH_NAMES = {"per_device_train_batch_size", "batch_size", "micro_batch_size", "micro_train_batch_size",
               "batch_size_per_device"}
ACCUM_NAMES = {"gradient_accumulation_steps", "accumulation_steps", "grad_accum_steps", "gradient_accumulation",
               "accum_steps", "grad_accum"}
PIP_RE = re.compile(r"pip3?\s+install\s+([^\n#]*)")
PIN_RE = re.compile(r"""['"]?(transformers|trl|peft|torch|accelerate)\s*((?:[=<>!~]=?|===)\s*[\w.*]+(?:\s*,\s*(?:[=<>!~]=?)\s*[\w.*]+)*)""")



# Imports that are never the repository's own code: the standard library and the libraries trainlint models
NOT_REPOSITORY_MODULES = frozenset(getattr(__import__("sys"), "stdlib_module_names", ())) | {
    "transformers", "trl", "peft", "torch", "accelerate", "datasets", "deepspeed", "numpy", "bitsandbytes",
    "liger_kernel", "unsloth", "wandb", "tqdm", "fire", "yaml", "evaluate", "sklearn", "pandas", "safetensors",
    "huggingface_hub", "tokenizers", "sentencepiece", "einops", "flash_attn", "vllm", "ray", "omegaconf",
    "hydra", "lightning", "pytorch_lightning", "torchvision", "torchaudio", "scipy", "requests", "jsonlines"}


# The library APIs that rules and facts match through the file's imports (facts/model.py Call.is_api).
DATALOADER = ("torch.utils.data.DataLoader",)
ACCELERATOR = ("accelerate.Accelerator",)
PEFT_WRAP = ("peft.get_peft_model", "peft.inject_adapter_in_model")
TORCH_CHECKPOINT = ("torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential")
TORCH_CROSS_ENTROPY = ("torch.nn.functional.cross_entropy", "torch.nn.CrossEntropyLoss")
# a log-softmax over the vocabulary: the per-token log-probabilities DPO / KD / RL losses gather from
TORCH_LOG_SOFTMAX = ("torch.log_softmax", "torch.nn.functional.log_softmax", "torch.nn.LogSoftmax")
