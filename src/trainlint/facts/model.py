"""The facts of one training script: frozen dataclasses that rules read (and never re-derive)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

from trainlint.diagnostics import Span
from trainlint.facts.values import UNSET, Value


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

    def inline(self, name: str) -> Value:
        for key, value in self.inline_config:
            if key == name:
                return value
        return UNSET


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


@dataclass(frozen=True)
class Evidence:
    """A value that bears on sequence length or batch size, and where it came from."""

    value: Value
    source: str  # "SFTConfig(max_length=)", "tokenizer(max_length=)", "block_size = ...", ...
    span: Span


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
    parsed_args_objects: tuple[str, ...] = field(default=())  # names bound from HfArgumentParser / argparse

    def calls_named(self, *shorts: str) -> Iterator[Call]:
        wanted = set(shorts)
        return (c for c in self.calls if c.short in wanted)

    def imports_module(self, prefix: str) -> bool:
        return any(q == prefix or q.startswith(prefix + ".") for _, q in self.imports)
