"""TL301 on TRL's other trainers: each version boundary of knowledge/trl_trainers.py, one side flagged and one not."""

import pytest
from conftest import codes

from trainlint.knowledge import trl_trainers
from trainlint.knowledge.versions import LibraryVersion, parse_version

DPO = '''
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer

model = AutoModelForCausalLM.from_pretrained("google/gemma-2-2b", dtype="bfloat16")
args = DPOConfig(output_dir="out", per_device_train_batch_size=2, max_length=2048{extra})
trainer = DPOTrainer(model=model, args=args, train_dataset=ds)
'''


@pytest.fixture
def lint(lint):
    """conftest's lint without TL304: an fp32 reference next to a bf16 policy (DPO 0.29-1.15) and the other
    reference-model findings are tests/test_rl_rules.py's."""
    return lambda *a, **k: [f for f in lint(*a, **k) if f[0] != "TL304"]


def expected(quiet: bool, trl: str, extra: str) -> list[str]:
    """TL301 unless quiet; TL009 too where the keyword does not exist yet in that release (knowledge/api_versions)."""
    too_early = "use_liger_loss" in extra and trl in ("0.18.2", "0.16.1")
    return ([] if quiet else ["TL301"]) if not too_early else ["TL009", "TL301"]


def pins(trl: str) -> dict[str, str]:
    return {"requirements.txt": f"trl=={trl}\ntransformers==4.57.6\n"}


def test_dpo_before_the_fused_head_counts_both_rows_and_the_reference_logits(lint):
    found = lint(DPO.format(extra=""), files=pins("1.14.2"))
    assert [(c, line) for c, line, _ in found] == [("TL301", 7)]
    message = found[0][2]
    # chosen + rejected: 2 x 2 = 4 rows x 2048 x 256000 = 2.1e9 logits = 3.9 GiB in bf16; full fine-tuning of a
    # softcapped Gemma 2 keeps 14 B/logit at peak (27.3 GiB, memory.loss_bytes_per_element: 12 + tanh's bf16 output)
    # plus the reference's 3.9 GiB
    assert "DPOTrainer in TRL 1.14.2 computes the full logits on a 256,000-token vocabulary" in message
    assert "[4 x 2,048 x 256,000] (2 rows per example) logits are ~3.9 GiB in bf16" in message
    assert "~31.2 GiB at peak (with ~3.9 GiB more for the reference model's logits)" in message
    assert "set use_liger_kernel=True" in message and "upgrade TRL to >= 1.15" in message


def test_dpo_from_1_15_is_quiet(lint):
    assert lint(DPO.format(extra=""), files=pins("1.15.0")) == []


def test_dpo_precomputed_reference_is_not_counted(lint):
    found = lint(DPO.format(extra=", precompute_ref_log_probs=True"), files=pins("1.14.2"))
    assert codes(found) == ["TL301"] and "reference" not in found[0][2]


@pytest.mark.parametrize("trl,flag,quiet", [
    ("0.18.2", "use_liger_loss", False),    # no fused DPO loss before 0.19 (nor the keyword: TL009 too)
    ("0.19.1", "use_liger_loss", True),     # LigerFusedLinearDPOLoss behind use_liger_loss 0.19-0.24
    ("0.25.1", "use_liger_loss", True),     # 0.25-0.27 copy use_liger_loss into use_liger_kernel
])
def test_dpo_liger_flag_per_version(lint, trl, flag, quiet):
    found = lint(DPO.format(extra=f", {flag}=True"), files=pins(trl))
    assert codes(found) == expected(quiet, trl, flag)


def test_use_liger_kernel_silences_it_only_where_it_is_the_trainers_fused_path(lint):
    # TrainingArguments.use_liger_kernel patches the model's forward with Liger's lce_forward, which builds the logits
    # whenever it is not given labels (liger-kernel 0.8.5 transformers/model/qwen2.py:100 and llama.py:115
    # `skip_logits = self.training and (labels is not None or shift_labels is not None)`); DPO calls the model without
    # labels and reads `.logits`, so only the trainer's own flag fuses its loss (use_liger_kernel from 0.25)
    assert codes(lint(DPO.format(extra=", use_liger_kernel=True"), files=pins("0.18.2"))) == ["TL301"]
    assert codes(lint(DPO.format(extra=", use_liger_kernel=True"), files=pins("0.24.0"))) == ["TL301"]
    assert lint(DPO.format(extra=", use_liger_kernel=True"), files=pins("1.14.2")) == []


