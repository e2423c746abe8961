"""Following the repository's own code (facts/inline.py, issue 18): small multi-module projects written for
these tests, one per shape, each with a launcher, a positive and a negative; run through the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _check(root: Path, *args: str) -> tuple[int, list[dict]]:
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", "json", *args],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def _verbose(root: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--verbose", *args],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout + out.stderr


# -- 1. a helper function in a package, reached with the parsed dataclasses ------------------------------------
HELPER = {
    "pkg/__init__.py": "",
    "pkg/model_utils.py": '''
        from transformers import AutoModelForCausalLM


        def get_model(model_args, training_args):
            return AutoModelForCausalLM.from_pretrained(
                model_args.model_name_or_path,
                attn_implementation="flash_attention_2" if model_args.use_flash_attn else "eager",
            )
        ''',
    "train.py": '''
        from dataclasses import dataclass, field

        from transformers import HfArgumentParser, Trainer, TrainingArguments

        from pkg.model_utils import get_model


        @dataclass
        class ModelArguments:
            model_name_or_path: str = field(default=None)
            use_flash_attn: bool = False
            max_len: int = 8192


        def main():
            parser = HfArgumentParser((ModelArguments, TrainingArguments))
            model_args, training_args = parser.parse_args_into_dataclasses()
            model = get_model(model_args, training_args)
            trainer = Trainer(model=model, args=training_args)
            trainer.train()


        if __name__ == "__main__":
            main()
        ''',
}
LAUNCH = '''
    deepspeed train.py \\
        --model_name_or_path meta-llama/Meta-Llama-3-8B \\
        --per_device_train_batch_size 2 \\
        --use_liger_kernel True{extra}
    '''


def test_helper_function_decides_attention_under_the_launch(tmp_path):
    root = _write(tmp_path, {**HELPER, "scripts/train.sh": LAUNCH.format(extra="")})
    _, diags = _check(root, "train.py")
    tl101 = [d for d in diags if d["code"] == "TL101"]
    assert len(tl101) == 1
    d = tl101[0]
    # reported at the expression in the module, naming the script; the call site and the launch are related
    assert d["filename"] == "pkg/model_utils.py" and d["location"]["row"] == 7
    assert d["message"].startswith("train.py: eager attention at sequence length 8,192")
    related = {(r["filename"], r["location"]["row"]) for r in d["related"]}
    assert ("train.py", 18) in related and ("scripts/train.sh", 1) in related
    assert d["fix"]["file"] == "pkg/model_utils.py"


def test_helper_function_negative_when_the_launch_turns_flash_on(tmp_path):
    root = _write(tmp_path, {**HELPER, "scripts/train.sh": LAUNCH.format(extra=" \\\n    --use_flash_attn True")})
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL101"] == []
    text = _verbose(root, "train.py")
    assert "modules followed: pkg/model_utils.py" in text
    assert "model at pkg/model_utils.py:5: meta-llama/Meta-Llama-3-8B" in text


def test_the_fix_edits_the_module_and_the_result_is_clean(tmp_path):
    root = _write(tmp_path, {**HELPER, "scripts/train.sh": LAUNCH.format(extra="")})
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--fix", "train.py"], cwd=root,
                         capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr
    text = (root / "pkg/model_utils.py").read_text()
    assert '"flash_attention_2" if model_args.use_flash_attn else "sdpa"' in text
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL101"] == []


def test_follow_hops_zero_sees_the_file_alone(tmp_path):
    root = _write(tmp_path, {**HELPER, "scripts/train.sh": LAUNCH.format(extra=""),
                             "pyproject.toml": "[tool.trainlint]\nfollow-hops = 0\n"})
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL101"] == []


# -- 2. a model wrapper class with a flag, argparse, relative imports in a package ---------------------------------
WRAPPER = {
    "rlhf/__init__.py": "",
    "rlhf/models/__init__.py": "from .actor import Actor\n",
    "rlhf/models/actor.py": '''
        from transformers import AutoModelForCausalLM


        class Actor:
            def __init__(self, pretrain, use_flash_attention_2=False, bf16=True):
                attn = "flash_attention_2" if use_flash_attention_2 else "eager"
                self.model = AutoModelForCausalLM.from_pretrained(pretrain, attn_implementation=attn)
                self.model.gradient_checkpointing_enable()
        ''',
    "rlhf/cli/train_sft.py": '''
        import argparse

        from transformers import Trainer, TrainingArguments

        from rlhf.models import Actor

        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--pretrain", type=str, default=None)
            parser.add_argument("--flash_attn", action="store_true", default=False)
            parser.add_argument("--max_len", type=int, default=2048)
            parser.add_argument("--micro_train_batch_size", type=int, default=1)
            args = parser.parse_args()
            actor = Actor(args.pretrain, use_flash_attention_2=args.flash_attn)
        ''',
}


@pytest.mark.parametrize("flag, fires", [("", True), (" --flash_attn", False)])
def test_wrapper_class_flag(tmp_path, flag, fires):
    root = _write(tmp_path, {**WRAPPER, "examples/train_sft.sh": (
        "deepspeed --module rlhf.cli.train_sft --pretrain meta-llama/Meta-Llama-3-8B --max_len 8192"
        f" --micro_train_batch_size 2{flag}\n")})
    _, diags = _check(root, "rlhf/cli/train_sft.py")
    tl101 = [d for d in diags if d["code"] == "TL101"]
    assert bool(tl101) is fires
    if fires:
        assert tl101[0]["filename"] == "rlhf/models/actor.py"
        assert tl101[0]["location"]["row"] == 6  # the "eager" written in actor.py


def test_relative_reexport_is_followed_in_verbose(tmp_path):
    root = _write(tmp_path, {**WRAPPER})
    text = _verbose(root, "rlhf/cli/train_sft.py")
    assert "modules followed: rlhf/models/__init__.py, rlhf/models/actor.py" in text


# -- 3. the project's own trainer ------------------------------------------------------------------------------
TRAINER_FULL = '''
    import torch.nn.functional as F
    from transformers import Trainer


    class LossTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
            labels = inputs.pop("labels")
            outputs = model(**inputs)
            logits = outputs.logits
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
            return (loss, outputs) if return_outputs else loss
    '''
TRAINER_LIGER = '''
    from liger_kernel.transformers import LigerFusedLinearCrossEntropyLoss
    from transformers import Trainer


    class LossTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
            labels = inputs.pop("labels")
            hidden = model.model(**inputs).last_hidden_state
            loss = LigerFusedLinearCrossEntropyLoss()(model.lm_head.weight, hidden.view(-1, hidden.size(-1)),
                                                      labels.view(-1))
            return loss
    '''
ENTRY = '''
    from transformers import AutoModelForCausalLM, TrainingArguments

    from mypkg.trainer import LossTrainer

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Meta-Llama-3-8B", attn_implementation="sdpa")
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True, use_liger_kernel=True)
    trainer = LossTrainer(model=model, args=args)
    trainer.train()
    '''


def test_custom_compute_loss_on_logits_is_a_full_logits_loss(tmp_path):
    root = _write(tmp_path, {"mypkg/__init__.py": "", "mypkg/trainer.py": TRAINER_FULL, "train.py": ENTRY})
    _, diags = _check(root, "train.py")
    tl301 = [d for d in diags if d["code"] == "TL301"]
    assert len(tl301) == 1  # use_liger_kernel=True does not help: the override takes the logits itself
    assert tl301[0]["filename"] == "mypkg/trainer.py" and tl301[0]["location"]["row"] == 6
    assert "LossTrainer.compute_loss computes a cross-entropy over the model's full logits" in tl301[0]["message"]


def test_custom_compute_loss_with_liger_is_fused(tmp_path):
    root = _write(tmp_path, {"mypkg/__init__.py": "", "mypkg/trainer.py": TRAINER_LIGER, "train.py": ENTRY})
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL301"] == []


TRAINER_HELPER = '''
    import torch.nn.functional as F
    from transformers import Trainer


    class LossTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
            labels = inputs.pop("labels")
            logits = model(**inputs).logits
            return self._token_loss(logits, labels)

        def _token_loss(self, logits, labels):
            return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
    '''


def test_compute_loss_through_a_method_of_its_class_is_a_full_logits_loss(tmp_path):
    root = _write(tmp_path, {"mypkg/__init__.py": "", "mypkg/trainer.py": TRAINER_HELPER, "train.py": ENTRY})
    _, diags = _check(root, "train.py")
    tl301 = [d for d in diags if d["code"] == "TL301"]
    assert [(d["filename"], d["location"]["row"]) for d in tl301] == [("mypkg/trainer.py", 6)]
    assert "LossTrainer.compute_loss computes a cross-entropy over the model's full logits" in tl301[0]["message"]


def test_a_trainer_class_bound_to_an_alias_is_followed(tmp_path):
    entry = ENTRY.replace("trainer = LossTrainer(", "trainer_cls = LossTrainer\n    trainer = trainer_cls(")
    root = _write(tmp_path, {"mypkg/__init__.py": "", "mypkg/trainer.py": TRAINER_FULL, "train.py": entry})
    _, diags = _check(root, "train.py")
    assert [d["filename"] for d in diags if d["code"] == "TL301"] == ["mypkg/trainer.py"]
    # an alias bound twice (to two classes) is not guessed at
    twice = entry.replace("trainer_cls = LossTrainer\n", "trainer_cls = LossTrainer\n    trainer_cls = Other\n")
    root = _write(tmp_path / "b", {"mypkg/__init__.py": "", "mypkg/trainer.py": TRAINER_FULL, "train.py": twice})
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL301"] == []


def test_an_override_returning_the_models_own_loss_follows_the_base_trainer(tmp_path):
    own = ("from transformers import Trainer\n\n\nclass LossTrainer(Trainer):\n"
           "    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):\n"
           "        outputs = model(**inputs)\n        return outputs.loss\n")
    root = _write(tmp_path, {"mypkg/__init__.py": "", "mypkg/trainer.py": own, "train.py": ENTRY})
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL301"] == []  # use_liger_kernel=True patches the model's loss
    root = _write(tmp_path / "b", {"mypkg/__init__.py": "", "mypkg/trainer.py": own,
                                   "train.py": ENTRY.replace(", use_liger_kernel=True", "")})
    _, diags = _check(root, "train.py")
    assert [d["message"].startswith("Trainer computes an unfused cross-entropy") for d in diags
            if d["code"] == "TL301"] == [True]


def test_a_load_reached_through_an_instantiated_main_is_one_load(tmp_path):
    """`main(script_args, ...)` under `if __name__ == "__main__":` is followed with its arguments; the calls inside it
    (here `get_model(...)` from a package re-export) are followed from that instantiation once, not a second time
    from main's own scope: one load, so the rules know which model the trainer gets."""
    files = {
        "pkg/__init__.py": "",
        "pkg/utils/__init__.py": "from .model_utils import get_model\n",
        "pkg/utils/model_utils.py": (
            "from transformers import AutoModelForCausalLM\n\n\n"
            "def get_model(name):\n"
            "    model = AutoModelForCausalLM.from_pretrained(name)\n"
            "    return model\n"),
        "train.py": (
            "from transformers import Trainer, TrainingArguments\n"
            "from pkg.utils import get_model\n\n\n"
            "def main(name, batch):\n"
            "    model = get_model(name)\n"
            "    args = TrainingArguments(output_dir='o', per_device_train_batch_size=batch)\n"
            "    Trainer(model=model, args=args).train()\n\n\n"
            "if __name__ == '__main__':\n"
            "    main('meta-llama/Meta-Llama-3-8B', 2)\n"),
    }
    root = _write(tmp_path, files)
    _, diags = _check(root, "train.py")
    assert [d["code"] for d in diags if d["code"] == "TL301"] == ["TL301"]


