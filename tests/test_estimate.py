"""The estimator against the lessons' worked examples, and `trainlint estimate` end to end."""

from __future__ import annotations

import json
from dataclasses import replace
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.memory import logits_bytes
from trainlint.memory.estimate import Geometry, Plan, estimate, fix_saving, lora_params, weights_bytes

ROOT = Path(__file__).resolve().parents[1]
LLAMA2_7B = Geometry(vocab=32000, hidden=4096, layers=32, heads=32, kv_heads=32, head_dim=128, intermediate=11008,
                     params=6_738_415_616)
LLAMA31_8B = Geometry(vocab=128256, hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, intermediate=14336,
                      params=8_030_261_248)


def states(e) -> int:
    return e.consumers["weights"] + e.consumers["gradients"] + e.consumers["optimizer"]


def test_full_fine_tuning_an_8b_in_mixed_precision_needs_about_128_gb_of_states():
    # L2's table: 2 (bf16 weights) + 2 (bf16 grads) + 4 (fp32 master) + 8 (Adam) = 16 bytes/param
    e = estimate(Plan(LLAMA31_8B, batch=1, seq=1, master_weights=True))
    assert states(e) == 16 * LLAMA31_8B.params
    assert round(states(e) / 1e9) == 128


def test_zero3_on_8_gpus_is_about_16_gb_of_states_each():
    e = estimate(Plan(LLAMA31_8B, batch=1, seq=1, master_weights=True, sharding="zero3", world_size=8))
    assert round(states(e) / 1e9) == 16


def test_fp32_logits_of_32768_tokens_of_a_128256_vocabulary_are_16_8_gb():
    assert round(logits_bytes(8, 4096, 128256, 4) / 1e9, 1) == 16.8
    # L1: batch 4 x 2,048 x 128k = 1 billion values, 2 GB in bf16, 4 GB in fp32
    assert round(logits_bytes(4, 2048, 128256, 2) / 1e9, 1) == 2.1


def test_qlora_weights_of_a_7b_are_about_3_9_gb_and_adapters_are_small():
    p = Plan(LLAMA2_7B, batch=2, seq=2048, quantization="4bit", lora_r=16, lora_targets=("q_proj", "v_proj"))
    base = weights_bytes(p) - lora_params(LLAMA2_7B, 16, ("q_proj", "v_proj")) * 4
    assert round(base / 1e9, 1) == 3.9  # L1: "about 3.9 GB in 4-bit NF4"
    e = estimate(p)
    # L1's figure: "Adapter gradients and optimiser state 0.2" GB
    assert round((e.consumers["gradients"] + e.consumers["optimizer"]) / 1e9, 1) == 0.1


def test_qlora_7b_at_2048_batch_2_is_around_11_gb():
    """L1 'The estimate before you rent': 3.9 GB weights, negligible gradients and optimiser state,
    5-8 GB of activations, 1 GB of logits (bf16, 128k vocabulary); around 11 GB. With checkpointing and
    the lesson's 128k vocabulary counted at peak (logits + fp32 loss copies), trainlint's peak lands in
    the same range."""
    geo = Geometry(**{**LLAMA2_7B.__dict__, "vocab": 128256})
    e = estimate(Plan(geo, batch=2, seq=2048, quantization="4bit", lora_r=16, checkpointing=True, loss="chunked"))
    assert 8e9 <= e.peak <= 14e9, e.consumers


def test_eager_attention_adds_the_score_matrix_per_layer():
    sdpa = estimate(Plan(LLAMA31_8B, batch=1, seq=8192))
    eager = estimate(Plan(LLAMA31_8B, batch=1, seq=8192, attention="eager"))
    # 32 heads x 8192^2 x 6 bytes per layer, 32 layers, plus one dense bf16 mask
    assert eager.consumers["attention"] == 32 * (32 * 8192**2 * 6) + 8192**2 * 2
    assert sdpa.consumers["attention"] == 0
    sdpa_lever = next(lv for lv in eager.levers if lv.name.startswith("SDPA"))
    assert sdpa_lever.saves == eager.consumers["attention"]
    assert [lv.saves for lv in eager.levers] == sorted((lv.saves for lv in eager.levers), reverse=True)


