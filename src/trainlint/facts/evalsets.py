"""The size of a trainer's eval set, when the script writes it: `split="test[:500]"`, `.select(range(500))`,
`.take(500)`, `train_test_split(test_size=200)["test"]` (TL302 multiplies the logits kept per example by it).
Anything else (a percentage, a filter, a file whose length is not written) is unknown: no size is guessed."""

from __future__ import annotations

import re
import libcst as cst

from trainlint.facts.model import EvalSet

_SPLIT_SLICE = re.compile(r"^\s*\w+\s*\[\s*(-?\d*)\s*:\s*(-?\d*)\s*\]\s*$")


def eval_sets(collector, resolver, trainers) -> tuple[EvalSet, ...]:
    """One EvalSet per trainer call that passes `eval_dataset=`."""
    out = []
    by_index = {raw.index: raw for raw in (*collector.raw_calls, *collector.hop_calls)}
    for trainer in trainers:
        raw = by_index.get(trainer.call.index)
        if raw is None:
            continue
        node = next((a.value for a in raw.node.args if a.keyword is not None and a.keyword.value == "eval_dataset"),
                    None)
        if node is None:
            continue
        size, how = _size(node, raw.scope, collector, resolver, 0)
        out.append(EvalSet(trainer.call.index, size, how))
    return tuple(out)


def _int(node: cst.BaseExpression, scope: str, resolver) -> int | None:
    value = resolver.value(node, scope)
    v = value.value if value.known else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _size(node: cst.BaseExpression, scope: str, collector, resolver, depth: int) -> tuple[int | None, str]:
    if depth > 8:
        return None, ""
    if isinstance(node, cst.Name):
        for where in (scope, "<module>"):
            bound = collector.bindings.get((where, node.value))
            if bound:
                if len(bound) != 1 or bound[0] is None:
                    return None, ""
                return _size(bound[0], where, collector, resolver, depth + 1)
        return None, ""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        method = node.func.attr.value
        if method == "select" and node.args:
            return _range_len(node.args[0].value, scope, resolver)
        if method == "take" and node.args:
            n = _int(node.args[0].value, scope, resolver)
            return n, f".take({n})" if n is not None else ""
    if isinstance(node, cst.Call):
        func = node.func.attr.value if isinstance(node.func, cst.Attribute) else getattr(node.func, "value", None)
        if func == "load_dataset":
            split = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "split"), None)
            if isinstance(split, cst.SimpleString):
                return _split_len(split.evaluated_value)
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        key = node.slice[0].slice
        if isinstance(key, cst.Index) and isinstance(key.value, cst.SimpleString) and \
                key.value.evaluated_value == "test":
            base = node.value
            if isinstance(base, cst.Name):
                bound = collector.bindings.get((scope, base.value)) or collector.bindings.get(("<module>", base.value))
                base = bound[0] if bound and len(bound) == 1 and bound[0] is not None else base
            if isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute) and \
                    base.func.attr.value == "train_test_split":
                test = next((a.value for a in base.args if a.keyword is not None and a.keyword.value == "test_size"),
                            None)
                if test is not None:
                    n = _int(test, scope, resolver)
                    return n, f"train_test_split(test_size={n})" if n is not None else ""
    return None, ""


def _range_len(node: cst.BaseExpression, scope: str, resolver) -> tuple[int | None, str]:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "list" and node.args:
        node = node.args[0].value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "range" and \
            1 <= len(node.args) <= 2:
        bounds = [_int(a.value, scope, resolver) for a in node.args]
        if any(b is None for b in bounds):
            return None, ""
        n = bounds[0] if len(bounds) == 1 else max(0, bounds[1] - bounds[0])
        return n, f".select(range({', '.join(map(str, bounds))}))"
    return None, ""


def _split_len(split: str | bytes) -> tuple[int | None, str]:
    if not isinstance(split, str):
        return None, ""
    m = _SPLIT_SLICE.match(split)
    if not m or not m.group(2) or m.group(2).startswith("-") or (m.group(1) or "0").startswith("-"):
        return None, ""  # "test[:10%]", "test[-100:]", "test": the length is not written
    n = int(m.group(2)) - int(m.group(1) or 0)
    return (n, f'split="{split}"') if n >= 0 else (None, "")
