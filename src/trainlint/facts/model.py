"""The facts of one training script: frozen dataclasses that rules read (and never re-derive)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from trainlint.diagnostics import Span
from trainlint.facts.values import UNKNOWN, UNSET, Value


@dataclass(frozen=True)
class Call:
    """One call the rules may care about, with its arguments resolved statically."""

    qualname: str  # through imports: "transformers.TrainingArguments"; local receivers stay bare: "model.train"
    short: str  # last dotted component: "TrainingArguments"
    receiver: str | None  # `model` in `model.gradient_checkpointing_enable()`
    target: str | None  # the single name the result is assigned to, if any
    args: tuple[Value, ...]
    arg_names: tuple[str | None, ...]  # each positional argument's plain name, if it is one
    kwargs: tuple[tuple[str, Value], ...]
    kw_spans: tuple[tuple[str, Span], ...]
    kw_names: tuple[tuple[str, str | None], ...]  # keyword -> plain name passed (`model=model`)
    opaque_kwargs: bool  # a `**mapping` we could not read: any keyword may be set
    span: Span
    index: int  # order of appearance in the file
    scope: str  # "<module>" or the enclosing function's name
    # Layout, so a fix can add a keyword in the call's own style:
    last_arg: Span | None = None  # the last argument (without its comma)
    trailing_comma: bool = False
    close_paren: Span | None = None  # the closing parenthesis
    kw_splat: str | None = None  # `**kwargs` of the enclosing function's own `**kwargs` (a caller fills it)
    # `if training_args.gradient_checkpointing:` around the call: (condition, the branch it is in) pairs; a
    # condition that resolves, under a launch, to the other branch removes the call from the run.
    guards: tuple[tuple[Value, bool], ...] = ()
    # The callee through the file's imports (TorchFix's qualified names): "torch.utils.data.DataLoader" for
    # `from torch.utils.data import DataLoader as DL; DL(...)`, "trl.SFTConfig" for `import trl; trl.SFTConfig()`.
    # None when the import cannot be seen (then `local` says whether the file binds the name itself).
    qualified: str | None = None
    local: bool = False
    # a `fire.Fire(fn)` entry (facts/extract.py _fire_hops): a call of fn whose every parameter is a command-line
    # option (Param("argparse", name)) with fn's own default
    fire: bool = False
    # `**cfg.trainer.args`, `**OmegaConf.to_container(cfg.training)`: mappings read from a Hydra / OmegaConf config
    # (Values of state "param"), expanded into keywords once a launch composes the config (resolve.py); until then
    # they make `opaque_kwargs` True. `opaque_rest`: the call is opaque for another reason as well.
    unpacked: tuple[Value, ...] = ()
    opaque_rest: bool = False

    def excludes(self, other: "Call") -> bool:
        """The two calls sit in branches that cannot both run: one needs a command-line value true that the other
        needs false (`if args.use_lora:` ... `if not (args.use_lora or args.use_oft):`), read from their guards
        (facts/extract.py `_literals`)."""
        def literals(call: "Call"):  # a command-line option or a function parameter read whole or by attribute
            return {(c.value, holds) for c, holds in call.guards
                    if c.state == "param" and isinstance(c.value, (Param, Arg))}
        mine = literals(self)
        return any((value, not holds) in mine for value, holds in literals(other))

    @property
    def library(self) -> str | None:
        """The top-level package the callee comes from ("torch"), when its import is seen."""
        return self.qualified.split(".", 1)[0] if self.qualified else None

    def in_library(self, *libraries: str) -> bool:
        """The callee may come from one of `libraries`: its import says so, or cannot be seen (no import, a
        `from x import *`, an import relative to the repository's own package, which may re-export the library's
        name). A name the file binds itself, or imports from another module (`from mylib import get_peft_model`),
        is not the library's."""
        if self.qualified is not None:
            return self.library in libraries
        return not self.local

    def is_api(self, *qualified_names: str) -> bool:
        """The call is one of `qualified_names` ("peft.get_peft_model"): the same library and the same final name
        (libraries re-export: `transformers.trainer.Trainer` is `transformers.Trainer`, so the path between is not
        compared). When the import cannot be seen (in_library), the short name decides, as it did before qualified
        names."""
        last = self.qualified.rsplit(".", 1)[-1] if self.qualified else self.short
        return any(name.rsplit(".", 1)[-1] == last and self.in_library(name.split(".", 1)[0])
                   for name in qualified_names)

    def kw(self, name: str) -> Value:
        for key, value in self.kwargs:
            if key == name:
                return value
        return UNSET

    def has_kw(self, name: str) -> bool:
        return any(key == name for key, _ in self.kwargs)

    def kw_span(self, name: str) -> Span | None:
        for key, span in self.kw_spans:
            if key == name:
                return span
        return None

    def kw_name(self, name: str) -> str | None:
        for key, passed in self.kw_names:
            if key == name:
                return passed
        return None

    def arg(self, index: int, keyword: str) -> Value:
        """An argument that may be passed by position or by keyword."""
        if self.has_kw(keyword):
            return self.kw(keyword)
        if index < len(self.args):
            return self.args[index]
        return UNSET

    def arg_name(self, index: int, keyword: str) -> str | None:
        passed = self.kw_name(keyword)
        if passed is not None:
            return passed
        if index < len(self.arg_names):
            return self.arg_names[index]
        return None