def test_sdpa_on_the_math_kernel_keeps_fp32_scores_per_layer_and_its_lever_is_the_peak_difference():
    # fp32 Llama-3.1-8B geometry (grouped-query heads): knowledge/sdpa.py says math; 4 B per score, no dense mask
    plan = Plan(LLAMA31_8B, batch=1, seq=4096, dtype_bytes=4, act_bytes=4, attention="sdpa-math")
    math = estimate(plan)
    assert math.consumers["attention"] == 32 * (32 * 4096**2 * 4)
    fused = estimate(Plan(LLAMA31_8B, batch=1, seq=4096, dtype_bytes=4, act_bytes=4))
    lever = next(lv for lv in math.levers if lv.name.startswith("a fused SDPA kernel"))
    assert lever.saves == fix_saving(plan, "TL102") == math.peak - fused.peak > 0
    checkpointed = estimate(Plan(LLAMA31_8B, batch=1, seq=4096, dtype_bytes=4, act_bytes=4, attention="sdpa-math",
                                 checkpointing=True))
    assert checkpointed.consumers["attention"] == 32 * 4096**2 * 4  # only the layer being recomputed


def run(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "estimate", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_estimate_command_text_json_and_verdict():
    r = run("examples/sft_llama3_long_context.py", "--gpu", "H200")
    assert r.returncode == 0, r.stderr
    assert "Recomputed layer's attention backward" in r.stdout and "verdict: H200" in r.stdout and "fits" in r.stdout
    assert "SDPA / flash attention" in r.stdout
    # eager at 8k with checkpointing on CUDA (bench/estimate_gpu.py): no longer fits an 80 GiB card
    assert run("examples/sft_llama3_long_context.py", "--gpu", "A100-80GB").returncode == 1
    data = json.loads(run("examples/sft_llama3_long_context.py", "--gpu", "24GB", "--format", "json").stdout)
    assert set(data["consumers"]) == {"weights", "gradients", "optimizer", "activations", "logits", "attention"}
    assert data["gpu"] == {"name": "24 GiB", "bytes": 24 * 1024**3, "gib": 24.0} and data["fits"] is False
    assert data["levers"][0]["saves"] >= data["levers"][-1]["saves"]
    # the rows are what is live at the peak moment, and they add up to it
    assert sum(row["bytes"] for row in data["rows"]) == data["peak"] == data["moments"][data["peak_phase"]]
    assert data["peak_phase"] == "backward of a recomputed layer"
    assert [row["name"] for row in data["rows"]] == ["weights", "optimizer", "checkpoints", "gradients", "recomputed",
                                                     "recomputed_attention"]
    assert max(data["moments"].values()) == data["peak"]


def test_overrides_and_unknown_shape_say_so(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import sys\nfrom transformers import AutoModelForCausalLM\n"
                      "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', dtype='bfloat16')\n"
                      "loader = DataLoader(ds, batch_size=int(sys.argv[1]))\n")
    data = json.loads(run(str(script), "--format", "json", "--gpu", "H100").stdout)
    assert data["unknown"] == ["batch", "sequence length"] and data["consumers"]["activations"] is None
    assert data["peak_is_lower_bound"] is True and data["fits"] is None
    data = json.loads(run(str(script), "--format", "json", "--batch", "4", "--seq", "4096").stdout)
    assert data["unknown"] == [] and data["consumers"]["logits"] == 4 * 4096 * 128256 * 12


def test_bad_input_is_a_clear_error(tmp_path):
    assert run("nope.py").returncode == 2
    (tmp_path / "x.py").write_text("from transformers import AutoModelForCausalLM\n"
                                   "m = AutoModelForCausalLM.from_pretrained('my-org/private')\n")
    r = run(str(tmp_path / "x.py"))
    assert r.returncode == 2 and "is unknown" in r.stderr and "Traceback" not in r.stderr
    r = run("examples/qlora_clean.py", "--gpu", "GTX-9000")
    assert r.returncode == 2 and "unknown GPU" in r.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (.ci/run installs it)")
def test_html_page_is_self_contained_and_renders_in_a_real_browser(tmp_path):
    page = tmp_path / "est.html"
    assert run("examples/full_finetune_qwen.py", "--gpu", "A100-80GB", "--format", "html", "-o", str(page)).returncode == 0
    text = page.read_text()
    assert "<svg" in text and "<script" not in text and "http://" not in text.replace(
        "http://www.w3.org/2000/svg", "") and "https://" not in text
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,900", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    # the chart drew: count pixels of the weights bar colour (#4e79a7) in the raw image
    pixels = _decode_png(data)
    assert sum(1 for px in pixels if px == (0x4E, 0x79, 0xA7)) > 2000


def _decode_png(data: bytes) -> list[tuple[int, int, int]]:
    """A minimal PNG reader (8-bit RGB/RGBA, non-interlaced) so the test needs no imaging library."""
    import struct
    import zlib

    pos, width, height, ctype, idat = 8, 0, 0, 0, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, _, ctype = struct.unpack(">IIBB", chunk[:10])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    bpp = 4 if ctype == 6 else 3
    raw = zlib.decompress(idat)
    stride = width * bpp
    out, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.extend(tuple(line[x * bpp:x * bpp + 3]) for x in range(width))
        prev = line
    return out


# -- the verdict as an exit code, and --max-batch (issue 26, parts 5 and 6) --------------------------------------
# Ground truth: the estimator itself. LLAMA_1B (conftest) needs ~38 GiB at batch 8 x 2,048: it fits an 80 GB card,
# not a 24 GB one; --max-batch must agree with the gate run at the batch it names and the one above it.

def estimate_cli(tmp_path, source: str, *args: str):
    from click.testing import CliRunner

    from trainlint.cli import main

    (tmp_path / "train.py").write_text(source)
    return CliRunner().invoke(main, ["estimate", str(tmp_path / "train.py"), *args])


def test_exit_code_is_the_verdict_with_gpu(tmp_path):
    from conftest import LLAMA_1B

    fits = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "A100 80GB")
    assert fits.exit_code == 0 and "A100-80GB (80.0 GiB): fits" in fits.output
    over = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "rtx-4090")
    assert over.exit_code == 1 and "RTX-4090 (24.0 GiB): does NOT fit" in over.output
    assert estimate_cli(tmp_path, LLAMA_1B).exit_code == 0  # no --gpu: an estimate was printed
    as_json = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "4090", "--format", "json")
    assert as_json.exit_code == 1 and json.loads(as_json.output)["fits"] is False
    unknown_gpu = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "GH200")
    assert unknown_gpu.exit_code == 2 and "unknown GPU 'GH200'" in unknown_gpu.output


