"""The RL / preference phases measured at full size on the CPU (issue 27): one DPO step (and its evaluation step) or
one GRPO round (HF-style generation, reference scoring, training step) of a decoder built from a config, under
FakeTensorMode (with a ShapeEnv: TRL's fused LM head selects the labelled positions, a data-dependent shape) and the
project's MemTracker (verify.measure.StepMemTracker), with the installed TRL's own `add_fused_lm_head` and the
tensors its trainers build (trl 1.16.0 dpo_trainer.py `_compute_loss` :1285-1345, grpo_trainer.py
`_get_per_token_logps_and_entropies` :1419-1506, `_generate_and_score_completions`, `_compute_loss`).

`trainlint verify --simulate` runs it for a DPOTrainer or GRPOTrainer script (verify/simulate.py); bench/measure_rl.py
runs it for the committed ground truth (bench/rl_measurements.json).

What is reproduced and what is not:
- DPO: chosen + rejected concatenated (2 x pairs rows), the policy's forward with `fused_lm_head=True` and labels
  masked over the prompt, the reference model (a second model in the policy's dtype, as TRL 1.16 builds it) under
  no_grad with its fused head, the sigmoid loss, backward, AdamW (torch's for-loop, as on CPU: the CUDA foreach
  temporary is not in these numbers), two steps; then the evaluation step (optimizer state resident, gradients
  freed): DPOTrainer.prediction_step's compute_loss under no_grad (trl 1.16.0 dpo_trainer.py:1712-1720) on
  `eval_pairs` pairs, the policy in eval mode.
- GRPO: generation as HF `generate` holds it: a prefill of the prompts with the cache, then the completion decoded
  in chunks of DECODE_CHUNK tokens with `logits_to_keep=1` (the KV cache is exact; the per-chunk working set is
  DECODE_CHUNK x a single decoding step's, a small overstatement); then the reference's per-token log-probabilities
  chunked by `logps_rows` rows; then the training step on one micro-batch with the fused head, the GRPO loss with
  the KL term, backward, AdamW. Sampling, rewards and the EOS mask are not reproduced (no tensor of note).
No torch.compile, no autocast (the weights are in `dtype`, as `from_pretrained(dtype=...)`), no LoRA, no
quantization.
"""

from __future__ import annotations

import gc
import time

DECODE_CHUNK = 64
DTYPES = ("bf16", "fp32")


