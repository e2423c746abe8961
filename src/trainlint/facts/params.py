"""The script's command-line surface, read in the facts pass: argument dataclasses, HfArgumentParser /
TrlParser / argparse parsers and the variables their parse calls fill. Kept symbolic (see facts.Param):
the launch layer binds values to these names, the context resolves them."""

from __future__ import annotations

from typing import Callable

import libcst as cst

from trainlint.diagnostics import Span
from trainlint.facts.model import PEFT_CONFIG, ArgparseParam, ClassDef, FieldDef, ParsedObject  # noqa: F401
from trainlint.facts.values import UNKNOWN, UNSET, Value


DATACLASS_PARSE = {"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict",
                   "parse_args_and_config"}
ARGPARSE_PARSE = {"parse_args", "parse_known_args", "parse_intermixed_args"}
_PARSERS = {"HfArgumentParser": "hf", "TrlParser": "trl", "ArgumentParser": "argparse"}


# A parser class of the repository's own (alignment-handbook's `H4ArgumentParser((ModelArguments, ...))`): read as
# HfArgumentParser only once facts/modules.py has confirmed, in the repository, that it derives from it.
CANDIDATE = "hf?"


def parser_kind(node: cst.BaseExpression, qualname: Callable[[cst.BaseExpression], str | None]) -> str | None:
    """"hf" | "trl" | "argparse" when `node` constructs one of those parsers; CANDIDATE for another class
    named like a parser that is given dataclasses (a repository's subclass of HfArgumentParser, maybe)."""
    if not isinstance(node, cst.Call):
        return None
    full = qualname(node.func) or ""
    name = full.split(".")[-1]
    if name in _PARSERS:
        return _PARSERS[name]
    first = next((a.value for a in node.args if a.keyword is None), None)
    if name.endswith(("Parser", "ParserPlus")) and full.split(".")[0] not in ("argparse", "transformers", "trl") \
            and isinstance(first, (cst.Tuple, cst.List, cst.Name)):
        return CANDIDATE
    return None


def parse_call(node: cst.BaseExpression) -> tuple[cst.BaseExpression, str, int | None] | None:
    """`parser.parse_args_into_dataclasses()` (optionally `[i]`): (the receiver, method, index)."""
    index = None
    if isinstance(node, cst.Subscript) and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index) \
            and isinstance(node.slice[0].slice.value, cst.Integer):
        index = int(node.slice[0].slice.value.value)
        node = node.value
    if not (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute)):
        return None
    method = node.func.attr.value
    if method not in DATACLASS_PARSE | ARGPARSE_PARSE | {"parse"}:  # ("parse": a candidate parser's, see CANDIDATE)
        return None
    return node.func.value, method, index


def is_argv_suffix_test(node: cst.Call) -> bool:
    """`sys.argv[1].endswith(".json")` (or ".yaml"): the script reads a single args file when given one."""
    func = node.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Subscript)):
        return False
    base = func.value.value
    if not (isinstance(base, cst.Attribute) and base.attr.value == "argv"):
        return False
    return any(isinstance(a.value, cst.SimpleString) and a.value.value.strip("'\"") in (".json", ".yaml", ".yml")
               for a in node.args)


def annotation_kind(node: cst.BaseExpression | None) -> str:
    """bool / optional_bool / int / float / str / list / dict / dict_or_str / other, from a field annotation."""
    if node is None:
        return "other"
    if isinstance(node, cst.SimpleString):  # `"Optional[int]"` string annotations
        try:
            return annotation_kind(cst.parse_expression(node.evaluated_value))
        except Exception:  # noqa: BLE001 - an odd annotation is simply "other"
            return "other"
    if isinstance(node, cst.Name):
        return {"bool": "bool", "int": "int", "float": "float", "str": "str", "list": "list", "dict": "dict",
                "List": "list", "Dict": "dict"}.get(node.value, "other")
    if isinstance(node, cst.Attribute):
        return annotation_kind(node.attr)
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.BitOr):
        return _union([node.left, node.right])
    if isinstance(node, cst.Subscript):
        outer = node.value.attr.value if isinstance(node.value, cst.Attribute) else \
            node.value.value if isinstance(node.value, cst.Name) else ""
        inner = [e.slice.value for e in node.slice if isinstance(e.slice, cst.Index)]
        if outer == "Optional" and len(inner) == 1:
            return _union([inner[0], cst.Name("None")])
        if outer == "Union":
            return _union(inner)
        if outer in ("list", "List", "Sequence", "tuple", "Tuple"):
            return "list"
        if outer in ("dict", "Dict", "Mapping"):
            return "dict"
        if outer == "Literal":
            return "str"
    return "other"


