"""Everything a rule may read about one file: its facts, the library versions and model specs assumed
for it, the settings, and the training shape (sequence length, batch) resolved from the facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

from trainlint.config import Settings
from trainlint.facts import ArgsObject, Call, ModelLoad, ScriptFacts, TrainerCall, Value, known
from trainlint.facts.names import PEFT_WRAP
from trainlint.diagnostics import Span
from trainlint.facts.values import UNKNOWN, UNSET, library_default
from trainlint.knowledge import libraries
from trainlint.knowledge.models import ModelSpec, class_only_spec, lookup_model, main_input_for, spec_from_inline
from trainlint.knowledge.versions import Versions
from trainlint.launch.model import Launch
from trainlint.notebook import place
from trainlint.spelling import PYTHON, Spelling

FRAMEWORK_CALLS = ("llamafactory.", "axolotl.")  # the synthesized calls of a framework config


@dataclass
class FileContext:
    path: Path
    display: str
    facts: ScriptFacts
    versions: Versions
    settings: Settings
    text: str = ""
    launch: Launch = field(default_factory=Launch.defaults)  # the facts are resolved under this launch
    raw_facts: ScriptFacts | None = None  # the facts before resolution (parameters still symbolic)
    follow_notes: list[str] = field(default_factory=list)  # repository code that could not be followed
    spelling: Spelling = PYTHON  # how the user writes a setting in this file (its front end's: trainlint.spelling)

    # -- models ---------------------------------------------------------------------------------------
    @cached_property
    def _specs(self) -> dict[int, ModelSpec | None]:
        out: dict[int, ModelSpec | None] = {}
        for i, model in enumerate(self.facts.models):
            out[i] = self._lookup(model)
        return out

    def _lookup(self, model: ModelLoad) -> ModelSpec | None:
        if model.config_class is not None:
            return spec_from_inline(model.config_class, {k: v.value for k, v in model.inline_config if v.known},
                                    model.class_name)
        if model.model_id.known and isinstance(model.model_id.value, str):
            spec = lookup_model(model.model_id.value, self.path.parent, model.class_name, self.settings.models,
                                self.settings.root)
            if spec is not None:
                return spec
        if model.kind != "trainer_string" and not model.class_name.startswith("Auto"):
            return class_only_spec(model.class_name)
        if model.class_name.startswith("Auto") and main_input_for(None, model.class_name) != "input_ids":
            return class_only_spec(model.class_name)  # AutoModelForImageClassification: pixel_values all the same
        return None

    def spec(self, model: ModelLoad) -> ModelSpec | None:
        return self._specs[self.facts.models.index(model)]

    def model_for(self, variable: str | None) -> ModelLoad | None:
        """The model load bound to `variable`, or the script's only model; None when it is ambiguous."""
        named = [m for m in self.facts.models if variable is not None and m.variable == variable]
        if len(named) == 1:
            return named[0]
        if not named and len(self.facts.models) == 1:
            return self.facts.models[0]
        return None

    @cached_property
    def uses_peft(self) -> bool:
        """PEFT adapters are attached somewhere (so the base model, its LM head included, is frozen)."""
        return any(c.is_api(*PEFT_WRAP) or c.short == "add_adapter" or is_peft_from_pretrained(c)
                   for c in self.facts.calls) or any(t.call.has_kw("peft_config") and not t.call.kw("peft_config").is_(None)
                                                     for t in self.facts.trainers)

    def call_path(self, span: Span) -> tuple[Span, ...]:
        """The call sites (outermost first) through which a fact at `span` was reached in the repository's own
        functions (facts/inline.py); () for a fact of the script itself."""
        best: tuple[Span, ...] = ()
        for call_span, sites in self.facts.chains:
            if call_span.file == span.file and call_span.line <= span.line <= call_span.end_line and \
                    (not best or len(sites) >= len(best)):
                best = sites
        return best

    # -- training objects -----------------------------------------------------------------------------
    def trainer_args(self, trainer: TrainerCall) -> ArgsObject | None:
        """The arguments object a trainer gets, when it is a call we can see."""
        if trainer.args_variable is not None:
            for args in self.facts.args_objects:
                if args.variable == trainer.args_variable:
                    return args
        for args in self.facts.args_objects:  # `Trainer(args=TrainingArguments(...))` inline
            if trainer.call.span.line <= args.call.span.line <= trainer.call.span.end_line:
                return args
        return None

    def trainer_args_opaque(self, trainer: TrainerCall) -> bool:
        """The trainer gets arguments we cannot read (parsed from the command line, a function's result...)."""
        if self.trainer_args(trainer) is not None:
            return False
        return trainer.call.has_kw("args") or len(trainer.call.args) > 1 or trainer.call.opaque_kwargs

    @cached_property
    def main_args(self) -> ArgsObject | None:
        """The arguments object of the training run: the trainer's, or the only one in the file."""
        for trainer in self.facts.trainers:
            args = self.trainer_args(trainer)
            if args is not None:
                return args
        return self.facts.args_objects[0] if len(self.facts.args_objects) == 1 else None

    # -- the training shape ---------------------------------------------------------------------------
    @cached_property
    def seq_len(self) -> Value:
        """The longest sequence the script trains on, from wherever it sets one; else the TRL default."""
        ints = [e for e in self.facts.seq_evidence
                if e.value.known and isinstance(e.value.value, int) and not isinstance(e.value.value, bool)
                and e.value.value > 0]
        if ints:
            best = max(ints, key=lambda e: e.value.value)
            return known(best.value.value, best.span, best.source)
        if any(e.value.unknown or (e.value.known and e.value.value is None) for e in self.facts.seq_evidence):
            return UNKNOWN
        uses_sft = any(a.class_name == "SFTConfig" for a in self.facts.args_objects) or any(
            t.class_name == "SFTTrainer" for t in self.facts.trainers)
        if uses_sft and self.unreadable_arguments:
            return UNKNOWN  # the repository's own config class may set its length
        if uses_sft:
            return Value("known", libraries.SFT_MAX_LENGTH_DEFAULT, None, "SFTConfig.max_length default")
        return UNSET

    @cached_property
    def unreadable_arguments(self) -> bool:
        """A parsed dataclass is the repository's own and could not be read: its fields (and what a launch sets
        in them) are unknown, so no library default stands in for them."""
        for parsed in self.facts.parsed:
            if parsed.parser != "argparse" and parsed.class_name:
                last = list(self.facts.mro(parsed.class_name))[-1]
                if isinstance(last, str) and "." in last:
                    return True
        return False

    @cached_property
    def batch(self) -> Value:
        args = self.main_args
        if args is not None:
            value = args.get("per_device_train_batch_size")
            if value.unset and not args.call.opaque_kwargs:
                return library_default(libraries.TRAINING_ARGS_DEFAULTS["per_device_train_batch_size"])
            return value if value.known and _pos_int(value.value) else UNKNOWN
        values = [e for e in self.facts.batch_evidence if e.value.known and _pos_int(e.value.value)]
        if len({e.value.value for e in values}) == 1 and len(values) == len(self.facts.batch_evidence):
            return known(values[0].value.value, values[0].span, values[0].source)
        return UNKNOWN

    @cached_property
    def accumulation(self) -> Value:
        """gradient_accumulation_steps, read where `batch` is read; a loop with no accumulation found: 1."""
        args = self.main_args
        if args is not None:
            value = args.get("gradient_accumulation_steps")
            if value.unset and not args.call.opaque_kwargs:
                return library_default(libraries.TRAINING_ARGS_DEFAULTS["gradient_accumulation_steps"])
            return value if value.known and _pos_int(value.value) else UNKNOWN
        found = self.facts.accum_evidence
        if not found:
            return known(1, None, "no gradient accumulation found")
        if len({e.value.value for e in found if e.value.known}) == 1 and all(
                e.value.known and _pos_int(e.value.value) for e in found):
            return known(found[0].value.value, found[0].span, found[0].source)
        return UNKNOWN

    @cached_property
    def framework_config(self) -> bool:
        """The facts are an axolotl / LLaMA-Factory config's (or `llamafactory-cli train` flags'), mapped onto the
        framework's trainer run: its front end spells settings as keys or flags (framework_lint sets `spelling`), and
        the framework functions frameworks/synth.py stands for are qualified `axolotl.` / `llamafactory.`."""
        return self.spelling.style != "python" or any(
            c.qualname.startswith(FRAMEWORK_CALLS) or (c.qualified or "").startswith(FRAMEWORK_CALLS)
            for c in self.facts.calls)

    @cached_property
    def gradient_checkpointing(self) -> bool | None:
        """True when checkpointing is on, False when it is off, None when the script does not say clearly."""
        if any(c.short in ("gradient_checkpointing_enable", "activation_checkpointing_enable")
               for c in self.facts.calls):
            return True
        args = self.main_args
        if args is None:
            return False if not self.facts.trainers else None
        return self.checkpointing(args)[0]

    def checkpointing(self, args: ArgsObject) -> tuple[bool | None, Value]:
        """(whether an arguments object turns checkpointing on, the kwargs it passes), None when not readable.

        `gradient_checkpointing`, or its transformers 5.x name `activation_checkpointing` (None = not set);
        neither given: TRL's configs default to True (trl base_config.py, since TRL 0.22). The launch's accelerate
        FSDP plugin with `activation_checkpointing: true` checkpoints every layer itself, whatever the arguments say
        (accelerator.py prepare; transformers refuses both at once, so the arguments then leave theirs off)."""
        launched = self.launch.fsdp_checkpointing
        if launched is not None and launched.is_(True):  # launch/discover.py _accelerate_offload
            return True, Value("known", {"use_reentrant": False}, launched.origin, launched.via)
        for flag, kw in (("gradient_checkpointing", "gradient_checkpointing_kwargs"),
                         ("activation_checkpointing", "activation_checkpointing_kwargs")):
            value = args.get(flag)
            if value.unknown:
                return None, UNKNOWN
            if value.known and isinstance(value.value, bool):
                kwargs = args.get(kw)
                # a `**mapping` we cannot read may carry the kwargs
                return value.value, UNKNOWN if kwargs.unset and args.call.opaque_kwargs else kwargs
        if args.call.opaque_kwargs:
            return None, UNKNOWN
        if self._fsdp_checkpointing(args):
            return True, Value("known", {"use_reentrant": False}, None, "FSDP's own activation checkpointing")
        return args.library == "trl" and self.versions.trl.at_least(0, 22), args.get("gradient_checkpointing_kwargs")

    @staticmethod
    def _fsdp_checkpointing(args: ArgsObject) -> bool:
        """FSDP's own activation checkpointing: `fsdp` set and `fsdp_config` (a mapping, or the JSON file a launch
        names, read by the launch layer) with `activation_checkpointing: true` (transformers 5.25.0 training_args.py
        `_process_fsdp_args`; the key may carry an `fsdp_` prefix, which transformers drops)."""
        fsdp, config = args.get("fsdp"), args.get("fsdp_config")
        if not (fsdp.known and fsdp.value and config.known and isinstance(config.value, dict)):
            return False
        return any(config.value.get(key) is True for key in ("activation_checkpointing", "fsdp_activation_checkpointing"))

    # -- history (TL401) ------------------------------------------------------------------------------
    @cached_property
    def base(self) -> tuple[ScriptFacts | None, str]:
        """The facts of this file at the git base, or None and the reason there are none."""
        from trainlint.resolve import resolve_facts
        from trainlint.history import base_version

        old = base_version(self.path, self.settings.diff_base)
        if old.text is None:
            return None, old.note
        launch, launch_note = self.launch, ""
        if self.launch.launcher is not None:  # the launch's values are compared with the launcher's base too
            from trainlint.launch.discover import base_launch

            if old.text == self.text:
                raw = self.raw_facts
            else:
                raw = _base_facts(self.display, old.text)  # once per file, whatever the number of launches
                if raw is None:
                    return None, f"{old.note}: the base version does not parse"
            launch, launch_note = base_launch(self.launch, self.path, raw, self.versions, self.settings,
                                              self.settings.diff_base)
            if launch is None:
                return None, f"{old.note}; {launch_note}"
            return resolve_facts(raw, launch, self.versions), f"{old.note}; {launch_note}"
        if old.text == self.text:
            return self.facts, f"{old.note}: unchanged"  # same text, same facts: nothing to parse again
        raw = _base_facts(self.display, old.text)
        if raw is None:
            return None, f"{old.note}: the base version does not parse"
        return resolve_facts(raw, launch, self.versions), old.note

    @property
    def launch_anchor(self) -> Span:
        """Where the script reads its command line (a launch-decided finding relates to it)."""
        spans = [p.span for p in self.facts.parsed]
        return min(spans) if spans else Span.point(1)

    @cached_property
    def launch_gpu(self):
        """(LaunchGpu or None, why not): the GPU the launch requests (launch/gpu.py), for TL202/TL701 when no
        setting names one; a file checked without a launch takes the one its launchers agree on."""
        from trainlint.launch.script_gpu import gpu_of_context

        return gpu_of_context(self)

    @cached_property
    def world_size(self) -> Value:
        ws = self.launch.world_size
        return ws if isinstance(ws, Value) else UNSET

    def verbose_lines(self) -> list[str]:
        lines = [f"{v.name} {v.version} ({v.source})" for v in self.versions.all()]
        lines.extend(self.versions.notes)
        if self.facts.declares_parameters:
            lines.append(f"launch: {self.launch.label}" + (f" (values from {', '.join(dict.fromkeys(self.launch.sources))})"
                                                           if self.launch.sources else ""))
            for name, value in self.launch.bindings:
                where = f" from {place(value.origin.file, value.origin.line)}" if value.origin and value.origin.file \
                    else ""
                shown = repr(value.value) if value.known else "unknown"
                assumed = f" (assuming {'; '.join(value.assumed)})" if value.assumed else ""
                lines.append(f"  {name} {shown}{where}{assumed}")
            lines.extend(f"  note: {n}" for n in self.launch.notes)
        if self.facts.modules:
            lines.append(f"modules followed: {', '.join(self.facts.modules)}")
        lines.extend(f"  {n}" for n in dict.fromkeys(self.follow_notes))
        for i, model in enumerate(self.facts.models):
            spec = self._specs[i]
            where = f"{model.call.span.file}:{model.call.span.line}" if model.call.span.file else \
                f"line {model.call.span.line}"
            if spec is None:
                ident = model.model_id.value if model.model_id.known else "<unresolved>"
                lines.append(f"model at {where}: {ident}: model unknown (rules that need its size say less)")
            else:
                if spec.assumed_from:
                    lines.append(f"model at {where}: {model.model_id.value}: {spec.assumed_from}")
                lines.append(f"model at {where}: {spec.describe()}")
        lines.append(f"sequence length: {_describe(self.seq_len)}; batch per device: {_describe(self.batch)}")
        if self.settings.gpu is None and not self.settings.gpus:
            from trainlint.launch.gpu import describe

            lines.extend(describe(*self.launch_gpu))
        if "base" in self.__dict__:
            lines.append(f"git history: {self.base[1]}")
        return lines


@lru_cache(maxsize=64)
def _base_facts(display: str, text: str) -> ScriptFacts | None:
    """The (launch-blind) facts of a file's base version; None when it does not parse."""
    import libcst as cst

    from trainlint.facts import extract_facts

    try:
        return extract_facts(cst.parse_module(text), display, text)
    except (cst.ParserSyntaxError, RecursionError):
        return None


def is_peft_from_pretrained(call: Call) -> bool:
    """`PeftModel.from_pretrained`, `AutoPeftModelFor*.from_pretrained`, `PeftModelFor*.from_pretrained`."""
    owner = call.qualname.rsplit(".", 1)[0].split(".")[-1]
    return call.short == "from_pretrained" and call.in_library("peft") and (
        owner == "PeftModel" or owner.startswith(("AutoPeftModel", "PeftModelFor")))


def _pos_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _describe(value: Value) -> str:
    if value.known:
        return f"{value.value} ({value.via})"
    return "unknown" if value.unknown else "not set"
