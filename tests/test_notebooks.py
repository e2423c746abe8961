"""Notebooks: code cells in order, magics skipped without moving lines, pip pins read, diagnostics per
cell, fixes that rewrite only the edited cell and keep the rest of the JSON byte for byte."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Fine-tune a Llama\n"]},
    {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
     "source": ["!pip install -q transformers==4.57.6 peft==0.17.1\n", "%env TOKENIZERS_PARALLELISM=false"]},
    {"cell_type": "code", "execution_count": 2, "metadata": {"scrolled": True},
     "outputs": [{"output_type": "stream", "name": "stdout", "text": ["loaded \u00e9\n"]}],
     "source": ["from peft import LoraConfig, get_peft_model\n", "from transformers import AutoModelForCausalLM\n",
                "model = AutoModelForCausalLM.from_pretrained(\"meta-llama/Llama-3.2-1B\")"]},
    {"cell_type": "code", "execution_count": 3, "metadata": {}, "outputs": [], "source": ["%%bash\n", "x = 1 +"]},
    {"cell_type": "code", "execution_count": 4, "metadata": {}, "outputs": [],
     "source": ["lora = LoraConfig(r=8)\n", "model = get_peft_model(model, lora)\n",
                "model.gradient_checkpointing_enable()\n"]},
]


def notebook(cells=CELLS, **dump) -> str:
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
          "nbformat": 4, "nbformat_minor": 5}
    style = dict(indent=1, sort_keys=True, ensure_ascii=False)
    style.update(dump)
    return json.dumps(nb, **style) + "\n"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "check", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_diagnostic_points_at_the_cell_and_the_row_inside_it(tmp_path):
    (tmp_path / "ft.ipynb").write_text(notebook(), encoding="utf-8")
    r = run(cwd=tmp_path)
    assert r.returncode == 1
    # the %%bash cell is not Python: it is skipped, and the `!pip install transformers==4.57.6` line pins the
    # version that makes this a trap
    assert r.stdout.splitlines()[0].startswith("ft.ipynb:cell 5:3:1: TL201 LoRA with reentrant checkpointing")
    data = json.loads(run("--output-format", "json", cwd=tmp_path).stdout)
    assert (data[0]["cell"], data[0]["location"], data[0]["filename"]) == (5, {"row": 3, "column": 1}, "ft.ipynb")


def test_fix_rewrites_only_the_edited_cell_and_is_idempotent(tmp_path):
    path = tmp_path / "ft.ipynb"
    original = notebook()
    path.write_text(original, encoding="utf-8")
    assert run("--fix", cwd=tmp_path).returncode == 0
    fixed = path.read_text(encoding="utf-8")
    cells = [dict(c) for c in CELLS]
    cells[4] = {**cells[4], "source": ["lora = LoraConfig(r=8)\n", "model = get_peft_model(model, lora)\n",
                                       "model.enable_input_require_grads()\n",
                                       "model.gradient_checkpointing_enable()\n"]}
    assert fixed == notebook(cells)
    assert run("--fix", cwd=tmp_path).returncode == 0
    assert path.read_text(encoding="utf-8") == fixed


def test_unusual_json_layout_is_kept_or_left_alone(tmp_path):
    path = tmp_path / "ft.ipynb"
    path.write_text(notebook(indent=2, sort_keys=False, ensure_ascii=True), encoding="utf-8")
    assert run("--fix", cwd=tmp_path).returncode == 0
    assert json.loads(path.read_text())["cells"][4]["source"][2] == "model.enable_input_require_grads()\n"
    assert path.read_text().startswith('{\n  "cells"')
    odd = notebook().replace('"nbformat": 4', '"nbformat":     4')
    path.write_text(odd, encoding="utf-8")
    r = run("--fix", cwd=tmp_path)
    assert "cannot be reproduced exactly" in r.stderr and path.read_text(encoding="utf-8") == odd


def test_bad_notebooks_get_a_clear_diagnostic(tmp_path):
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    (tmp_path / "v3.ipynb").write_text(json.dumps({"nbformat": 3, "worksheets": []}), encoding="utf-8")
    (tmp_path / "prose.ipynb").write_text(notebook([CELLS[0]]), encoding="utf-8")
    r = run(cwd=tmp_path)
    assert "broken.ipynb:1:1: TL002 cannot lint this notebook: notebook is not valid JSON" in r.stdout
    assert "v3.ipynb:1:1: TL002 cannot lint this notebook: nbformat 3 notebooks are not supported" in r.stdout
    assert "prose.ipynb" not in r.stdout
    assert "Traceback" not in r.stderr
    r = run("-v", "prose.ipynb", cwd=tmp_path)
    assert "prose.ipynb: skipped: notebook has no code cells" in r.stderr


def test_estimate_reads_a_notebook(tmp_path):
    cells = [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
              "source": ["from transformers import AutoModelForCausalLM\n",
                         "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', dtype='bfloat16')"]},
             {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
              "source": ["%time\n", "loader = DataLoader(ds, batch_size=2)\n", "MAX_LEN = 4096"]}]
    (tmp_path / "nb.ipynb").write_text(notebook(cells), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "trainlint", "estimate", "nb.ipynb", "--format", "json"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["unknown"] == [] and data["consumers"]["logits"] == 2 * 4096 * 128256 * 12


def test_a_python_cell_magic_is_read_and_a_cell_that_is_not_python_is_skipped_alone(tmp_path):
    cells = [dict(c) for c in CELLS]
    # %%time runs its body as Python: here, broken (and naming the run's batch size, so it could hide a value)
    cells[3] = {**cells[3], "source": ["%%time\n", "batch_size = 1 +"]}
    (tmp_path / "ft.ipynb").write_text(notebook(cells), encoding="utf-8")
    lines = run(cwd=tmp_path).stdout.splitlines()
    assert lines[0] == ("ft.ipynb:cell 4:2:17: TL001 not Python, so skipped (the other cells were linted): cell 4 "
                        "(syntax error: invalid syntax)")
    assert lines[1].startswith("ft.ipynb:cell 5:3:1: TL201 LoRA with reentrant checkpointing")  # still linted


def test_magics_inside_blocks_and_python_cell_magics(tmp_path):
    cells = [
        {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [], "source": [
            "import os\n", "if \"COLAB_\" not in \"\".join(os.environ.keys()):\n", "    !pip install unsloth\n",
            "else:\n", "    !pip install --no-deps unsloth \\\n", "        trl\n", "for i in range(2):\n",
            "    %env X=1\n"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [], "source": [
            "%%time\n", "from transformers import AutoModelForCausalLM\n",
            "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='eager')\n",
            "MAX_SEQ_LENGTH = 8192\n"]},
    ]
    (tmp_path / "nb.ipynb").write_text(notebook(cells), encoding="utf-8")
    r = run(cwd=tmp_path)
    assert r.stdout.splitlines()[0].startswith("nb.ipynb:cell 2:3:73: TL101 eager attention at sequence length 8,192")
    original = (tmp_path / "nb.ipynb").read_text(encoding="utf-8")
    assert run("--fix", cwd=tmp_path).returncode == 0
    fixed = json.loads((tmp_path / "nb.ipynb").read_text(encoding="utf-8"))
    assert fixed["cells"][1]["source"][2].endswith("attn_implementation='sdpa')\n")
    assert fixed["cells"][0] == json.loads(original)["cells"][0]  # the shell lines come back as they were


def test_newer_syntax_is_not_a_syntax_error(tmp_path):
    (tmp_path / "t.py").write_text(
        'from transformers import AutoModelForCausalLM\nrow = {"user": 1}\nprint(f"{row["user"]}")\n'
        'model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", attn_implementation="eager")\n'
        'MAX_SEQ_LENGTH = 8192\n')
    r = run("t.py", cwd=tmp_path)  # PEP 701 (Python 3.12): ast on 3.10/3.11 rejects it, LibCST reads it
    assert r.stdout.splitlines()[0].startswith("t.py:4:73: TL101") and "TL001" not in r.stdout


def test_a_notebook_in_another_language_is_skipped_with_a_reason(tmp_path):
    cells = [{"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
              "source": ["library(keras)\n", "model <- keras_model_sequential() %>% layer_dense(units = 1)\n"]}]
    nb = {"cells": cells, "metadata": {"kernelspec": {"name": "ir", "language": "R", "display_name": "R"},
                                       "language_info": {"name": "R"}}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "r.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    r = run("-v", "--no-cache", cwd=tmp_path)
    assert r.returncode == 0 and "r.ipynb: skipped: a r notebook, not Python" in r.stderr


def _code(*lines: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": [line + "\n" for line in lines[:-1]] + [lines[-1]]}


LONG = [
    _code("from transformers import AutoModelForCausalLM",
          "from trl import SFTConfig, SFTTrainer",
          "model = AutoModelForCausalLM.from_pretrained('meta-llama/Meta-Llama-3-8B', attn_implementation='eager')",
          "ctx_len = 8192"),
    None,  # the cell under test
    _code("args = SFTConfig(output_dir='o', max_length=ctx_len, per_device_train_batch_size=1, use_liger_kernel=True)",
          "trainer = SFTTrainer(model=model, args=args)"),
]


def test_names_a_skipped_cell_may_rebind_are_unknown_after_it(tmp_path):
    cells = list(LONG)
    cells[1] = _code("ctx_len = 512  # shorter", "this line is not python at all")
    (tmp_path / "a.ipynb").write_text(notebook(cells), encoding="utf-8")
    out = run("--no-cache", "--output-format", "json", cwd=tmp_path)
    codes = [d["code"] for d in json.loads(out.stdout)]
    assert codes == ["TL001"]  # 8,192 from cell 1 is not taken: cell 2 may have set ctx_len to anything
    cells[1] = _code("learning_rate = 2e-5", "this line is not python at all")  # does not touch ctx_len
    (tmp_path / "b.ipynb").write_text(notebook(cells), encoding="utf-8")
    out = run("--no-cache", "--output-format", "json", "b.ipynb", cwd=tmp_path)
    # (and no TL001: the skipped cell names nothing of the run and binds nothing a cell of the run uses)
    assert sorted(d["code"] for d in json.loads(out.stdout)) == ["TL101"]


def test_a_fix_beside_a_skipped_cell_keeps_that_cell_byte_for_byte(tmp_path):
    cells = list(LONG)
    cells[1] = _code("lr = 2e-5", "this line is not python at all")
    path = tmp_path / "c.ipynb"
    path.write_text(notebook(cells), encoding="utf-8")
    run("--no-cache", "--fix", cwd=tmp_path)
    after = json.loads(path.read_text(encoding="utf-8"))
    assert after["cells"][1] == cells[1]
    assert "attn_implementation='sdpa'" in "".join(after["cells"][0]["source"])


def test_a_python_cell_magic_body_keeps_its_shell_lines_ipython(tmp_path):
    """The Colab install cell of the Unsloth notebooks: `%%capture` over an if/else of `!pip install` lines."""
    cells = list(LONG)
    cells[1] = _code("%%capture", "import os", 'if "COLAB_" not in "".join(os.environ.keys()):',
                     "    !pip install unsloth", "else:", "    !pip install --no-deps unsloth", "%env X=1")
    (tmp_path / "u.ipynb").write_text(notebook(cells), encoding="utf-8")
    out = run("--no-cache", "--output-format", "json", cwd=tmp_path)
    assert [d["code"] for d in json.loads(out.stdout)] == ["TL101"]  # no TL001; the later cell is still linted


def test_nbformat_variants_seen_in_the_wild(tmp_path):
    """`source` as one string, a code cell without `outputs` or `execution_count`, cell ids, Colab metadata:
    read alike, the finding is in the right cell, and a fix keeps every other byte."""
    cells = [
        {"cell_type": "code", "id": "a1b2", "metadata": {"id": "xYz", "colab": {"base_uri": "https://localhost/"}},
         "source": "from transformers import AutoModelForCausalLM\nfrom trl import SFTConfig, SFTTrainer\n"},
        {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "Train it"},
        {"cell_type": "code", "id": "c3d4", "metadata": {"colab": {"height": 10}},
         "source": "model = AutoModelForCausalLM.from_pretrained('meta-llama/Meta-Llama-3-8B', "
                   "attn_implementation='eager')\nargs = SFTConfig(output_dir='o', max_length=8192, "
                   "per_device_train_batch_size=1, use_liger_kernel=True)\nSFTTrainer(model=model, args=args)"},
    ]
    nb = {"cells": cells, "metadata": {"colab": {"provenance": [], "gpuType": "T4"}, "accelerator": "GPU",
                                       "kernelspec": {"name": "python3", "display_name": "Python 3"},
                                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 0}
    path = tmp_path / "colab.ipynb"
    original = json.dumps(nb, indent=2) + "\n"
    path.write_text(original, encoding="utf-8")
    data = json.loads(run("--no-cache", "--output-format", "json", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"], d["location"]["row"]) for d in data] == [("TL101", 3, 1)]
    assert run("--no-cache", "--fix", cwd=tmp_path).returncode == 0
    cells[2] = {**cells[2], "source": cells[2]["source"].replace("'eager'", "'sdpa'")}
    assert path.read_text(encoding="utf-8") == json.dumps(nb, indent=2) + "\n"


def _cell(*lines: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": list(lines)}


def test_ipython_automagic_and_help_lines_are_not_syntax_errors(tmp_path):
    cells = [_cell("pip install -q transformers==4.57.6\n", "cd data\n"),
             _cell("from transformers import AutoModelForCausalLM\n", "AutoModelForCausalLM.from_pretrained?\n",
                   "?AutoModelForCausalLM\n"),
             _cell("pip = 3\n", "cd = pip\n")]  # plain Python that starts alike
    (tmp_path / "nb.ipynb").write_text(notebook(cells), encoding="utf-8")
    r = run("--no-cache", "-v", "nb.ipynb", cwd=tmp_path)
    assert "TL001" not in r.stdout and "not Python" not in r.stderr, r.stdout + r.stderr


def test_cells_that_are_not_python_are_one_finding_and_only_in_a_notebook_that_trains(tmp_path):
    broken = [_cell("trainer = Trainer(model=model, ...)\n"), _cell("x = (1,\n"),
              _cell("from transformers import Trainer\n", "trainer.train()\n")]
    (tmp_path / "doc.ipynb").write_text(notebook(broken), encoding="utf-8")
    (tmp_path / "infer.ipynb").write_text(notebook([_cell("print('a'\n"), _cell("y = 2\n")]), encoding="utf-8")
    r = run("--no-cache", "-v", ".", cwd=tmp_path)
    found = [line for line in r.stdout.splitlines() if "TL001" in line]
    # cell 2 (`x = (1,`) names nothing of the run and binds nothing a cell of the run uses: a note, not listed
    assert found == ["doc.ipynb:cell 1:1:35: TL001 not Python, so skipped (the other cells were linted): cell 1 "
                     "(syntax error: positional argument follows keyword argument)"]
    assert "doc.ipynb: also skipped, naming nothing of the run: cell 2 (syntax error: '(' was never closed)" in r.stderr
    assert "infer.ipynb: not Python, so skipped (the other cells were linted): cell 1" in r.stderr
    assert "(not reported: the notebook does not train, and nothing else was found)" in r.stderr


def test_a_helper_cell_that_does_not_parse_in_a_training_notebook_is_not_reported(tmp_path):
    # a display helper with an unterminated docstring (a cell cut short): it names no model, trainer, argument or
    # step, and nothing it binds reaches the run
    gif = _cell("import numpy as np\n", "def to_gif(frames):\n", '    """Frames to a GIF.\n')
    train = _cell("from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n",
                  "model = AutoModelForCausalLM.from_pretrained('gpt2')\n",
                  "trainer = Trainer(model=model, args=TrainingArguments('out'))\n", "trainer.train()\n")
    show = _cell("to_gif(np.zeros(3))\n")
    (tmp_path / "nb.ipynb").write_text(notebook([gif, train, show]), encoding="utf-8")
    r = run("--no-cache", "-v", ".", cwd=tmp_path)
    assert "TL001" not in r.stdout, r.stdout
    assert "none of them names a model, trainer, argument or step of the run" in r.stderr
    # the same helper whose result a cell of the run uses could hide part of it: reported
    (tmp_path / "nb.ipynb").write_text(notebook([gif, train, _cell("trainer.train(to_gif(1))\n")]), encoding="utf-8")
    r = run("--no-cache", ".", cwd=tmp_path)
    assert [line.split(": TL001")[0] for line in r.stdout.splitlines() if "TL001" in line] == ["nb.ipynb:cell 1:3:5"]