def test_subclass_without_override_behaves_like_its_base(tmp_path):
    plain = "from transformers import Trainer\n\n\nclass MyTrainer(Trainer):\n    def log(self, logs):\n        pass\n"
    entry = ENTRY.replace("mypkg.trainer import LossTrainer", "mypkg.trainer import MyTrainer").replace(
        "LossTrainer(", "MyTrainer(")
    root = _write(tmp_path, {"mypkg/__init__.py": "", "mypkg/trainer.py": plain, "train.py": entry})
    _, diags = _check(root, "train.py")
    assert [d for d in diags if d["code"] == "TL301"] == []  # use_liger_kernel=True, as for Trainer
    root2 = _write(tmp_path / "b", {"mypkg/__init__.py": "", "mypkg/trainer.py": plain,
                                    "train.py": entry.replace(", use_liger_kernel=True", "")})
    _, diags = _check(root2, "train.py")
    assert [d["message"].startswith("Trainer computes an unfused cross-entropy") for d in diags
            if d["code"] == "TL301"] == [True]


def test_same_file_trainer_subclass(tmp_path):
    text = textwrap.dedent(TRAINER_FULL) + textwrap.dedent(ENTRY).replace("from mypkg.trainer import LossTrainer\n",
                                                                         "")
    root = _write(tmp_path, {"train.py": text})
    _, diags = _check(root, "train.py")
    assert [d["filename"] for d in diags if d["code"] == "TL301"] == ["train.py"]


