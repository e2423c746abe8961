"""The estimator against the lessons' worked examples, and `trainlint estimate` end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trainlint.memory import logits_bytes
from trainlint.memory.estimate import Geometry, Plan, estimate, lora_params, weights_bytes

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


def run(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainlint", "estimate", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_estimate_command_text_json_and_verdict():
    r = run("examples/sft_llama3_long_context.py", "--gpu", "A100-80GB")
    assert r.returncode == 0, r.stderr
    assert "Attention scores" in r.stdout and "verdict: A100-80GB" in r.stdout and "fits" in r.stdout
    assert "SDPA / flash attention" in r.stdout
    data = json.loads(run("examples/sft_llama3_long_context.py", "--gpu", "24GB", "--format", "json").stdout)
    assert set(data["consumers"]) == {"weights", "gradients", "optimizer", "activations", "logits", "attention"}
    assert data["gpu"] == {"name": "24 GiB", "bytes": 24 * 1024**3, "gib": 24.0} and data["fits"] is False
    assert data["levers"][0]["saves"] >= data["levers"][-1]["saves"]
    c = data["consumers"]
    # checkpointing: the recomputed layer's eager backward holds about twice its saved scores
    assert c["weights"] + c["optimizer"] <= data["peak"] <= sum(c.values()) + c["attention"] + c["weights"]
    assert data["peak_phase"] in ("start of backward", "optimizer step")


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
