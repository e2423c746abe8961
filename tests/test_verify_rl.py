"""`trainlint verify` on RL / preference trainers (issue 27 item 6): real TRL GRPO and DPO runs of a tiny Qwen2 built
from a config and saved next to the scripts (with a byte-level tokenizer of its own, a reward model built the same
way), two steps each on the CPU under the real harness; the per-phase peaks beside memory.estimate.phase_peaks,
the use_vllm note, the user's output_dir left alone; and `--simulate` of a GRPO and a DPO script at full size."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import pinned_installed

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytestmark = pytest.mark.skipif(not pinned_installed("trl", "transformers"),
                                reason="the runs are written for the pinned trl and transformers")


def save_tiny_qwen(path: Path, reward: bool = False) -> None:
    """A 2-layer, 64-wide Qwen2 (seed 0) with a byte-level BPE tokenizer of 256 bytes and 3 special tokens (no
    merges), both saved where the script loads them; `reward`: a one-label sequence classifier of the same shape."""
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification, Qwen2Tokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    for special in ("<|endoftext|>", "<|im_start|>", "<|im_end|>"):
        vocab[special] = len(vocab)
    tokenizer = Qwen2Tokenizer(vocab=vocab, merges=[], unk_token=None, eos_token="<|im_end|>",
                               pad_token="<|endoftext|>")
    config = Qwen2Config(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         tie_word_embeddings=True, eos_token_id=258, pad_token_id=256, bos_token_id=None,
                         num_labels=1)
    torch.manual_seed(0)
    model = Qwen2ForSequenceClassification(config) if reward else Qwen2ForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("verify_rl")
    save_tiny_qwen(root / "tiny-qwen")
    save_tiny_qwen(root / "tiny-reward", reward=True)
    return root


def write(project: Path, name: str, src: str) -> Path:
    path = project / name
    path.write_text(textwrap.dedent(src))
    return path


def verify(project: Path, *args: str, timeout: int = 300) -> tuple[int, dict, str]:
    r = subprocess.run([sys.executable, "-m", "trainlint", "verify", "--format", "json", *args], cwd=project,
                       capture_output=True, text=True, timeout=timeout)
    try:
        data = json.loads(r.stdout)
    except ValueError:
        data = {}
    return r.returncode, data, r.stderr


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


GRPO = '''
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer


def length_reward(completions, **kwargs):
    return [float(len(c)) for c in completions]


model = AutoModelForCausalLM.from_pretrained("./tiny-qwen")
tokenizer = AutoTokenizer.from_pretrained("./tiny-qwen")
dataset = Dataset.from_dict({{"prompt": [f"prompt number {{i}}" for i in range(32)]}})
args = GRPOConfig(output_dir="grpo-out", per_device_train_batch_size=4, num_generations=4, max_completion_length=8,
                  beta=0.04, push_to_hub=True, report_to="wandb"{extra})
trainer = GRPOTrainer(model=model, reward_funcs=[length_reward, "./tiny-reward"], args=args, train_dataset=dataset,
                      processing_class=tokenizer)
trainer.train()
trainer.save_model("grpo-out/final")
'''

DPO = '''
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("./tiny-qwen")
tokenizer = AutoTokenizer.from_pretrained("./tiny-qwen")
rows = {"prompt": [f"question {i} " * 4 for i in range(16)], "chosen": [f"good answer {i} " * 6 for i in range(16)],
        "rejected": [f"bad answer {i} " * 5 for i in range(16)]}
args = DPOConfig(output_dir="dpo-out", per_device_train_batch_size=2, per_device_eval_batch_size=8, max_length=128,
                 eval_strategy="steps", eval_steps=100, report_to="wandb")
trainer = DPOTrainer(model=model, args=args, train_dataset=Dataset.from_dict(rows),
                     eval_dataset=Dataset.from_dict(rows), processing_class=tokenizer)
trainer.train()
'''


def phases(data: dict, label: str = "original") -> dict[str, dict]:
    return {row["phase"]: row for row in data["phases"][label]}


def assert_verdicts(rows: dict[str, dict]) -> None:
    for row in rows.values():
        m, p = row["measured"], row["predicted"]
        off = abs(m - p) / p
        if off <= 0.10:
            assert row["verdict"] == "confirmed within ±10%", row
        else:
            assert row["verdict"] == "not confirmed" and row["note"].startswith("measured "), row
            assert ", predicted " in row["note"], row


def test_grpo_runs_two_steps_with_hf_generate_and_reports_train_and_generation_phases(project):
    write(project, "grpo.py", GRPO.format(extra=""))
    before = snapshot(project)
    code, data, err = verify(project, "grpo.py", "--steps", "2", "--device", "cpu")
    assert code == 0, err
    run = data["runs"]["original"]
    assert run["ok"] and run["steps"] == 2, run.get("error")
    # 4 prompts x 4 completions per step: TRL counts completions in per_device_train_batch_size
    assert run["samples_per_step"] == [4, 4]
    rows = phases(data)
    assert set(rows) == {"train", "generation"}
    # generation runs under no_grad with the KV cache, the step keeps the graph: two different peaks, each above
    # the resident weights of the policy, the reference and the reward model (3 x 95k fp32 parameters)
    assert rows["train"]["measured"] != rows["generation"]["measured"]
    assert min(rows["train"]["measured"], rows["generation"]["measured"]) > 3 * 94_528 * 4
    assert run["phase_peaks"]["train"] == rows["train"]["measured"]
    # the prediction is memory.estimate.phase_peaks of the script's plan on the CPU's kernels
    from trainlint.config import Settings
    from trainlint.lint import enabled_codes, lint_file
    from trainlint.memory.phases import phase_peaks
    from trainlint.planning import Overrides, plan_for
    from dataclasses import replace

    ctx = lint_file(project / "grpo.py", Settings(root=project), enabled_codes(Settings(root=project))).context
    want = phase_peaks(replace(plan_for(ctx, Overrides())[0], device="cpu"))
    assert {k: v["predicted"] for k, v in rows.items()} == want
    assert_verdicts(rows)
    assert "notes" not in data  # use_vllm not asked for
    # nothing written into the project: output_dir, save_model and the tracker were redirected or switched off
    assert snapshot(project) == before
    assert run["user_output_dirs"] == ["grpo-out"]


def test_grpo_with_use_vllm_runs_hf_generate_and_says_so(project):
    write(project, "grpo_vllm.py", GRPO.format(extra=', use_vllm=True, vllm_mode="colocate"'))
    code, data, err = verify(project, "grpo_vllm.py", "--steps", "2", "--device", "cpu")
    assert code == 0, err
    assert data["runs"]["original"]["ok"], data["runs"]["original"].get("error")
    note, = data["notes"]
    assert note.startswith("use_vllm=True (vllm_mode='colocate'): vLLM is not installable here") and \
        "HF generate" in note
    rows = phases(data)
    assert rows["generation"]["measured"] > 0 and rows["generation"]["predicted"] > 0
    code, text, _ = (lambda r: (r.returncode, r.stdout, r.stderr))(subprocess.run(
        [sys.executable, "-m", "trainlint", "verify", "grpo_vllm.py", "--steps", "1", "--device", "cpu"],
        cwd=project, capture_output=True, text=True, timeout=300))
    assert code == 0
    assert "note: use_vllm=True" in text and "per phase" in text and "generation" in text


def test_dpo_runs_two_steps_and_its_evaluation_step_with_the_reference_model(project):
    write(project, "dpo.py", DPO)
    before = snapshot(project)
    code, data, err = verify(project, "dpo.py", "--steps", "2", "--device", "cpu")
    assert code == 0, err
    run = data["runs"]["original"]
    assert run["ok"] and run["steps"] == 2, run.get("error")
    assert run["samples_per_step"] == [4, 4]  # 2 pairs, chosen and rejected concatenated
    rows = phases(data)
    assert set(rows) == {"train", "eval"}
    # the evaluation step scores 8 pairs (16 rows), the training step 2 pairs: the harness ran it as its own phase
    assert rows["eval"]["measured"] > rows["train"]["measured"]
    assert run["eval_error"] is None
    assert_verdicts(rows)
    assert snapshot(project) == before


def test_a_supervised_script_gets_no_phase_table(project):
    write(project, "sft.py", '''
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained("./tiny-qwen")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, 256, (2, 32))
        for _ in range(10):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    ''')
    code, data, err = verify(project, "sft.py", "--steps", "2", "--device", "cpu")
    assert code == 0, err
    assert "phases" not in data and "notes" not in data
    assert set(data["runs"]["original"]["phase_peaks"]) == {"train"}  # measured, but no generation or evaluation


SMALL_QWEN = {"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "vocab_size": 32768, "hidden_size": 256,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
              "tie_word_embeddings": True, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("name,src,phase_names", [
    ("sim_grpo.py", '''
        import torch
        from transformers import AutoModelForCausalLM
        from trl import GRPOConfig, GRPOTrainer

        model = AutoModelForCausalLM.from_pretrained("./small-qwen", dtype=torch.bfloat16)
        args = GRPOConfig(output_dir="out", per_device_train_batch_size=4, steps_per_generation=2, num_generations=4,
                          max_completion_length=128, beta=0.04, gradient_checkpointing=True, use_vllm=True,
                          vllm_mode="colocate")
        trainer = GRPOTrainer(model=model, reward_funcs=[accuracy_reward], args=args, train_dataset=dataset)
        trainer.train()
    ''', {"train", "generation"}),
    ("sim_dpo.py", '''
        import torch
        from transformers import AutoModelForCausalLM
        from trl import DPOConfig, DPOTrainer

        model = AutoModelForCausalLM.from_pretrained("./small-qwen", dtype=torch.bfloat16)
        args = DPOConfig(output_dir="out", per_device_train_batch_size=2, max_length=512, gradient_checkpointing=True,
                         eval_strategy="steps", eval_steps=100)
        trainer = DPOTrainer(model=model, args=args, train_dataset=dataset, eval_dataset=eval_dataset)
        trainer.train()
    ''', {"train", "eval"}),
])
def test_simulate_reports_each_phase_at_full_size_beside_the_estimates(tmp_path, name, src, phase_names):
    from dataclasses import replace

    from trainlint.config import Settings
    from trainlint.lint import enabled_codes, lint_file
    from trainlint.memory.phases import phase_peaks
    from trainlint.planning import Overrides, plan_for

    (tmp_path / "small-qwen").mkdir()
    (tmp_path / "small-qwen" / "config.json").write_text(json.dumps(SMALL_QWEN))
    write(tmp_path, name, src)
    code, data, err = verify(tmp_path, name, "--simulate")
    assert code == 0, err
    rows = phases(data)
    assert set(rows) == phase_names
    ctx = lint_file(tmp_path / name, Settings(root=tmp_path), enabled_codes(Settings(root=tmp_path))).context
    plan = replace(plan_for(ctx, Overrides())[0], device="cpu")
    if plan.generation is not None:  # simulated with HF generate: predicted for it, not for the colocated vLLM
        assert plan.generation.vllm == "colocate"
        plan = replace(plan, generation=replace(plan.generation, vllm=None), vllm_share=0.0)
        assert any("vLLM" in n for n in data["notes"])
    assert {k: v["predicted"] for k, v in rows.items()} == phase_peaks(plan)
    weights = 2 * (32768 * 256 + 2 * (4 * 256 * 256 + 3 * 256 * 512))  # bf16 embedding + 2 layers, roughly
    for row in rows.values():
        assert row["measured"] > weights
    assert_verdicts(rows)
    assert data["simulated"]["spec"]["reference"] is True
    from trainlint.verify.simulate import simulation_text

    text = simulation_text(data)
    assert "original run, per phase" in text and all(f"    {p} " in text for p in phase_names)