# -- 4. a thin entry point that calls a package's main ------------------------------------------------------------
THIN = {
    "fastlm/__init__.py": "",
    "fastlm/train/__init__.py": "",
    "fastlm/train/train.py": '''
        from dataclasses import dataclass, field

        import transformers
        from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer


        @dataclass
        class ModelArguments:
            model_name_or_path: str = field(default="facebook/opt-125m")


        @dataclass
        class TrainingArguments(transformers.TrainingArguments):
            model_max_length: int = field(default=512)


        def train(attn_implementation=None):
            parser = HfArgumentParser((ModelArguments, TrainingArguments))
            model_args, training_args = parser.parse_args_into_dataclasses()
            model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                                         attn_implementation=attn_implementation)
            trainer = Trainer(model=model, args=training_args)
            trainer.train()
        ''',
    "fastlm/train/train_mem.py": '''
        from fastlm.train.train import train

        if __name__ == "__main__":
            train(attn_implementation="eager")
        ''',
    "scripts/train.sh": '''
        torchrun --nproc_per_node=8 fastlm/train/train_mem.py \\
            --model_name_or_path meta-llama/Meta-Llama-3-8B \\
            --model_max_length 8192 \\
            --per_device_train_batch_size 1 \\
            --use_liger_kernel True
        ''',
}


