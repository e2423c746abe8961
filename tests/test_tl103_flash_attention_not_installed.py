"""TL103: flash_attention_2 requested where the environment the repository declares has no flash-attn (a lever that does
nothing, issue 28 item 4). Real scripts and configs in tmp repositories with their requirements files; the versions
come from the pins, as for every rule."""

from __future__ import annotations

import json

from conftest import codes

SCRIPT = '''
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", dtype="bfloat16", {attention})
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True, gradient_checkpointing=True)
enc = tokenizer(texts, max_length=4096, truncation=True)
Trainer(model=model, args=args, train_dataset=ds).train()
'''
FA2 = SCRIPT.format(attention='attn_implementation="flash_attention_2"')


def tl103(found):
    return [f for f in found if f[0] == "TL103"]


_repos = iter(range(10_000))


def in_repo(lint, source, files=None, name="train.py", **kw):
    """Lint `source` as `name` in a fresh repository (its own `.git`) holding `files`: one test's repositories do not
    see each other's files."""
    root = f"repo{next(_repos)}"
    tree = {f"{root}/.git/HEAD": "ref: refs/heads/main\n"} | {f"{root}/{k}": v for k, v in (files or {}).items()}
    return tl103(lint(source, files=tree, name=f"{root}/{name}", **kw))


def test_requirements_without_flash_attn_on_4_46_is_flagged_with_the_eager_attention_at_stake(lint):
    found = in_repo(lint, FA2, files={"requirements.txt": "transformers==4.46.3\ntorch\n"})
    assert len(found) == 1 and found[0][1] == 4
    message = found[0][2]
    assert message.startswith('attn_implementation="flash_attention_2" requests flash-attention, but the environment '
                              'this repository declares (requirements.txt) has no flash-attn: transformers 4.46.3 '
                              'raises ImportError at load')
    # Llama-3.1-8B, batch 4 x 4,096, 32 heads, checkpointing on: one layer's eager scores and softmax + the mask
    assert "a fallback to eager attention would keep ~12.1 GiB of score matrices" in message
    assert message.endswith('add flash-attn to requirements.txt, or set attn_implementation="sdpa" (fused SDPA '
                            'kernels, no package to install)')
    assert "kernels" not in message.split("ImportError")[0]  # 4.46 has no Hub-kernel fallback


def test_use_flash_attention_2_is_the_same_request(lint):
    src = SCRIPT.format(attention="use_flash_attention_2=True")
    found = in_repo(lint, src, files={"requirements.txt": "transformers==4.40.2\n"})
    assert len(found) == 1 and found[0][2].startswith("use_flash_attention_2=True requests flash-attention")


def test_flash_attn_declared_or_installed_by_hand_is_quiet(lint):
    pinned = "transformers==4.46.3\n"
    assert not in_repo(lint, FA2, files={"requirements.txt": pinned + "flash-attn==2.7.4.post1\n"})
    assert not in_repo(lint, FA2, files={"requirements.txt": pinned + "axolotl[flash-attn,deepspeed]\n"})
    assert not in_repo(lint, FA2, files={"requirements.txt": pinned + "https://example.invalid/flash_attn-2.7.4+cu12torch2.6"
                                                                    "-cp311-cp311-linux_x86_64.whl\n"})
    # the README says to install it by hand (it needs --no-build-isolation): counted as present
    assert not in_repo(lint, FA2, files={"requirements.txt": pinned,
                                      "README.md": "pip install flash-attn --no-build-isolation\n"})
    assert not in_repo(lint, "import flash_attn\n" + FA2, files={"requirements.txt": pinned})


def test_no_declared_environment_is_quiet(lint):
    assert not in_repo(lint, FA2, settings={"versions": {"transformers": "4.46.3"}})
    # a pyproject.toml with tool settings only declares nothing; versions then come from the settings
    assert not in_repo(lint, FA2, files={"pyproject.toml": "[tool.ruff]\nline-length = 120\n"},
                          settings={"versions": {"transformers": "4.46.3"}})


def test_pyproject_setup_py_and_conda_declarations(lint):
    found = in_repo(lint, FA2, files={"pyproject.toml": '[project]\nname = "x"\ndependencies = ["transformers==4.46.3", '
                                                     '"peft"]\n'})
    assert len(found) == 1 and "(pyproject.toml)" in found[0][2]
    found = in_repo(lint, FA2, files={"setup.py": 'from setuptools import setup\nsetup(name="x", install_requires=['
                                               '"transformers==4.46.3"])\n'})
    assert len(found) == 1 and "(setup.py)" in found[0][2]
    conda = "name: x\ndependencies:\n  - python=3.11\n  - pip:\n    - transformers==4.46.3\n"
    at_4_46 = {"versions": {"transformers": "4.46.3"}}  # (a conda list's `- transformers==...` is not a pin read)
    assert len(in_repo(lint, FA2, files={"environment.yml": conda}, settings=at_4_46)) == 1
    assert not in_repo(lint, FA2, files={"environment.yml": conda + "    - flash-attn\n"}, settings=at_4_46)