@dataclass(frozen=True)
class ModelLoad:
    """A model the script builds: `X.from_pretrained(...)`, `X.from_config(...)`, `XForY(config)`,
    or a model id handed to a TRL trainer as a string."""

    call: Call
    kind: str  # "from_pretrained" | "from_config" | "constructor" | "trainer_string"
    class_name: str  # "AutoModelForCausalLM", "LlamaForCausalLM", "SFTTrainer" (string model)
    model_id: Value
    attn_implementation: Value
    output_attentions: Value
    use_flash_attention_2: Value
    dtype: Value
    quantization: Value  # "4bit" | "8bit" | None
    inline_config: tuple[tuple[str, Value], ...]  # kwargs of an inline `LlamaConfig(...)`
    config_class: str | None  # "LlamaConfig" when the config is built inline
    variable: str | None
    anchor: Span  # where a diagnostic about this load points
    # `REGISTRY[key].from_pretrained(...)` with `REGISTRY = {"llama": LlamaForCausalLM, ...}`: the dict's (key, class)
    # pairs and the key's Value; a key a launch decides picks the class when the facts are resolved (resolve.py);
    # class_name is "" while the key is not known.
    registry: tuple[tuple[str, str], ...] = ()
    registry_key: Value = UNSET
    # `hydra.utils.instantiate(cfg.model)`: the config node (a Value of state "param"); its `_target_`
    # (`transformers.AutoModelForCausalLM.from_pretrained`) names the call and its keys are the keywords, read when
    # the facts are resolved (resolve.py); class_name is "" until then
    instantiated: Value = UNSET

    def inline(self, name: str) -> Value:
        for key, value in self.inline_config:
            if key == name:
                return value
        return UNSET


def registry_class(pairs: tuple[tuple[str, str], ...], key: Value) -> str:
    """The class a registry lookup picks: "" while the key is not known, or not in the dict (a KeyError)."""
    if key.known and isinstance(key.value, str):
        return dict(pairs).get(key.value, "")
    return ""


@dataclass(frozen=True)
class ArgsObject:
    """`TrainingArguments(...)`, `SFTConfig(...)` or another TRL config."""

    call: Call
    class_name: str
    library: str  # "transformers" | "trl"
    variable: str | None

    def get(self, name: str) -> Value:
        return self.call.kw(name)


@dataclass(frozen=True)
class TrainerCall:
    call: Call
    class_name: str  # "Trainer", "SFTTrainer", ...
    library: str
    args_variable: str | None
    model_variable: str | None
    variable: str | None
    # The repository's own subclass (`class MyTrainer(Trainer)`): its name, and how an overridden loss method
    # treats the logits ("full" | "fused" | "other", the method, where it is); class_name is the library base.
    subclass: str | None = None
    loss_override: tuple[str, str, Span] | None = None
    # A framework config's trainer (frameworks/): the TRL trainer its class is or subclasses, whose components and
    # phases apply (LLaMA-Factory's CustomDPOTrainer -> "DPOTrainer"); the key that chose the stage (`rl:` /
    # `stage:`); and the models the framework itself decides beside the policy (FrameworkModel).
    trl_base: str | None = None
    stage_span: Span | None = None
    framework_models: tuple["FrameworkModel", ...] = ()


