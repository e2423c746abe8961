"""What the argument dataclasses' __post_init__ does to the fields trainlint decides on, per version: the recorded
`self.<field> = ...` statements (arguments.json, bench/gen_argument_fields.py: small JSON expression trees in source
order) listed (`post_init_rules`) and run over known values (`effective_values`). Nothing is imported or executed:
a condition on an unknown value leaves the field Unresolved, naming the statement."""

from __future__ import annotations

import json
from dataclasses import dataclass

from trainlint.knowledge.arguments import EnvDependent, Unresolved, _chain_for, _Required, library_fields
from trainlint.knowledge.versions import Versions, parse_version

# --------------------------------------------------------------------------------------------------------------
# __post_init__
# --------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PostInitStep:
    """One `self.<field> = ...` of a __post_init__ (for the fields trainlint decides on), as read from the source."""

    field: str
    action: str        # "set" | "setdefault"
    value: str         # the expression, in a small readable form
    when: str | None   # the conditions of the enclosing `if`s
    source: str        # "trl 1.16.0 trl/trainer/base_config.py:108"


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


_UNKNOWN = _Unknown()


# An operator's expression as Python text: its template, and which of its operands are expressions to show (the others
# are literal names, written with repr); None: one operand, an expression.
_FORMS = {
    "is_none": ("{} is None", None),
    "eq": ("{} == {}", (True, True)),
    "in": ("{} in {}", (True, True)),
    "index": ("{}[{!r}]", (True, False)),
    "len": ("len({})", None),
    "hasattr": ("hasattr({}, {!r})", (True, False)),
}


def _show(e: dict) -> str:
    if "self" in e:
        return e["self"]
    if "const" in e:
        return repr(e["const"])
    if "not" in e:
        inner = e["not"]
        if "is_none" in inner:
            return f"{_show(inner['is_none'])} is not None"
        return f"not {_show(inner)}"
    if "and" in e or "or" in e:
        op = "and" if "and" in e else "or"
        return f" {op} ".join(f"({_show(x)})" if ("and" in x or "or" in x) else _show(x) for x in e[op])
    if "ifelse" in e:
        c, a, b = e["ifelse"]
        return f"{_show(a)} if {_show(c)} else {_show(b)}"
    for key, (template, shown) in _FORMS.items():
        if key in e:
            if shown is None:
                return template.format(_show(e[key]))
            return template.format(*(_show(x) if s else x for x, s in zip(e[key], shown)))
    if "isinstance" in e:
        return f"isinstance({_show(e['isinstance'][0])}, {'/'.join(e['isinstance'][1])})"
    if "version" in e:
        lib, op, ver = e["version"]
        return f"{lib} {op} {ver}"
    return e.get("opaque", "?")


_TYPES = {"bool": bool, "int": int, "float": float, "str": str, "dict": dict, "list": list, "tuple": tuple}


def _version_cmp(have: tuple[int, ...], op: str, want: tuple[int, ...]) -> bool:
    n = max(len(have), len(want))
    a, b = have + (0,) * (n - len(have)), want + (0,) * (n - len(want))
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _eval(e: dict, values: dict[str, object], versions: Versions) -> object:
    """Python semantics over known values; _UNKNOWN as soon as an unknown value decides the result."""
    if "self" in e:
        v = values.get(e["self"], _UNKNOWN)
        return _UNKNOWN if isinstance(v, (Unresolved, EnvDependent, _Required)) else v
    if "const" in e:
        return json.loads(json.dumps(e["const"]))  # a fresh copy: __post_init__ may mutate it
    if "not" in e:
        v = _eval(e["not"], values, versions)
        return _UNKNOWN if v is _UNKNOWN else not v
    if "and" in e or "or" in e:
        is_and = "and" in e
        v: object = None
        for sub in e["and" if is_and else "or"]:
            v = _eval(sub, values, versions)
            if v is _UNKNOWN or (not v if is_and else bool(v)):
                return v
        return v
    if "ifelse" in e:
        c = _eval(e["ifelse"][0], values, versions)
        if c is _UNKNOWN:
            return _UNKNOWN
        return _eval(e["ifelse"][1] if c else e["ifelse"][2], values, versions)
    if "version" in e:
        lib, op, ver = e["version"]
        lv = getattr(versions, lib, None)
        return _UNKNOWN if lv is None else _version_cmp(lv.tuple, op, parse_version(ver))
    args = {k: v for k, v in e.items()}
    try:
        if "is_none" in args:
            v = _eval(args["is_none"], values, versions)
            return _UNKNOWN if v is _UNKNOWN else v is None
        if "eq" in args or "in" in args:
            a, b = (_eval(x, values, versions) for x in args.get("eq") or args["in"])
            if a is _UNKNOWN or b is _UNKNOWN:
                return _UNKNOWN
            return a == b if "eq" in args else a in b
        if "index" in args:
            v = _eval(args["index"][0], values, versions)
            return _UNKNOWN if v is _UNKNOWN else v[args["index"][1]]
        if "len" in args:
            v = _eval(args["len"], values, versions)
            return _UNKNOWN if v is _UNKNOWN else len(v)
        if "hasattr" in args:
            v = _eval(args["hasattr"][0], values, versions)
            return _UNKNOWN if v is _UNKNOWN else hasattr(v, args["hasattr"][1])
        if "isinstance" in args:
            v = _eval(args["isinstance"][0], values, versions)
            return _UNKNOWN if v is _UNKNOWN else isinstance(v, tuple(_TYPES[t] for t in args["isinstance"][1]))
    except (TypeError, KeyError, IndexError):
        return _UNKNOWN
    return _UNKNOWN


