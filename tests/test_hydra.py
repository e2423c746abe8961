"""Hydra / OmegaConf configs read statically (launch/hydra.py, facts/hydra.py): the primary config, its defaults
list and config groups, the launch's overrides, `${...}` interpolation, and registry dicts of model classes. The
projects are written for the tests in the shapes of Hydra training repositories (a script, a configs/ tree, a
launcher) and linted with the real engine; findings must land where the deciding value is written."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from trainlint.config import Settings, from_table
from trainlint.knowledge.versions import project_pins
from trainlint.launch.discover import clear_caches
from trainlint.lint import enabled_codes, lint_file

# Meta-Llama-3-8B (128,256-token vocabulary) with eager attention at 8,192 tokens: TL101 and TL301 under Trainer.
SCRIPT = '''\
import hydra
from omegaconf import DictConfig, OmegaConf
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments


@hydra.main(config_path="configs", config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> None:
    tokenizer = AutoTokenizer.from_pretrained(cfg.model.name_or_path)
    model = AutoModelForCausalLM.from_pretrained(
        cfg.model.name_or_path,
        attn_implementation=cfg.model.attn_implementation,
    )
    data = tokenizer(["..."], truncation=True, max_length=cfg.data.max_length)
    args = TrainingArguments(**OmegaConf.to_container(cfg.trainer.args, resolve=True))
    trainer = Trainer(model=model, args=args, train_dataset=data)
    trainer.train()


if __name__ == "__main__":
    main()
'''

CONFIGS = {
    "configs/train.yaml": '''\
        defaults:
          - model: llama3
          - trainer: default
          - _self_

        data:
          max_length: 8192
        ''',
    "configs/model/llama3.yaml": '''\
        name_or_path: meta-llama/Meta-Llama-3-8B
        attn_implementation: eager
        ''',
    "configs/model/qwen.yaml": '''\
        name_or_path: Qwen/Qwen2.5-7B
        attn_implementation: sdpa
        ''',
    "configs/model/tiny.yaml": '''\
        name_or_path: meta-llama/Llama-3.2-1B
        attn_implementation: sdpa
        ''',
    "configs/trainer/default.yaml": '''\
        args:
          output_dir: out
          per_device_train_batch_size: 4
          learning_rate: 1e-5
          bf16: true
        ''',
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch):
    """project(files, settings) -> [(code, file, line, col, message)] for train.py, linted with the real engine."""
    monkeypatch.chdir(tmp_path)

    def run(files: dict[str, str], settings: dict | None = None, script: str = "train.py"):
        for rel, text in files.items():
            target = tmp_path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text))
        project_pins.cache_clear()
        clear_caches()
        s = from_table(settings, tmp_path, "test") if settings else Settings(root=tmp_path)
        result = lint_file(tmp_path / script, s, enabled_codes(s))
        return [(d.code, d.filename, d.span.line, d.span.col, d.message) for d in result.diagnostics]

    return run


def found(rows) -> list[tuple[str, str, int, int]]:
    return sorted((code, file, line, col) for code, file, line, col, _ in rows)


def test_defaults_list_composes_groups_and_findings_land_in_the_group_file(project):
    rows = project({"train.py": SCRIPT, **CONFIGS})
    assert found(rows) == [("TL101", "configs/model/llama3.yaml", 2, 22),
                           ("TL301", "configs/model/llama3.yaml", 1, 15)]
    tl101 = next(r for r in rows if r[0] == "TL101")[4]
    assert "sequence length 8,192" in tl101 and "batch 4" in tl101  # batch from **cfg.trainer.args


def test_a_launcher_group_override_changes_the_verdict(project):
    rows = project({"train.py": SCRIPT, **CONFIGS, "scripts/run.sh": "python train.py model=qwen\n"})
    assert found(rows) == [("TL301", "configs/model/qwen.yaml", 1, 15)]  # sdpa: no TL101; Qwen's 152,064 vocab
    assert "152,064" in rows[0][4]


def test_a_launcher_key_override_carries_the_launchers_span(project):
    launcher = "python train.py model=qwen model.attn_implementation=eager data.max_length=4096\n"
    rows = project({"train.py": SCRIPT, **CONFIGS, "run.sh": launcher})
    assert ("TL101", "run.sh", 1, launcher.index("=eager") + 2) in found(rows)
    tl101 = next(r for r in rows if r[0] == "TL101")[4]
    assert "4,096" in tl101


def test_a_launcher_batch_override_reaches_training_arguments(project):
    rows = project({"train.py": SCRIPT, **CONFIGS,
                    "run.sh": "python train.py trainer.args.per_device_train_batch_size=1\n"})
    tl101 = next(r for r in rows if r[0] == "TL101")[4]
    assert "batch 1 " in tl101


def test_self_first_lets_the_group_override_the_primary(project):
    configs = dict(CONFIGS)
    configs["configs/train.yaml"] = '''\
        defaults:
          - _self_
          - model: llama3
          - trainer: default

        model:
          attn_implementation: sdpa
        data:
          max_length: 8192
        '''
    assert found(project({"train.py": SCRIPT, **configs})) == [("TL101", "configs/model/llama3.yaml", 2, 22),
                                                               ("TL301", "configs/model/llama3.yaml", 1, 15)]
    configs["configs/train.yaml"] = configs["configs/train.yaml"].replace("  - _self_\n", "").replace(
        "  - trainer: default\n", "  - trainer: default\n  - _self_\n")
    rows = project({"train.py": SCRIPT, **configs})
    assert "TL101" not in [r[0] for r in rows]  # the primary's own sdpa wins, merged last


def test_override_in_the_defaults_list_and_optional_group(project):
    configs = dict(CONFIGS)
    configs["configs/train.yaml"] = '''\
        defaults:
          - model: llama3
          - trainer: default
          - optional extras: none
          - override model: qwen
          - _self_
        data:
          max_length: 8192
        '''
    assert found(project({"train.py": SCRIPT, **configs})) == [("TL301", "configs/model/qwen.yaml", 1, 15)]


def test_interpolation_of_plain_and_relative_references(project):
    configs = dict(CONFIGS)
    configs["configs/train.yaml"] = '''\
        defaults:
          - model: llama3
          - trainer: default
          - _self_
        context: 8192
        data:
          max_length: ${..context}
        model:
          attn_implementation: ${.kernel}
          kernel: eager
        name: ${model.name_or_path}-${data.max_length}
        '''
    rows = project({"train.py": SCRIPT, **configs})
    # the value is where the referenced literal is written
    assert found(rows) == [("TL101", "configs/train.yaml", 10, 11), ("TL301", "configs/model/llama3.yaml", 1, 15)]
    assert "8,192" in next(r for r in rows if r[0] == "TL101")[4]
    configs["configs/train.yaml"] = configs["configs/train.yaml"].replace("context: 8192", "context: 1024")
    assert found(project({"train.py": SCRIPT, **configs})) == [("TL301", "configs/model/llama3.yaml", 1, 15)]


def test_interpolated_strings_compose():
    from trainlint.launch.hydra import Composition, Leaf, _Interpolator, _leaves

    tree = {"model": {"name": Leaf("org/m", None, "a.yaml")}, "run": {"dir": Leaf("out/${model.name}-${.n}", None,
                                                                                 "a.yaml"), "n": Leaf(3, None, "a.yaml")},
            "env": Leaf("${oc.env:HOME}/x", None, "a.yaml"), "late": Leaf("${now:%H}", None, "a.yaml")}
    out = Composition(tree)
    interpolator = _Interpolator(tree, out, None)
    leaves = {path: interpolator.leaf(path, leaf) for path, leaf in list(_leaves(tree))}
    assert (leaves["run.dir"].known, leaves["run.dir"].value) == (True, "out/org/m-3")
    assert not leaves["env"].known and not leaves["late"].known
    assert out.problems == []


def test_run_time_resolvers_leave_the_value_unknown(project):
    configs = dict(CONFIGS)
    configs["configs/model/llama3.yaml"] = '''\
        name_or_path: meta-llama/Meta-Llama-3-8B
        attn_implementation: ${oc.env:ATTN_IMPL,eager}
        '''
    configs["configs/train.yaml"] = CONFIGS["configs/train.yaml"].replace("8192", "${now:%H}")
    rows = project({"train.py": SCRIPT, **configs})
    assert found(rows) == [("TL301", "configs/model/llama3.yaml", 1, 15)]


def test_missing_value_is_unknown(project):
    configs = dict(CONFIGS)
    configs["configs/model/llama3.yaml"] = "name_or_path: ???\nattn_implementation: eager\n"
    # the model (its vocabulary) is not known: no TL301; eager attention at 8,192 tokens is still known
    assert [r[0] for r in project({"train.py": SCRIPT, **configs})] == ["TL101"]


def test_config_name_with_its_extension(project):
    script = SCRIPT.replace('config_name="train"', 'config_name="train.yaml"')
    assert sorted(r[0] for r in project({"train.py": script, **CONFIGS})) == ["TL101", "TL301"]


def test_compose_api_with_overrides_in_code(project):
    script = '''\
        from hydra import compose, initialize
        from omegaconf import OmegaConf
        from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

        with initialize(config_path="configs", version_base=None):
            cfg = compose(config_name="train", overrides=["model=qwen", "trainer.args.per_device_train_batch_size=2"])
        tokenizer = AutoTokenizer.from_pretrained(cfg["model"]["name_or_path"])
        model = AutoModelForCausalLM.from_pretrained(cfg["model"]["name_or_path"])
        data = tokenizer(["..."], max_length=cfg.data.max_length, truncation=True)
        trainer = Trainer(model=model, args=TrainingArguments(**cfg.trainer.args), train_dataset=data)
        trainer.train()
        '''
    rows = project({"train.py": script, **CONFIGS})
    assert found(rows) == [("TL301", "configs/model/qwen.yaml", 1, 15)]
    assert "[2 x 8,192 x 152,064]" in rows[0][4]


def test_omegaconf_load_merge_and_from_cli(project):
    script = '''\
        from omegaconf import OmegaConf
        from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

        cfg = OmegaConf.merge(OmegaConf.load("config/base.yaml"), OmegaConf.from_cli())
        tokenizer = AutoTokenizer.from_pretrained(cfg.model)
        model = AutoModelForCausalLM.from_pretrained(cfg.model, attn_implementation=cfg.attn)
        data = tokenizer(["..."], max_length=cfg.max_len, truncation=True)
        trainer = Trainer(model=model, args=TrainingArguments(output_dir="o", per_device_train_batch_size=1))
        '''
    files = {"train.py": script, "config/base.yaml": "model: Qwen/Qwen2.5-7B\nattn: sdpa\nmax_len: 8192\n"}
    assert found(project(files)) == [("TL301", "config/base.yaml", 1, 8)]
    rows = project({**files, "train.sh": "python train.py attn=eager\n"})
    assert found(rows) == [("TL101", "train.sh", 1, 22), ("TL301", "config/base.yaml", 1, 8)]


def test_a_sub_config_passed_to_a_helper(project):
    script = '''\
        import hydra
        from omegaconf import DictConfig
        from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments


        def build_model(model_cfg):
            return AutoModelForCausalLM.from_pretrained(model_cfg.name_or_path,
                                                        attn_implementation=model_cfg["attn_implementation"])


        @hydra.main(config_path="configs", config_name="train", version_base=None)
        def main(cfg: DictConfig):
            model = build_model(cfg.model)
            tokenizer = AutoTokenizer.from_pretrained(cfg.model.name_or_path)
            data = tokenizer(["..."], max_length=cfg.data.max_length, truncation=True)
            Trainer(model=model, args=TrainingArguments(**cfg.trainer.args)).train()


        main()
        '''
    assert found(project({"train.py": script, **CONFIGS})) == [("TL101", "configs/model/llama3.yaml", 2, 22),
                                                               ("TL301", "configs/model/llama3.yaml", 1, 15)]


def test_does_not_fit_with_gpu_follows_the_chosen_model(project):
    files = {"train.py": SCRIPT, **CONFIGS}
    rows = project(files, {"gpu": "24GB", "select": ["TL701"]})
    assert [r[0] for r in rows] == ["TL701"]
    rows = project({**files, "run.sh": "python train.py model=tiny data.max_length=512 "
                                       "trainer.args.per_device_train_batch_size=1\n"},
                   {"gpu": "80GB", "select": ["TL701"]})
    assert rows == []


REGISTRY = '''\
import argparse
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer, Trainer
from transformers import TrainingArguments

MODEL_REGISTRY = {"lm": AutoModelForCausalLM, "classifier": AutoModelForSequenceClassification}

parser = argparse.ArgumentParser()
parser.add_argument("--task", default="{default}")
args = parser.parse_args()
tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B")
model = MODEL_REGISTRY[{key}].from_pretrained("Qwen/Qwen2.5-7B")
data = tokenizer(["..."], max_length=4096, truncation=True)
Trainer(model=model, args=TrainingArguments(output_dir="o", per_device_train_batch_size=1)).train()
'''


@pytest.mark.parametrize("key, default, launcher, expected", [
    ('"lm"', "lm", None, ["TL301"]),  # a literal key: the causal LM, its vocabulary logits
    ('"classifier"', "lm", None, []),  # a classifier head: no vocabulary logits
    ("args.task", "lm", None, ["TL301"]),  # the key from a parameter's default
    ("args.task", "lm", "python train.py --task classifier\n", []),  # ... that the launch overrides
    ("args.task", "classifier", "python train.py --task lm\n", ["TL301"]),
    ("sys_key()", "lm", None, []),  # a key nothing decides: no class is guessed, nothing is judged
])
def test_registry_dict_of_model_classes(project, key, default, launcher, expected):
    script = REGISTRY.replace("{key}", key).replace("{default}", default)
    if key == "sys_key()":
        script = "import sys\n" + script.replace("MODEL_REGISTRY = ", "def sys_key():\n    return sys.argv[1]\n\n"
                                                                   "MODEL_REGISTRY = ")
    files = {"train.py": script}
    if launcher:
        files["run.sh"] = launcher
    assert [r[0] for r in project(files)] == expected


def test_registry_key_from_a_hydra_config(project):
    script = '''\
        import hydra
        from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer, Trainer

        REGISTRY = {"lm": AutoModelForCausalLM, "classifier": AutoModelForSequenceClassification}


        @hydra.main(config_path="conf", config_name="config", version_base=None)
        def main(cfg):
            cls = REGISTRY[cfg.task]
            model = cls.from_pretrained(cfg.model)
            tokenizer = AutoTokenizer.from_pretrained(cfg.model)
            data = tokenizer(["..."], max_length=4096, truncation=True)
            Trainer(model=model).train()


        main()
        '''
    files = {"train.py": script, "conf/config.yaml": "task: lm\nmodel: Qwen/Qwen2.5-7B\n"}
    assert [r[0] for r in project(files)] == ["TL301"]
    assert [r[0] for r in project({**files, "run.sh": "python train.py task=classifier\n"})] == []


def test_broken_yaml_is_tl005_in_that_file_and_the_rest_is_read(project):
    configs = dict(CONFIGS)
    configs["configs/trainer/default.yaml"] = "args:\n  output_dir: [out\n"
    rows = project({"train.py": SCRIPT, **configs})
    assert ("TL005", "configs/trainer/default.yaml") in [(r[0], r[1]) for r in rows]
    assert "TL101" in [r[0] for r in rows]  # the model group was still read


def test_missing_group_option_is_tl005_at_the_defaults_list(project):
    configs = dict(CONFIGS)
    configs["configs/train.yaml"] = CONFIGS["configs/train.yaml"].replace("llama3", "mistral")
    # no launch found: a placeholder option every documented run overrides is not reported
    assert project({"train.py": SCRIPT, **configs}) == []
    # a launch that runs it as it is: Hydra fails there
    rows = project({"train.py": SCRIPT, **configs, "run.sh": "python train.py data.max_length=4096\n"})
    tl005 = [r for r in rows if r[0] == "TL005"]
    assert [(r[1], r[2]) for r in tl005] == [("configs/train.yaml", 2)]
    assert "model/mistral.yaml" in tl005[0][4]
    assert not [r for r in rows if r[0] in ("TL101", "TL301")]  # no model: nothing claimed about it


def test_missing_primary_config_is_tl005_under_a_launch(project):
    files = {"train.py": SCRIPT.replace('config_name="train"', 'config_name="nope"'), **CONFIGS}
    assert project(files) == []  # no launch runs it: a note for --verbose
    rows = project({**files, "run.sh": "python train.py\n"})
    assert [(r[0], r[1]) for r in rows] == [("TL005", "train.py")]
    assert "nope.yaml" in rows[0][4]


def test_cyclic_interpolation_is_tl005_and_unknown(project):
    configs = dict(CONFIGS)
    configs["configs/model/llama3.yaml"] = '''\
        name_or_path: meta-llama/Meta-Llama-3-8B
        attn_implementation: ${model.other}
        other: ${model.attn_implementation}
        '''
    rows = project({"train.py": SCRIPT, **configs})
    assert sorted((r[0], r[1]) for r in rows) == [("TL005", "configs/model/llama3.yaml"),
                                                  ("TL301", "configs/model/llama3.yaml")]
    assert "cyclic interpolation" in next(r[4] for r in rows if r[0] == "TL005")


def test_check_command_on_a_hydra_project_has_no_traceback(tmp_path):
    for rel, text in {"train.py": SCRIPT, **CONFIGS, "configs/model/llama3.yaml": "name_or_path: [\n",
                      "scripts/train.sh": "python train.py model=missing +x=1 ++y=2 ~data\n"}.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "."], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, env=env)
    assert "Traceback" not in r.stderr
    assert r.returncode in (0, 1)
    assert "TL005" in r.stdout


def test_instantiate_with_a_target_is_the_call_it_names(project):
    script = '''\
        import hydra
        from hydra.utils import instantiate
        from transformers import AutoTokenizer, Trainer, TrainingArguments


        @hydra.main(config_path="conf", config_name="config", version_base=None)
        def main(cfg):
            model = instantiate(cfg.model)
            tokenizer = AutoTokenizer.from_pretrained(cfg.model.pretrained_model_name_or_path)
            data = tokenizer(["..."], max_length=cfg.seq, truncation=True)
            Trainer(model=model, args=TrainingArguments(output_dir="o", per_device_train_batch_size=1)).train()


        main()
        '''
    config = '''\
        seq: 8192
        model:
          _target_: transformers.AutoModelForCausalLM.from_pretrained
          pretrained_model_name_or_path: Qwen/Qwen2.5-7B
          attn_implementation: eager
        '''
    files = {"train.py": script, "conf/config.yaml": config}
    assert found(project(files)) == [("TL101", "conf/config.yaml", 5, 24), ("TL301", "conf/config.yaml", 4, 34)]
    # a target that is not a model class's from_pretrained (or not known): nothing is judged about it
    other = config.replace("transformers.AutoModelForCausalLM.from_pretrained", "mypkg.build_model")
    assert project({**files, "conf/config.yaml": other}) == []
    assert project({**files, "run.sh": "python train.py model._target_=${TARGET}\n"}) == []


def test_a_group_chosen_by_a_variable(project):
    files = {"train.py": SCRIPT, **CONFIGS}
    # the launcher's own variable: read as the shell would expand it
    rows = project({**files, "run.sh": "MODEL=qwen\npython train.py model=$MODEL\n"})
    assert found(rows) == [("TL301", "configs/model/qwen.yaml", 1, 15)]
    # a variable the caller sets: the group's values are not known, nothing is claimed from them
    assert project({**files, "run.sh": "python train.py model=$MODEL\n"}) == []


LORA = '''\
import hydra
from omegaconf import OmegaConf
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


@hydra.main(config_path="conf", config_name="sft", version_base="1.3")
def main(cfg):
    model = AutoModelForCausalLM.from_pretrained(cfg.model.path)
    model = get_peft_model(model, LoraConfig(r=cfg.lora.r, target_modules=["q_proj", "v_proj"]))
    args = TrainingArguments(**OmegaConf.to_container(cfg.train, resolve=True))
    Trainer(model=model, args=args).train()


if __name__ == "__main__":
    main()
'''


def test_lora_checkpointing_from_the_config_and_its_override(project):
    # transformers 4.40.0 pinned: reentrant checkpointing by default, and get_peft_model hooks no inputs (TL201)
    files = {"train.py": LORA, "requirements.txt": "transformers==4.40.0\n",
             "conf/sft.yaml": "model:\n  path: meta-llama/Llama-3.2-1B\nlora:\n  r: 8\ntrain:\n  output_dir: out\n"
                              "  gradient_checkpointing: true\n  per_device_train_batch_size: 2\n"}
    assert found(project(files, {"select": ["TL201"]})) == [("TL201", "conf/sft.yaml", 7, 27)]
    launched = {**files, "run.sh": "python train.py train.gradient_checkpointing=false\n"}
    assert project(launched, {"select": ["TL201"]}) == []
    # `++` forces a key in; `~` deletes one (the library default, off, applies)
    deleted = {**files, "run.sh": "python train.py '~train.gradient_checkpointing'\n"}
    assert project(deleted, {"select": ["TL201"]}) == []
    forced = {**files, "conf/sft.yaml": files["conf/sft.yaml"].replace("  gradient_checkpointing: true\n", ""),
              "run.sh": "python train.py ++train.gradient_checkpointing=true\n"}
    column = forced["run.sh"].index("=true") + 2  # the value after `=`
    assert found(project(forced, {"select": ["TL201"]})) == [("TL201", "run.sh", 1, column)]
