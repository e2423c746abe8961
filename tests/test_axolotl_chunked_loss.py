"""axolotl's `chunked_cross_entropy`: the Run's "chunked-upcast" loss path (the full logits in the compute dtype, the
fp32 copy one chunk at a time; knowledge/libraries.py CHUNKED_UPCAST_PATCH), what `estimate` counts for it and what
TL301 says, decided from the Run for every axolotl release read."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.lint import enabled_codes, lint_file
from trainlint.memory import GIB, loss_peak_bytes
from trainlint.memory.estimate import estimate, fix_saving
from trainlint.planning import Overrides, plan_for
from trainlint.run import resolve

CONFIG = """\
    base_model: meta-llama/Meta-Llama-3-8B
    sequence_len: 4096
    micro_batch_size: 2
    gradient_accumulation_steps: 4
    bf16: true
    attn_implementation: sdpa
"""
VOCAB = 128_256


def _result(tmp_path: Path, text: str, release: str | None = None):
    project_pins.cache_clear()
    (tmp_path / "ax.yml").write_text(textwrap.dedent(text))
    if release is not None:
        (tmp_path / "requirements.txt").write_text(f"axolotl=={release}\n")
    s = Settings(root=tmp_path)
    return lint_file(tmp_path / "ax.yml", s, enabled_codes(s))


def _plan(result):
    plan, _model, _notes, unknown = plan_for(result.context, Overrides())
    assert unknown == []
    return plan


@pytest.mark.parametrize("release", ["0.12.0", "0.18.0", "0.19.0"])  # every release read has the key (since 0.11.0)
def test_chunked_cross_entropy_is_the_chunked_upcast_path_and_tl301_says_what_it_keeps(tmp_path, release):
    result = _result(tmp_path, CONFIG + "    chunked_cross_entropy: true\n", release)
    assert result.context.mapped.release == release
    loss = resolve(result.context).loss
    assert (loss.path.value, loss.chunks, loss.path.certain) == ("chunked-upcast", 8, True)
    assert loss.path.span.line == 7  # the chunked_cross_entropy key
    [diag] = result.diagnostics
    assert diag.code == "TL301" and diag.span.line == 1
    assert diag.message.startswith(
        "axolotl's trainer (a transformers Trainer) computes its loss on the full logits with axolotl's "
        "chunked_cross_entropy (the fp32 upcast in 8 chunks) on a 128,256-token vocabulary: the [2 x 4,096 x 128,256] "
        "logits are ~2.0 GiB in bf16 and the loss keeps every chunk's fp32 log-softmax (~3.9 GiB) for backward, "
        "~7.8 GiB at peak, ~7.4 GiB off this run's peak with a fused loss; list "
        "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin in plugins: with chunked_cross_entropy: false "
        "(the plugin refuses both)")
    # the fix switches the key off in the same edit as it lists the plugin
    edits = sorted(diag.fix.edits, key=lambda e: e.start)
    assert [e.content for e in edits] == ["false", "plugins:\n  - axolotl.integrations.cut_cross_entropy."
                                                      "CutCrossEntropyPlugin\n"]


def test_without_chunked_cross_entropy_the_loss_is_full_and_tl301_fires(tmp_path):
    result = _result(tmp_path, CONFIG)
    assert resolve(result.context).loss.path.value == "full"
    [diag] = result.diagnostics
    assert diag.code == "TL301" and "~11.7 GiB at peak" in diag.message and "chunked" not in diag.message


def test_chunked_upcast_estimate_keeps_the_16_bit_logits_and_the_chunks_fp32_log_softmax(tmp_path):
    plan = _plan(_result(tmp_path, CONFIG + "    chunked_cross_entropy: true\n"))
    assert (plan.loss, plan.loss_chunks, plan.batch, plan.seq) == ("chunked-upcast", 8, 2, 4096)
    elements = 2 * 4096 * VOCAB
    # bf16 logits and a second bf16 logits-sized tensor (2 + 2 bytes a logit) + every chunk's fp32 log-softmax kept
    # for backward (4): 8 bytes a logit (bench/measure_chunked_upcast.py: 8.6 with the other activations)
    est = estimate(plan)
    assert est.consumers["logits"] == elements * 8
    assert round(elements * 8 / GIB, 1) == 7.8
    full = _plan(_result(tmp_path, CONFIG))
    assert estimate(full).consumers["logits"] == loss_peak_bytes(2, 4096, VOCAB, 2, trainable_head=True)  # 11.7 GiB
    assert est.consumers["logits"] < estimate(full).consumers["logits"]
    assert est.peak < estimate(full).peak
    # a fused loss (CCE / Liger) still takes the 16-bit logits off: estimate's TL301 lever stays
    assert fix_saving(plan, "TL301") > 0 and "TL301" in [lever.code for lever in est.levers]


def test_num_chunks_is_read_and_does_not_change_the_peak(tmp_path):
    plan = _plan(_result(tmp_path, CONFIG + "    chunked_cross_entropy: true\n    chunked_cross_entropy_num_chunks: 4\n"))
    assert plan.loss_chunks == 4
    assert estimate(plan).consumers["logits"] == 2 * 4096 * VOCAB * 8


def test_chunked_cross_entropy_false_is_the_full_loss(tmp_path):
    result = _result(tmp_path, CONFIG + "    chunked_cross_entropy: false\n")
    assert resolve(result.context).loss.path.value == "full"
    assert [d.code for d in result.diagnostics] == ["TL301"]


def test_a_trl_trainer_does_not_go_through_the_patched_causal_lm_loss(tmp_path):
    # rl: dpo builds TRL's DPOTrainer, whose loss reads the logits itself (no labels to the model): the patch of
    # transformers' ForCausalLMLoss does not reach it, so its full-logits finding stands
    text = CONFIG + "    chunked_cross_entropy: true\n    rl: dpo\n    adapter: lora\n    lora_r: 8\n"
    result = _result(tmp_path, text, "0.19.0")
    assert resolve(result.context).loss.path.value != "chunked-upcast"
    assert "TL301" in [d.code for d in result.diagnostics]
