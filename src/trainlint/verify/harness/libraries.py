"""The library patches, installed as each library gets imported (``patching.PostImportHooks``):

- ``transformers.TrainingArguments.__post_init__`` (TRL's configs subclass it): max_steps=N,
  output_dir=DIR/output (logging_dir too where that field exists), save_strategy="no", push_to_hub=False,
  report_to="none", eval_strategy="no", eval_on_start=False, load_best_model_at_end=False; on a run without CUDA
  use_cpu=True (TRL's configs default bf16=True, which asks for a GPU otherwise); a TRL config's use_vllm=True
  becomes False (vLLM is not installed here: generation runs with HF ``generate``, and the result says so in
  ``notes``); hub_strategy and everything else untouched;
- TRL's generation rounds (``GRPOTrainer`` / ``RLOOTrainer`` / ``DistillationTrainer``
  ``_generate_and_score_completions``: ``generate``, then the no-grad log-probabilities of the old policy and the
  reference) and any other ``GenerationMixin.generate`` run as the "generation" phase (``steps.Harness.phase``);
- after ``Trainer.train`` returns, when the script's config evaluates (eval_strategy not "no") and the trainer has
  an eval_dataset: one evaluation of per_device_eval_batch_size examples, as the "eval" phase (the run's own
  evaluations are switched off above, so the phase is measured once, after the N steps, with the optimizer state
  resident as in a mid-training evaluation);
- ``transformers.Trainer``: ``__init__`` adds a callback that sets ``control.should_training_stop`` once N
  optimizer steps are done; ``train(resume_from_checkpoint=True)`` resumes from the user's original output_dir
  (read only) or starts fresh when it holds no checkpoint; ``save_model(dir)`` is redirected; ``push_to_hub``
  raises;
- pushes raise ``PushBlockedError``: ``PushToHubMixin.push_to_hub`` (models, tokenizers, configs, processors,
  PeftModel), ``Trainer.push_to_hub``, huggingface_hub's ``ModelHubMixin.push_to_hub``, ``HfApi`` upload /
  create / delete / commit methods and the module-level functions bound to them,
  ``datasets.Dataset(Dict).push_to_hub``, and ``save_pretrained(..., push_to_hub=True)``;
- path-based saves outside DIR are redirected (``sandbox.Sandbox.redirect``): ``safetensors.torch.save_file /
  save_model``, ``save_pretrained`` of PreTrainedModel, PeftModel (and PeftMixedModel), tokenizers, configs,
  generation configs, processors, feature extractors, image processors and huggingface_hub's ModelHubMixin;
  ``Trainer.save_model(dir)``; ``accelerate.Accelerator.save_state/save_model/save``;
  ``datasets.Dataset(Dict).save_to_disk`` (``torch.save`` is patched with torch's hooks, ``steps.py``);
- ``PreTrainedModel.from_pretrained``: weights loaded from files are made by no dispatched op, so the CPU
  tracker is shown them at once.
"""

from __future__ import annotations

import os
import sys

from trainlint.verify.harness.patching import PostImportHooks, patch_classmethod, patch_method
from trainlint.verify.harness.sandbox import blocked, redirecting_function, redirecting_method