def _union(members: list[cst.BaseExpression]) -> str:
    kinds = [("none" if isinstance(m, cst.Name) and m.value == "None" else annotation_kind(m)) for m in members]
    real = [k for k in kinds if k != "none"]
    if real == ["bool"]:
        return "optional_bool" if "none" in kinds else "bool"
    if len(real) == 1:
        return real[0]
    if sorted(real) == ["dict", "str"]:
        return "dict_or_str"
    return "other"


class ParamCollector:
    """Called from the facts visitor; builds the ScriptFacts fields of the command-line surface."""

    def __init__(self) -> None:
        self._classes: dict[str, tuple[list[str], list[tuple[str, cst.BaseExpression, cst.BaseExpression | None,
                                                             bool]]]] = {}
        self._parsers: dict[str, tuple[str, list[str]]] = {}  # variable -> (kind, dataclass names)
        # variable, class, method, span, kind, the parser's class (CANDIDATE only)
        self._parsed: list[tuple[str, str | None, str, Span, str, str | None]] = []
        self._argparse: list[tuple[str, list, cst.Call, cst.BaseExpression | None]] = []
        self.json_argv_branch = False
        self.parse_functions: dict[str, tuple] = {}  # function name -> the parse call it returns
        self.parser_classes: dict[str, str] = {}  # CANDIDATE parser variable -> its class, qualified

    def class_started(self, name: str, bases: list[str]) -> None:
        self._classes[name] = (bases, [])

    def class_names(self) -> list[str]:
        return list(self._classes)

    def field(self, cls: str, name: str, annotation, default, has_value: bool) -> None:
        if cls in self._classes:
            self._classes[cls][1].append((name, annotation, default, has_value))

    def parser_created(self, variable: str, kind: str, call: cst.Call, qualname, bound=None) -> None:
        """`bound(name)`: the one value a name is bound to in the scope (`dataclass_types = (A, B)` then
        `TrlParser(dataclass_types)`), or None."""
        classes: list[str] = []
        node = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "dataclass_types"), None)
        if isinstance(node, cst.Name) and bound is not None and isinstance(bound(node.value), (cst.Tuple, cst.List)):
            node = bound(node.value)
        items = [e.value for e in node.elements] if isinstance(node, (cst.Tuple, cst.List)) else \
            [node] if node is not None else []
        for item in items:
            name = qualname(item) if isinstance(item, (cst.Name, cst.Attribute)) else None
            classes.append(name.split(".")[-1] if name else "?")
        self._parsers[variable] = (kind, classes if kind != "argparse" else [])
        if kind == CANDIDATE:
            self.parser_classes[variable] = qualname(call.func) or ""

    def is_candidate(self, receiver: cst.BaseExpression) -> bool:
        return isinstance(receiver, cst.Name) and self._parsers.get(receiver.value, ("",))[0] == CANDIDATE

    def parse_assigned(self, target: cst.BaseExpression, receiver_node: cst.BaseExpression, method: str,
                       index: int | None, span: Span, qualname) -> None:
        receiver = receiver_node.value if isinstance(receiver_node, cst.Name) else None
        inline = parser_kind(receiver_node, qualname)
        if inline is not None:  # `HfArgumentParser((A, B)).parse_args_into_dataclasses()`
            receiver = f"<parser {len(self._parsers)}>"
            self.parser_created(receiver, inline, receiver_node, qualname)
        kind, classes = self._parsers.get(receiver or "", ("argparse" if method in ARGPARSE_PARSE else "hf", []))
        pclass = self.parser_classes.get(receiver or "") if kind == CANDIDATE else None
        if kind == "argparse" or method in ARGPARSE_PARSE:
            first = target.elements[0].value if isinstance(target, (cst.Tuple, cst.List)) and target.elements \
                else target
            if isinstance(first, cst.Name):
                self._parsed.append((first.value, None, method, span, "argparse", None))
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
        elif isinstance(target, cst.Name) and index is None and method == "parse" and kind == CANDIDATE and \
                len(classes) == 1:
            # `args = parser.parse()` of a repository's HfArgumentParser subclass given one dataclass: the parse
            # methods people write return the dataclass itself then (`if len(output) == 1: output = output[0]`, as
            # in alignment-handbook's H4ArgumentParser and open-instruct's ArgumentParserPlus)
            names = [target.value]
        else:
            names = [target.value] if isinstance(target, cst.Name) and index is not None else []
            offset = index or 0
            names = [None] * offset + names
        for i, name in enumerate(names):
            if name is not None:
                self._parsed.append((name, classes[i] if i < len(classes) else None, method, span, kind, pclass))

    def argparse_argument(self, dest: str, flags: list, node: cst.Call, default) -> None:
        self._argparse.append((dest, flags, node, default))

    def build(self, resolve: Callable[[cst.BaseExpression | None], Value], literal_spans: dict[int, Span]) -> dict:
        def default_of(node, via: str) -> Value:
            value = resolve(node)
            if value.known:
                return Value("known", value.value, literal_spans.get(id(node)) or value.origin, via)
            return value

        classes = []
        for name, (bases, fields) in self._classes.items():
            defs = []
            for field_name, annotation, default, has_value in fields:
                if not has_value:
                    value = UNSET  # required (or a default_factory, which `field(default=)` reading leaves out)
                elif default is None:
                    value = UNKNOWN
                else:
                    value = default_of(default, "dataclass default")
                defs.append(FieldDef(field_name, annotation_kind(annotation), value))
            classes.append(ClassDef(name, tuple(bases), tuple(defs)))
        merged: dict[str, list] = {}
        for variable, cls, method, span, kind, pclass in self._parsed:
            merged.setdefault(variable, []).append((cls, method, span, kind, pclass))
        parsed = []
        for variable, uses in merged.items():
            names = {u[0] for u in uses}
            cls = names.pop() if len(names) == 1 else None
            parsed.append(ParsedObject(variable, uses[0][3], cls, tuple(dict.fromkeys(u[1] for u in uses)), uses[0][2],
                                       uses[0][4]))
        params = [_argparse_param(dest, flags, node, default, default_of) for dest, flags, node, default
                  in self._argparse]
        return dict(classes=tuple(classes), argparse_params=tuple(params), parsed=tuple(parsed),
                    json_argv_branch=self.json_argv_branch)


def _argparse_param(dest: str, flags: list, node: cst.Call, default, default_of) -> ArgparseParam:
    kw = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
    action = kw.get("action")
    action_name = action.evaluated_value if isinstance(action, cst.SimpleString) else None
    type_node = kw.get("type")
    type_name = type_node.value if isinstance(type_node, cst.Name) else \
        type_node.attr.value if isinstance(type_node, cst.Attribute) else ""
    kind = type_name if type_name in ("int", "float", "str") else \
        "bool" if "bool" in type_name.lower() else "str" if type_node is None else "other"
    nargs_node = kw.get("nargs")
    nargs = nargs_node.evaluated_value if isinstance(nargs_node, cst.SimpleString) else \
        int(nargs_node.value) if isinstance(nargs_node, cst.Integer) else None
    required = isinstance(kw.get("required"), cst.Name) and kw["required"].value == "True"
    if required:
        value = UNSET
    elif default is None:
        value = Value("known", None, None, "argparse default")  # argparse stores None when no default is given
    else:
        value = default_of(default, "argparse default")
    const = default_of(kw["const"], "argparse const") if "const" in kw else UNSET
    return ArgparseParam(dest, tuple(f for f in flags if isinstance(f, str)), action_name, kind, nargs, value, const)