def test_thin_entry_point_adopts_the_modules_command_line(tmp_path):
    root = _write(tmp_path, THIN)
    _, diags = _check(root, "fastlm/train/train_mem.py")
    tl101 = [d for d in diags if d["code"] == "TL101"]
    assert len(tl101) == 1
    # "eager" is written in the thin script: the finding is there, under the launch that makes it long
    assert tl101[0]["filename"] == "fastlm/train/train_mem.py"
    assert "sequence length 8,192" in tl101[0]["message"]


def test_thin_entry_point_is_not_skipped_as_irrelevant(tmp_path):
    root = _write(tmp_path, THIN)
    text = _verbose(root, "fastlm/train/train_mem.py")
    assert "mentions none of the APIs" not in text and "modules followed: fastlm/train/train.py" in text


# -- 5. a helper reached from several scripts: one finding per distinct outcome ------------------------------------
def test_helper_reached_from_two_scripts_is_reported_once(tmp_path):
    helper = {"common/__init__.py": "", "common/load.py": '''
        from transformers import AutoModelForCausalLM


        def load(name):
            return AutoModelForCausalLM.from_pretrained(name, attn_implementation="eager")
        '''}
    script = '''
        from transformers import TrainingArguments, Trainer
        from common.load import load

        model = load("meta-llama/Meta-Llama-3-8B")
        args = TrainingArguments(output_dir="o", per_device_train_batch_size=1, use_liger_kernel=True)
        tok_max_length = 8192
        trainer = Trainer(model=model, args=args)
        trainer.train()
        '''
    root = _write(tmp_path, {**helper, "a.py": script.replace("tok_max_length", "max_length"),
                             "b.py": script.replace("tok_max_length", "max_length")})
    _, diags = _check(root, "a.py", "b.py")
    tl101 = [d for d in diags if d["code"] == "TL101"]
    assert len(tl101) == 1 and tl101[0]["filename"] == "common/load.py"
    assert tl101[0]["message"].startswith("a.py (and b.py): eager attention")
    # a different outcome (another sequence length) stays a separate finding
    (root / "b.py").write_text(textwrap.dedent(script).replace("tok_max_length = 8192", "max_length = 4096"))
    _, diags = _check(root, "a.py", "b.py")
    assert len([d for d in diags if d["code"] == "TL101"]) == 2


# -- 6. never a library, never a traceback ------------------------------------------------------------------------
def test_third_party_imports_are_never_followed(tmp_path):
    # a folder named like a library inside the repository is still not followed for a library import
    files = {"torch/__init__.py": "", "torch/nn.py": "from transformers import AutoModel\n\n\ndef Linear(x):\n"
                                                          "    return AutoModel.from_pretrained('gpt2', "
                                                          "attn_implementation='eager')\n",
             "train.py": "import torch\nfrom torch.nn import Linear\nfrom transformers import Trainer\n\n"
                         "layer = Linear(4)\n"}
    root = _write(tmp_path, files)
    text = _verbose(root, "train.py")
    assert "modules followed" not in text
    assert "torch/nn.py" not in text


