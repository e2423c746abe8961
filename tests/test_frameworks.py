"""axolotl and LLaMA-Factory configs as first-class inputs: the real sample configs with labels derived from the
frameworks' source, small configs of our own at each boundary, and the CLI (check, estimate, --fix, --diff,
explicit file lists as pre-commit passes them, --diff-base against a real git repository)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from trainlint.config import Settings
from trainlint.knowledge.versions import project_pins
from trainlint.lint import enabled_codes, lint_file

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "configs"
if not SAMPLE.is_dir():
    SAMPLE = Path("/work/shared/configs")

# Labels: what each sample config should report, decided from the framework source read (knowledge/frameworks.py)
# and the model catalog (a model the catalog does not know makes the rules say less, never guess).
# TL201 is never expected: axolotl's load_adapter() calls enable_input_require_grads() for every adapter and
# LLaMA-Factory's checkpoint function marks every checkpointed block's input as requiring grad.
# TL101 is never expected: every sample sets flash_attention_2 / sdpa / flex_attention / fa2, or leaves the
# attention to the transformers default, which is SDPA for these architectures (mpt / bloom / gpt_oss are not here).
LABELS: dict[str, tuple[set[str], str]] = {
    # axolotl
    "axolotl/examples__deepseek-v2__fft-fsdp-16b.yaml": ({"TL301"}, "vocab 102,400 with no loss plugin: TL301; "
                                                                    "DeepSeek-V2-Lite is in the catalog (issue 28)"),
    "axolotl/examples__gemma2__reward-model.yaml": (set(), "reward_model: sequence classification, no vocabulary CE"),
    "axolotl/examples__gemma3__gemma-3-4b-qlora.yml": ({"TL301"}, "262,208-token vocabulary, no CCE/Liger plugin"),
    "axolotl/examples__gemma4__31b-qlora.yaml": (set(), "CutCrossEntropyPlugin listed: cut_cross_entropy defaults True"),
    "axolotl/examples__llama-2__gptq-lora.yml": ({"TL007"}, "32,000 vocab; gptq_disable_exllama and adam_eps are not "
                                                           "schema keys: axolotl drops them silently"),
    "axolotl/examples__llama-2__lora.yml": (set(), "32,000-token vocabulary, flash_attention_2"),
    "axolotl/examples__llama-3-vision__lora-11b.yaml": (set(), "128,256 vocab is TL301, model not in the catalog"),
    "axolotl/examples__llama-3__fft-8b.yaml": ({"TL301"}, "128,256 vocab, no loss plugin; the NousResearch mirror resolves to Llama 3"),
    "axolotl/examples__llama-3__lora-1b-deduplicate-dpo.yml": ({"TL301"}, "rl: dpo: the pinned trl 1.9.0's DPOTrainer "
                                                                         "builds the full logits (fused head from 1.15; "
                                                                         "knowledge/trl_trainers.py)"),
    "axolotl/examples__llama-3__lora-1b.yml": ({"TL301"}, "128,256 vocab, no loss plugin; the NousResearch mirror resolves to Llama 3.2"),
    "axolotl/examples__llama-3__qlora.yml": ({"TL301"}, "128,256 vocab, no loss plugin; the NousResearch mirror resolves to Llama 3"),
    "axolotl/examples__magistral__magistral-small-qlora.yaml": (set(), "CutCrossEntropyPlugin listed"),
    "axolotl/examples__mistral-medium-3_5__qlora-text.yml": (set(), "CutCrossEntropyPlugin listed; flash_attention"),
    "axolotl/examples__mistral__lora.yml": (set(), "32,000-token vocabulary"),
    "axolotl/examples__mistral__mixtral__mixtral.yml": (set(), "32,000-token vocabulary"),
    "axolotl/examples__mistral__orpo__mistral-qlora-orpo.yml": (set(), "rl: orpo; 32,000-token vocabulary"),
    "axolotl/examples__orpheus__finetune.yml": (set(), "LigerPlugin with liger_fused_linear_cross_entropy: true"),
    "axolotl/examples__phi__phi-qlora.yml": (set(), "51,200-token vocabulary"),
    "axolotl/examples__qwen2-vl__lora-7b.yaml": ({"TL301"}, "152,064 vocab, no loss plugin; Qwen2-VL-7B-Instruct is "
                                                            "now in the catalog (its config.json copy is cited there)"),
    "axolotl/examples__qwen3__8b-qat-fsdp2.yml": (set(), "LigerPlugin with liger_fused_linear_cross_entropy: true"),
    "axolotl/examples__qwen3__qlora-fsdp.yaml": ({"TL301"}, "Qwen3-8B, 151,936-token vocabulary, no loss plugin"),
    "axolotl/examples__qwen3__reward-model.yaml": (set(), "reward_model: no vocabulary CE"),
    # LLaMA-Factory (stage sft without enable_liger_kernel: CustomSeq2SeqTrainer, the model's loss on full logits)
    "llama-factory/examples__ascend__qwen3_full_sft_fsdp2.yaml": ({"TL301"}, "Qwen3-8B, sft, no enable_liger_kernel"),
    "llama-factory/examples__extras__eaft__qwen25_05b_eaft_full.yaml": ({"TL301"}, "Qwen2.5-0.5B 151,936, sft; the "
                                                                                   "EAFT loss reads full logits"),
    "llama-factory/examples__extras__llama_pro__llama3_freeze_sft.yaml": (set(), "models/llama3-8b-pro: a folder a "
                                                                                 "script makes; unknown, say less"),
    "llama-factory/examples__extras__loraplus__llama3_lora_sft.yaml": ({"TL301"}, "Llama-3-8B-Instruct 128,256, sft"),
    "llama-factory/examples__extras__muon__qwen2_full_sft.yaml": ({"TL301"}, "Qwen2-1.5B-Instruct 151,936, sft"),
    "llama-factory/examples__extras__pissa__llama3_lora_sft.yaml": ({"TL301"}, "Llama-3-8B-Instruct 128,256, sft"),
    "llama-factory/examples__train_lora__qwen3_lora_reward.yaml": (set(), "stage rm: value head, no vocabulary CE"),
    "llama-factory/examples__train_lora__qwen3_lora_sft_ds3.yaml": ({"TL301"}, "151,936 vocab, stage sft, no "
                                                                               "enable_liger_kernel; Qwen3-4B-Instruct-"
                                                                               "2507 resolves to Qwen3-4B by its name"),
    "llama-factory/examples__train_lora__qwen3vl_lora_dpo.yaml": (set(), "stage dpo: not a loss path TL301 models"),
    "llama-factory/examples__train_lora__qwen3vl_lora_sft.yaml": (set(), "Qwen3-VL-4B not in the catalog"),
    "llama-factory/examples__train_qlora__llama3_lora_sft_gptq.yaml": ({"TL301"}, "stage sft, no enable_liger_kernel; the GPTQ upload resolves to Llama 3 by its name"),
}


def _lint(path: Path, **settings) -> list:
    project_pins.cache_clear()
    s = Settings(root=path.parent, **settings)
    return lint_file(path, s, enabled_codes(s)).diagnostics


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the shared sample of framework configs is not here")
def test_every_sample_config_is_labelled():
    found = {f"{p.parent.name}/{p.name}" for p in SAMPLE.glob("*/*.y*ml")}
    assert found == set(LABELS)


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the shared sample of framework configs is not here")
@pytest.mark.parametrize("name", sorted(LABELS))
def test_sample_config_reports_its_label(name: str):
    expected, why = LABELS[name]
    got = {d.code for d in _lint(SAMPLE / name)}
    assert got == expected, why


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the shared sample of framework configs is not here")
def test_sample_tl301_lands_on_the_model_key_and_says_the_plugin():
    diags = _lint(SAMPLE / "axolotl/examples__gemma3__gemma-3-4b-qlora.yml")
    (d,) = diags
    text = (SAMPLE / "axolotl/examples__gemma3__gemma-3-4b-qlora.yml").read_text().splitlines()
    assert text[d.span.line - 1].startswith("base_model:")
    assert "262,208-token vocabulary" in d.message and "CutCrossEntropyPlugin in plugins:" in d.message
    assert d.message.startswith("axolotl's trainer (a transformers Trainer) computes an unfused cross-entropy")
    assert d.fix.applicability == "unsafe"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


AX_EAGER = """\
    base_model: meta-llama/Llama-3.2-1B
    adapter: lora
    lora_r: 16
    sequence_len: 8192
    micro_batch_size: 2
    gradient_checkpointing: true
    gradient_checkpointing_kwargs:
      use_reentrant: true
    attn_implementation: eager
    bf16: auto
    plugins:
      - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin
    """


def test_axolotl_eager_at_8k_is_tl101_on_the_key_line_and_lora_reentrant_is_never_tl201(tmp_path):
    diags = _lint(_write(tmp_path, "ax.yml", AX_EAGER))
    assert [(d.code, d.span.line, d.span.col) for d in diags] == [("TL101", 9, 1)]
    assert "attn_implementation: eager" in diags[0].message and "set attn_implementation: sdpa" in diags[0].message
    assert "batch 2 x 32 heads x 8,192^2" in diags[0].message
    assert diags[0].fix.applicability == "safe"


def test_axolotl_eager_below_the_long_context_threshold_is_quiet(tmp_path):
    assert _lint(_write(tmp_path, "ax.yml", AX_EAGER.replace("8192", "1024"))) == []


@pytest.mark.parametrize("flag,fires", [("eager_attention", True), ("sdp_attention", False),
                                        ("flash_attention", False), ("flex_attention", False)])
def test_axolotl_legacy_attention_flags(tmp_path, flag, fires):
    text = AX_EAGER.replace("attn_implementation: eager", f"{flag}: true")
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert [d.code for d in diags] == (["TL101"] if fires else [])
    if fires:
        assert f"{flag}: true" in diags[0].message
        assert diags[0].fix.edits[0].content == "attn_implementation: sdpa"


def test_axolotl_attn_implementation_with_a_legacy_flag_is_refused(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa\n    flash_attention: true")
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert [(d.code, d.span.line) for d in diags] == [("TL007", 10)]
    assert "refuses this config" in diags[0].message


def test_axolotl_loss_paths(tmp_path):
    no_plugin = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa")
    no_plugin = no_plugin.split("    plugins:")[0]
    assert [d.code for d in _lint(_write(tmp_path, "a.yml", no_plugin))] == ["TL301"]
    liger_no_flce = no_plugin + "    plugins:\n      - axolotl.integrations.liger.LigerPlugin\n    liger_rms_norm: true\n"
    assert [d.code for d in _lint(_write(tmp_path, "b.yml", liger_no_flce))] == ["TL301"]
    flce = liger_no_flce + "    liger_fused_linear_cross_entropy: true\n"
    assert _lint(_write(tmp_path, "c.yml", flce)) == []
    # axolotl's chunked_cross_entropy upcasts one chunk at a time but keeps the full logits and every chunk's fp32
    # log-softmax (bench/measure_chunked_upcast.py): still TL301, with its own figures (test_axolotl_chunked_loss.py)
    chunked = no_plugin + "    chunked_cross_entropy: true\n"
    assert [d.code for d in _lint(_write(tmp_path, "d.yml", chunked))] == ["TL301"]
    cce_off = no_plugin + ("    plugins:\n      - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n"
                           "    cut_cross_entropy: false\n")
    assert [d.code for d in _lint(_write(tmp_path, "e.yml", cce_off))] == ["TL301"]
    reward = no_plugin.replace("adapter: lora\n", "reward_model: true\n")
    assert _lint(_write(tmp_path, "f.yml", reward)) == []


def test_axolotl_plugin_key_without_its_plugin_has_no_effect(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa").split("    plugins:")[0]
    text += "    liger_fused_linear_cross_entropy: true\n"
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert sorted((d.code, d.span.line) for d in diags) == [("TL007", 11), ("TL301", 1)]
    assert "LigerPlugin" not in diags[0].message or "not listed in plugins" in diags[-1].message


def test_axolotl_removed_and_unknown_keys(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa\n    s2_attention: true\n"
                                                          "    micro_batchsize: 4")
    diags = [(d.code, d.span.line, d.message) for d in _lint(_write(tmp_path, "ax.yml", text))]
    assert [(c, line) for c, line, _ in diags] == [("TL007", 10), ("TL007", 11)]
    assert "no longer supported" in diags[0][2] and "micro_batchsize is not an axolotl" in diags[1][2]


def test_axolotl_auto_find_batch_size_is_tl401(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa\n    auto_find_batch_size: true")
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert [(d.code, d.span.line) for d in diags] == [("TL401", 10)]
    assert diags[0].message.startswith("auto_find_batch_size: true") and "micro_batch_size" in diags[0].message


def test_noqa_on_the_key_line_suppresses(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: eager  # noqa: TL101")
    assert _lint(_write(tmp_path, "ax.yml", text)) == []


def test_missing_local_model_path_is_tl008_and_the_model_is_unknown(tmp_path):
    text = AX_EAGER.replace("meta-llama/Llama-3.2-1B", "./checkpoints/merged")
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert [(d.code, d.span.line) for d in diags] == [("TL008", 1), ("TL101", 9)]
    assert "model size unknown" in diags[1].message  # explicit eager is eager; no figures for an unknown model
    (tmp_path / "checkpoints" / "merged").mkdir(parents=True)
    assert [d.code for d in _lint(tmp_path / "ax.yml")] == ["TL101"]  # exists: no TL008 (no config.json: unknown)


LF = """\
    ### model
    model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
    stage: sft
    do_train: true
    finetuning_type: lora
    template: llama3
    cutoff_len: 4096
    flash_attn: disabled
    per_device_train_batch_size: 2
    gradient_accumulation_steps: 4
    bf16: true
    enable_liger_kernel: true
    """


def test_llamafactory_disabled_attention_is_eager(tmp_path):
    diags = _lint(_write(tmp_path, "lf.yaml", LF))
    assert [(d.code, d.span.line) for d in diags] == [("TL101", 8)]
    assert "(flash_attn: disabled)" in diags[0].message and "set flash_attn: sdpa" in diags[0].message
    assert diags[0].fix.edits[0].content == "sdpa"


def test_llamafactory_default_cutoff_is_2048_so_the_default_length_counts(tmp_path):
    text = LF.replace("    cutoff_len: 4096\n", "")
    assert [d.code for d in _lint(_write(tmp_path, "lf.yaml", text))] == ["TL101"]
    assert [d.code for d in _lint(_write(tmp_path, "lf.yaml", text.replace("disabled", "auto")))] == []


def test_llamafactory_liger_fuses_only_pt_and_sft(tmp_path):
    text = LF.replace("disabled", "sdpa")
    assert _lint(_write(tmp_path, "lf.yaml", text)) == []
    without = text.replace("enable_liger_kernel: true", "enable_liger_kernel: false")
    diags = _lint(_write(tmp_path, "lf.yaml", without))
    assert [d.code for d in diags] == ["TL301"] and "set enable_liger_kernel: true" in diags[0].message
    assert diags[0].message.startswith("LLaMA-Factory's trainer (a Seq2SeqTrainer) computes an unfused")
    assert diags[0].fix.edits[0].content == "true"
    assert _lint(_write(tmp_path, "lf.yaml", without.replace("stage: sft", "stage: rm"))) == []


def test_llamafactory_unknown_key_and_old_attention_spelling(tmp_path):
    text = LF.replace("disabled", "off").replace("enable_liger_kernel: true", "use_flash_attention: true")
    diags = [(d.code, d.span.line, d.message) for d in _lint(_write(tmp_path, "lf.yaml", text))]
    assert [(c, line) for c, line, _ in diags] == [("TL301", 2), ("TL007", 8), ("TL007", 12)]
    assert "releases before 0.9 read it as eager" in diags[1][2]
    assert "Some specified arguments are not used" in diags[2][2]


def test_llamafactory_lora_with_reentrant_checkpointing_is_never_tl201(tmp_path):
    text = textwrap.dedent(LF.replace("disabled", "sdpa")).rstrip(" ") + "use_reentrant_gc: true\n"
    assert _lint(_write(tmp_path, "lf.yaml", text)) == []


@pytest.mark.parametrize("text", [
    "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\ndataset_name: x\nmax_length: 8192\n",  # TRL recipe
    "base_model: meta-llama/Llama-3.2-1B\nmodel_type: llm\ninput_features: []\noutput_features: []\n",  # Ludwig
    "model_name_or_path: x/y\nadapter_name_or_path: z\ntemplate: llama3\nexport_dir: out\ninfer_backend: vllm\n",
    "foo: 1\n",
])
def test_yaml_that_is_neither_framework_is_skipped(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    s = Settings(root=tmp_path)
    result = lint_file(path, s, enabled_codes(s))
    assert result.diagnostics == [] and result.skipped and result.context is None


def test_a_config_that_does_not_load_is_tl005_and_others_still_lint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yml").write_text("base_model: x\nsequence_len: [1\n")
    _write(tmp_path, "good.yml", AX_EAGER)
    out = _cli("check", "--output-format", "json", ".", cwd=tmp_path)
    found = sorted((d["filename"], d["code"], d["location"]["row"]) for d in json.loads(out.stdout))
    assert found == [("bad.yml", "TL005", 3), ("good.yml", "TL101", 9)]
    assert out.returncode == 1


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ})


@pytest.mark.parametrize("fmt", ["sarif", "github", "rdjson", "gitlab", "junit", "json-lines"])
def test_all_output_formats_carry_the_yaml_location(tmp_path, fmt):
    _write(tmp_path, "ax.yml", AX_EAGER)
    out = _cli("check", "--output-format", fmt, "ax.yml", cwd=tmp_path)
    assert out.returncode == 1 and "ax.yml" in out.stdout and "TL101" in out.stdout


def test_fix_rewrites_the_value_in_place_keeping_comments_and_quotes(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: 'eager'   # chosen on purpose")
    path = _write(tmp_path, "ax.yml", text)
    before = path.read_text()
    out = _cli("check", "--fix", "ax.yml", cwd=tmp_path)
    after = path.read_text()
    assert out.returncode == 0, out.stdout + out.stderr
    assert after == before.replace("'eager'", "'sdpa'")
    assert yaml.safe_load(after)["attn_implementation"] == "sdpa"


def test_unsafe_fix_adds_the_cce_plugin_to_the_block_list(tmp_path):
    text = AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa").replace(
        "cut_cross_entropy.CutCrossEntropyPlugin", "liger.LigerPlugin")
    path = _write(tmp_path, "ax.yml", text)
    assert _cli("check", "--fix", "ax.yml", cwd=tmp_path).returncode == 1  # unsafe: not applied by --fix alone
    out = _cli("check", "--fix", "--unsafe-fixes", "ax.yml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert yaml.safe_load(path.read_text())["plugins"] == ["axolotl.integrations.liger.LigerPlugin",
                                                           "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"]


def test_diff_shows_the_yaml_fix_and_writes_nothing(tmp_path):
    path = _write(tmp_path, "lf.yaml", LF)
    before = path.read_text()
    out = _cli("check", "--diff", "lf.yaml", cwd=tmp_path)
    assert out.returncode == 1 and "-flash_attn: disabled\n+flash_attn: sdpa\n" in out.stdout
    assert path.read_text() == before


def test_estimate_reads_a_framework_config(tmp_path):
    _write(tmp_path, "lf.yaml", LF)
    out = _cli("estimate", "lf.yaml", "--format", "json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    text = json.dumps(report)
    assert "Meta-Llama-3-8B-Instruct" in text and "4096" in text.replace(",", "")


def test_explicit_file_list_as_pre_commit_passes_it(tmp_path):
    _write(tmp_path, "ax.yml", AX_EAGER)
    _write(tmp_path, "recipe.yaml", "model_name_or_path: x/y\ndataset_name: d\n")
    _write(tmp_path, "train.py", "print('hello')\n")
    out = _cli("check", "--force-exclude", "ax.yml", "recipe.yaml", "train.py", "--output-format", "json",
               cwd=tmp_path)
    assert [(d["filename"], d["code"]) for d in json.loads(out.stdout)] == [("ax.yml", "TL101")]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


@pytest.mark.parametrize("framework,batch_key", [("axolotl", "micro_batch_size"),
                                                 ("llamafactory", "per_device_train_batch_size")])
def test_diff_base_micro_batch_drop_without_accumulation_is_tl401_and_fixed(tmp_path, framework, batch_key):
    text = (f"base_model: mistralai/Mistral-7B-v0.1\nsequence_len: 1024\n{batch_key}: 4\n"
            f"gradient_accumulation_steps: 2\n") if framework == "axolotl" else (
        f"model_name_or_path: mistralai/Mistral-7B-v0.1\nstage: sft\ntemplate: mistral\ncutoff_len: 1024\n"
        f"{batch_key}: 4\ngradient_accumulation_steps: 2\n")
    _git(tmp_path, "init", "-q")
    path = tmp_path / "cfg.yml"
    path.write_text(text)
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "base")
    path.write_text(text.replace(f"{batch_key}: 4", f"{batch_key}: 2"))
    out = _cli("check", "--diff-base", "HEAD", "cfg.yml", cwd=tmp_path)
    assert f"cfg.yml:{text.splitlines().index(f'{batch_key}: 4') + 1}:1: TL401 {batch_key} 4 -> 2" in out.stdout
    assert "set gradient_accumulation_steps: 4 to keep 8" in out.stdout
    assert _cli("check", "--fix", "cfg.yml", cwd=tmp_path).returncode == 0
    assert yaml.safe_load(path.read_text())["gradient_accumulation_steps"] == 4


def test_diff_base_axolotl_batch_size_pair_rederives_accumulation(tmp_path):
    text = "base_model: mistralai/Mistral-7B-v0.1\nsequence_len: 1024\nmicro_batch_size: 4\nbatch_size: 16\n"
    _git(tmp_path, "init", "-q")
    (tmp_path / "cfg.yml").write_text(text)
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "base")
    (tmp_path / "cfg.yml").write_text(text.replace("micro_batch_size: 4", "micro_batch_size: 2"))
    assert _cli("check", "cfg.yml", cwd=tmp_path).returncode == 0  # batch_size // micro_batch_size rises to 8


def test_framework_pin_chooses_the_release_and_its_transformers(tmp_path):
    (tmp_path / "requirements.txt").write_text("axolotl==0.18.0\n")
    path = _write(tmp_path, "ax.yml", AX_EAGER)
    project_pins.cache_clear()
    s = Settings(root=tmp_path)
    ctx = lint_file(path, s, enabled_codes(s)).context
    assert ctx.mapped.release == "0.18.0"
    assert ctx.versions.transformers.version == "5.14.1"
    assert "axolotl 0.18.0 requires transformers==5.14.1" in ctx.versions.transformers.source


def _page_yaml_examples():
    import re

    root = Path(__file__).resolve().parents[1] / "rules"
    for page in sorted(root.glob("TL[1-9]*.md")):  # the rules; TL0xx pages are about trainlint itself
        section = re.search(r"^## Framework configs\n(.*?)(?=^## )", page.read_text(), re.S | re.M)
        assert section, f"{page.name}: no '## Framework configs' section"
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", section.group(1), re.S)):
            m = re.match(r"# (TL\d+): (fires|does not fire)\n(?:# settings: gpu = \"([^\"]+)\"\n)?", block)
            assert m, f"{page.name} block {i}: first line must say `# TLxxx: fires` or `# TLxxx: does not fire`"
            # an optional second line `# settings: gpu = "..."`: the GPU a rule that judges the fit needs
            settings = {"gpu": m.group(3)} if m.group(3) else {}
            yield pytest.param(m.group(1), block, m.group(2) == "fires", settings, id=f"{page.stem}-yaml-{i}")


@pytest.mark.parametrize(("code", "block", "fires", "settings"), list(_page_yaml_examples()))
def test_rule_page_framework_examples_run(tmp_path, code, block, fires, settings):
    found = {d.code for d in _lint(_write(tmp_path, "config.yml", block), **settings)}
    assert (code in found) is fires, f"{code} {'should' if fires else 'should not'} fire on:\n{block}\nfound {found}"
    assert not found - {code}, f"other findings on a page example: {found}"


def test_axolotl_gemma2_with_no_attention_key_follows_the_pinned_transformers(tmp_path):
    """axolotl 0.19.0 pins transformers 5.16.1, where gemma2 still supports SDPA (its default); 5.21.0 dropped it."""
    text = "base_model: google/gemma-2-2b\nsequence_len: 8192\nmicro_batch_size: 1\nbf16: auto\nplugins:\n" \
           "  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n"
    path = _write(tmp_path, "ax.yml", text)
    assert _lint(path) == []
    (tmp_path / "requirements.txt").write_text("transformers==5.21.0\n")
    diags = _lint(path)
    assert [(d.code, d.span.line) for d in diags] == [("TL101", 1)]
    assert "gemma2 falls back to eager in transformers 5.21.0" in diags[0].message
    assert diags[0].fix.applicability == "unsafe" and "attn_implementation: flex_attention" in \
        diags[0].fix.edits[0].content


def test_the_cache_follows_a_changed_framework_pin(tmp_path):
    """dataset_num_proc is an axolotl 0.19.0 key that 0.12.0 does not have: the cached result must not survive
    a pin that changes the release."""
    _write(tmp_path, "ax.yml", AX_EAGER.replace("attn_implementation: eager", "attn_implementation: sdpa")
           + "dataset_num_proc: 4\n")
    assert _cli("check", "ax.yml", cwd=tmp_path).returncode == 0
    assert _cli("check", "ax.yml", cwd=tmp_path).returncode == 0  # cached
    (tmp_path / "requirements.txt").write_text("axolotl==0.12.0\n")
    out = _cli("check", "ax.yml", cwd=tmp_path)
    assert "TL007 dataset_num_proc is not an axolotl 0.12.0 config key" in out.stdout


@pytest.mark.parametrize("extra", [
    "sequence_len: abc\n", "micro_batch_size: 0\n", "micro_batch_size: x\nbatch_size: 8\n", "plugins: liger\n",
    "plugins:\n  - 3\n  - {a: 1}\n", "fsdp_config: [1, 2]\n", "lora_target_modules: 5\nadapter: lora\n",
    "gradient_checkpointing: offload\n", "attn_implementation: 7\n", "attn_implementation:\n", "bf16: maybe\n",
    "base: &b {x: 1}\nother: *b\n", "deepspeed: {zero_optimization: {stage: 3}}\n", "rl: ebft\n",
    "adapter: [lora]\n", "1: 2\n", "model_type: 5\n",
])
def test_odd_axolotl_values_never_crash(tmp_path, extra):
    text = "base_model: meta-llama/Llama-3.2-1B\nsequence_len: 4096\nmicro_batch_size: 2\n" + extra
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert "TL004" not in {d.code for d in diags}
    out = _cli("estimate", "ax.yml", cwd=tmp_path)
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("extra", [
    "cutoff_len: abc\n", "lora_target: [q_proj, v_proj]\n", "lora_target: 5\n", "flash_attn: 3\n",
    "quantization_bit: '4'\n", "stage: unknown\n", "finetuning_type: [lora]\n", "per_device_train_batch_size: -1\n",
    "use_unsloth: true\n", "disable_gradient_checkpointing: true\n",
])
def test_odd_llamafactory_values_never_crash(tmp_path, extra):
    text = "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\ntemplate: llama3\n" + extra
    diags = _lint(_write(tmp_path, "lf.yaml", text))
    assert "TL004" not in {d.code for d in diags}
    out = _cli("estimate", "lf.yaml", cwd=tmp_path)
    assert "Traceback" not in out.stderr


def test_axolotl_deepseek_v4_kernels_replace_the_eager_kernel(tmp_path):
    text = AX_EAGER + "use_dsv4_kernels: true\n"
    # without the KernelsPlugin listed its key has no effect: eager stays eager
    assert [d.code for d in _lint(_write(tmp_path, "a.yml", text))] == ["TL101", "TL007"]
    text = AX_EAGER.replace("  - axolotl.integrations.cut", "  - axolotl.integrations.kernels.KernelsPlugin\n"
                            "      - axolotl.integrations.cut") + "use_dsv4_kernels: true\n"
    assert _lint(_write(tmp_path, "b.yml", text)) == []


def test_deepspeed_file_named_from_the_repository_root_counts_in_the_estimate(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "examples" / "deepspeed").mkdir(parents=True)
    (tmp_path / "examples" / "deepspeed" / "ds_z3.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "configs").mkdir()
    _write(tmp_path / "configs", "lf.yaml", LF.replace("disabled", "sdpa") + "deepspeed: examples/deepspeed/ds_z3.json\n")
    out = _cli("estimate", "configs/lf.yaml", "--world-size", "8", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "zero3 over 8 GPU(s)" in out.stdout


def test_checking_framework_configs_imports_no_training_library(tmp_path):
    heavy = ("torch", "transformers", "peft", "trl", "accelerate", "datasets", "axolotl", "llamafactory")
    _write(tmp_path, "ax.yml", AX_EAGER)
    _write(tmp_path, "lf.yaml", LF)
    probe = ("import sys\nfrom trainlint.cli import main\ntry:\n"
             f"    main(['check', '--no-cache', {str(tmp_path)!r}])\nexcept SystemExit as e:\n    code = e.code\n"
             f"print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r}), 'EXIT', code)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "HEAVY [] EXIT 1" in r.stdout, r.stdout + r.stderr[-2000:]


def test_yaml_tags_are_never_constructed(tmp_path):
    marker = tmp_path / "ran"
    text = (f"base_model: !!python/object/apply:os.system ['touch {marker}']\nsequence_len: 4096\n"
            "micro_batch_size: 1\n")
    (tmp_path / "ax.yml").write_text(text)
    out = _cli("check", "ax.yml", cwd=tmp_path)
    assert not marker.exists()
    assert "TL005" in out.stdout and out.returncode == 1


def test_fix_keeps_crlf_line_endings_and_a_bom(tmp_path):
    text = textwrap.dedent(LF).replace("\n", "\r\n")
    path = tmp_path / "lf.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    out = _cli("check", "--fix", "lf.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and b"flash_attn: sdpa\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")


def test_json_fix_edits_point_at_the_yaml_value(tmp_path):
    _write(tmp_path, "ax.yml", AX_EAGER)
    (d,) = json.loads(_cli("check", "--output-format", "json", "ax.yml", cwd=tmp_path).stdout)
    assert (d["code"], d["location"], d["end_location"]) == ("TL101", {"row": 9, "column": 1},
                                                             {"row": 9, "column": 27})
    assert d["fix"]["edits"] == [{"content": "sdpa", "location": {"row": 9, "column": 22},
                                  "end_location": {"row": 9, "column": 27}}]


def test_axolotl_base_model_config_names_the_geometry(tmp_path):
    text = AX_EAGER.replace("base_model: meta-llama/Llama-3.2-1B",
                            "base_model: someone/private-finetune\n    base_model_config: meta-llama/Llama-3.2-1B")
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert [d.code for d in diags] == ["TL101"] and "32 heads" in diags[0].message
    assert "model size unknown" in _lint(_write(tmp_path, "b.yml", text.replace("base_model_config:", "x_:")))[-1].message


# LLaMA-Factory's own preference trainers (0.9.2 train/dpo/trainer.py:198, train/kto/trainer.py:168): the loss reads
# the full logits in fp32; DPO on chosen + rejected with the reference's logits unless pref_loss is orpo / simpo.
LF_DPO = """model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: dpo
finetuning_type: lora
pref_loss: sigmoid
template: llama3
cutoff_len: 2048
per_device_train_batch_size: 1
"""


def test_llamafactory_dpo_stage_builds_full_logits_of_both_rows_and_the_reference(tmp_path):
    diags = [d for d in _lint(_write(tmp_path, "dpo.yml", LF_DPO)) if d.code == "TL301"]
    assert [(d.code, d.span.line) for d in diags] == [("TL301", 2)]  # on the `stage:` key
    message = diags[0].message
    assert message.startswith("CustomDPOTrainer.concatenated_forward computes its loss from the model's full logits")
    assert "[2 x 2,048 x 128,256] (2 rows per example)" in message and "reference model's logits" in message
    assert diags[0].fix is None  # Liger is applied without its fused loss outside pt / sft: nothing to switch on


def test_llamafactory_simpo_has_no_reference_and_kto_is_full_logits_too(tmp_path):
    simpo = [d for d in _lint(_write(tmp_path, "simpo.yml", LF_DPO.replace("sigmoid", "simpo"))) if d.code == "TL301"]
    assert len(simpo) == 1 and "reference" not in simpo[0].message
    kto = LF_DPO.replace("stage: dpo", "stage: kto").replace("pref_loss: sigmoid\n", "")
    (tmp_path / "k").mkdir()
    found = [d for d in _lint(_write(tmp_path / "k", "kto.yml", kto)) if d.code == "TL301"]
    assert len(found) == 1 and found[0].message.startswith("CustomKTOTrainer.forward computes its loss")


@pytest.mark.parametrize("value,refused", [("true", True), ("${S2_ATTENTION}", False), ("false", False)])
def test_axolotl_removed_key_is_refused_only_when_set(tmp_path, value, refused):
    # a template's `${VAR}` slot is filled by something else before the run: its value is not known here
    text = AX_EAGER.replace("attn_implementation: eager", f"attn_implementation: sdpa\n    s2_attention: {value}")
    diags = _lint(_write(tmp_path, "ax.yml", text))
    assert [(d.code, d.span.line) for d in diags] == ([("TL007", 10)] if refused else [])


def test_a_config_fix_is_chosen_by_what_the_setting_is_about_not_by_the_code(tmp_path):
    """frameworks/fixes.adapt maps each Setting.target to the config's own key, whichever rule asks for it; a finding
    without a target (or without a setting) gets no YAML edit."""
    from trainlint.diagnostics import ACCUMULATION, ATTENTION, FUSED_LOSS, SETTING_TARGETS, Diagnostic, Setting, Span
    from trainlint.framework_lint import map_config
    from trainlint.frameworks import fixes
    from trainlint.launch.configs import read_config
    from trainlint.launch.framework_config import framework_of

    assert set(fixes._FIXES) == set(SETTING_TARGETS)
    path = _write(tmp_path, "ax.yml", AX_EAGER.replace("micro_batch_size: 2\n", "micro_batch_size: 2\n"
                                                                               "    gradient_accumulation_steps: 1\n"))
    text = path.read_text()
    reading = read_config(path, text)
    mapped, _ = map_config(path, reading, framework_of(reading), Settings(root=tmp_path))

    def fixed(setting):
        diag = Diagnostic("TL990", "some-new-rule", "m", "ax.yml", Span.point(1), setting=setting)
        return fixes.adapt(diag, mapped, text, "sdpa", "llama").fix

    assert fixed(Setting("attn_implementation", "sdpa", target=ATTENTION)).message == "Set attn_implementation: sdpa"
    assert fixed(Setting("gradient_accumulation_steps", 4, target=ACCUMULATION)).message == \
        "Set gradient_accumulation_steps: 4"
    assert "CutCrossEntropyPlugin to plugins:" in fixed(Setting("use_liger_kernel", True, target=FUSED_LOSS)).message
    no_plugin = text.replace("plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin\n", "")
    assert "plugins" not in no_plugin
    assert fixed(Setting("attn_implementation", "sdpa")) is None and fixed(None) is None
    reading = read_config(path, no_plugin)
    mapped, _ = map_config(path, reading, framework_of(reading), Settings(root=tmp_path))
    fix = fixes.adapt(Diagnostic("TL990", "n", "m", "ax.yml", Span.point(1),
                                 setting=Setting("use_liger_kernel", True, target=FUSED_LOSS)),
                      mapped, no_plugin, "sdpa", "llama").fix
    assert "plugins:\n  - axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin" in fix.edits[0].content
    with pytest.raises(ValueError, match="Setting.target"):
        Setting("x", 1, target="speed")