def test_dpo_on_old_trl_names_the_flag_of_that_version(lint):
    found = lint(DPO.format(extra=""), files=pins("0.19.1"))
    assert "set use_liger_loss=True" in found[0][2]
    found = lint(DPO.format(extra=""), files=pins("0.18.2"))
    assert "use_liger" not in found[0][2] and "upgrade TRL to >= 1.15" in found[0][2]


GRPO = '''
from trl import GRPOConfig, GRPOTrainer

args = GRPOConfig(output_dir="out", per_device_train_batch_size=8, max_completion_length=1024{extra})
trainer = GRPOTrainer(model="google/gemma-2-2b", reward_funcs=reward, args=args, train_dataset=ds)
'''


def test_grpo_projects_only_the_completion(lint):
    found = lint(GRPO.format(extra=""), files=pins("1.14.2"))
    assert [(c, line) for c, line, _ in found] == [("TL301", 5)]
    # 8 x 1024 x 256000 = 2.1e9 logits: 3.9 GiB in bf16; no reference logits in the step (separate no-grad pass)
    assert "[8 x 1,024 x 256,000] logits are ~3.9 GiB in bf16" in found[0][2]
    assert "reference" not in found[0][2]


@pytest.mark.parametrize("trl,extra,quiet", [
    ("1.14.2", "", False), ("1.15.0", "", True),                        # fused LM head from 1.15
    ("0.16.1", ", use_liger_loss=True", False),                         # GRPO's Liger loss arrived in 0.17 (TL009 too)
    ("0.17.0", ", use_liger_loss=True", True),
    ("0.24.0", ", use_liger_loss=True", True), ("0.25.1", ", use_liger_loss=True", True),  # copied into use_liger_kernel
    # use_liger_kernel before 0.25 only patches the model's forward, which skips the logits only when given labels;
    # GRPO calls it without labels and reads .logits (open-r1's recipes at trl 0.18 set exactly this)
    ("0.18.2", ", use_liger_kernel=True", False), ("0.25.1", ", use_liger_kernel=True", True),
])
def test_grpo_boundaries(lint, trl, extra, quiet):
    assert codes(lint(GRPO.format(extra=extra), files=pins(trl))) == expected(quiet, trl, extra)


def test_grpo_default_completion_length_comes_from_the_library(lint):
    src = GRPO.format(extra="").replace(", max_completion_length=1024", "")
    found = lint(src, files=pins("1.14.2"))
    # GRPOConfig.max_completion_length default 512 in 1.14.2 (grpo_config.py:70; knowledge/arguments.json)
    assert "[8 x 512 x 256,000]" in found[0][2]


KTO = '''
from trl import KTOConfig, KTOTrainer

args = KTOConfig(output_dir="out", per_device_train_batch_size=2, max_length=2048{extra})
trainer = KTOTrainer(model="google/gemma-2-2b", args=args, train_dataset=ds)
'''


@pytest.mark.parametrize("trl,extra,quiet", [
    ("0.16.1", ", use_liger_loss=True", False), ("0.17.0", ", use_liger_loss=True", True),  # (0.16.1: TL009 too)
    ("1.7.0", "", False), ("1.8.0", ", use_liger_kernel=True", True),
    ("1.14.2", "", False), ("1.15.0", "", True),
])
def test_kto_boundaries(lint, trl, extra, quiet):
    assert codes(lint(KTO.format(extra=extra), files=pins(trl))) == expected(quiet, trl, extra)


def test_orpo_and_cpo_always_build_the_logits(lint):
    for name in ("ORPO", "CPO"):
        # trl.experimental from 0.29 (`from trl import ORPOTrainer` fails there: TL009)
        src = KTO.format(extra=", use_liger_loss=True").replace("KTO", name).replace(
            "from trl import", f"from trl.experimental.{name.lower()} import")
        found = lint(src, files=pins("1.16.0"))
        assert codes(found) == ["TL301"] and "no fused path in this trainer" in found[0][2]


@pytest.mark.parametrize("trl,quiet", [("1.14.2", False), ("1.15.0", True)])
def test_rloo_boundary(lint, trl, quiet):
    src = GRPO.format(extra="").replace("GRPO", "RLOO")
    assert codes(lint(src, files=pins(trl))) == ([] if quiet else ["TL301"])


GKD = '''
from trl import GKDConfig, GKDTrainer

args = GKDConfig(output_dir="out", per_device_train_batch_size=2, max_length=2048{extra})
trainer = GKDTrainer(model="google/gemma-2-2b", teacher_model="google/gemma-2-9b", args=args, train_dataset=ds)
'''