@pytest.mark.parametrize("module", [
    "from .b import g\n\n\ndef f(x):\n    return g(x)\n",  # circular with b
    "def broken(:\n",  # does not parse
    "def __getattr__(name):\n    raise AttributeError(name)\n",  # a __getattr__ module
])
def test_bad_modules_stay_unknown(tmp_path, module):
    files = {"pkg/__init__.py": "", "pkg/a.py": module,
             "pkg/b.py": "from transformers import AutoModelForCausalLM\nfrom .a import f\n\n\ndef g(x):\n"
                         "    return f(x)\n",
             "train.py": "from transformers import Trainer, TrainingArguments\nfrom pkg.a import f\nfrom pkg.b import g"
                         "\n\nmodel = f('gpt2')\nm2 = g('gpt2')\ntrainer = Trainer(model=model, args=TrainingArguments("
                         "'o'))\n"}
    root = _write(tmp_path, files)
    code, diags = _check(root, "train.py")
    assert not [d for d in diags if d["code"] in ("TL001", "TL004")]
    assert "Traceback" not in _verbose(root, "train.py")


def test_a_c_extension_stays_unknown(tmp_path):
    files = {"pkg/__init__.py": "", "train.py": "from transformers import Trainer\nfrom pkg.fast import load\n\n"
                                                "model = load('gpt2')\nTrainer(model=model)\n"}
    root = _write(tmp_path, files)
    (root / "pkg/fast.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF\x00\x00binary")
    code, diags = _check(root, "train.py")
    assert not [d for d in diags if d["code"] in ("TL001", "TL002", "TL004")]
    assert "not followed: pkg.fast.load" in _verbose(root, "train.py")


def test_cached_result_is_invalidated_when_a_followed_module_changes(tmp_path):
    root = _write(tmp_path, {**HELPER, "scripts/train.sh": LAUNCH.format(extra="")})

    def run() -> list[str]:
        out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--output-format", "json", "train.py"],
                             cwd=root, capture_output=True, text=True, timeout=120)
        return [d["code"] for d in json.loads(out.stdout)]

    assert "TL101" in run()
    assert "TL101" in run()  # cached
    module = root / "pkg/model_utils.py"
    module.write_text(module.read_text().replace('else "eager"', 'else "sdpa"'))
    assert "TL101" not in run()


def test_thin_entry_point_fix_edits_the_literal_it_passes(tmp_path):
    root = _write(tmp_path, THIN)
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--fix", "fastlm/train/train_mem.py"],
                         cwd=root, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr
    assert 'train(attn_implementation="sdpa")' in (root / "fastlm/train/train_mem.py").read_text()
    assert "attn_implementation=attn_implementation" in (root / "fastlm/train/train.py").read_text()


def test_same_file_helper_binds_its_arguments(tmp_path):
    script = '''
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


        def load(name, flash=False, **kwargs):
            return AutoModelForCausalLM.from_pretrained(
                name, attn_implementation="flash_attention_2" if flash else "eager", **kwargs)


        model = load("meta-llama/Meta-Llama-3-8B", flash={flash}, dtype="bfloat16")
        args = TrainingArguments(output_dir="o", per_device_train_batch_size=1, use_liger_kernel=True)
        max_length = 8192
        Trainer(model=model, args=args).train()
        '''
    root = _write(tmp_path, {"train.py": script.format(flash="False")})
    _, diags = _check(root, "train.py")
    assert [d["location"]["row"] for d in diags if d["code"] == "TL101"] == [6]
    root2 = _write(tmp_path / "b", {"train.py": script.format(flash="True")})
    _, diags = _check(root2, "train.py")
    assert [d for d in diags if d["code"] == "TL101"] == []