def test_cannot_say_is_exit_2(tmp_path):
    from conftest import LLAMA_1B

    no_length = LLAMA_1B.replace('data = tokenizer(["..."], max_length=2048, truncation=True)\n', "")
    r = estimate_cli(tmp_path, no_length, "--gpu", "H200")
    assert r.exit_code == 2 and "cannot say: sequence length unknown" in r.output
    # a lower bound already over the card is a "does not fit", unknown length or not
    assert estimate_cli(tmp_path, no_length, "--gpu", "4GB").exit_code == 1
    private = LLAMA_1B.replace("meta-llama/Llama-3.2-1B", "my-org/private")
    r = estimate_cli(tmp_path, private, "--gpu", "H100")
    assert r.exit_code == 2 and "is unknown" in r.output


def _largest(output: str) -> int:
    import re

    return int(re.search(r"largest micro-batch that fits .*: (\d+) per device", output).group(1))


def test_max_batch_is_the_largest_batch_the_gate_passes(tmp_path):
    from conftest import LLAMA_1B

    r = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "RTX4090", "--max-batch")
    assert r.exit_code == 0, r.output
    largest = _largest(r.output)
    assert 1 <= largest < 8  # batch 8 does not fit a 24 GB card
    assert estimate_cli(tmp_path, LLAMA_1B, "--gpu", "RTX4090", "--batch", str(largest)).exit_code == 0
    assert estimate_cli(tmp_path, LLAMA_1B, "--gpu", "RTX4090", "--batch", str(largest + 1)).exit_code == 1
    steps = -(-8 // largest)
    assert f"gradient_accumulation_steps={steps}" in r.output and "effective batch of 8" in r.output
    data = json.loads(estimate_cli(tmp_path, LLAMA_1B, "--gpu", "RTX4090", "--max-batch", "--format", "json").output)
    assert data["max_batch"]["batch"] == largest and data["max_batch"]["gradient_accumulation_steps"] == steps
    assert data["max_batch"]["effective_batch"] == 8 and data["fits"] is False
    # an 80 GB card takes more than the script's 8
    assert _largest(estimate_cli(tmp_path, LLAMA_1B, "--gpu", "A100-80GB", "--max-batch").output) > 8


def test_max_batch_keeps_the_scripts_accumulation(tmp_path):
    from conftest import LLAMA_1B

    accumulating = LLAMA_1B.replace("use_liger_kernel=True", "use_liger_kernel=True, gradient_accumulation_steps=3")
    data = json.loads(estimate_cli(tmp_path, accumulating, "--gpu", "4090", "--max-batch", "--format", "json").output)
    mb = data["max_batch"]
    assert mb["effective_batch"] == 24
    assert mb["gradient_accumulation_steps"] == -(-24 // mb["batch"])
    assert mb["exact"] is (24 % mb["batch"] == 0)


LOOP = """
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer

accelerator = Accelerator(gradient_accumulation_steps=2)
tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.2-1B")
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", dtype=torch.bfloat16)
loader = DataLoader(tokenizer(["..."], max_length=2048, truncation=True), batch_size=8)
optimizer = torch.optim.AdamW(model.parameters())
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
"""


def test_max_batch_reads_a_loops_accumulation(tmp_path):
    data = json.loads(estimate_cli(tmp_path, LOOP, "--gpu", "4090", "--max-batch", "--format", "json").output)
    mb = data["max_batch"]
    assert mb["effective_batch"] == 16 and mb["gradient_accumulation_steps"] == -(-16 // mb["batch"])


def test_max_batch_says_when_no_whole_number_of_steps_keeps_the_effective_batch(tmp_path):
    from conftest import LLAMA_1B

    # a card just over what batch 3 needs (peak + the CUDA overhead, from the tool's own JSON): 3 fits, 4 does not
    at_3 = json.loads(estimate_cli(tmp_path, LLAMA_1B, "--batch", "3", "--format", "json").output)
    gib = (at_3["peak"] + at_3["cuda_overhead"]) / 1024**3 + 0.05
    r = estimate_cli(tmp_path, LLAMA_1B, "--gpu", f"{gib:.2f}GB", "--max-batch")
    assert r.exit_code == 0 and _largest(r.output) == 3
    assert ("gradient_accumulation_steps=3 gives 9 per device, not the script's 8" in r.output
            and "micro-batch 2 with gradient_accumulation_steps=4 keeps it exactly" in r.output)


def test_max_batch_none_fits_unknown_or_no_gpu(tmp_path):
    from conftest import LLAMA_1B

    r = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "4GB", "--max-batch")
    assert r.exit_code == 1 and "not even a micro-batch of 1 fits 4 GiB" in r.output
    no_length = LLAMA_1B.replace('data = tokenizer(["..."], max_length=2048, truncation=True)\n', "")
    r = estimate_cli(tmp_path, no_length, "--gpu", "H100", "--max-batch")
    assert r.exit_code == 2 and "largest micro-batch: cannot say: sequence length unknown" in r.output
    assert estimate_cli(tmp_path, no_length, "--gpu", "H100", "--max-batch", "--seq", "2048").exit_code == 0
    r = estimate_cli(tmp_path, LLAMA_1B, "--max-batch")
    assert r.exit_code == 2 and "--max-batch needs a GPU" in r.output


def test_readme_max_batch_example_is_the_tools_output(tmp_path):
    import re

    from conftest import LLAMA_1B

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"\$ trainlint estimate train.py --gpu RTX4090 --max-batch.*?\n(.*?)```", readme, re.S).group(1)
    out = estimate_cli(tmp_path, LLAMA_1B, "--gpu", "RTX4090", "--max-batch").output
    for line in block.strip().splitlines():
        assert line in out


# -- issue 26: what is live at the peak, the recomputed layer on CUDA, tied embeddings, the CUDA context ----------

LLAMA32_1B = Geometry(vocab=128256, hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, intermediate=8192,
                      params=1_235_814_400, tied=True)


@pytest.mark.parametrize("plan", [
    Plan(LLAMA32_1B, batch=1, seq=8192, attention="eager", checkpointing=True),
    Plan(LLAMA32_1B, batch=4, seq=2048),
    Plan(LLAMA32_1B, batch=2, seq=2048, dtype_bytes=4, act_bytes=4, attention="sdpa-math"),
    Plan(LLAMA32_1B, batch=1, seq=64, dtype_bytes=4, act_bytes=4, optimizer="sgd", checkpointing=True),
    Plan(LLAMA31_8B, batch=8, seq=4096, lora_r=16, checkpointing=True, loss="liger"),
    Plan(LLAMA31_8B, batch=2, seq=2048, sharding="zero3", world_size=8),
], ids=["eager-gc", "sdpa", "math", "tied-sgd", "lora-liger", "zero3"])
def test_the_rows_are_what_is_live_at_the_peak_and_add_up_to_it(plan):
    e = estimate(plan)
    assert sum(b for _, b in e.rows) == e.peak == max(m.total for m in e.moments)
    assert e.peak_phase in {m.name for m in e.moments} and all(b > 0 for _, b in e.rows)


def test_eager_recompute_on_cuda_bills_the_fp32_softmax_gradient_and_cpu_does_not():
    from trainlint.memory import eager_backward_bytes_per_score

    # bench/gpu_eager_gc_probe.py on the H200: the fp32 softmax costs 8 B per score of the recomputed layer, of which
    # the saved output (4) was billed; the CPU MemTracker measured 2 x (2 + 4) for the same step
    assert eager_backward_bytes_per_score(2) == 16 and eager_backward_bytes_per_score(2, device="cpu") == 12
    # an fp32 Llama saves its softmax's fp32 output only (4 B, saved_tensors_hooks count), but is billed dtype + 4 = 8
    # per score as before: verify's eager-vs-SDPA peak saving on a 2-layer fp32 model measured 7.6 B per score
    # (memory.eager_bytes_per_score); no separate fp32 gradient on CUDA either
    assert eager_backward_bytes_per_score(4) == eager_backward_bytes_per_score(4, device="cpu") == 16
    plan = Plan(LLAMA32_1B, batch=1, seq=8192, attention="eager", checkpointing=True)
    cuda, cpu = estimate(plan), estimate(Plan(**{**plan.__dict__, "device": "cpu"}))
    assert cuda.peak - cpu.peak == 4 * 32 * 8192**2  # one layer's scores x the fp32 gradient's 4 bytes
    assert cuda.peak_phase == "backward of a recomputed layer"
    assert dict(cuda.rows)["recomputed_attention"] == 32 * 8192**2 * 16 + 2 * 8192**2 * 2


def test_a_tied_embedding_with_sgd_peaks_at_the_end_of_backward():
    # bench/live_measurements.json live_wide-tied_sdpa_s64_b1_full_sgd_fp32_gc: 552.0 MiB measured on real CPU tensors;
    # 299 MiB before this moment was modelled (-45.9%)
    g = Geometry(vocab=65536, hidden=512, layers=2, heads=8, kv_heads=8, head_dim=64, intermediate=1024,
                 params=38_802_432, tied=True)
    e = estimate(Plan(g, batch=1, seq=64, dtype_bytes=4, act_bytes=4, optimizer="sgd", checkpointing=True))
    assert e.peak_phase == "end of backward"
    assert dict(e.rows)["embedding_sum"] == 2 * 65536 * 512 * 4
    untied = estimate(Plan(replace(g, tied=False), batch=1, seq=64, dtype_bytes=4, act_bytes=4, optimizer="sgd",
                           checkpointing=True))
    assert all(m.name != "end of backward" for m in untied.moments)
    lora = estimate(Plan(g, batch=1, seq=64, lora_r=8, optimizer="sgd"))  # a frozen embedding has no gradient
    assert all(m.name != "end of backward" for m in lora.moments)


def test_a_config_without_tie_word_embeddings_takes_its_architectures_default(tmp_path):
    model = tmp_path / "models" / "gemma2"
    model.mkdir(parents=True)
    model.joinpath("config.json").write_text(json.dumps({
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "vocab_size": 256000, "hidden_size": 2304,
        "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
        "intermediate_size": 9216}))
    (tmp_path / "train.py").write_text(
        "import torch\nfrom transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
        "model = AutoModelForCausalLM.from_pretrained('models/gemma2', dtype=torch.bfloat16)\n"
        "args = TrainingArguments('out', per_device_train_batch_size=1, gradient_checkpointing=True, optim='sgd')\n"
        "Trainer(model=model, args=args, train_dataset=ds).train()\n")
    data = json.loads(run("train.py", "--seq", "1024", "--format", "json", cwd=tmp_path).stdout)
    assert any("gemma2's config class defaults it to True" in a for a in data["assumptions"])
    # Gemma-2-2B's 2.61 B parameters count the 256,000 x 2,304 embedding once
    assert "2.61 B parameters" in data["model"]
    assert data["peak_phase"] == "end of backward"


def test_the_cuda_context_is_a_separate_measured_line():
    from trainlint.memory.estimate import CUDA_OVERHEAD

    # ../shared/gpu-truth/trl-sft-vs-trainer-h200.json (bench/estimate_gpu.py's folder), where this machine has it
    measured = Path(os.environ.get("TRAINLINT_GPU_TRUTH", "/work/shared/gpu-truth")) / "trl-sft-vs-trainer-h200.json"
    assert CUDA_OVERHEAD == 648_871_936
    if measured.exists():
        assert json.loads(measured.read_text())["context_bytes_used_by_process_estimate"] == CUDA_OVERHEAD
    r = run("examples/sft_llama3_long_context.py", "--gpu", "H200")
    assert "+ CUDA context and allocator, one process (measured on an H200), not in the rows: ~619 MiB" in r.stdout


def test_levers_offer_4bit_base_weights_to_a_lora_run_and_shorter_sequences_at_batch_1():
    names = [lv.name for lv in estimate(Plan(LLAMA31_8B, batch=1, seq=4096, lora_r=16, checkpointing=True)).levers]
    assert "4-bit base weights (QLoRA: load_in_4bit)" in names
    assert "sequences of 2,048 tokens instead of 4,096" in names
    names = [lv.name for lv in estimate(Plan(LLAMA31_8B, batch=4, seq=4096, lora_r=16, quantization="4bit")).levers]
    assert not any(n.startswith("4-bit base") or n.startswith("sequences of") for n in names)


@pytest.mark.parametrize("lora", [True, False])
def test_gemma3_norms_keep_what_the_sandwich_and_qk_norm_terms_count(lora):
    """Every tensor the six Gemma3RMSNorms of a Gemma 3 decoder layer save (input, post-attention, pre- and
    post-feedforward, q_norm, k_norm; counted with saved_tensors_hooks active only inside those modules; the second
    layer, whose input requires grad under LoRA as every layer's but the first does) against
    the estimate's terms: the Llama count's two norms (4 bytes per hidden element, 6 with a trained weight), the
    sandwich difference and the q/k norm term."""
    torch = pytest.importorskip("torch")
    from peft import LoraConfig, get_peft_model
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    from trainlint.memory.estimate import qk_norm_bytes_per_token, sandwich_norm_bytes_per_token

    h, f, nh, kv, hd, n = 256, 512, 8, 4, 64, 64
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        model = Gemma3ForCausalLM._from_config(Gemma3TextConfig(
            hidden_size=h, intermediate_size=f, num_hidden_layers=2, num_attention_heads=nh, num_key_value_heads=kv,
            head_dim=hd, vocab_size=100, query_pre_attn_scalar=hd), attn_implementation="sdpa")
        if lora:
            model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
        model.train()
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        norms = [m for name, m in model.named_modules() if type(m).__name__ == "Gemma3RMSNorm" and ".layers.1." in name]
        assert len(norms) == 6
        storages: dict[int, int] = {}
        hooks = torch.autograd.graph.saved_tensors_hooks(
            lambda t: storages.__setitem__(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) or t,
            lambda t: t)
        for m in norms:
            m.register_forward_pre_hook(lambda *_: hooks.__enter__())
            m.register_forward_hook(lambda *_: hooks.__exit__(None, None, None))
        model(input_ids=torch.randint(0, 100, (1, n)))
    finally:
        torch.set_default_dtype(previous)
    # each norm's (1 + weight) in fp32 is one vector per layer, not per token
    vectors = 4 * (4 * h + 2 * hd)
    kept = sum(b for ptr, b in storages.items() if ptr not in params) - vectors
    g = Geometry(vocab=100, hidden=h, layers=1, heads=nh, kv_heads=kv, head_dim=hd, intermediate=f, params=0,
                 sandwich_norms=True, qk_norms=4)
    llama_two = 2 * (4 + (0 if lora else 2)) * h
    rsqrt = 4 * 4  # the four hidden-size norms' rsqrt per token, below the per-hidden-element count
    assert kept == n * (llama_two + sandwich_norm_bytes_per_token(g, lora) + qk_norm_bytes_per_token(g, lora) + rsqrt)


def test_gemma3_text_measurements_stay_within_one_percent():
    """bench/gemma3_text_measurements.json (Gemma-3-1B-it, b2 x 1024, no checkpointing, fake tensors at full size)
    against the estimate of bench/vlm/gemma3_1b_text.py with each row's shape, as measured (the model's full-logits
    loss, CPU kernels). Before gemma3_text had the sandwich and q/k norms: -9.4% (full) and -6.1% (LoRA)."""
    from trainlint.config import Settings
    from trainlint.lint import lint_file
    from trainlint.planning import Overrides, plan_for

    root = Path(__file__).resolve().parents[1] / "bench"
    script = root / "vlm" / "gemma3_1b_text.py"
    base = plan_for(lint_file(script, Settings(root=script.parent), set()).context, Overrides())[0]
    rows = json.loads((root / "gemma3_text_measurements.json").read_text())["configs"]
    assert len(rows) == 2
    for rec in rows:
        assert rec["params"] - (rec["trainable_params"] if rec["lora_r"] else 0) == base.geometry.params
        plan = replace(base, seq=rec["seq"], batch=rec["batch"], loss="full", optimizer="adamw_torch_fused",
                       device="cpu", lora_r=rec["lora_r"],
                       lora_targets=tuple(rec["target_modules"]) if rec["lora_r"] else base.lora_targets)
        err = 100 * (estimate(plan).peak - rec["peak"]) / rec["peak"]
        assert abs(err) <= 1, (rec["name"], err)


def _qk_norm_saved_bytes(family: str, lora: bool, dtype_name: str, h=256, nh=8, kv=4, n=64) -> tuple[int, Geometry]:
    """The bytes autograd saves inside the q_norm and k_norm of the second decoder layer of a tiny `family` model
    (saved_tensors_hooks active only inside those two modules; parameters left out: a frozen weight is saved as
    itself), and the Geometry the estimate builds for that family (run/model.py's QK_NORMS_FP32 fields)."""
    torch = pytest.importorskip("torch")
    import transformers
    from peft import LoraConfig, get_peft_model

    from trainlint.knowledge.libraries import QK_NORMS_FP32, QK_NORMS_WHOLE_PROJECTION

    hd = h // nh
    common = dict(hidden_size=h, intermediate_size=2 * h, num_hidden_layers=2, num_attention_heads=nh,
                  num_key_value_heads=kv, vocab_size=100)
    cls, cfg = {
        "qwen3": (transformers.Qwen3ForCausalLM, transformers.Qwen3Config(head_dim=hd, **common)),
        "qwen3_moe": (transformers.Qwen3MoeForCausalLM, transformers.Qwen3MoeConfig(
            head_dim=hd, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, **common)),
        "olmo2": (transformers.Olmo2ForCausalLM, transformers.Olmo2Config(**common)),
        "olmoe": (transformers.OlmoeForCausalLM, transformers.OlmoeConfig(num_experts=4, num_experts_per_tok=2,
                                                                           **common)),
    }[family]
    previous = torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype_name))
    try:
        model = cls._from_config(cfg, attn_implementation="sdpa")
        if lora:
            model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
        model.train()
        params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        norms = [m for name, m in model.named_modules()
                 if ".layers.1." in name and name.rsplit(".", 1)[-1] in ("q_norm", "k_norm")]
        assert len(norms) == 2
        storages: dict[int, int] = {}
        hooks = torch.autograd.graph.saved_tensors_hooks(
            lambda t: storages.__setitem__(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) or t,
            lambda t: t)
        for m in norms:
            m.register_forward_pre_hook(lambda *_: hooks.__enter__())
            m.register_forward_hook(lambda *_: hooks.__exit__(None, None, None))
        model(input_ids=torch.randint(0, 100, (1, n)))
    finally:
        torch.set_default_dtype(previous)
    kept = sum(b for ptr, b in storages.items() if ptr not in params)
    g = Geometry(vocab=100, hidden=h, layers=1, heads=nh, kv_heads=kv, head_dim=hd, intermediate=2 * h, params=0,
                 qk_norms=QK_NORMS_FP32[family], qk_norm_per_head=family not in QK_NORMS_WHOLE_PROJECTION)
    return kept, g


