"""Peak live bytes of one training step of a tiny Llama with a 128,256-token vocabulary: transformers' own loss
vs axolotl 0.19.0's chunked_cross_entropy patch, on CPU, with torch's MemTracker (memory/estimate.py
chunked_upcast_bytes cites it).

axolotl is not a dependency: `pip download axolotl==0.19.0 --no-deps -d /tmp/ax && unzip -q /tmp/ax/*.whl -d
/tmp/ax/w`, then `python bench/measure_chunked_upcast.py full|chunked eager|compile [/tmp/ax/w]`. Its
monkeypatch/loss/chunked.py imports only torch. Last run (2 busy cores, torch 2.13.0, transformers 5.25.0), bytes
per logit at the peak of step 2: full 12.6 (PARAM 0.5, ACT 4.1, TEMP 8.0), chunked 9.1 (PARAM 0.5, ACT 8.6), the
same with `compile` (MemTracker's dispatch mode runs the compiled loss eagerly)."""
import sys, json, os
os.environ["HF_HUB_OFFLINE"] = "1"
import torch
from torch.distributed._tools.mem_tracker import MemTracker
from transformers import LlamaConfig, LlamaForCausalLM
import transformers.loss.loss_utils as lu

mode = sys.argv[1]
compiled = len(sys.argv) > 2 and sys.argv[2] == "compile"
orig = lu.LOSS_MAPPING["ForCausalLM"]
if mode == "chunked":
    sys.path.insert(0, sys.argv[3] if len(sys.argv) > 3 else "/tmp/ax/w")
    import axolotl.monkeypatch.loss.chunked as ch
    if not compiled:
        ch.torch.compile = lambda f, backend=None: f  # eager, to see what autograd keeps without inductor
    ch.patch_chunked_ce_loss_fn(8)
torch.manual_seed(0)
torch.set_default_dtype(torch.bfloat16)
cfg = LlamaConfig(vocab_size=128256, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                  num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False)
model = LlamaForCausalLM(cfg)
model.config._attn_implementation = "sdpa"
B, S = 2, 1024
ids = torch.randint(0, 128256, (B, S))
mt = MemTracker()
mt.track_external(model)
with mt:
    for step in range(2):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        for p in model.parameters():
            p.grad = None
        if step == 0:
            mt.reset_mod_stats()
peak = mt.get_tracker_snapshot("peak")
tot = {}
for dev, d in peak.items():
    for k, v in d.items():
        tot[str(k)] = tot.get(str(k), 0) + v
logits = B * S * 128256
print(json.dumps({"mode": mode, "compiled": compiled, "logits": logits,
                  "peak_total": tot.get("Total"), "per_logit": {k: round(v / logits, 2) for k, v in tot.items()}}))