@pytest.mark.parametrize("trl,extra,quiet", [
    ("0.21.0", "", False), ("0.22.2", ", use_liger_kernel=True", True),  # LigerFusedLinearJSDLoss from 0.22
    ("1.14.2", "", False),  # trl.experimental.gkd: no Liger path, still the full student and teacher logits
])
def test_gkd_boundaries_and_teacher_logits(lint, trl, extra, quiet):
    src = GKD.format(extra=extra)
    if parse_version(trl) >= (0, 29):
        src = src.replace("from trl import", "from trl.experimental.gkd import")  # moved in 0.29
    found = lint(src, files=pins(trl))
    assert codes(found) == ([] if quiet else ["TL301"])
    if found:
        assert "the student's and the teacher's" in found[0][2] and "generalized JSD" in found[0][2]


GKD_QWEN = '''
from transformers import AutoModelForCausalLM
from {module} import GKDConfig, GKDTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", {dtype}="bfloat16")
args = GKDConfig(output_dir="out", per_device_train_batch_size=2, max_length=1024, max_new_tokens=512{extra})
trainer = GKDTrainer(model=model, teacher_model="Qwen/Qwen2.5-0.5B", args=args, train_dataset=ds)
'''


@pytest.mark.parametrize("trl,cost,fix", [
    # 1.8+: the JSD reads every position (1.16.0 experimental/gkd/gkd_trainer.py:344-345); no fused JSD from 1.14
    ("1.16.0", "15 more vocabulary-sized tensors over every position, ~17.4 GiB: ~19.7 GiB at peak",
     "GKDTrainer has no fused JSD from TRL 1.14 (1.13 has use_liger_kernel=True): use DistillationTrainer (TRL >= "
     "1.10: its chunked divergence loss projects the completion's positions on tiles, never the full logits), or a "
     "smaller per_device_train_batch_size / max_length"),
    ("1.13.0", "over every position, ~17.4 GiB", "set use_liger_kernel=True (TRL 1.13's own FusedLinearJSDLoss: no "
                                                "extra package)"),
    # <= 1.0: the completion's max_new_tokens positions (0.22.2 gkd_trainer.py:317-320)
    ("0.22.2", "15 more vocabulary-sized tensors over the completion's 512 positions (max_new_tokens), ~8.7 GiB: "
               "~11.0 GiB at peak", "set use_liger_kernel=True (Liger's LigerFusedLinearJSDLoss: needs the "
                                   "liger-kernel package)"),
    ("0.21.0", "over the completion's 512 positions", "upgrade TRL: 0.22-1.13 fuse the JSD with use_liger_kernel=True "
                                                      "(1.13 without the liger-kernel package), or use "
                                                      "DistillationTrainer (TRL >= 1.10"),
])
def test_gkd_message_gives_the_jsd_figure_and_the_versions_lever(lint, trl, cost, fix):
    """TL301 on GKDTrainer: the two models' [2 x 1,024 x 151,936] logits, fp32 under the config's default bf16 mixed
    precision (accelerate's fp32 outputs: ~1.2 GiB each), and the generalized JSD's 15 tensors over the positions it
    reads (memory.estimate jsd_loss_bytes: 2 x 151,936 x 4 x (2 x 1,024 + 15 x 1,024) = 19.7 GiB from 1.8,
    15 x 512 = 11.0 GiB before), and the lever of the version."""
    new = parse_version(trl) >= (0, 29)
    src = GKD_QWEN.format(module="trl.experimental.gkd" if new else "trl", dtype="dtype" if new else "torch_dtype",
                          extra="")
    [(code, line, message)] = lint(src, files=pins(trl))
    assert (code, line) == ("TL301", 7)
    assert message.startswith(f"GKDTrainer in TRL {trl} computes its generalized JSD on the full logits of a "
                              f"151,936-token vocabulary: the student's and the teacher's [2 x 1,024 x 151,936] "
                              f"logits are ~1.2 GiB each in fp32 (under mixed precision accelerate hands TRL fp32 "
                              f"copies of both models' logits), and the generalized JSD builds "), message
    assert cost in message and fix in message, message


def test_gkd_without_mixed_precision_keeps_the_bf16_figure(lint):
    src = GKD_QWEN.format(module="trl.experimental.gkd", dtype="dtype", extra=", bf16=False")
    [(_, _, message)] = lint(src, files=pins("1.16.0"))
    assert ("logits are ~594 MiB each in bf16, and the generalized JSD builds 15 more vocabulary-sized tensors over "
            "every position, ~8.7 GiB: ~9.9 GiB at peak") in message, message


