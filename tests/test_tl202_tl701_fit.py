"""TL202 (checkpointing off, over budget) and TL701 (run does not fit): the GPU from --gpu / gpus / gpu, the
figures from memory.estimate, one finding per overflow."""

import subprocess
import sys

import pytest

from conftest import LLAMA_1B, codes
from trainlint.memory import fmt_bytes
from trainlint.memory.estimate import CUDA_OVERHEAD, Geometry, Plan, activations_bytes, estimate

LLAMA_8B = LLAMA_1B.replace("Llama-3.2-1B", "Llama-3.1-8B").replace("batch_size=8", "batch_size=2").replace(
    ", use_liger_kernel=True", "")
GPU24 = {"gpu": "24GB"}


def _plan_1b(**changes) -> Plan:
    # Llama-3.2-1B as knowledge/models.json has it: the worked example of rules/TL202.md
    g = Geometry(vocab=128256, hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, intermediate=8192,
                 params=1235814400, tied=True)
    return Plan(geometry=g, batch=8, seq=2048, loss="liger", **changes)


def test_checkpointing_off_over_24gb_is_flagged_with_the_estimates_figures(lint):
    found = lint(LLAMA_1B, settings=GPU24)
    assert [(c, line) for c, line, _ in found] == [("TL202", 7)]
    message = found[0][2]
    off, on = estimate(_plan_1b()), estimate(_plan_1b(checkpointing=True))
    saved = activations_bytes(_plan_1b()) - activations_bytes(_plan_1b(checkpointing=True))
    assert f"it needs ~{fmt_bytes(off.peak + CUDA_OVERHEAD)}" in message
    assert f"activations kept for backward ~{fmt_bytes(off.consumers['activations'])}" in message
    assert f"would free ~{fmt_bytes(saved)}" in message
    assert f"with it the peak is ~{fmt_bytes(on.peak + CUDA_OVERHEAD)}, which fits" in message
    # the page's worked example, as printed
    assert "~35.4 GiB (activations kept for backward ~27.5 GiB, of which checkpointing would free ~24.8 GiB)" in message
    assert "~12.5 GiB, which fits" in message
    assert "does not fit the 24 GiB GPU: it needs" in message  # a size given is its own name


def test_no_gpu_known_no_finding(lint):
    assert lint(LLAMA_1B) == []


def test_it_fits_on_80gb(lint):
    assert lint(LLAMA_1B, settings={"gpu": "A100-80GB"}) == []


def test_checkpointing_on_is_quiet(lint):
    assert lint(LLAMA_1B.replace("use_liger_kernel=True", "use_liger_kernel=True, gradient_checkpointing=True"),
                settings=GPU24) == []


def test_unknown_batch_says_nothing(lint):
    src = LLAMA_1B.replace("per_device_train_batch_size=8", "per_device_train_batch_size=bs")
    assert lint(src, settings=GPU24) == []


def test_fix_turns_checkpointing_on_and_lora_gets_non_reentrant_kwargs(tmp_path):
    from trainlint.config import from_table
    from trainlint.lint import enabled_codes, lint_file

    lora = LLAMA_1B.replace("data = tokenizer", "from peft import LoraConfig, get_peft_model\nmodel = get_peft_model("
                            "model, LoraConfig(r=16, target_modules='all-linear'))\ndata = tokenizer")
    lora = lora.replace("batch_size=8", "batch_size=16")
    script = tmp_path / "train.py"
    script.write_text(lora)
    settings = from_table(GPU24, tmp_path, "test")
    diags = [d for d in lint_file(script, settings, enabled_codes(settings)).diagnostics if d.code == "TL202"]
    assert len(diags) == 1
    fix = diags[0].fix
    assert fix.applicability == "safe"
    assert [e.content for e in fix.edits] == [
        ', gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False}']
    assert "TL201" in diags[0].message and "use_reentrant" in diags[0].message