def test_dockerfiles(lint):
    bare = "FROM python:3.11-slim\nRUN pip install transformers==4.46.3 torch\n"
    found = in_repo(lint, FA2, files={"Dockerfile": bare, "requirements.txt": "transformers==4.46.3\n"})
    assert len(found) == 1 and "(requirements.txt and Dockerfile)" in found[0][2]
    # an image with its own packages (NVIDIA's PyTorch containers ship flash-attn): nothing can be known
    ngc = "FROM nvcr.io/nvidia/pytorch:24.05-py3\nRUN pip install transformers==4.46.3\n"
    assert not in_repo(lint, FA2, files={"Dockerfile": ngc, "requirements.txt": "transformers==4.46.3\n"})


def test_hub_kernel_fallback_from_4_56(lint):
    found = in_repo(lint, FA2, files={"requirements.txt": "transformers==4.57.6\n"})
    assert len(found) == 1
    assert ("has no flash-attn nor the `kernels` package, from which transformers >= 4.56 would load the Hub kernel "
            "kernels-community/flash-attn instead: transformers 4.57.6 raises ImportError") in found[0][2]
    assert not in_repo(lint, FA2, files={"requirements.txt": "transformers==4.57.6\nkernels>=0.6.1\n"})
    assert not in_repo(lint, FA2, files={"requirements.txt": "transformers[hub-kernels]==4.57.6\n"})
    # before 4.56 `kernels` does not help: the load still raises
    assert len(in_repo(lint, FA2, files={"requirements.txt": "transformers==4.55.4\nkernels\n"})) == 1


def test_5_25_brings_kernels_itself(lint):
    assert not in_repo(lint, FA2, files={"requirements.txt": "transformers==5.25.0\n"})
    assert not in_repo(lint, FA2, files={"requirements.txt": "torch\n"})  # unpinned: the newest release, 5.25.0
    assert len(in_repo(lint, FA2, files={"requirements.txt": "transformers==5.24.0\n"})) == 1


def test_a_notebook_pip_install_cell_is_its_environment(lint):
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": ["!pip install -q transformers==4.46.3 peft trl\n"]},
             {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": FA2.splitlines(keepends=True)}]
    nb = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    found = in_repo(lint, nb, name="train.ipynb")
    assert len(found) == 1 and "train.ipynb)" in found[0][2]
    cells[0]["source"] = ["!pip install -q transformers==4.46.3 peft trl flash-attn\n"]
    nb = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    assert not in_repo(lint, nb, name="train.ipynb")


def test_sdpa_or_eager_requests_are_quiet(lint):
    for attention in ('attn_implementation="sdpa"', 'attn_implementation="eager"'):
        assert not in_repo(lint, SCRIPT.format(attention=attention), files={"requirements.txt": "transformers==4.46.3\n"})


LF = '''model_name_or_path: {model}
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
flash_attn: fa2
dataset: alpaca_en_demo
template: default
cutoff_len: 4096
output_dir: out
per_device_train_batch_size: 2
bf16: true
'''


def test_llamafactory_fa2_falls_back_to_eager_where_that_is_the_default(lint):
    reqs = {"requirements.txt": "llamafactory==0.9.2\ntransformers==4.46.3\n"}
    found = in_repo(lint, LF.format(model="bigscience/bloom-7b1"), files=reqs, name="sft.yaml")
    assert len(found) == 1 and found[0][1] == 6
    message = found[0][2]
    assert message.startswith("flash_attn: fa2 requests flash-attention")
    assert ('LLaMA-Factory logs "FlashAttention-2 is not installed." and loads with the transformers 4.46.3 default '
            "for bloom, eager attention") in message
    assert "its score matrices keep ~6.1 GiB" in message
    assert message.endswith("add flash-attn to requirements.txt")  # bloom has no SDPA path in 4.46: no sdpa advice
    # a model whose default is SDPA loses nothing: its fused kernels keep what flash-attention keeps
    assert not in_repo(lint, LF.format(model="meta-llama/Llama-3.1-8B"), files=reqs, name="sft.yaml")


def test_adding_flash_attn_invalidates_the_result_cache(tmp_path):
    from test_launch import run

    (tmp_path / "train.py").write_text(FA2)
    (tmp_path / "requirements.txt").write_text("transformers==4.46.3\n")
    first = run("check", "train.py", "--select", "TL103", cwd=tmp_path)
    assert "TL103" in first.stdout
    (tmp_path / "requirements.txt").write_text("transformers==4.46.3\nflash-attn\n")
    second = run("check", "train.py", "--select", "TL103", cwd=tmp_path)
    assert "TL103" not in second.stdout, second.stdout