def test_gkd_with_beta_zero_counts_one_kl_div(lint):
    src = GKD_QWEN.format(module="trl.experimental.gkd", dtype="dtype", extra=", beta=0.0")
    [(_, _, message)] = lint(src, files=pins("1.16.0"))
    assert "builds 7 more vocabulary-sized tensors over every position (beta 0 or 1: one kl_div)" in message


def test_distillation_1_9_message_is_the_reverse_kl_on_the_completion(lint):
    """DistillationTrainer 1.3-1.9: GKD's JSD over max_completion_length (512) positions with DistillationConfig's
    default beta 1.0 (the reverse KL: 7 tensors and the labels' mask copy of the 512 positions, fp32 under the
    config's default bf16: 2 x 151,936 x 4 x (7 x 512 + 512) = 4.6 GiB, 7.0 GiB with both models' logits), and its
    levers."""
    src = GKD_QWEN.format(module="trl.experimental.distillation", dtype="dtype", extra="").replace("GKD", "Distillation")
    src = src.replace(", max_new_tokens=512", "")
    [(code, line, message)] = lint(src, files=pins("1.9.2"))
    assert (code, line) == ("TL301", 7)
    assert ("the generalized JSD builds 7 more vocabulary-sized tensors over the completion's 512 positions "
            "(max_completion_length) (beta 1: one kl_div, and the labels' mask copies 512 positions beside it), ~4.6 "
            "GiB: ~7.0 GiB at peak") in message, message
    assert message.endswith("set use_liger_kernel=True (Liger's LigerFusedLinearJSDLoss: needs the liger-kernel "
                            "package), or upgrade TRL to >= 1.10 (its chunked divergence loss never builds the full "
                            "logits)"), message


@pytest.mark.parametrize("trl,quiet", [("1.9.2", False), ("1.10.0", True)])
def test_distillation_boundary(lint, trl, quiet):
    # DistillationConfig has max_length 1.1-1.9 only (arguments.json): the length comes from the tokenizer here
    src = GKD.format(extra="").replace("GKD", "Distillation").replace(", max_length=2048", "") + \
        "enc = tokenizer(texts, max_length=2048, truncation=True)\n"
    if parse_version(trl) < (1, 10):
        src = src.replace("from trl import", "from trl.experimental.distillation import")
    assert codes(lint(src, files=pins(trl))) == ([] if quiet else ["TL301"])


def test_reward_trainer_never_fires(lint):
    src = KTO.format(extra="").replace("KTO", "Reward")
    assert lint(src, files=pins("0.19.1")) == []


def test_every_row_is_ordered_and_contiguous():
    for name, rows in trl_trainers.LOSS.items():
        for a, b in zip(rows, rows[1:]):
            assert a.until == b.since, name
        assert rows[-1].until is None, name
    assert trl_trainers.loss_row("DPOTrainer", LibraryVersion("trl", "1.14.2", "")).full_logits
    assert not trl_trainers.loss_row("DPOTrainer", LibraryVersion("trl", "1.15.0", "")).full_logits


