"""Evaluating expressions of a script statically, with what the facts visitor saw: literals, arithmetic, names
bound once, `**dict(...)`, `args.x` from argparse / dataclass defaults, `a if t else b`. Anything that is not
provably constant is unknown; a value read from the command line is a Param, one a function receives an Arg."""

from __future__ import annotations

import libcst as cst

from trainlint.diagnostics import Span
from trainlint.facts import params as P
from trainlint.facts.model import SYMBOLIC, Arg, Compare, Cond, Param
from trainlint.facts.names import CONFIG_CLASS_RE, MODULE_SCOPE
from trainlint.facts.values import UNKNOWN, Value, known

_MAX_DEPTH = 24
_SAME_CONFIG = {"omegaconf.OmegaConf.to_container", "omegaconf.OmegaConf.to_object", "omegaconf.OmegaConf.create",
                "omegaconf.DictConfig", "builtins.dict", "dict"}
TORCH_DTYPES = {"float32", "float", "bfloat16", "float16", "half", "float64", "double", "int8", "uint8"}


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return ""


def _dotted_or_none(node: cst.BaseExpression) -> str | None:
    return _dotted(node) or None



class _Resolver:
    """Evaluates expressions with what the collector saw. Anything not provably constant is UNKNOWN."""

    def __init__(self, c) -> None:  # the facts visitor (collector._Collector)
        self.c = c

    def value(self, node: cst.BaseExpression | None, scope: str, span: Span | None = None, depth: int = 0) -> Value:
        if node is None:
            return UNKNOWN
        if depth > _MAX_DEPTH:
            return UNKNOWN
        raw = self._eval(node, scope, depth)
        if raw is _NOPE:
            return UNKNOWN
        value, via, origin = raw
        if isinstance(value, Param):
            return Value("param", value, value.span, "param")
        if isinstance(value, (Arg, Cond, Compare)):
            return Value("param", value, origin or span, "param")
        return known(value, origin or span, via)

    def _eval(self, node: cst.BaseExpression, scope: str, depth: int):
        """Return (python value, via, origin span) or _NOPE."""
        if depth > _MAX_DEPTH:
            return _NOPE
        if isinstance(node, (cst.Integer, cst.Float)):
            return node.evaluated_value, "literal", None
        if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
            try:
                value = node.evaluated_value
            except Exception:  # noqa: BLE001 - an odd literal is unknown, never a crash
                return _NOPE
            return (value, "literal", None) if isinstance(value, str) else _NOPE
        if isinstance(node, cst.Name):
            if node.value in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.value], "literal", None
            return self._lookup(node.value, scope, depth)
        if isinstance(node, cst.UnaryOperation):
            inner = self._eval(node.expression, scope, depth + 1)
            if inner is _NOPE:
                return _NOPE
            v = inner[0]
            if isinstance(node.operator, cst.Minus) and _is_number(v):
                return -v, inner[1], inner[2]
            if isinstance(node.operator, cst.Plus) and _is_number(v):
                return v, inner[1], inner[2]
            if isinstance(node.operator, cst.Not) and isinstance(v, bool):
                return (not v), inner[1], inner[2]
            return _NOPE
        if isinstance(node, cst.BinaryOperation):
            left = self._eval(node.left, scope, depth + 1)
            right = self._eval(node.right, scope, depth + 1)
            if left is _NOPE or right is _NOPE:
                return _NOPE
            result = _arith(node.operator, left[0], right[0])
            if result is _NOPE:
                return _NOPE
            via = "literal" if left[1] == right[1] == "literal" else "constant"
            return result, via, None
        if isinstance(node, cst.Attribute):
            return self._attribute(node, scope, depth)
        if isinstance(node, cst.Dict):
            return self._dict(node.elements, scope, depth)
        if isinstance(node, (cst.List, cst.Tuple)):
            items = []
            for element in node.elements:
                if isinstance(element, cst.StarredElement):
                    return _NOPE
                item = self._eval(element.value, scope, depth + 1)
                items.append(UNKNOWN if item is _NOPE else item[0])
            return items, "literal", None
        if isinstance(node, cst.Call):
            return self._call(node, scope, depth)
        if isinstance(node, cst.Subscript):
            return self._subscript(node, scope, depth)
        if isinstance(node, cst.IfExp):
            return self._ifexp(node, scope, depth)
        if isinstance(node, cst.Comparison):
            return self._comparison(node, scope, depth)
        return _NOPE

    _OPS = {cst.Equal: "==", cst.NotEqual: "!=", cst.In: "in", cst.NotIn: "not in", cst.Is: "is", cst.IsNot: "is not"}

    def _comparison(self, node: cst.Comparison, scope: str, depth: int):
        """`"70B" in config.model_name`, `args.mode == "lora"`: decided when both sides are constants, a Compare
        when a side is a parameter or an argument (a launch or a caller decides it), else unknown."""
        if len(node.comparisons) != 1:
            return _NOPE  # chained comparisons: not read
        target = node.comparisons[0]
        op = self._OPS.get(type(target.operator))
        left, right = self._eval(node.left, scope, depth + 1), self._eval(target.comparator, scope, depth + 1)
        if op is None or left is _NOPE or right is _NOPE:
            return _NOPE
        if isinstance(left[0], SYMBOLIC) or isinstance(right[0], SYMBOLIC):
            return Compare(op, self.value(node.left, scope, None, depth + 1),
                           self.value(target.comparator, scope, None, depth + 1)), "param", None
        decided = Compare(op, UNKNOWN, UNKNOWN).decide(left[0], right[0])
        return _NOPE if decided is None else (decided, "constant", None)

    def _ifexp(self, node: cst.IfExp, scope: str, depth: int):
        """`"flash_attention_2" if args.flash_attn else "eager"`: one branch when the test is a constant, a Cond
        when it is a parameter or an argument (a launch or a caller decides it), else unknown."""
        test, negate = node.test, False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negate = test.expression, True
        condition = self._eval(test, scope, depth + 1)
        if condition is _NOPE:
            return _NOPE
        branches = (self.value(node.body, scope, self.c._span(node.body), depth + 1),
                    self.value(node.orelse, scope, self.c._span(node.orelse), depth + 1))
        if isinstance(condition[0], (Param, Arg, Cond)):
            test_value = self.value(test, scope, None, depth + 1)
            return Cond(test_value, *branches, negate=negate), "param", None
        chosen = branches[0] if bool(condition[0]) != negate else branches[1]
        if not chosen.known:
            return _NOPE if chosen.unknown else (chosen.value, "param", chosen.origin)
        return chosen.value, chosen.via, chosen.origin

    def _lookup(self, name: str, scope: str, depth: int):
        if name in self.c.imports:
            return _NOPE
        for candidate in _enclosing_scopes(scope):
            bound = self.c.bindings.get((candidate, name))
            if bound is None:
                continue
            if len(bound) == 1 and bound[0] is None and (candidate, name) in self.c.func_params:
                return Arg(candidate, name), "param", None  # the caller decides it
            if len(bound) != 1 or bound[0] is None:
                return _NOPE
            inner = self._eval(bound[0], candidate, depth + 1)
            if inner is _NOPE:
                return _NOPE
            return inner[0], "constant", inner[2] or self.c.literal_spans.get(id(bound[0]))
        return _NOPE

    def _chain(self, node: cst.BaseExpression, scope: str):
        """`cfg.model.name_or_path`, `cfg["model"]["name_or_path"]` on a Hydra / OmegaConf config: its Param (the
        dotted path as attribute); on a function's parameter, two levels deep or through string keys, its Arg (the
        caller passes `cfg` or `cfg.model`, facts/inline.py); None otherwise."""
        parts: list[str] = []
        subscripted = False
        while True:
            if isinstance(node, cst.Attribute):
                parts.insert(0, node.attr.value)
                node = node.value
            elif isinstance(node, cst.Subscript) and len(node.slice) == 1 and \
                    isinstance(node.slice[0].slice, cst.Index) and \
                    isinstance(node.slice[0].slice.value, cst.SimpleString):
                key = node.slice[0].slice.value.evaluated_value
                if not isinstance(key, str):
                    return None
                parts.insert(0, key)
                node = node.value
                subscripted = True
            else:
                break
        if not isinstance(node, cst.Name) or not parts or node.value in self.c.imports:
            return None
        visible = getattr(self.c, "_hydra_visible", None)
        if visible is not None and visible(node.value, scope):
            return Param(node.value, ".".join(parts))
        if len(parts) >= 2 or subscripted:
            owner = self._parameter_scope(node.value, scope)
            if owner is not None and getattr(self.c, "_hydra_imported", lambda: False)():
                return Arg(owner, node.value, ".".join(parts))
        return None

    def _attribute(self, node: cst.Attribute, scope: str, depth: int):
        chained = self._chain(node, scope)
        if chained is not None:
            return chained, "param", None
        # `args.batch_size` read back from an argparse default, `cfg.max_len` from a dataclass default
        if isinstance(node.value, cst.Name) and self.c.imports.get(node.value.value, "").endswith("TaskType"):
            return node.attr.value, "literal", None  # peft's TaskType.SEQ_CLS is the string "SEQ_CLS"
        if isinstance(node.value, cst.Name) and self.c.imports.get(node.value.value) == "torch" and \
                node.attr.value in TORCH_DTYPES:
            return node.attr.value, "literal", None  # torch.bfloat16 is read as "bfloat16"
        if not isinstance(node.value, cst.Name) or node.value.value in self.c.imports:
            return _NOPE
        attr = node.attr.value
        if node.value.value in self.c.parsed_names:
            # read from the command line: symbolic until a launch (or the defaults) decides it
            return Param(node.value.value, attr), "param", None
        owner = self._parameter_scope(node.value.value, scope)
        if owner is not None:  # `model_args.model_name_or_path` where model_args is a parameter
            return Arg(owner, node.value.value, attr), "param", None
        candidates = []
        for table, via in ((self.c.argparse_defaults, "argparse default"), (self.c.dataclass_fields,
                                                                           "dataclass default")):
            for default in table.get(attr, ()):
                candidates.append((default, via))
        if not candidates:
            return _NOPE
        results = set()
        via = candidates[0][1]
        origin = self.c.literal_spans.get(id(candidates[0][0])) if len(candidates) == 1 else None
        for default, _ in candidates:
            if default is None:
                return _NOPE
            inner = self._eval(default, MODULE_SCOPE, depth + 1)
            if inner is _NOPE or not _hashable(inner[0]):
                return _NOPE
            results.add(inner[0])
        if len(results) != 1:
            return _NOPE
        return results.pop(), via, origin

    def _parameter_scope(self, name: str, scope: str) -> str | None:
        """The function whose (never rebound) parameter `name` is, seen from `scope`."""
        for candidate in _enclosing_scopes(scope):
            bound = self.c.bindings.get((candidate, name))
            if bound is None:
                continue
            return candidate if len(bound) == 1 and bound[0] is None and (candidate, name) in self.c.func_params \
                else None
        return None

    def _dict(self, elements, scope: str, depth: int):
        out: dict = {}
        for element in elements:
            if isinstance(element, cst.StarredDictElement):
                inner = self._eval(element.value, scope, depth + 1)
                if inner is _NOPE or not isinstance(inner[0], dict):
                    return _NOPE
                out.update(inner[0])
                continue
            key = self._eval(element.key, scope, depth + 1)
            if key is _NOPE or not isinstance(key[0], str):
                return _NOPE
            value = self._eval(element.value, scope, depth + 1)
            out[key[0]] = UNKNOWN if value is _NOPE else value[0]
        return out, "literal", None

    def _call(self, node: cst.Call, scope: str, depth: int):
        name = _dotted(node.func)
        if name == "dict":
            out: dict = {}
            for arg in node.args:
                if arg.star == "**":
                    inner = self._eval(arg.value, scope, depth + 1)
                    if inner is _NOPE or not isinstance(inner[0], dict):
                        return _NOPE
                    out.update(inner[0])
                elif arg.keyword is not None:
                    value = self._eval(arg.value, scope, depth + 1)
                    out[arg.keyword.value] = UNKNOWN if value is _NOPE else value[0]
                else:
                    return _NOPE
            return out, "literal", None
        if name in ("int", "float") and len(node.args) == 1 and node.args[0].keyword is None:
            inner = self._eval(node.args[0].value, scope, depth + 1)
            if inner is _NOPE or not _is_number(inner[0]):
                return _NOPE
            return (int(inner[0]) if name == "int" else float(inner[0])), inner[1], inner[2]
        short = name.split(".")[-1]
        if CONFIG_CLASS_RE.match(short) and short != "AutoConfig":
            # `BitsAndBytesConfig(load_in_4bit=True)`, `LoraConfig(r=16, ...)`: read as their keywords
            out = {"__class__": short}
            for arg in node.args:
                if arg.keyword is None:
                    return _NOPE if arg.star else (out, "literal", None)
                value = self._eval(arg.value, scope, depth + 1)
                out[arg.keyword.value] = UNKNOWN if value is _NOPE else value[0]
            return out, "literal", None
        if name.split(".")[-1] == "get_peft_config" and len(node.args) == 1 and \
                isinstance(node.args[0].value, cst.Name) and node.args[0].value.value in self.c.parsed_names:
            # trl's get_peft_config(model_args): a LoraConfig when --use_peft, else None
            return Param(node.args[0].value.value, P.PEFT_CONFIG), "param", None
        qualname = getattr(self.c, "qualname", None)
        if qualname is not None and node.args and node.args[0].keyword is None and qualname(node.func) in _SAME_CONFIG:
            return self._eval(node.args[0].value, scope, depth + 1)  # `OmegaConf.to_container(cfg.training)`
        if name in ("field", "dataclasses.field"):
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value == "default":
                    return self._eval(arg.value, scope, depth + 1)
        return _NOPE

    def _subscript(self, node: cst.Subscript, scope: str, depth: int):
        chained = self._chain(node, scope)
        if chained is not None:
            return chained, "param", None
        # `MODEL_REGISTRY[args.model_type]`: a registry dict of classes read by a key (facts/extract.py reads it)
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return _NOPE
        container = self._eval(node.value, scope, depth + 1)
        key = self._eval(node.slice[0].slice.value, scope, depth + 1)
        if container is _NOPE or key is _NOPE:
            return _NOPE
        try:
            value = container[0][key[0]]
        except (KeyError, IndexError, TypeError):
            return _NOPE
        if isinstance(value, Value):
            return _NOPE
        return value, container[1], None


class _Nope:
    def __repr__(self) -> str:
        return "<unresolved>"


_NOPE = _Nope()


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _hashable(v) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _arith(op: cst.BaseBinaryOp, a, b):
    if isinstance(a, str) and isinstance(b, str) and isinstance(op, cst.Add):
        return a + b
    if not (_is_number(a) and _is_number(b)):
        return _NOPE
    try:
        if isinstance(op, cst.Add):
            return a + b
        if isinstance(op, cst.Subtract):
            return a - b
        if isinstance(op, cst.Multiply):
            return a * b
        if isinstance(op, cst.Divide):
            return a / b
        if isinstance(op, cst.FloorDivide):
            return a // b
        if isinstance(op, cst.Modulo):
            return a % b
        if isinstance(op, cst.Power):
            if abs(b) > 64:
                return _NOPE
            return a**b
    except (ZeroDivisionError, OverflowError):
        return _NOPE
    return _NOPE


def _enclosing_scopes(scope: str) -> list[str]:
    if scope == MODULE_SCOPE:
        return [MODULE_SCOPE]
    parts = scope.split(".")
    out = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
    return [s for s in out if not s.split(".")[-1].startswith("class ")] + [MODULE_SCOPE]  # (not class bodies)