@dataclass(frozen=True)
class FrameworkModel:
    """A model an axolotl / LLaMA-Factory run creates (or leaves out) beside the policy, as the framework's own code
    decides it from the config (frameworks/ cites the source): `role` ("reference" | "reward"), `how` ("copy": the
    policy's model loaded again in its dtype; "adapter disabled"; "none (...)"; "loaded": another model), `resident`
    through training, `passed` (it is the trainer's own `ref_model` / `reward_model`, so TRL's own decision for the
    role does not apply; False: the framework holds it beside the trainer), `model_id` (a model other than the
    policy's, "loaded"), `span` (the key that decides it), `why`, `drop` (the key that would leave it out)."""

    role: str
    how: str
    resident: bool
    why: str
    span: Span | None = None
    passed: bool = True
    model_id: str | None = None
    drop: str | None = None


@dataclass(frozen=True)
class Evidence:
    """A value that bears on sequence length or batch size, and where it came from."""

    value: Value
    source: str  # "SFTConfig(max_length=)", "tokenizer(max_length=)", "block_size = ...", ...
    span: Span


PEFT_CONFIG = "get_peft_config()"  # Param.attr for trl's get_peft_config(model_args)


@dataclass(frozen=True)
class Param:
    """A value the script reads from its command line: `training_args.gradient_checkpointing`, `args.lr`.

    Carried inside a Value of state "param" (or inside a dict/list value) until the context resolves it
    under a launch, or to its default when no launch sets it."""

    obj: str  # the variable the parsed object is bound to: "training_args"
    attr: str  # the field read: "gradient_checkpointing"
    span: Span | None = None  # where the script reads it, when known

    def __repr__(self) -> str:
        return f"<{self.obj}.{self.attr}>"


@dataclass(frozen=True)
class Arg:
    """A value a function receives from its caller: parameter `name` of the function at `scope` (read whole,
    or its attribute `attr`: `model_args.model_name_or_path`). Bound at each call site the facts can follow
    (facts/inline.py); one that stays unbound is unknown."""

    scope: str  # the function's scope: "get_model", "class Actor.__init__"
    name: str
    attr: str | None = None

    def __repr__(self) -> str:
        return f"<arg {self.scope}:{self.name}{'.' + self.attr if self.attr else ''}>"


@dataclass(frozen=True)
class Cond:
    """`a if test else b` whose test is symbolic (a parameter or an argument): decided when the test is."""

    test: "Value"
    then: "Value"
    orelse: "Value"
    negate: bool = False  # `a if not test else b`

    def __repr__(self) -> str:
        return f"<{self.then!r} if {'not ' if self.negate else ''}{self.test!r} else {self.orelse!r}>"


@dataclass(frozen=True)
class Compare:
    """`left OP right` with a symbolic side (`"70B" in model_args.model_name`, `args.mode == "lora"`): decided, like
    a Cond's test, when a launch or a caller decides that side. OP is one of COMPARE_OPS."""

    op: str
    left: "Value"
    right: "Value"

    def __repr__(self) -> str:
        return f"<{self.left!r} {self.op} {self.right!r}>"

    def resolve(self, resolve) -> "Value":
        """The comparison once `resolve` (Value -> Value: a launch, a caller) makes both sides known; still a
        Compare while a side is symbolic; else unknown."""
        left, right = resolve(self.left), resolve(self.right)
        if left.known and right.known:
            decided = self.decide(left.value, right.value)
            return UNKNOWN if decided is None else Value("known", decided, left.origin or right.origin, "comparison")
        if (left.known or left.state == "param") and (right.known or right.state == "param"):
            return Value("param", Compare(self.op, left, right), left.origin or right.origin, "param")
        return UNKNOWN

    def decide(self, left, right) -> bool | None:
        """The comparison on two known values; None where Python would raise (`1 in 2`)."""
        try:
            return COMPARE_OPS[self.op](left, right)
        except TypeError:
            return None


COMPARE_OPS = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "in": lambda a, b: a in b,
               "not in": lambda a, b: a not in b, "is": lambda a, b: a is b, "is not": lambda a, b: a is not b}
SYMBOLIC = (Param, Arg, Cond, Compare)  # values a launch or a caller decides


@dataclass(frozen=True)
class FunctionDef:
    """A function (or a class's `__init__`) the file defines: what a call to it binds."""

    scope: str  # "get_model", "class Actor.__init__", "Outer.inner"
    params: tuple[tuple[str, "Value"], ...]  # name, default (UNSET: none), in order, `self` excluded
    positional: int  # how many of `params` may be passed by position
    star: str | None = None  # *args
    kwstar: str | None = None  # **kwargs
    returns: tuple[str, ...] = ()  # the plain names it returns (`return model`)
    span: Span | None = None  # the whole definition (evidence inside it goes with it)