def test_estimate_counts_the_pair_and_the_reference_logits(tmp_path):
    """`trainlint estimate` on a DPO script (TRL 1.14.2): the forward runs on chosen + rejected, the reference
    model's logits are one more [rows x seq x vocab] tensor; on 1.15 the fused head makes the loss chunked."""
    import json
    import subprocess
    import sys
    import textwrap

    from trainlint.memory.estimate import CHUNKED_LOSS_BYTES, Geometry, Plan, fused_head_train_bytes, logits_bytes

    script = tmp_path / "dpo.py"
    script.write_text(textwrap.dedent(DPO.format(extra="")))
    (tmp_path / "requirements.txt").write_text("trl==1.14.2\ntransformers==4.57.6\n")

    def run():
        out = subprocess.run([sys.executable, "-m", "trainlint", "estimate", str(script), "--format", "json"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    data = run()
    assert "batch 4 x 2,048 tokens" in data["plan"]  # per_device_train_batch_size=2, chosen + rejected
    text = json.dumps(data)
    assert "runs chosen and rejected together" in text and "reference model's logits" in text
    g = Geometry(vocab=256000, hidden=2304, layers=26, heads=8, kv_heads=4, head_dim=256, intermediate=9216,
                 params=2_614_341_888, tied=True, softcap=True)
    with_ref = logits_bytes(Plan(g, batch=4, seq=2048, reference_logits=True))
    without = logits_bytes(Plan(g, batch=4, seq=2048))
    assert with_ref - without == 4 * 2048 * 256000 * 2  # one more bf16 logits tensor
    assert data["consumers"]["logits"] == with_ref
    # no PEFT and no ref_model: DPO keeps a frozen copy of the model (trl_trainers.REFERENCE_COPY)
    assert "keeps a frozen copy of the model as its reference" in text
    script.write_text(textwrap.dedent(DPO.format(extra=", precompute_ref_log_probs=True")))
    pre = run()
    # DPO 0.29-1.15 loads the reference from model_init_kwargs, fp32 by default (knowledge/trl_trainers.py
    # Components): a model row of its own at 4 bytes per parameter, gone with precompute_ref_log_probs (1.5+)
    assert pre["consumers"]["weights"] == data["consumers"]["weights"]
    assert data["components"] == [{"role": "reference", "bytes": 2 * data["consumers"]["weights"]}]
    assert pre["components"] == []
    assert pre["consumers"]["logits"] == without
    script.write_text(textwrap.dedent(DPO.format(extra="")))
    (tmp_path / "requirements.txt").write_text("trl==1.15.0\ntransformers==4.57.6\n")
    # the fused head (memory.estimate.fused_head_train_bytes): no logits, its backward's fp32 gradients and tile buffer
    fused = fused_head_train_bytes(Plan(g, batch=4, seq=2048, loss="chunked", fused_head=True))
    assert run()["consumers"]["logits"] == fused < CHUNKED_LOSS_BYTES


def test_dpo_notebook_pinned_to_an_old_trl_on_gemma_is_flagged(tmp_path):
    """The issue's case: a notebook that pins trl 0.8.6 (a `!pip install` line) and runs DPO on a 256k vocabulary."""
    import json
    import subprocess
    import sys

    cells = [
        {"cell_type": "code", "metadata": {}, "execution_count": 1, "outputs": [],
         "source": ["!pip install -q trl==0.8.6 transformers==4.40.2 peft\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": 2, "outputs": [], "source": [
            "import torch\n", "from transformers import AutoModelForCausalLM, TrainingArguments\n",
            "from trl import DPOTrainer\n",
            "model = AutoModelForCausalLM.from_pretrained('google/gemma-2b', torch_dtype=torch.bfloat16)\n",
            "args = TrainingArguments(output_dir='o', per_device_train_batch_size=2, bf16=True)\n",
            "trainer = DPOTrainer(model, ref_model=None, args=args, beta=0.1, train_dataset=ds, tokenizer=tok,\n",
            "                     max_length=1024, max_prompt_length=512)\n"]},
    ]
    nb = tmp_path / "dpo.ipynb"
    nb.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}))
    out = subprocess.run([sys.executable, "-m", "trainlint", "check", str(nb), "--no-cache"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 1, out.stderr
    # 2 x 2 rows x 1024 x 256000 = 1.05e9 logits: 1.95 GiB in bf16; 12 B/logit at peak (full fine-tuning) = 11.7 GiB
    # plus the reference model's 1.95 GiB
    assert ("dpo.ipynb:cell 2:6:11: TL301 DPOTrainer in TRL 0.8.6 computes the full logits on a 256,000-token "
            "vocabulary: the [4 x 1,024 x 256,000] (2 rows per example) logits are ~2.0 GiB in bf16") in out.stdout
    assert "~13.7 GiB at peak (with ~2.0 GiB more for the reference model's logits)" in out.stdout


@pytest.mark.parametrize("trl,imports,expect", [
    ("0.19.1", "from trl import PPOConfig, PPOTrainer", ["TL301"]),
    ("0.29.1", "from trl import PPOConfig, PPOTrainer", ["TL009", "TL301"]),  # moved to trl.experimental.ppo
    ("0.29.1", "from trl.experimental.ppo import PPOConfig, PPOTrainer", ["TL301"]),
])
def test_ppo_has_no_fused_path(lint, trl, imports, expect):
    src = f'''
    {imports}
    args = PPOConfig(output_dir="out", per_device_train_batch_size=2)
    trainer = PPOTrainer(args=args, processing_class=tok, model="google/gemma-2-2b", ref_model=None,
                         reward_model=rm, value_model=vm, train_dataset=ds)
    '''
    found = lint(src, files=pins(trl))
    assert codes(found) == expect
    # PPOConfig has no max_completion_length (its length is response_length): the cost is given per token
    assert "per token of each example" not in found[-1][2] and "per token at peak" in found[-1][2]