@pytest.mark.parametrize("family,lora,dtype_name", [
    ("qwen3", True, "bfloat16"), ("qwen3", False, "bfloat16"), ("qwen3", False, "float32"),
    ("qwen3_moe", True, "bfloat16"), ("olmo2", True, "bfloat16"), ("olmo2", False, "bfloat16"),
    ("olmoe", False, "bfloat16")])
def test_q_k_norms_keep_what_the_qk_norm_term_counts(family, lora, dtype_name):
    """Qwen3 / Qwen3-MoE normalise each head (a row per head: 4-byte rsqrt each), OLMo2 / OLMoE each whole projection
    (one row per token for q and one for k); Qwen3's and OLMoE's trained weight keeps the normalised output in the
    model dtype (2 bytes in bf16, 4 in fp32), OLMo2's keeps its fp32 product (4); a LoRA-frozen weight keeps none."""
    from trainlint.memory.estimate import qk_norm_bytes_per_token

    n = 64
    kept, g = _qk_norm_saved_bytes(family, lora, dtype_name, n=n)
    act_bytes = 4 if dtype_name == "float32" else 2
    assert kept == n * qk_norm_bytes_per_token(g, lora, act_bytes)
    assert kept > 0


def test_qwen3_text_measurements_stay_within_one_percent():
    """bench/qwen3_text_measurements.json (bench/measure_qwen3_text.py: Qwen3-8B LoRA r=16 q/k/v/o_proj with and
    without checkpointing, Qwen3-4B full fine-tuning without; b1 x 2048, fake tensors at full size) against the
    estimate of bench/vlm/qwen3_8b_text.py / qwen3_4b_text.py with each row's shape, as measured (the model's
    full-logits loss, CPU kernels). Before qwen3 had its per-head q/k norms the rows without checkpointing were -4.1%
    (8B LoRA) and -6.2% (4B full)."""
    from trainlint.config import Settings
    from trainlint.lint import lint_file
    from trainlint.planning import Overrides, plan_for

    root = Path(__file__).resolve().parents[1] / "bench"
    rows = json.loads((root / "qwen3_text_measurements.json").read_text())["configs"]
    assert len(rows) == 3
    for rec in rows:
        script = root / "vlm" / ("qwen3_8b_text.py" if rec["model_id"] == "Qwen/Qwen3-8B" else "qwen3_4b_text.py")
        base = plan_for(lint_file(script, Settings(root=script.parent), set()).context, Overrides())[0]
        assert base.geometry.qk_norms == 2 and base.geometry.qk_norm_per_head
        assert rec["params"] - (rec["trainable_params"] if rec["lora_r"] else 0) == base.geometry.params
        plan = replace(base, seq=rec["seq"], batch=rec["batch"], loss="full", optimizer="adamw_torch_fused",
                       device="cpu", lora_r=rec["lora_r"], checkpointing=rec["gradient_checkpointing"],
                       lora_targets=tuple(rec["target_modules"]) if rec["lora_r"] else base.lora_targets)
        err = 100 * (estimate(plan).peak - rec["peak"]) / rec["peak"]
        assert abs(err) <= 1, (rec["name"], err)