def post_init_rules(class_name: str, versions: Versions) -> tuple[PostInitStep, ...] | None:
    """The recorded __post_init__ rewrites of the deciding fields, in the order they run (a class's statements before
    its `super().__post_init__()`, then the base's, then the rest), each with the conditions of its enclosing `if`s.
    None for an unknown class."""
    chain = _chain_for(class_name, versions)
    if chain is None:
        return None
    out: list[PostInitStep] = []

    def flatten(program: list, conds: list[str], where: tuple[str, str, str], i: int) -> None:
        lib, ver, module = where
        for node in program:
            if node.get("super"):
                run(_super_index(chain, i, node["super"]), conds)
            elif "if" in node:
                cond = _show(node["if"])
                flatten(node["then"], conds + [cond], where, i)
                flatten(node["else"], conds + [f"not ({cond})"], where, i)
            else:
                names = node.get("set") or node.get("setdefault")
                for name in names if isinstance(names, list) else [names]:
                    out.append(PostInitStep(
                        field=name, action="set" if "set" in node else "setdefault",
                        value=(_show(node["value"]) if "set" in node
                               else f"[{node['key']!r}] = {_show(node['value'])}"),
                        when=" and ".join(conds) or None, source=f"{lib} {ver} {module}:{node['line']}"))

    def run(i: int, conds: list[str]) -> None:
        while i >= 0 and chain[i][2].get("post_init") is None:
            i -= 1  # a class without its own __post_init__ runs its base's
        if i >= 0:
            lib, ver, rec, _name = chain[i]
            flatten(rec["post_init"], conds, (lib, ver, rec["module"]), i)

    run(len(chain) - 1, [])
    return tuple(out)


def _super_index(chain: list, i: int, target: object) -> int:
    """The chain index `super().__post_init__()` (target True) or `Base.__post_init__(self)` (target "Base") runs."""
    if target is True:
        return i - 1
    for j in range(i - 1, -1, -1):
        if chain[j][3].split(".")[-1] == target:
            return j
    return i - 1


def _assigned(program: list) -> set[str]:
    names: set[str] = set()
    for node in program:
        if "if" in node:
            names |= _assigned(node["then"]) | _assigned(node["else"])
        elif not node.get("super"):
            n = node.get("set") or node.get("setdefault")
            names.update(n if isinstance(n, list) else [n])
    return names


def effective_values(class_name: str, versions: Versions, given: dict[str, object] | None = None
                     ) -> dict[str, object] | None:
    """The deciding fields' values once the dataclass is built: the library defaults, overridden by `given` (values
    already converted, e.g. by convert_cli), then the recorded __post_init__ rewrites (TRL's `bf16 = not fp16` when
    None; transformers 5.23+'s `gradient_checkpointing` <-> `activation_checkpointing` mirroring; deprecated-alias
    copies such as SFTConfig `max_seq_length` -> `max_length`). A value the rewrites cannot decide (a condition on
    an unknown value) becomes Unresolved naming the statement. Fields other than the deciding ones keep their
    given / default value (their __post_init__ normalisations, e.g. `fsdp` str -> list, are not applied). None for
    an unknown class."""
    fields = library_fields(class_name, versions)
    chain = _chain_for(class_name, versions)
    if fields is None or chain is None:
        return None
    values: dict[str, object] = {name: info.default for name, info in fields.items()}
    values.update(given or {})

    def execute(program: list, where: tuple[str, str, str], i: int) -> None:
        lib, ver, module = where
        for node in program:
            at = f"{lib} {ver} {module}:{node['line']}"
            if node.get("super"):
                run(_super_index(chain, i, node["super"]))
            elif "if" in node:
                cond = _eval(node["if"], values, versions)
                if cond is _UNKNOWN:
                    for name in _assigned(node["then"]) | _assigned(node["else"]):
                        values[name] = Unresolved(f"__post_init__ at {at}: condition {_show(node['if'])} not known")
                    for n in node["then"] + node["else"]:
                        if n.get("super"):
                            run(_super_index(chain, i, n["super"]))
                            break
                else:
                    execute(node["then"] if cond else node["else"], where, i)
            elif "set" in node:
                new = _eval(node["value"], values, versions)
                for name in node["set"] if isinstance(node["set"], list) else [node["set"]]:
                    values[name] = (Unresolved(f"__post_init__ at {at}: {_show(node['value'])} not known")
                                    if new is _UNKNOWN else new)
            else:
                name, new, current = node["setdefault"], _eval(node["value"], values, versions), values.get(
                    node["setdefault"])
                if isinstance(current, dict) and new is not _UNKNOWN:
                    current = dict(current)
                    current.setdefault(node["key"], new)
                    values[name] = current
                else:
                    values[name] = Unresolved(f"__post_init__ at {at}: setdefault on {current!r}")

    def run(i: int) -> None:
        while i >= 0 and chain[i][2].get("post_init") is None:
            i -= 1
        if i >= 0:
            lib, ver, rec, _name = chain[i]
            execute(rec["post_init"], (lib, ver, rec["module"]), i)

    run(len(chain) - 1)
    return values