def install_library_patches(H) -> PostImportHooks:
    box = H.sandbox
    hooks: dict[str, list] = {}

    def on(name):
        def register(fn):
            hooks.setdefault(name, []).append(fn)
            return fn

        return register

    @on("transformers.training_args")
    def _training_args(mod):
        cls = mod.TrainingArguments

        def make(fn):
            def __post_init__(self, *args, **kwargs):
                user = getattr(self, "output_dir", None)
                if user is not None and os.fspath(user) != box.output_dir:
                    if os.fspath(user) not in box.user_output_dirs:
                        box.user_output_dirs.append(os.fspath(user))
                    self._trainlint_user_output_dir = os.fspath(user)
                strategy = getattr(self, "eval_strategy", getattr(self, "evaluation_strategy", None))
                if strategy is not None and str(getattr(strategy, "value", strategy)) != "no":
                    H.eval_wanted = True
                if getattr(self, "use_vllm", False):
                    mode = getattr(self, "vllm_mode", None)
                    note = (f"use_vllm=True{f' (vllm_mode={mode!r})' if mode else ''}: vLLM is not installable here, "
                            "so generation ran with HF generate (the estimate's vLLM phase is not measured)")
                    if note not in H.notes:
                        H.notes.append(note)
                    self.use_vllm = False
                if H.memory.kind == "cpu" and hasattr(self, "use_cpu"):
                    self.use_cpu = True
                self.output_dir = box.output_dir
                self.max_steps = H.n
                self.save_strategy = "no"
                self.push_to_hub = False
                self.report_to = "none"
                self.load_best_model_at_end = False
                for field, value in (("eval_strategy", "no"), ("evaluation_strategy", "no"),
                                     ("eval_on_start", False), ("logging_dir",
                                                                os.path.join(box.output_dir, "runs"))):
                    if hasattr(self, field):
                        setattr(self, field, value)
                fn(self, *args, **kwargs)
                self.output_dir = box.output_dir
                self.max_steps = H.n
                self.push_to_hub = False

            return __post_init__

        patch_method(cls, "__post_init__", make)

    @on("transformers.trainer")
    def _trainer(mod):
        cls = mod.Trainer
        from transformers.trainer_callback import TrainerCallback

        class _StopCallback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if H.steps_done >= H.n or state.global_step >= H.n:
                    control.should_training_stop = True
                return control

        def make_init(fn):
            def __init__(self, *args, **kwargs):
                fn(self, *args, **kwargs)
                try:
                    self.add_callback(_StopCallback())
                except Exception as exc:
                    H.warn(f"could not add the stop callback: {exc}")

            return __init__

        def make_train(fn):
            def train(self, *args, **kwargs):
                resume = args[0] if args else kwargs.get("resume_from_checkpoint")
                if resume is True:
                    user = getattr(self.args, "_trainlint_user_output_dir", None)
                    last = None
                    if user and os.path.isdir(user):
                        from transformers.trainer_utils import get_last_checkpoint

                        last = get_last_checkpoint(user)
                    if args:
                        args = (last, *args[1:])
                    else:
                        kwargs["resume_from_checkpoint"] = last
                    H.warn(f"resume_from_checkpoint=True -> {last!r} (read only)")
                H.in_trainer += 1
                try:
                    out = fn(self, *args, **kwargs)
                    _evaluate_once(self)
                    return out
                finally:
                    H.in_trainer -= 1

            return train

        def _evaluate_once(trainer) -> None:
            """The eval phase: one evaluation of per_device_eval_batch_size examples after the N steps."""
            dataset = getattr(trainer, "eval_dataset", None)
            if not H.eval_wanted or dataset is None or H.eval_error is not None or "eval" in H.phase_peaks:
                return
            try:
                n = max(1, int(getattr(trainer.args, "per_device_eval_batch_size", 1) or 1))
                if hasattr(dataset, "select") and hasattr(dataset, "__len__"):
                    dataset = dataset.select(range(min(n, len(dataset))))
                with H.phase("eval"):
                    trainer.evaluate(eval_dataset=dataset)
            except Exception as exc:  # the training steps were measured; the evaluation's failure is reported
                H.eval_error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
                H.warn(f"the evaluation step failed: {type(exc).__name__}: {exc}")

        patch_method(cls, "__init__", make_init)
        patch_method(cls, "train", make_train)
        patch_method(cls, "save_model", redirecting_method(box, 0, "output_dir"))
        patch_method(cls, "push_to_hub", blocked("Trainer.push_to_hub"))

    def in_phase(name: str):
        def make(fn):
            def wrapper(*args, **kwargs):
                with H.phase(name):
                    return fn(*args, **kwargs)

            return wrapper

        return make

    @on("transformers.generation.utils")
    def _generate(mod):
        patch_method(mod.GenerationMixin, "generate", in_phase("generation"))

    for module_name, class_name in (("trl.trainer.grpo_trainer", "GRPOTrainer"),
                                    ("trl.trainer.rloo_trainer", "RLOOTrainer"),
                                    ("trl.trainer.distillation_trainer", "DistillationTrainer")):
        def _rounds(mod, class_name=class_name):
            cls = getattr(mod, class_name, None)
            if cls is not None and hasattr(cls, "_generate_and_score_completions"):
                patch_method(cls, "_generate_and_score_completions", in_phase("generation"))

        on(module_name)(_rounds)

    @on("transformers.utils.hub")
    def _hub_mixin(mod):
        patch_method(mod.PushToHubMixin, "push_to_hub", blocked("push_to_hub"))

    @on("transformers.modeling_utils")
    def _from_pretrained(mod):
        def make(fn):
            def from_pretrained(cls, *args, **kwargs):
                model = fn(cls, *args, **kwargs)
                H.see_module(model)  # weights loaded from files are made by no dispatched op: count them now
                return model

            return from_pretrained

        patch_classmethod(mod.PreTrainedModel, "from_pretrained", make)

    for module_name, class_names in (
        ("transformers.modeling_utils", ("PreTrainedModel",)),
        ("transformers.tokenization_utils_base", ("PreTrainedTokenizerBase",)),
        ("transformers.configuration_utils", ("PreTrainedConfig", "PretrainedConfig")),
        ("transformers.generation.configuration_utils", ("GenerationConfig",)),
        ("transformers.processing_utils", ("ProcessorMixin",)),
        ("transformers.feature_extraction_utils", ("FeatureExtractionMixin",)),
        ("transformers.image_processing_base", ("ImageProcessingMixin",)),
        ("peft.peft_model", ("PeftModel",)),
        ("peft.mixed_model", ("PeftMixedModel",)),
        ("huggingface_hub.hub_mixin", ("ModelHubMixin",)),
    ):
        def _save_pretrained(mod, class_names=class_names):
            for cname in class_names:
                cls = getattr(mod, cname, None)
                if cls is not None:
                    patch_method(cls, "save_pretrained", redirecting_method(box, 0, "save_directory", True))
                    if cname == "ModelHubMixin":
                        patch_method(cls, "push_to_hub", blocked("push_to_hub"))

        on(module_name)(_save_pretrained)

    @on("huggingface_hub.hf_api")
    def _hf_api(mod):
        cls = mod.HfApi
        names = [n for n in vars(cls) if n.startswith(("upload_", "create_", "delete_"))
                 or n in ("move_repo", "duplicate_repo", "update_repo_settings", "super_squash_history",
                          "merge_pull_request", "preupload_lfs_files", "add_space_secret", "add_space_variable")]
        for n in names:
            patch_method(cls, n, blocked(f"huggingface_hub {n}"))
        top = sys.modules.get("huggingface_hub")
        for n in names:
            if callable(getattr(mod, n, None)):
                wrapped = cls.__dict__[n]
                setattr(mod, n, wrapped)
                if top is not None:
                    try:
                        setattr(top, n, wrapped)
                    except Exception:
                        pass

    @on("safetensors.torch")
    def _safetensors(mod):
        if hasattr(mod, "save_file"):
            mod.save_file = redirecting_function(box, mod.save_file, 1, "filename")
        if hasattr(mod, "save_model"):
            mod.save_model = redirecting_function(box, mod.save_model, 1, "filename")

    @on("accelerate.accelerator")
    def _accelerate(mod):
        cls = mod.Accelerator
        patch_method(cls, "save_state", redirecting_method(box, 0, "output_dir"))
        patch_method(cls, "save_model", redirecting_method(box, 1, "save_directory"))
        patch_method(cls, "save", redirecting_method(box, 1, "f"))

    @on("datasets.arrow_dataset")
    def _dataset(mod):
        patch_method(mod.Dataset, "save_to_disk", redirecting_method(box, 0, "dataset_path"))
        patch_method(mod.Dataset, "push_to_hub", blocked("Dataset.push_to_hub"))

    @on("datasets.dataset_dict")
    def _dataset_dict(mod):
        for cname in ("DatasetDict", "IterableDatasetDict"):
            cls = getattr(mod, cname, None)
            if cls is not None:
                patch_method(cls, "save_to_disk", redirecting_method(box, 0, "dataset_dict_path"))
                patch_method(cls, "push_to_hub", blocked(f"{cname}.push_to_hub"))

    finder = PostImportHooks(hooks, H.warn)
    finder.install()
    return finder
