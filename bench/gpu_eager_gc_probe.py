#!/usr/bin/env python3
"""Where eager attention with checkpointing spends the bytes the estimate misses (issue 26 part 2), on CUDA.

The H200 peaks (../shared/gpu-truth/peaks-h200.json) show eager + non-reentrant checkpointing at 4-8k tokens
~3 bytes per attention score above the estimate. transformers' eager_attention_forward computes the softmax in fp32
(`softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)`), whose fp32 output autograd keeps for the
softmax backward in the recomputed layer. This probe runs the same training step (Llama-3.2-1B geometry from its
config, bf16 weights, AdamW, batch 1, 2 steps) with transformers' eager attention as shipped and with the softmax
kept in bf16, and prints the peak of each and the difference per score of one layer. CUDA only; no download.

    python bench/gpu_eager_gc_probe.py CONFIG_DIR [SEQ ...]
"""

from __future__ import annotations

import json
import sys

import torch


def run(config_dir: str, seq: int, bf16_softmax: bool, checkpointing: bool = True) -> int:
    import transformers.models.llama.modeling_llama as M
    from transformers import AutoConfig, AutoModelForCausalLM

    shipped = M.eager_attention_forward

    def eager_bf16_softmax(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        key_states = M.repeat_kv(key, module.num_key_value_groups)
        value_states = M.repeat_kv(value, module.num_key_value_groups)
        weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
        if attention_mask is not None:
            weights = weights + attention_mask[:, :, :, : key_states.shape[-2]]
        weights = torch.nn.functional.softmax(weights, dim=-1)  # in the compute dtype: no fp32 copy
        weights = torch.nn.functional.dropout(weights, p=dropout, training=module.training)
        return torch.matmul(weights, value_states).transpose(1, 2).contiguous(), weights

    M.eager_attention_forward = eager_bf16_softmax if bf16_softmax else shipped
    try:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        cfg = AutoConfig.from_pretrained(config_dir)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("cuda"):
            model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.bfloat16)
        torch.set_default_dtype(torch.float32)
        if checkpointing:
            model.gradient_checkpointing_enable({"use_reentrant": False})
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        ids = torch.randint(cfg.vocab_size, (1, seq), device="cuda")
        for _ in range(2):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del loss
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        del model, opt, ids
        return peak
    finally:
        M.eager_attention_forward = shipped


def main() -> None:
    config_dir = sys.argv[1]
    seqs = [int(s) for s in sys.argv[2:]] or [4096, 8192]
    cfg = json.load(open(f"{config_dir}/config.json"))
    heads = cfg["num_attention_heads"]
    rows = []
    for seq in seqs:
        shipped = run(config_dir, seq, False)
        bf16 = run(config_dir, seq, True)
        scores = heads * seq * seq
        rows.append({"seq": seq, "peak_shipped": shipped, "peak_bf16_softmax": bf16,
                     "bytes_per_score": round((shipped - bf16) / scores, 3)})
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