def _model(torch, cfg, gc_on: bool, dtype):
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    finally:
        torch.set_default_dtype(previous)
    add_fused_lm_head(model)
    if gc_on:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def measure(which: str, model_type: str, config: dict, spec: dict) -> dict:
    """Peaks per phase (bytes) of `which` ("dpo" | "grpo") for the model `config` (config.json's fields) of
    `model_type`. `spec`: DPO: pairs, seq, prompt, beta, eval_pairs (None: no evaluation step); GRPO: batch (the
    training micro-batch), steps_per_generation (or rows: completions per round), prompt, completion, beta,
    logps_rows (default: batch). Both: gc (checkpointing, default on), dtype ("bf16" default | "fp32"),
    reference (default True). Returns {"phases": {...}, "params": N, "seconds": S}."""
    import torch
    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from transformers import AutoConfig

    from trainlint.verify.measure import STEP_PHASES, StepMemTracker, _make_optimizer, measured_step

    t0 = time.perf_counter()
    cfg = AutoConfig.for_model(model_type, **config)
    dtype = torch.bfloat16 if spec.get("dtype", "bf16") == "bf16" else torch.float32
    gc_on = spec.get("gc", True)
    with_ref = spec.get("reference", True)
    mode = FakeTensorMode(allow_non_fake_inputs=False, shape_env=ShapeEnv())
    with mode:
        policy = _model(torch, cfg, gc_on, dtype)
        policy.train()
        ref = None
        if with_ref:
            ref = _model(torch, cfg, False, dtype)
            ref.eval()
            for p in ref.parameters():
                p.requires_grad_(False)
        opt = _make_optimizer("adamw", [p for p in policy.parameters() if p.requires_grad])
        mt = StepMemTracker()

        def run(model, **kw):  # each top-level call is its own "iteration" for MemTracker's module stats (unused)
            mt.reset_mod_stats()
            return model(**kw)

        def ref_logps(ids, labels):
            with torch.no_grad():
                return run(ref, input_ids=ids, labels=labels, fused_lm_head=True, use_cache=False).log_probs
        if which == "dpo":
            rows = 2 * spec["pairs"]
            ids = torch.randint(0, cfg.vocab_size, (rows, spec["seq"]))
            labels = ids.clone()
            labels[:, :spec["prompt"]] = -100
            mt.track_external(*[m for m in (policy, ref) if m is not None], opt, ids, labels)

            def dpo_loss():  # the log-probabilities and their differences die with this frame, before backward
                logps = run(policy, input_ids=ids, labels=labels, fused_lm_head=True, use_cache=False).log_probs
                logps = logps.sum(dim=1)
                reference = ref_logps(ids, labels).sum(dim=1) if ref is not None else torch.zeros_like(logps)
                chosen, rejected = (logps - reference).chunk(2, dim=0)
                return -F.logsigmoid(spec["beta"] * (chosen - rejected)).mean()

            with mt:
                for step in (1, 2):
                    measured_step(mt, step, dpo_loss, opt)
                if spec.get("eval_pairs"):
                    policy.eval()
                    pairs = spec["eval_pairs"]
                    eids = torch.randint(0, cfg.vocab_size, (2 * pairs, spec["seq"]))
                    elabels = eids.clone()
                    elabels[:, :spec["prompt"]] = -100
                    mt.set_phase(3, "eval")
                    with torch.no_grad():
                        logps = run(policy, input_ids=eids, labels=elabels, fused_lm_head=True,
                                    use_cache=False).log_probs.sum(dim=1)
                        reference = ref_logps(eids, elabels).sum(dim=1) if ref is not None \
                            else torch.zeros_like(logps)
                        chosen, rejected = (logps - reference).chunk(2, dim=0)
                        loss = -F.logsigmoid(spec["beta"] * (chosen - rejected)).mean()
                        del logps, reference, chosen, rejected, loss
            train = max(int(mt.peaks.get(f"step{s}/{ph}", (0,))[0]) for s in (1, 2)
                        for ph in STEP_PHASES)
            phases = {"train": train}
            if "step3/eval" in mt.peaks:
                phases["eval"] = int(mt.peaks["step3/eval"][0])
        elif which == "grpo":
            batch = spec["batch"]
            rows = spec.get("rows") or batch * spec["steps_per_generation"]
            logps_rows = spec.get("logps_rows") or batch
            tokens = spec["prompt"] + spec["completion"]
            prompt_ids = torch.randint(0, cfg.vocab_size, (rows, spec["prompt"]))
            mt.track_external(*[m for m in (policy, ref) if m is not None], opt, prompt_ids)
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
                    # the reference's per-token log-probabilities, chunked by logps_rows
                    mt.set_phase(step, "scoring")
                    reference = None
                    if ref is not None:
                        chunks = []
                        for start in range(0, rows, logps_rows):
                            sl = slice(start, start + logps_rows)
                            chunks.append(ref_logps(full[sl], labels[sl])[:, -spec["completion"]:])
                        reference = torch.cat(chunks)
                        del chunks
                    advantages = torch.randn(rows)
                    # the training step on the first micro-batch (the buffered others are the same size)
                    sl = slice(0, batch)
                    mt.set_phase(step, "forward")
                    logps = run(policy, input_ids=full[sl], labels=labels[sl], fused_lm_head=True,
                                use_cache=False).log_probs[:, -spec["completion"]:]
                    if reference is not None:
                        ref_mb = reference[sl]
                        kl = torch.exp(ref_mb - logps) - (ref_mb - logps) - 1
                        ratio = torch.exp(logps - logps.detach())
                        per_token = -(ratio * advantages[sl].unsqueeze(1)) + spec["beta"] * kl
                        loss = per_token.mean()
                        del ref_mb, kl
                    else:
                        ratio = torch.exp(logps - logps.detach())
                        per_token = -(ratio * advantages[sl].unsqueeze(1))
                        loss = per_token.mean()
                    del logps, ratio, per_token
                    mt.set_phase(step, "backward")
                    loss.backward()
                    del loss, reference, full, labels, advantages
                    mt.set_phase(step, "optimizer_step")
                    opt.step()
                    mt.set_phase(step, "zero_grad")
                    opt.zero_grad(set_to_none=True)
            gen = max(int(mt.peaks[f"step{s}/generation"][0]) for s in (1, 2))
            score = max(int(mt.peaks.get(f"step{s}/scoring", (0,))[0]) for s in (1, 2))
            train = max(int(mt.peaks[f"step{s}/{ph}"][0]) for s in (1, 2)
                        for ph in ("forward", "backward", "optimizer_step"))
            phases = {"generation": gen, "scoring": score, "train": train}
        elif which == "gkd":
            phases = _gkd(torch, cfg, spec, policy, ref, opt, mt, run)
        else:
            raise ValueError(which)
        params = sum(p.numel() for p in policy.parameters())
        del mt, opt, policy, ref
    gc.collect()
    return {"phases": phases, "params": params, "seconds": round(time.perf_counter() - t0, 1)}