# -- 7. a parser class of the repository's own (alignment-handbook's layout) ---------------------------------------
HANDBOOK = {
    "setup.py": 'from setuptools import find_packages, setup\n\nsetup(name="alignment", package_dir={"": "src"}, '
                'packages=find_packages("src"))\n',
    "src/alignment/__init__.py": "from .configs import H4ArgumentParser, ModelArguments\n",
    "src/alignment/configs.py": '''
        import os
        import sys
        from dataclasses import dataclass, field

        from transformers import HfArgumentParser


        @dataclass
        class ModelArguments:
            model_name_or_path: str = field(default=None)
            attn_implementation: str = field(default="sdpa")


        class H4ArgumentParser(HfArgumentParser):
            def parse_yaml_and_args(self, yaml_arg, other_args=None):
                return self.parse_yaml_file(os.path.abspath(yaml_arg))

            def parse(self):
                if len(sys.argv) == 2 and sys.argv[1].endswith(".yaml"):
                    return self.parse_yaml_file(os.path.abspath(sys.argv[1]))
                if len(sys.argv) > 2 and sys.argv[1].endswith(".yaml"):
                    return self.parse_yaml_and_args(os.path.abspath(sys.argv[1]), sys.argv[2:])
                return self.parse_args_into_dataclasses()
        ''',
    "scripts/run_sft.py": '''
        from transformers import AutoModelForCausalLM
        from trl import SFTConfig, SFTTrainer

        from alignment import H4ArgumentParser, ModelArguments


        def main():
            parser = H4ArgumentParser((ModelArguments, SFTConfig))
            model_args, training_args = parser.parse()
            model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                                         attn_implementation=model_args.attn_implementation)
            trainer = SFTTrainer(model=model, args=training_args)
            trainer.train()


        if __name__ == "__main__":
            main()
        ''',
    "recipes/llama3/sft/config.yaml": '''
        model_name_or_path: meta-llama/Meta-Llama-3-8B
        attn_implementation: eager
        max_length: 8192
        per_device_train_batch_size: 4
        use_liger_kernel: true
        ''',
    "recipes/launch.sh": "ACCELERATE_LOG_LEVEL=info accelerate launch scripts/run_sft.py "
                         "recipes/llama3/sft/config.yaml --per_device_train_batch_size=1\n",
}


def test_a_repository_parser_subclass_reads_its_recipe_and_the_overrides(tmp_path):
    root = _write(tmp_path, HANDBOOK)
    _, diags = _check(root, "scripts/run_sft.py")
    tl101 = [d for d in diags if d["code"] == "TL101"]
    assert len(tl101) == 1 and tl101[0]["filename"] == "recipes/llama3/sft/config.yaml"
    assert "batch 1 x 32 heads x 8,192^2" in tl101[0]["message"]  # the override after the recipe wins


def test_a_parser_class_that_is_not_an_hf_parser_stays_unknown(tmp_path):
    files = dict(HANDBOOK)
    files["src/alignment/configs.py"] = files["src/alignment/configs.py"].replace(
        "class H4ArgumentParser(HfArgumentParser):", "class H4ArgumentParser:")
    root = _write(tmp_path, files)
    code, diags = _check(root, "scripts/run_sft.py")
    assert [d for d in diags if d["code"] in ("TL101", "TL004")] == []


# -- 8. argparse declared in a repository module ------------------------------------------------------------------
ARGS_MODULE = {
    "utils/__init__.py": "",
    "utils/args.py": '''
        import argparse


        def get_args():
            parser = argparse.ArgumentParser()
            parser.add_argument("--model", type=str, default="meta-llama/Meta-Llama-3-8B")
            parser.add_argument("--attn", type=str, default="eager")
            parser.add_argument("--max_length", type=int, default=1024)
            parser.add_argument("--batch_size", type=int, default=1)
            return parser.parse_args()
        ''',
    "train.py": '''
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        from utils.args import get_args

        args = get_args()
        model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=args.attn)
        targs = TrainingArguments(output_dir="o", per_device_train_batch_size=args.batch_size, use_liger_kernel=True)
        Trainer(model=model, args=targs).train()
        ''',
}


@pytest.mark.parametrize("launch, fires", [("python train.py --max_length 8192\n", True),
                                           ("python train.py --max_length 8192 --attn sdpa\n", False),
                                           ("python train.py\n", False)])
def test_argparse_options_declared_in_a_module_are_the_scripts(tmp_path, launch, fires):
    root = _write(tmp_path, {**ARGS_MODULE, "run.sh": launch})
    _, diags = _check(root, "train.py")
    tl101 = [d for d in diags if d["code"] == "TL101"]
    assert bool(tl101) is fires
    if fires:
        # the default "eager" is written in utils/args.py: reported (and fixed) there, under the launch
        assert tl101[0]["filename"] == "utils/args.py" and tl101[0]["location"]["row"] == 7
        assert ("run.sh", 1) in {(r["filename"], r["location"]["row"]) for r in tl101[0]["related"]}


