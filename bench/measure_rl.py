#!/usr/bin/env python3
"""Ground truth for the RL / preference phases (issue 27): one DPO step and one GRPO round (HF-style generation,
reference scoring, training step) of a Qwen2.5-0.5B geometry at full size, under FakeTensorMode (with a ShapeEnv:
TRL's fused LM head selects the labelled positions, a data-dependent shape) and the project's MemTracker
(trainlint.verify.measure.StepMemTracker), with the installed TRL (1.16.0): its own `add_fused_lm_head` and the
tensors its trainers build (trl 1.16.0 dpo_trainer.py `_compute_loss` :1285-1345, grpo_trainer.py
`_get_per_token_logps_and_entropies` :1419-1506, `_generate_and_score_completions`, `_compute_loss`).

What is reproduced and what is not:
- DPO: chosen + rejected concatenated (2 x batch rows), the policy's forward with `fused_lm_head=True` and labels
  masked over the prompt, the reference model (a second bf16 model, as TRL 1.16 builds it: dtype of the policy)
  under no_grad with its fused head, the sigmoid loss, backward, AdamW (torch's for-loop, as on CPU: the CUDA
  foreach temporary is not in these numbers), two steps. Gradient checkpointing on (DPOConfig's default from 0.22),
  non-reentrant.
- GRPO: generation as HF `generate` holds it: a prefill of the prompts with the cache, then the completion decoded
  in chunks of DECODE_CHUNK tokens with `logits_to_keep=1` (the KV cache is exact; the per-chunk working set is
  DECODE_CHUNK x a single decoding step's, a small overstatement); then the reference's per-token log-probabilities
  (beta=0.04) chunked by per_device_train_batch_size rows; then the training step on one micro-batch with the fused
  head, the GRPO loss with the KL term, backward, AdamW. Sampling, rewards and the EOS mask are not reproduced (no
  tensor of note).
No torch.compile, no autocast (the weights are bf16, as `from_pretrained(dtype=torch.bfloat16)`).

Run from the repository root (a few minutes on two cores):

    python bench/measure_rl.py            # writes bench/rl_measurements.json
    python bench/rl_accuracy.py           # the estimate vs these measurements
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "rl_measurements.json"

# Qwen2.5-0.5B's config.json (public): 24 layers, hidden 896, 14 heads / 2 KV heads, 151,936 tied vocabulary.
QWEN05 = dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
              intermediate_size=4864, tie_word_embeddings=True, max_position_embeddings=32768, rope_theta=1000000.0,
              rms_norm_eps=1e-6, use_sliding_window=False)
DPO = dict(name="dpo_qwen2.5-0.5b_bf16_full_gc_b2x1024", pairs=2, seq=1024, prompt=512, beta=0.1, eval_pairs=8)
GRPO = dict(name="grpo_qwen2.5-0.5b_bf16_full_gc_b4_spg2_p256_c512", batch=4, steps_per_generation=2, prompt=256,
            completion=512, beta=0.04)
DECODE_CHUNK = 64


def _model(torch, cfg, gc_on: bool):
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(previous)
    add_fused_lm_head(model)
    if gc_on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _record(mt, keys):
    return {k: int(mt.peaks[k][0]) for k in keys if k in mt.peaks}


def measure(which: str) -> dict:
    import torch
    import torch.nn.functional as F
    import trl
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from transformers import AutoConfig

    from trainlint.verify.measure import StepMemTracker, _make_optimizer

    t0 = time.perf_counter()
    cfg = AutoConfig.for_model("qwen2", **QWEN05)
    mode = FakeTensorMode(allow_non_fake_inputs=False, shape_env=ShapeEnv())
    with mode:
        policy = _model(torch, cfg, gc_on=True)
        policy.train()
        ref = _model(torch, cfg, gc_on=False)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        opt = _make_optimizer("adamw", [p for p in policy.parameters() if p.requires_grad])
        mt = StepMemTracker()

        def run(model, **kw):  # each top-level call is its own "iteration" for MemTracker's module stats (unused)
            mt.reset_mod_stats()
            return model(**kw)
        if which == "dpo":
            spec = DPO
            rows = 2 * spec["pairs"]
            ids = torch.randint(0, cfg.vocab_size, (rows, spec["seq"]))
            labels = ids.clone()
            labels[:, :spec["prompt"]] = -100
            mt.track_external(policy, ref, opt, ids, labels)
            with mt:
                for step in (1, 2):
                    mt.set_phase(step, "forward")
                    logps = run(policy, input_ids=ids, labels=labels, fused_lm_head=True, use_cache=False).log_probs
                    logps = logps.sum(dim=1)
                    with torch.no_grad():
                        ref_logps = run(ref, input_ids=ids, labels=labels, fused_lm_head=True,
                                        use_cache=False).log_probs.sum(dim=1)
                    chosen, rejected = (logps - ref_logps).chunk(2, dim=0)
                    loss = -F.logsigmoid(spec["beta"] * (chosen - rejected)).mean()
                    del logps, ref_logps, chosen, rejected
                    mt.set_phase(step, "backward")
                    loss.backward()
                    del loss
                    mt.set_phase(step, "optimizer_step")
                    opt.step()
                    mt.set_phase(step, "zero_grad")
                    opt.zero_grad(set_to_none=True)
                # the evaluation step after training (optimizer state resident, gradients freed by zero_grad):
                # DPOTrainer.prediction_step runs compute_loss under no_grad (trl 1.16.0 dpo_trainer.py:1712-1720,
                # prediction_loss_only without compute_metrics) on per_device_eval_batch_size pairs (8, the default),
                # chosen + rejected concatenated, the policy in eval mode (no checkpointing) and the reference
                policy.eval()
                pairs = spec["eval_pairs"]
                eids = torch.randint(0, cfg.vocab_size, (2 * pairs, spec["seq"]))
                elabels = eids.clone()
                elabels[:, :spec["prompt"]] = -100
                mt.set_phase(3, "eval")
                with torch.no_grad():
                    logps = run(policy, input_ids=eids, labels=elabels, fused_lm_head=True,
                                use_cache=False).log_probs.sum(dim=1)
                    ref_logps = run(ref, input_ids=eids, labels=elabels, fused_lm_head=True,
                                    use_cache=False).log_probs.sum(dim=1)
                    chosen, rejected = (logps - ref_logps).chunk(2, dim=0)
                    loss = -F.logsigmoid(spec["beta"] * (chosen - rejected)).mean()
                    del logps, ref_logps, chosen, rejected, loss
            train = max(int(mt.peaks.get(f"step{s}/{ph}", (0,))[0]) for s in (1, 2)
                        for ph in ("forward", "backward", "optimizer_step", "zero_grad"))
            phases = {"train": train, "eval": int(mt.peaks["step3/eval"][0])}
        else:
            spec = GRPO
            rows = spec["batch"] * spec["steps_per_generation"]
            tokens = spec["prompt"] + spec["completion"]
            prompt_ids = torch.randint(0, cfg.vocab_size, (rows, spec["prompt"]))
            mt.track_external(policy, ref, opt, prompt_ids)
            with mt:
                for step in (1, 2):
                    # generation (HF generate under no_grad: the cache grows to rows x (prompt + completion))
                    mt.set_phase(step, "generation")
                    with torch.no_grad():
                        out = run(policy, input_ids=prompt_ids, use_cache=True, logits_to_keep=1)
                        cache = out.past_key_values
                        del out
                        done = 0
                        while done < spec["completion"]:
                            n = min(DECODE_CHUNK, spec["completion"] - done)
                            nxt = torch.randint(0, cfg.vocab_size, (rows, n))
                            out = run(policy, input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                            cache = out.past_key_values
                            del out, nxt
                            done += n
                        del cache
                    full = torch.randint(0, cfg.vocab_size, (rows, tokens))
                    labels = full.clone()
                    labels[:, :spec["prompt"]] = -100
                    # the reference's per-token log-probabilities, chunked by per_device_train_batch_size
                    mt.set_phase(step, "scoring")
                    ref_logps = []
                    with torch.no_grad():
                        for start in range(0, rows, spec["batch"]):
                            sl = slice(start, start + spec["batch"])
                            ref_logps.append(run(ref, input_ids=full[sl], labels=labels[sl], fused_lm_head=True,
                                                 use_cache=False).log_probs[:, -spec["completion"]:])
                    ref_logps = torch.cat(ref_logps)
                    advantages = torch.randn(rows)
                    # the training step on the first micro-batch (the buffered others are the same size)
                    sl = slice(0, spec["batch"])
                    mt.set_phase(step, "forward")
                    logps = run(policy, input_ids=full[sl], labels=labels[sl], fused_lm_head=True,
                                   use_cache=False).log_probs[:, -spec["completion"]:]
                    ref_mb = ref_logps[sl]
                    kl = torch.exp(ref_mb - logps) - (ref_mb - logps) - 1
                    ratio = torch.exp(logps - logps.detach())
                    per_token = -(ratio * advantages[sl].unsqueeze(1)) + spec["beta"] * kl
                    loss = per_token.mean()
                    del logps, ref_mb, kl, ratio, per_token
                    mt.set_phase(step, "backward")
                    loss.backward()
                    del loss, ref_logps, full, labels, advantages
                    mt.set_phase(step, "optimizer_step")
                    opt.step()
                    mt.set_phase(step, "zero_grad")
                    opt.zero_grad(set_to_none=True)
            gen = max(int(mt.peaks[f"step{s}/generation"][0]) for s in (1, 2))
            score = max(int(mt.peaks[f"step{s}/scoring"][0]) for s in (1, 2))
            train = max(int(mt.peaks[f"step{s}/{ph}"][0]) for s in (1, 2)
                        for ph in ("forward", "backward", "optimizer_step"))
            phases = {"generation": gen, "scoring": score, "train": train}
        params = sum(p.numel() for p in policy.parameters())
        del mt, opt, policy, ref
    gc.collect()
    import transformers

    return {"name": spec["name"], "spec": spec, "model": {"config": "Qwen2.5-0.5B (config.json values)", **QWEN05,
                                                         "params": params},
            "trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
            "phases": phases, "tracker": "trainlint.verify.measure.StepMemTracker under FakeTensorMode+ShapeEnv",
            "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str]) -> int:
    which = [w for w in ("dpo", "grpo") if not argv or w in argv]
    records = []
    for w in which:
        rec = measure(w)
        records.append(rec)
        print(w, {k: f"{v / 2**30:.2f} GiB" for k, v in rec["phases"].items()}, f"({rec['seconds']} s)", flush=True)
    kept = json.loads(OUT.read_text())["configs"] if OUT.exists() else []
    names = {r["name"] for r in records}
    OUT.write_text(json.dumps({"configs": [r for r in kept if r["name"] not in names] + records}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main(sys.argv[1:]))
