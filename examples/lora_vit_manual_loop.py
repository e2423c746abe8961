"""LoRA on a ViT image classifier with a hand-written training loop.

trainlint flags TL201 here: reentrant checkpointing on a model whose main input is pixel_values; transformers
hooks the inputs only for input_ids models, so the classifier trains and the adapters silently do not.
"""

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForImageClassification

model = AutoModelForImageClassification.from_pretrained("google/vit-base-patch16-224", num_labels=10,
                                                        ignore_mismatched_sizes=True)
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"], modules_to_save=["classifier"]))
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})

optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
loader = torch.utils.data.DataLoader(train_set, batch_size=32, shuffle=True)
for pixel_values, labels in loader:
    loss = model(pixel_values=pixel_values, labels=labels).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
