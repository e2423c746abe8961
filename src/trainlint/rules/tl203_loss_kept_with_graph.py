"""TL203 loss-kept-with-graph: a loop accumulates a loss tensor whose autograd graph nothing frees, so every
iteration's saved activations stay alive and memory grows step after step.

Docs: rules/TL203.md. Facts: facts/loops.py (which loops keep the graph, and why a loop that calls
`loss.backward()` each step does not). The number: memory.estimate.graph_bytes.
"""

from __future__ import annotations

from trainlint.context import FileContext
from trainlint.edits import make_fix, replace
from trainlint.memory import fmt_bytes
from trainlint.rules.base import Rule, rule


def per_iteration(ctx: FileContext) -> str:
    """' (~X per iteration for <model> at batch B x S)' when the model, batch and length are known."""
    from trainlint.memory.estimate import graph_bytes
    from trainlint.planning import Overrides, PlanError, plan_for

    try:
        plan, _model, _notes, unknown = plan_for(ctx, Overrides())
    except PlanError:
        return ""
    if unknown:
        return ""
    return f" (~{fmt_bytes(graph_bytes(plan))} per iteration at batch {plan.batch} x {plan.seq:,} tokens)"


@rule("TL203", "loss-kept-with-graph", consumer="activations (autograd graph)",
      summary="A loop accumulates a loss tensor while nothing frees its autograd graph, so every iteration's "
              "activations stay alive.",
      fix_hint="accumulate `loss.detach()` / `.item()`; evaluate under `torch.no_grad()`; backward per micro-batch",
      fix="safe", verifies="memory")
def check(self: Rule, ctx: FileContext):
    size = None
    for acc in ctx.facts.loss_accumulations:
        if size is None:
            size = per_iteration(ctx)
        if acc.shape == "no_backward":
            why = ("this loop runs no backward and is not under torch.no_grad(), so every iteration's autograd graph, "
                   "with the activations it saved" + size + ", stays referenced by it and memory grows step after "
                   f"step; accumulate {acc.fix_text} (or .item() when the value is only logged) and run evaluation "
                   "under torch.no_grad()")
        elif acc.shape == "retained":
            why = ("backward(retain_graph=True) keeps the saved tensors of the graph, and it keeps the graph, so every "
                   "iteration's activations" + size + f" stay alive and memory grows step after step; accumulate "
                   f"{acc.fix_text} (or .item())")
        else:
            why = (f"{acc.target}.backward() runs on the sum, so the graphs of all the iterations summed into it, with "
                   "their activations" + size + ", stay alive until then; call backward on each micro-batch's loss "
                   "divided by the number of micro-batches instead (the gradients add up the same)")
        diag = self.diagnostic(ctx, acc.span, f"`{acc.target}` accumulates the loss tensor `{acc.value}`: {why}")
        fix = None
        if acc.fix_span is not None and acc.fix_text is not None:
            # safe: the accumulated numbers are the same; no gradient flows through the accumulator (it is never
            # backpropagated: the "deferred" shape, where it is, gets no fix)
            fix = make_fix("safe", f"Accumulate {acc.fix_text}", replace(acc.fix_span, acc.fix_text))
        yield diag.with_fix(fix)