def _gkd(torch, cfg, spec: dict, student, teacher, opt, mt, run) -> dict:
    """GKD (trl 1.16.0 experimental/gkd/gkd_trainer.py): the on-policy generation of `training_step` (:416-430,
    `generate_on_policy_outputs` :364) with `use_cache=False` under gradient checkpointing (:221): each decoding step
    is a no-grad forward over the whole prefix, the last one over rows x (prompt + completion), measured as that one
    forward with `logits_to_keep=1`; then `compute_loss` (:324-362): the student's forward, the teacher's under
    no_grad, both logits shifted by one position (`[:, :-1, :]`, every position) and TRL's own
    `GKDTrainer.generalized_jsd_loss` with the prompt masked, backward, AdamW; then the evaluation step (Trainer's
    prediction_step: compute_loss under no_grad) at `eval_batch` rows. `teacher` is the second model (`ref`)."""
    from trl.experimental.gkd import GKDTrainer

    from trainlint.verify.measure import STEP_PHASES, measured_step

    batch, seq, prompt = spec["batch"], spec["seq"], spec["prompt"]
    ids = torch.randint(0, cfg.vocab_size, (batch, seq))
    labels = ids.clone()
    labels[:, :prompt] = -100
    mt.track_external(student, teacher, opt, ids, labels)

    mixed = spec.get("mixed", False)

    def logits_of(model, input_ids):
        # bf16 / fp16 mixed precision (`bf16=True`, not DeepSpeed): accelerate wraps both models' forward in
        # `convert_outputs_to_fp32` (accelerate 1.15 accelerator.py `prepare_model` l.1790-1801; GKDTrainer prepares
        # the teacher with `prepare_model(evaluation_mode=True)`, trl 1.16.0 experimental/gkd/gkd_trainer.py:194), so
        # the logits TRL reads are an fp32 copy and the 16-bit ones are freed with the model's output object
        out = run(model, input_ids=input_ids, use_cache=False)
        logits = out.logits.float() if mixed else out.logits
        del out
        return logits

    def loss_of(input_ids, lab, nograd: bool):
        s_logits = logits_of(student, input_ids)
        with torch.no_grad():
            t_logits = logits_of(teacher, input_ids)
        # TRL's own loss up to its masking; `jsd[labels != -100]` has a data-dependent shape FakeTensorMode cannot
        # track, so the same selection is taken with a static shape: the prompt's positions are the masked ones, and
        # the copy of the rest is the boolean index's result, element for element
        jsd = GKDTrainer.generalized_jsd_loss(s_logits[:, :-1, :], t_logits[:, :-1, :], labels=None,
                                              beta=spec.get("beta", 0.5), temperature=spec.get("temperature", 0.9),
                                              reduction="none")
        del s_logits, t_logits
        kept = jsd[:, prompt - 1:, :].reshape(-1, jsd.shape[-1])
        del jsd
        return kept.sum() / (kept.shape[0])

    with mt:
        for step in (1, 2):
            mt.set_phase(step, "generation")
            with torch.no_grad():  # the last decoding step without a cache: the whole prefix, one token's logits
                out = run(student, input_ids=ids, use_cache=False, logits_to_keep=1)
                del out
            measured_step(mt, step, lambda: loss_of(ids, labels, False), opt)
        if spec.get("eval_batch"):
            student.eval()
            eids = torch.randint(0, cfg.vocab_size, (spec["eval_batch"], seq))
            elabels = eids.clone()
            elabels[:, :prompt] = -100
            mt.set_phase(3, "eval")
            with torch.no_grad():
                loss = loss_of(eids, elabels, True)
                del loss
    phases = {"generation": max(int(mt.peaks[f"step{s}/generation"][0]) for s in (1, 2)),
              "train": max(int(mt.peaks.get(f"step{s}/{ph}", (0,))[0]) for s in (1, 2) for ph in STEP_PHASES)}
    if "step3/eval" in mt.peaks:
        phases["eval"] = int(mt.peaks["step3/eval"][0])
    if spec.get("detail"):  # every step's phase (for reading where the step peaks)
        phases.update({k: int(v[0]) for k, v in mt.peaks.items()})
    return phases