@dataclass(frozen=True)
class FieldDef:
    """A field of an argument dataclass the script defines (`model_name_or_path: str = field(default=...)`)."""

    name: str
    kind: str  # "bool" | "optional_bool" | "int" | "float" | "str" | "list" | "dict" | "dict_or_str" | "other"
    default: Value  # UNSET when the field has no default (required), UNKNOWN when not readable


@dataclass(frozen=True)
class ClassDef:
    """A class the script defines, as far as argument parsing cares: its bases and annotated fields."""

    name: str
    bases: tuple[str, ...]  # qualified through imports: "transformers.TrainingArguments", or a local name
    fields: tuple[FieldDef, ...]
    module: str | None = None  # the repository module it was read from ("fastchat.train.train"); None: the script


@dataclass(frozen=True)
class ArgparseParam:
    dest: str
    flags: tuple[str, ...]  # option strings as written: ("--max_seq_length", "-l")
    action: str | None  # "store_true" | "store_false" | "store_const" | "append" | None (store)
    kind: str  # from `type=`: "int" | "float" | "str" | "bool" (a str2bool helper) | "other"
    nargs: str | int | None
    default: Value  # the default as argparse would store it (None when not given); UNSET when required
    const: Value = UNSET


@dataclass(frozen=True)
class HydraSource:
    """A Hydra / OmegaConf config the script reads into `variable` (launch/hydra.py composes it under a launch).

    kind "main": `@hydra.main(config_path=, config_name=)` on a function whose first parameter is `variable`;
    "compose": `cfg = compose(config_name=, overrides=[...])` after `initialize(config_path=)`;
    "load": `cfg = OmegaConf.load("x.yaml")`, or `OmegaConf.merge` of such loads (`files`, in merge order) and
    `OmegaConf.from_cli()` (`cli`: the launch's `key=value` words apply, as for "main")."""

    variable: str
    kind: str
    config_path: str | None  # as written, relative to the script's folder (Hydra's rule for config_path)
    config_name: str | None
    files: tuple[str, ...] = ()  # "load": paths as written, relative to where the run starts
    overrides: tuple[str, ...] = ()  # `compose(overrides=[...])` written in the script
    cli: bool = False
    span: Span | None = None
    known: bool = True  # False when a path or name is not a literal: nothing is composed


@dataclass(frozen=True)
class ParsedObject:
    """A variable bound to what a command-line parser returns."""

    variable: str
    parser: str  # "hf" (HfArgumentParser) | "trl" (TrlParser) | "argparse" | "hydra" (a Hydra / OmegaConf config)
    class_name: str | None  # the dataclass it is an instance of (None for an argparse namespace)
    methods: tuple[str, ...]  # how it is filled: "parse_args_into_dataclasses", "parse_json_file", ...
    span: Span  # the parse call (a launch-decided finding relates to it)
    parser_class: str | None = None  # parser "hf?": the repository's parser class, until confirmed (modules.py)


@dataclass(frozen=True)
class LossAccumulation:
    """A loss tensor accumulated in a loop where its graph stays alive (facts/loops.py, TL203)."""

    shape: str  # "no_backward" | "retained" | "deferred"
    target: str  # the accumulator: "total_loss", "losses"
    value: str  # the accumulated expression as written
    span: Span  # the accumulating statement
    scope: str  # "<module>" or the enclosing function
    fix_span: Span | None = None  # the loss expression a `.detach()` fix wraps
    fix_text: str | None = None


@dataclass(frozen=True)
class EvalSet:
    """The eval set a trainer call gets (`eval_dataset=`), and its size when the script writes it."""

    trainer_index: int  # Call.index of the trainer call
    size: int | None
    how: str  # 'split="test[:500]"', ".select(range(500))", ...