def test_does_not_fit_lists_consumers_and_the_largest_lever(lint):
    found = lint(LLAMA_8B, settings=GPU24)
    assert sorted(codes(found)) == ["TL301", "TL701"]
    message = next(m for c, _, m in found if c == "TL701")
    assert message.startswith("the run does not fit the 24 GiB GPU: predicted peak ~76.2 GiB per device at the "
                              "start of backward plus ~619 MiB of CUDA context, ~52.8 GiB over")
    assert "weights 15.0 GiB, gradients 15.0 GiB, optimizer state 29.9 GiB, activations 25.5 GiB, logits/loss 5.9 GiB" \
        in message
    assert "no single lever makes it fit; the largest: FSDP / ZeRO-3 over 8 GPUs (saves ~39.3 GiB)" in message


def test_levers_that_make_it_fit_are_ranked_cheapest_first(lint):
    found = lint(LLAMA_8B.replace("per_device_train_batch_size=2", "per_device_train_batch_size=1"),
                 settings={"gpu": "48GB"})
    message = next(m for c, _, m in found if c == "TL701")
    assert "~13.2 GiB over" in message
    # optim unset: transformers 5.x's Trainer runs the fused AdamW (no step temporary), so the start of backward is the
    # peak; 8-bit states (saves 15.0 GiB) are the cheapest lever that fits, ahead of LoRA and QLoRA although those
    # save more; checkpointing (does not fit alone) is not listed. (LoRA/QLoRA save 1 GiB more since a frozen RMSNorm
    # weight keeps no normalised output: memory.estimate.activation_bytes_per_layer, bench/README.md)
    assert "predicted peak ~60.6 GiB per device at the start of backward" in message
    assert message.endswith("levers that alone make it fit, cheapest first: 8-bit or paged optimizer (saves ~15.0 GiB; "
                            "tiny quality risk (bitsandbytes)); LoRA (r=16, all linear layers) (saves ~21.8 GiB; slight "
                            "quality risk); QLoRA (4-bit base + LoRA) (saves ~31.4 GiB; slight quality risk, slower "
                            "steps)")


def test_a_specific_finding_that_makes_it_fit_is_the_only_one(lint):
    # checkpointing alone makes the 1B run fit 24 GiB: TL202 says so, TL701 is silent
    assert codes(lint(LLAMA_1B, settings=GPU24)) == ["TL202"]
    # the unfused loss alone makes it fit: TL301 says so, TL701 is silent
    src = LLAMA_1B.replace(", use_liger_kernel=True", ", gradient_checkpointing=True")
    found = lint(src, settings=GPU24)
    assert codes(found) == ["TL301"]
    assert found[0][2].endswith("this alone makes the run fit the 24 GiB GPU: ~32.0 GiB -> ~12.5 GiB")
    # without a GPU the same finding says nothing about a fit
    assert "fit" not in lint(src)[0][2]


def test_per_path_gpu_table(lint):
    settings = {"gpu": "A100-80GB", "gpus": {"jobs/small/**": "24GB"}}
    assert codes(lint(LLAMA_1B, settings=settings, name="jobs/small/train.py")) == ["TL202"]
    assert lint(LLAMA_1B, settings=settings, name="jobs/big/train.py") == []


@pytest.mark.parametrize("table", [{"gpus": ["24GB"]}, {"gpus": {"a/**": "huge"}}, {"gpus": {"a/**": 24}}])
def test_bad_gpu_table_is_a_config_error(tmp_path, table):
    from trainlint.config import ConfigError, from_table

    with pytest.raises(ConfigError):
        from_table(table, tmp_path, "test")