# -- what runs when the file runs: only those calls are followed (facts/inline.run_scopes) ----------------------
def _main_variant(call: str) -> dict:
    """HELPER's train.py with its `if __name__ == "__main__": main()` replaced by `call`."""
    text = HELPER["train.py"].replace('''
        if __name__ == "__main__":
            main()
        ''', call)
    assert text != HELPER["train.py"]
    return {**HELPER, "train.py": text, "scripts/train.sh": LAUNCH.format(extra="")}


@pytest.mark.parametrize("call, followed", [
    ('''
        if __name__ == "__main__":
            import fire
            fire.Fire(main)
        ''', True),  # passed, not called: it still runs
    ('''
        main()
        ''', True),
    ('''
        import typer

        app = typer.Typer()
        app.command()(main)
        ''', True),
    ('''
        def cli():
            return main
        ''', False),  # a library module: nothing at its module level names main or what names it
])
def test_calls_are_followed_only_where_the_file_runs(tmp_path, call, followed):
    root = _write(tmp_path, _main_variant(call))
    text = _verbose(root, "train.py")
    assert ("modules followed: pkg/model_utils.py" in text) is followed, text
    _, diags = _check(root, "train.py")
    assert bool([d for d in diags if d["code"] == "TL101"]) is followed


def test_a_decorated_function_is_taken_to_run(tmp_path):
    files = _main_variant('''
        ''')
    pad = " " * 8  # HELPER's texts are dedented when written
    files["train.py"] = files["train.py"].replace(f"{pad}def main():", f"{pad}@app.command()\n{pad}def main():").replace(
        "from pkg.model_utils import get_model", f"from pkg.model_utils import get_model\n{pad}from cli import app")
    assert "@app.command()" in files["train.py"]
    files["cli.py"] = "import typer\napp = typer.Typer()\n"
    root = _write(tmp_path, files)
    assert "modules followed: pkg/model_utils.py" in _verbose(root, "train.py")


def test_a_library_class_is_followed_from_the_script_that_runs_it(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/model_utils.py": HELPER["pkg/model_utils.py"],
        "pkg/runner.py": '''
            from transformers import Trainer

            from pkg.model_utils import get_model


            class Runner:
                def __init__(self, model_args, training_args):
                    self.trainer = Trainer(model=get_model(model_args, training_args), args=training_args)
            ''',
        "train.py": HELPER["train.py"].replace("from pkg.model_utils import get_model",
                                              "from pkg.runner import Runner").replace(
            '''            model = get_model(model_args, training_args)
            trainer = Trainer(model=model, args=training_args)
            trainer.train()''', '''            Runner(model_args, training_args).trainer.train()'''),
        "scripts/train.sh": LAUNCH.format(extra=""),
    }
    assert "Runner(model_args" in files["train.py"]
    root = _write(tmp_path, files)
    # pkg/runner.py alone runs nothing: its class's calls are not followed
    assert "modules followed" not in _verbose(root, "pkg/runner.py")
    # the script runs it: the class, and the helper it calls, are followed; the finding lands in the helper
    assert "modules followed: pkg/runner.py, pkg/model_utils.py" in _verbose(root, "train.py")
    _, diags = _check(root, "train.py")
    assert [d["filename"] for d in diags if d["code"] == "TL101"] == ["pkg/model_utils.py"]


def test_an_installed_librarys_relative_imports_are_not_followed(tmp_path):
    """A file of an installed package, linted in place, is part of that library: its relative imports are the
    library's own modules (torch/_dynamo/variables/lazy.py reached 42 of torch's modules this way)."""
    files = {
        "proj/pyproject.toml": "[tool.trainlint]\n",
        "venv/lib/python3.11/site-packages/fakelib/__init__.py": "",
        "venv/lib/python3.11/site-packages/fakelib/model_utils.py": HELPER["pkg/model_utils.py"],
        "venv/lib/python3.11/site-packages/fakelib/cli.py": HELPER["train.py"].replace(
            "from pkg.model_utils import get_model", "from .model_utils import get_model"),
    }
    root = _write(tmp_path, files)
    installed = root / "venv/lib/python3.11/site-packages/fakelib/cli.py"
    text = _verbose(root / "proj", str(installed))
    assert "modules followed" not in text
    # the same package in a repository of its own is followed
    copy = _write(tmp_path / "repo", {"fakelib/__init__.py": "", "fakelib/model_utils.py": HELPER["pkg/model_utils.py"],
                                      "fakelib/cli.py": files["venv/lib/python3.11/site-packages/fakelib/cli.py"]})
    assert "modules followed: fakelib/model_utils.py" in _verbose(copy, "fakelib/cli.py")