def jsd_tensor_counts(shapes, beta: float = 0.5, temperature: float = 0.9) -> list[dict]:
    """TRL's own `GKDTrainer.generalized_jsd_loss` alone under FakeTensorMode + StepMemTracker, for each
    (rows, seq, vocab) in `shapes`, in bf16: the peak of its forward (with grad: the student's logits a non-leaf of the
    graph, as the LM head's output; and under no_grad, as the evaluation step runs it) and of its backward, in
    vocabulary-sized tensors N = rows x (seq - 1) x vocab above the two models' own [rows x seq x vocab] logits (the
    student's is one more tensor made inside the tracked region and taken off; the leaf it comes from stands for the
    LM head's parameters and is not counted). memory.estimate JSD_TENSORS / JSD_NOGRAD_TENSORS are these counts."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from trl.experimental.gkd import GKDTrainer

    from trainlint.verify.measure import StepMemTracker

    out = []
    for rows, seq, vocab in shapes:
        rec = {"rows": rows, "seq": seq, "vocab": vocab, "beta": beta}
        for grad in (True, False):
            with FakeTensorMode(allow_non_fake_inputs=False, shape_env=ShapeEnv()):
                leaf = torch.zeros(rows, seq, vocab, dtype=torch.bfloat16, requires_grad=grad)
                teacher = torch.zeros(rows, seq, vocab, dtype=torch.bfloat16)
                mt = StepMemTracker()
                mt.track_external(leaf, teacher)
                with mt:
                    mt.set_phase(1, "forward")
                    with torch.enable_grad() if grad else torch.no_grad():
                        student = leaf * 1
                        jsd = GKDTrainer.generalized_jsd_loss(student[:, :-1, :], teacher[:, :-1, :], labels=None,
                                                              beta=beta, temperature=temperature, reduction="none")
                        loss = jsd.sum()
                        del jsd
                    if grad:
                        mt.set_phase(1, "backward")
                        loss.backward()
                    del loss, student
            n = rows * (seq - 1) * vocab * 2
            logits = rows * seq * vocab * 2
            for phase in ("forward", "backward") if grad else ("forward",):
                total = int(mt.peaks[f"step1/{phase}"][0])
                # the leaf and the teacher's logits, and the student's logits (one [rows x seq x vocab] tensor)
                rec[f"{'grad' if grad else 'nograd'}_{phase}"] = round((total - 3 * logits) / n, 3)
        out.append(rec)
    return out