def test_check_gpu_option_overrides_config(tmp_path):
    (tmp_path / "train.py").write_text(LLAMA_1B)
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\ngpu = "A100-80GB"\n')
    run = lambda *extra: subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", *extra, "train.py"],
                                        cwd=tmp_path, capture_output=True, text=True)
    assert run().returncode == 0
    flagged = run("--gpu", "24GB")
    assert flagged.returncode == 1 and "TL202" in flagged.stdout
    bad = run("--gpu", "lots")
    assert bad.returncode == 2 and "--gpu" in bad.stderr
    stats = run("--gpu", "24GB", "--statistics")
    assert "TL202" in stats.stdout


def test_a_hand_written_loop_gets_both_and_tl701_names_the_other_findings_instead_of_repeating_them(lint):
    src = '''
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype=torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
enc = tokenizer(texts, max_length=2048, truncation=True)
loader = DataLoader(ds, batch_size=8)
for batch in loader:
    loss = model(**batch, labels=batch["input_ids"]).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
'''
    found = lint(src, settings=GPU24)
    assert [(c, line) for c, line, _ in found] == [("TL202", 7), ("TL301", 12), ("TL701", 13)]
    tl202 = found[0][2]
    assert "with it ~32.0 GiB: still over, but no other single change saves more" in tl202
    assert "call model.gradient_checkpointing_enable() before training" in tl202
    tl701 = found[2][2]
    assert "no single lever makes it fit (the changes TL202 and TL301 report are not enough alone); the largest " \
           "other: micro-batch 4 + twice the gradient accumulation (saves ~25.5 GiB)" in tl701
    assert "gradient checkpointing" not in tl701


def test_fix_applied_by_the_cli_turns_a_false_into_true_and_the_finding_goes(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LLAMA_1B.replace("use_liger_kernel=True)", "use_liger_kernel=True, gradient_checkpointing=False)"))
    run = lambda *extra: subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--gpu", "24GB",
                                         *extra, "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert "TL202" in run().stdout
    assert run("--fix").returncode == 0
    assert "use_liger_kernel=True, gradient_checkpointing=True)" in script.read_text()


def test_estimate_reads_the_per_path_gpu_table_too(tmp_path):
    (tmp_path / "jobs" / "small").mkdir(parents=True)
    (tmp_path / "jobs" / "small" / "train.py").write_text(LLAMA_1B)
    (tmp_path / "pyproject.toml").write_text('[tool.trainlint]\ngpu = "A100-80GB"\ngpus = { "jobs/small/**" = "24GB" }\n')
    done = subprocess.run([sys.executable, "-m", "trainlint", "estimate", "jobs/small/train.py"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "verdict: 24 GiB: does NOT fit" in done.stdout


# FSDP's own activation checkpointing, named in the fsdp_config JSON a launch passes (transformers reads the file in
# TrainingArguments._process_fsdp_args, dropping `fsdp_` prefixes): checkpointing is on, so TL202 has nothing to say.
FSDP_SCRIPT = '''
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

parser = HfArgumentParser(TrainingArguments)
(args,) = parser.parse_args_into_dataclasses()
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype="bfloat16")
data = tokenizer(["..."], max_length=2048, truncation=True)
trainer = Trainer(model=model, args=args)
'''


@pytest.mark.parametrize("key, fires", [("activation_checkpointing", False), ("fsdp_activation_checkpointing", False),
                                        ("limit_all_gathers", True)])
def test_fsdp_activation_checkpointing_in_the_launched_fsdp_config_counts(tmp_path, key, fires):
    import json
    import subprocess
    import sys

    (tmp_path / "train.py").write_text(FSDP_SCRIPT)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "fsdp_config.json").write_text(json.dumps({key: True}))
    (tmp_path / "run.sh").write_text("torchrun --nproc-per-node 1 train.py --output_dir out --bf16 True \\\n"
                                     "  --per_device_train_batch_size 8 --use_liger_kernel True \\\n"
                                     "  --fsdp 'full_shard auto_wrap' --fsdp_config config/fsdp_config.json\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--no-cache", "--select", "TL202", "--gpu",
                        "24GB", "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ("TL202" in r.stdout) is fires, r.stdout + r.stderr