def test_a_checkout_of_a_modelled_library_is_not_followed(tmp_path):
    """A file of a package trainlint models (trl, accelerate, peft, ...) in a checkout of it: its relative imports
    are that library's modules, not followed, as its absolute imports of the library are not."""
    cli = HELPER["train.py"].replace("from pkg.model_utils import get_model", "from .model_utils import get_model")
    root = _write(tmp_path, {"accelerate/__init__.py": "", "accelerate/commands/__init__.py": "",
                             "accelerate/commands/model_utils.py": HELPER["pkg/model_utils.py"],
                             "accelerate/commands/cli.py": cli,
                             "mylib/__init__.py": "", "mylib/commands/__init__.py": "",
                             "mylib/commands/model_utils.py": HELPER["pkg/model_utils.py"],
                             "mylib/commands/cli.py": cli})
    assert "modules followed" not in _verbose(root, "accelerate/commands/cli.py")
    assert "modules followed: mylib/commands/model_utils.py" in _verbose(root, "mylib/commands/cli.py")


DISPATCH = '''
import argparse
from transformers import AutoModelForCausalLM


def generate(args):
    return AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="eager")


def score(args):
    return AutoModelForCausalLM.from_pretrained(args.model, attn_implementation="sdpa")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", default="score")
    parser.add_argument("--model", default="meta-llama/Llama-3.2-1B")
    args = parser.parse_args()
    if args.task and args.task == "generate":
        generate(args)
    elif args.task and args.task == "score":
        score(args)
'''


def test_a_followed_function_runs_only_where_its_call_site_does(tmp_path):
    """The callee's calls carry the call site's `if` conditions: under `--task score` (the default) the eager load
    inside generate() is not part of the run, and under `--task generate` it is."""
    from trainlint.facts import extract_facts
    from trainlint.facts.inline import Follower
    import libcst as cst

    script = tmp_path / "run.py"
    script.write_text(DISPATCH)
    facts = extract_facts(cst.parse_module(DISPATCH), str(script), DISPATCH)
    followed = Follower(tmp_path, lambda p: p.name).follow(facts, script)
    loads = {m.attn_implementation.value: m.call for m in followed.models}
    assert set(loads) == {"eager", "sdpa"}
    eager_guards = [(g.value, holds) for g, holds in loads["eager"].guards if g.state == "param"]
    assert any(holds for _, holds in eager_guards) and len(eager_guards) >= 2  # `args.task` and `== "generate"`


BOUND_GUARD = '''
import argparse
from transformers import AutoModelForCausalLM


def train(name, quantize):
    if quantize:
        model = AutoModelForCausalLM.from_pretrained(name, load_in_4bit=True)
    else:
        model = AutoModelForCausalLM.from_pretrained(name)
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="meta-llama/Llama-3.2-1B")
    parser.add_argument("--quantize", action="store_true")
    args = parser.parse_args()
    train(args.name, args.quantize)
'''


def test_a_guard_bound_to_an_option_at_the_call_site_stays_that_option(tmp_path):
    """`if quantize:` inside train(quantize=args.quantize) becomes the command-line option, which a launch then
    decides; it must not go back to the unbound parameter (that left both loads in every run)."""
    from trainlint.facts import extract_facts
    from trainlint.facts.inline import Follower
    from trainlint.facts.model import Param
    import libcst as cst

    script = tmp_path / "train.py"
    script.write_text(BOUND_GUARD)
    facts = extract_facts(cst.parse_module(BOUND_GUARD), str(script), BOUND_GUARD)
    followed = Follower(tmp_path, lambda p: p.name).follow(facts, script)
    loads = [m.call for m in followed.models]
    assert len(loads) == 2
    for call in loads:
        symbols = [g.value for g, _ in call.guards if g.state == "param"]
        assert symbols and all(isinstance(s, Param) for s in symbols), symbols