@dataclass(frozen=True)
class ScriptFacts:
    path: str
    imports: tuple[tuple[str, str], ...]  # local alias -> qualified name
    calls: tuple[Call, ...]
    models: tuple[ModelLoad, ...]
    args_objects: tuple[ArgsObject, ...]
    trainers: tuple[TrainerCall, ...]
    seq_evidence: tuple[Evidence, ...]
    batch_evidence: tuple[Evidence, ...]
    accum_evidence: tuple[Evidence, ...]  # gradient accumulation outside TrainingArguments (Accelerator, loops)
    pip_pins: tuple[tuple[str, str], ...]  # ("transformers", "==4.34.0") from `pip install` lines
    logits_accessed: bool  # `.logits` is read somewhere
    # `model(**batch).loss`, `outputs.loss`, `outputs["loss"]`: (the called name, the forward call's span)
    forward_losses: tuple[tuple[str, Span], ...] = field(default=())
    parsed_args_objects: tuple[str, ...] = field(default=())  # names bound from HfArgumentParser / argparse
    # The command-line surface, symbolically: what a launch may bind.
    classes: tuple[ClassDef, ...] = field(default=())
    argparse_params: tuple[ArgparseParam, ...] = field(default=())
    parsed: tuple[ParsedObject, ...] = field(default=())
    json_argv_branch: bool = False  # `if len(sys.argv) == 2 and sys.argv[1].endswith(".json")`
    argv_config_overrides: bool = False  # that args file may be followed by `--key value` overrides (sys.argv[2:])
    # Following the repository's own code (facts/inline.py): the functions this file defines, the calls to
    # functions and classes that may be defined in it or in a module of the repository, and, once followed,
    # the modules reached and the call sites an inlined fact came through.
    functions: tuple[FunctionDef, ...] = field(default=())
    hops: tuple[Call, ...] = field(default=())
    modules: tuple[str, ...] = field(default=())  # files followed (paths as given to the follower)
    parse_functions: tuple[str, ...] = field(default=())  # functions returning a parse call (`def get_args()`)
    chains: tuple[tuple[Span, tuple[Span, ...]], ...] = field(default=())  # inlined call span -> call sites
    # per function scope, what it does with logits: "logits" (reads `.logits`) and the loss calls it makes
    marks: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())

    def function(self, scope: str) -> FunctionDef | None:
        return next((f for f in self.functions if f.scope == scope), None)
    loss_accumulations: tuple[LossAccumulation, ...] = field(default=())  # facts/loops.py (TL203)
    eval_sets: tuple[EvalSet, ...] = field(default=())  # facts/evalsets.py (TL302)
    # chat-message content lists written in the script with N `{"type": "image", ...}` entries: (N, the list's span)
    # (run/vision.py: the images one sample carries)
    image_slots: tuple[tuple[int, Span], ...] = field(default=())
    hydra: tuple[HydraSource, ...] = field(default=())  # Hydra / OmegaConf configs the script reads

    @property
    def declares_parameters(self) -> bool:
        return bool(self.parsed or self.argparse_params)

    def parsed_object(self, variable: str) -> ParsedObject | None:
        return next((p for p in self.parsed if p.variable == variable), None)

    def class_def(self, name: str) -> ClassDef | None:
        return next((c for c in self.classes if c.name == name), None)

    def mro(self, name: str, depth: int = 0) -> Iterator[ClassDef | str]:
        """The script's class, its script-defined bases, then the first library base by name
        (`class TrainingArguments(transformers.TrainingArguments)`: the base is the library's)."""
        if "." in name:  # imported: a class of one of the repository's own modules, else a library's
            module, _, short = name.rpartition(".")
            own = next((c for c in self.classes if c.name == short and c.module == module), None)
        else:
            own = self.class_def(name)
        if own is None or depth > 8:
            library = name.split(".")[0] in ("transformers", "trl", "peft") or "." not in name
            # a class of the repository that could not be read stays that (unknown), never a library class
            yield name.split(".")[-1] if library else name
            return
        yield own
        for base in own.bases:
            if base.split(".")[-1] == own.name and "." not in base:
                continue
            if own.module is not None and "." not in base:  # a base named inside that module
                base = f"{own.module}.{base}"
            yield from self.mro(base, depth + 1)

    def calls_named(self, *shorts: str) -> Iterator[Call]:
        """Calls by their short name alone: methods of local objects (`model.generate`), whose type is not known."""
        wanted = set(shorts)
        return (c for c in self.calls if c.short in wanted)

    def calls_to(self, *qualified_names: str) -> Iterator[Call]:
        """Calls to a library's API through the file's imports (Call.is_api): `calls_to("peft.LoraConfig")`."""
        return (c for c in self.calls if c.is_api(*qualified_names))

    def imports_module(self, prefix: str) -> bool:
        return any(q == prefix or q.startswith(prefix + ".") for _, q in self.imports)
