"""The GPU a launch requests (Slurm `--gres` / `--gpus*` / `--constraint`), used by TL202/TL701 when no setting or
--gpu names one; an ambiguous or unknown type means no GPU, and --verbose says why."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import LLAMA_1B, codes
from trainlint.knowledge.gpu_types import gpu_of_type
from trainlint.launch.discover import read_launch_text
from trainlint.launch.gpu import requested_gpu

# LLAMA_1B (conftest): the worked example of rules/TL202.md; the 8B at batch 2 does not fit 24 GB whatever
# single lever is pulled.
LLAMA_8B = LLAMA_1B.replace("Llama-3.2-1B", "Llama-3.1-8B").replace("batch_size=8", "batch_size=2")
# a script whose batch comes from its command line: checked under each launch that runs it
ARGPARSE_1B = LLAMA_1B.replace(
    "from transformers", "import argparse\nfrom transformers", 1).replace(
    "tokenizer = ", "parser = argparse.ArgumentParser()\nparser.add_argument('--batch', type=int, default=1)\n"
                    "cli = parser.parse_args()\ntokenizer = ", 1).replace(
    "per_device_train_batch_size=8", "per_device_train_batch_size=cli.batch")


def slurm(*header: str, command: str = "srun python train.py") -> str:
    return "#!/bin/bash\n" + "".join(f"#SBATCH {h}\n" for h in header) + command + "\n"


def _gpu(text: str):
    (inv,) = read_launch_text(text, Path("job.slurm")).invocations
    return requested_gpu(inv, "job.slurm")


@pytest.mark.parametrize("header, command, gpu, line", [
    (["--gres=gpu:l4:1"], "srun python train.py", "L4", 2),
    (["--gres=gpu:a100_80gb:8"], "python train.py", "A100-80GB", 2),
    (["--gres=gpu:nvidia_a100-sxm4-80gb:4", "--nodes=2"], "python train.py", "A100-80GB", 2),
    (["--gres=gpu:tesla_t4"], "python train.py", "T4", 2),  # a type without a count asks for one
    (["--gres=mps:100,gpu:l40s:2"], "python train.py", "L40S", 2),  # only the `gpu` entry names the GPU
    (["--gres=gpu:h100_nvl:2(S:0-1)"], "python train.py", "H100-NVL", 2),
    (["--gpus=a100-40gb:4"], "python train.py", "A100-40GB", 2),
    (["-G t4:2"], "python train.py", "T4", 2),
    (["--gpus-per-node=nvidia_h100_80gb_hbm3:8"], "python train.py", "H100-80GB", 2),
    (["--gpus-per-task=l4:1"], "python train.py", "L4", 2),
    (["--constraint=a100-80gb"], "python train.py", "A100-80GB", 2),
    (["-C ib&l4"], "python train.py", "L4", 2),  # AND: the GPU feature among others
    (["--constraint=[a100_80gb|nvidia_a100-sxm4-80gb]"], "python train.py", "A100-80GB", 2),  # same GPU either way
    (["--constraint=a100"], "python train.py", None, None),  # 40 or 80 GB
    (["--gres=gpu:a100:1", "--constraint=a100_80gb"], "python train.py", "A100-80GB", 3),  # the feature decides
    (["--gres=gpu:1"], "srun --gres=gpu:l4:1 python train.py", "L4", 3),  # srun's own option, on the srun line
    (["--gres=gpu:4"], "python train.py", None, None),  # no type
    (["--gpus=8"], "python train.py", None, None),
    (["--constraint=skylake"], "python train.py", None, None),  # a node feature, not a GPU
    (["--gres=gpu:h100:8"], "python train.py", None, None),  # H100 80 GB or H100 NVL 94 GB
    (["--gres=gpu:v100:1"], "python train.py", None, None),  # 16 or 32 GB
    (["--gres=gpu:a100_3g.40gb:1"], "python train.py", None, None),  # a MIG slice
    (["--gres=gpu:rtx8000:1"], "python train.py", None, None),  # not in the catalog
    (["--gpus=l4:1,a100-80gb:1"], "python train.py", None, None),  # two sizes in one job
    (["--constraint=l4|a100-80gb"], "python train.py", None, None),  # either, with different memory
    ([], "GPU=l4\nsrun --gres=gpu:$GPU:1 python train.py", "L4", 3),  # the file's own variable
    ([], "srun --gres=gpu:$1:1 python train.py", None, None),  # set by the caller
    ([], 'sbatch --gres=gpu:l4:1 --wrap "python train.py"', "L4", 2),
    ([], "srun --gpus-per-node=a100_80gb:4 torchrun --nproc_per_node 4 train.py", "A100-80GB", 2),
])
def test_slurm_option_grammar(header, command, gpu, line):
    found, note = _gpu(slurm(*header, command=command))
    assert (found.name if found else None) == gpu
    if found is not None:
        assert found.span.file == "job.slurm" and found.span.line == line and note == ""


@pytest.mark.parametrize("header, command, why", [
    (["--gres=gpu:h100:8"], "python train.py", "job.slurm:2: `h100` is ambiguous: the H100 is sold with 80 GB and "
                                                "94 GB of memory"),
    (["--constraint=a100"], "python train.py", "`a100` is ambiguous: the A100 is sold with 40 GB and 80 GB"),
    (["--gres=gpu:a100_3g.40gb:1"], "python train.py", "is a MIG slice, not a whole GPU"),
    (["--gres=gpu:rtx8000:1"], "python train.py", "`rtx8000`: GPU type not known to trainlint"),
    (["--gpus=l4:1,a100-80gb:1"], "python train.py", "the launch requests both L4 (2) and A100-80GB (2)"),
    (["--constraint=ampere"], "python train.py", "names an architecture, not a GPU model"),
    ([], "srun --gres=gpu:$1:1 python train.py", "--gres is not known statically"),
    (["--gres=gpu:4"], "python train.py", ""),  # nothing asked of a type: nothing to explain
    (["--constraint=skylake"], "python train.py", ""),
])
def test_why_a_named_type_gives_no_gpu(header, command, why):
    found, note = _gpu(slurm(*header, command=command))
    assert found is None and (why in note if why else note == "")


@pytest.mark.parametrize("name, gpu", [
    ("l4", "L4"), ("A10G", "A10G"), ("a100-80gb", "A100-80GB"), ("a100_80g", "A100-80GB"),
    ("nvidia_a100-pcie-40gb", "A100-40GB"), ("tesla_v100-sxm2-32gb", "V100-32GB"), ("h100_nvl", "H100-NVL"),
    ("nvidia_geforce_rtx_4090", "RTX-4090"), ("rtx3090", "RTX-3090"), ("h200", "H200"), ("l4_24gb", "L4"),
    ("a100", None), ("h100", None), ("v100", None), ("ampere", None), ("t4_32gb", None), ("a100_96gb", None),
    ("a100_l4", None), ("nvidia_a100_1g.10gb", None),
])
def test_type_names_map_only_when_one_memory_size_is_possible(name, gpu):
    assert gpu_of_type(name)[0] == gpu


def test_ambiguous_names_say_why():
    assert gpu_of_type("h100")[1] == "`h100` is ambiguous: the H100 is sold with 80 GB and 94 GB of memory"
    assert "40 GB and 80 GB" in gpu_of_type("a100")[1]
    assert gpu_of_type("skylake") == (None, "")  # not about a GPU: nothing to say


def test_tl701_fires_on_the_gpu_the_slurm_launcher_requests(lint):
    found = lint(LLAMA_8B, files={"scripts/train.slurm": slurm("--nodes=1", "--gres=gpu:l4:1",
                                                               command="srun python train.py")})
    assert "TL701" in codes(found)
    message = next(m for c, _, m in found if c == "TL701")
    assert message.startswith("the run does not fit the L4 GPU (22.5 GiB) the launch requests (scripts/train.slurm:3): ")


def test_the_finding_relates_to_the_line_that_requests_the_gpu(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_1B)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.slurm").write_text(slurm("--job-name=sft", "--gres=gpu:l4:1",
                                                            command="python train.py"))
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--output-format", "json",
                          "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1, out.stderr
    (diag,) = json.loads(out.stdout)
    assert diag["code"] == "TL202" and diag["filename"] == "train.py" and diag["location"]["row"] == 7
    assert "the L4 GPU (22.5 GiB) the launch requests (scripts/train.slurm:3)" in diag["message"]
    related = [(r["filename"], r["location"]["row"], r["location"]["column"], r["message"]) for r in diag["related"]]
    assert ("scripts/train.slurm", 3, 16, "the GPU the launch requests (--gres=gpu:l4:1)") in related


def test_an_ambiguous_type_gives_no_gpu_and_verbose_says_why(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_8B)
    (tmp_path / "job.slurm").write_text(slurm("--gres=gpu:h100:1", command="python train.py"))
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--verbose", "train.py"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert "TL701" not in out.stdout and "TL202" not in out.stdout
    assert "GPU: none known (TL202/TL701 stay silent): job.slurm:2: `h100` is ambiguous: the H100 is sold with " \
           "80 GB and 94 GB of memory" in out.stderr + out.stdout


def test_each_launch_is_judged_against_the_gpu_it_requests(lint):
    files = {"small.slurm": slurm("--gres=gpu:l4:1", command="python train.py --batch 8"),
             "big.slurm": slurm("--gres=gpu:a100_80gb:1", command="python train.py --batch 8")}
    found = lint(ARGPARSE_1B, files=files)
    assert codes(found) == ["TL202"]
    assert "the L4 GPU (22.5 GiB) the launch requests (small.slurm:2)" in found[0][2]
    assert "launched by small.slurm:3" in found[0][2] and "big.slurm" not in found[0][2]


def test_launchers_that_disagree_on_the_gpu_give_none(lint):
    files = {"small.slurm": slurm("--gres=gpu:l4:1", command="python train.py"),
             "big.slurm": slurm("--gres=gpu:a100_80gb:1", command="python train.py")}
    assert codes(lint(LLAMA_1B, files=files)) == []


def test_settings_win_over_the_launch(lint):
    files = {"scripts/train.slurm": slurm("--gres=gpu:l4:1", command="python train.py")}
    assert lint(LLAMA_1B, files=files, settings={"gpu": "A100-80GB"}) == []
    assert lint(LLAMA_1B, files=files, settings={"gpus": {"train.py": "80GB"}}) == []
    # and a setting that does not fit is the one named, not the launch's
    found = lint(LLAMA_1B, files={"scripts/train.slurm": slurm("--gres=gpu:a100_80gb:1", command="python train.py")},
                 settings={"gpu": "24GB"})
    assert codes(found) == ["TL202"] and "the 24 GiB GPU:" in found[0][2] and "launch requests" not in found[0][2]


def test_gpu_option_wins_over_the_launch(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_1B)
    (tmp_path / "train.slurm").write_text(slurm("--gres=gpu:l4:1", command="python train.py"))
    run = lambda *extra: subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", *extra, "train.py"],
                                        cwd=tmp_path, capture_output=True, text=True)
    assert run().returncode == 1
    assert run("--gpu", "A100-80GB").returncode == 0
    flagged = run("--gpu", "T4")
    assert flagged.returncode == 1 and "the T4 GPU" in flagged.stdout and "launch requests" not in flagged.stdout


def test_no_launches_flag_means_no_launch_gpu(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_1B)
    (tmp_path / "train.slurm").write_text(slurm("--gres=gpu:l4:1", command="python train.py"))
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--no-launches", "train.py"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def sky(accelerators: str, run: str = "python train.py") -> str:
    return f"name: sft\nresources:\n  accelerators: {accelerators}\nworkdir: .\nrun: |\n  {run}\n"


def test_a_skypilot_task_that_runs_the_script_gives_its_gpu(lint):
    found = lint(LLAMA_1B, files={"sky/task.yaml": sky("L4:1", run="cd .. && python train.py")})
    # (`run` executes in the workdir; the script is found from the task's folder or the repository root)
    assert codes(found) == ["TL202"]
    assert "the L4 GPU (22.5 GiB) the launch requests (sky/task.yaml:3)" in found[0][2]


@pytest.mark.parametrize("accelerators, fires", [
    ("L4:1", True), ("L4", True), ("{L4: 1}", True), ("[L4:1, nvidia_l4:1]", True),
    ("A100:8", False),  # SkyPilot's A100 is its 40 GB card, but the name alone is ambiguous: no guess
    ("[L4:1, A100-80GB:1]", False),  # SkyPilot may pick either
    ("tpu-v4-8", False),
])
def test_skypilot_accelerators_grammar(lint, accelerators, fires):
    found = lint(LLAMA_1B, files={"task.yaml": sky(accelerators)})
    assert codes(found) == (["TL202"] if fires else [])


def test_a_skypilot_task_that_runs_another_script_says_nothing(lint):
    assert lint(LLAMA_1B, files={"task.yaml": sky("L4:1", run="python eval.py  # train.py runs elsewhere")}) == []


def test_a_changed_gpu_request_is_not_hidden_by_the_result_cache(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_1B)
    job = tmp_path / "job.slurm"
    job.write_text(slurm("--gres=gpu:a100_80gb:1", command="python train.py"))
    run = lambda: subprocess.run([sys.executable, "-m", "trainlint", "check", "train.py"], cwd=tmp_path,
                                 capture_output=True, text=True)
    assert run().returncode == 0
    job.write_text(slurm("--gres=gpu:l4:1", command="python train.py"))
    assert run().returncode == 1
    (tmp_path / "task.yaml").write_text(sky("A100-80GB:1"))  # now the launchers disagree: no GPU
    assert run().returncode == 0


def test_skypilot_any_of_alternatives_must_agree(lint):
    task = "resources:\n  any_of:\n    - infra: aws\n      accelerators: L4:1\n    - infra: gcp\n      accelerators: {gpu}\n" \
           "run: |\n  python train.py\n"
    assert codes(lint(LLAMA_1B, files={"task.yaml": task.format(gpu="nvidia_l4")})) == ["TL202"]
    assert codes(lint(LLAMA_1B, files={"task.yaml": task.format(gpu="A100-80GB:1")})) == []


def test_estimate_judges_against_the_launch_gpu_unless_told_otherwise(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_1B)
    (tmp_path / "job.slurm").write_text(slurm("--gres=gpu:l4:1", command="python train.py"))
    run = lambda *extra: subprocess.run([sys.executable, "-m", "trainlint", "estimate", *extra, "train.py"],
                                        cwd=tmp_path, capture_output=True, text=True).stdout
    out = run()
    assert "verdict: L4 (22.5 GiB): does NOT fit" in out and "GPU L4: requested at job.slurm:2 (--gres=gpu:l4:1)" in out
    told = run("--gpu", "A100-80GB")
    assert "verdict: A100-80GB (80.0 GiB): fits" in told and "requested at" not in told


@pytest.mark.parametrize("task", [
    "resources:\n  accelerators: 8\nrun: |\n  python train.py\n",
    "resources:\n  accelerators: [L4:1\nrun: python train.py\n",  # YAML error
    "resources: 3\naccelerators: L4\nrun: [python train.py]\n",
    "resources:\n  any_of: {a: 1}\n  accelerators:\nrun: |\n  python train.py\n",
    "run: |\n  python train.py\n# accelerators: L4:1\n",
])
def test_odd_skypilot_tasks_give_no_gpu_and_no_traceback(lint, task):
    assert lint(LLAMA_1B, files={"task.yaml": task}) == []


@pytest.mark.parametrize("option", ["--gres=gpu:", "--gres=gpu::1", "--gpus=:4", "--constraint=", "-C '&|'",
                                    "--gres=,,", "--gpus-per-node=l4:", "--constraint=[*2]"])
def test_odd_slurm_values_give_no_gpu(option):
    assert _gpu(slurm(option, command="python train.py"))[0] is None
