"""Build src/trainlint/knowledge/models.json from cited sources, so the catalog can be refreshed.

Sources (none is fetched from a model hub):
- the litgpt wheel's litgpt/config.py (per-checkpoint geometry transcribed from each checkpoint's config.json, the
  URL in a comment above each entry). Its top-level `configs` statements are plain data (dict literals, loops that
  fill "{}" name templates with "", "-Instruct", ...): they are compiled from the wheel's AST and run with only
  `deepcopy` in scope, never imported with the package. HF `vocab_size` is litgpt's `padded_vocab_size`.
- the llm-analysis wheel's llm_analysis/model_configs/*.json (hidden, layers, heads, vocab, ffn per checkpoint).
- scripts/catalog/curated.json: hand-transcribed entries (each with its citation), the hub ids of the
  llm-analysis files, the model_type of litgpt's names, tie_word_embeddings rules, and real alias names.

    python scripts/build_catalog.py --litgpt /tmp/litgpt/litgpt-0.5.13-py3-none-any.whl \
        --llm-analysis /tmp/llma/llm_analysis-0.2.2-py3-none-any.whl      # re-extract the wheels, then build
    python scripts/build_catalog.py                                          # build from the committed extract

The wheels are not committed: what was read from them is (scripts/catalog/extracted.json), so the test suite can
check that models.json is exactly what this script makes from the committed files.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CURATED = ROOT / "scripts" / "catalog" / "curated.json"
EXTRACTED = ROOT / "scripts" / "catalog" / "extracted.json"
OUTPUT = ROOT / "src" / "trainlint" / "knowledge" / "models.json"
FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
          "intermediate_size")


# -- litgpt ---------------------------------------------------------------------------------------------
def _dataclass_defaults(cls: ast.ClassDef) -> dict:
    out = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            try:
                out[node.target.id] = ast.literal_eval(node.value)
            except ValueError:
                pass  # `field(default_factory=...)`: not geometry
    return out


class _TagLines(ast.NodeTransformer):
    """Adds `_line=N` to every `dict(..., hf_config=...)` so a checkpoint can be cited by its line."""

    def visit_Call(self, node: ast.Call) -> ast.Call:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "dict" and any(k.arg == "hf_config"
                                                                              for k in node.keywords):
            node.keywords.append(ast.keyword(arg="_line", value=ast.Constant(node.lineno)))
        return node


def litgpt_configs(source: str) -> tuple[dict, list[dict]]:
    """(Config dataclass defaults, the raw `configs` list) from the text of litgpt/config.py."""
    tree = ast.parse(source)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config"]
    if not classes:
        raise ValueError("litgpt/config.py: no `class Config`")
    defaults = _dataclass_defaults(classes[0])
    start = tree.body.index(classes[0]) + 1
    data = [n for n in tree.body[start:] if not isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Import,
                                                                ast.ImportFrom))]
    data = [n for n in data if not (isinstance(n, ast.Assign) and isinstance(n.value, ast.DictComp))]
    module = ast.fix_missing_locations(_TagLines().visit(ast.Module(body=data, type_ignores=[])))
    namespace: dict = {"deepcopy": copy.deepcopy, "__builtins__": {"dict": dict, "range": range, "len": len}}
    exec(compile(module, "litgpt/config.py", "exec"), namespace)  # noqa: S102 - data statements only, see above
    return defaults, namespace["configs"]


def _find_multiple(n: int, k: int) -> int:
    return n if n % k == 0 else n + k - (n % k)


def litgpt_geometry(defaults: dict, raw: dict) -> dict:
    """The Config's __post_init__ arithmetic (head_size, padded vocab, query groups, MLP width), on plain data."""
    c = {**defaults, **{k: v for k, v in raw.items() if k != "hf_config"}}
    c["head_size"] = c.get("head_size") or c["n_embd"] // c["n_head"]
    c["padded_vocab_size"] = c.get("padded_vocab_size") or _find_multiple(c["vocab_size"], c["padding_multiple"])
    c["n_query_groups"] = c.get("n_query_groups") or c["n_head"]
    c["intermediate_size"] = c.get("intermediate_size") or 4 * c["n_embd"]
    return c


def litgpt_params(c: dict, tied: bool) -> int:
    """Parameters of litgpt's GPT for a config (litgpt/model.py GPT, Block, CausalSelfAttention, *MLP, LLaMAMoE),
    counting a tied LM head once as transformers' num_parameters() does."""
    e, v, hs = c["n_embd"], c["padded_vocab_size"], c["head_size"]
    affine = not (c["norm_class_name"] == "LayerNorm" and "OLMo" in c["name"])  # elementwise_affine=False
    norm = (2 * e if c["norm_class_name"] == "LayerNorm" else e) if affine else 0

    def norm_of(size: int) -> int:
        return (2 * size if c["norm_class_name"] == "LayerNorm" else size) if affine else 0

    def mlp(inter: int) -> int:
        if c["mlp_class_name"] == "GptNeoxMLP":
            return 2 * e * inter + (inter + e if c["bias"] else 0)
        return 3 * e * inter + (2 * inter + e if c["bias"] else 0)

    q, kv = c["n_head"] * hs, c["n_query_groups"] * hs
    attn = e * (q + 2 * kv) + ((q + 2 * kv) if (c["bias"] or c["attn_bias"]) else 0) + q * e + (e if c["bias"] else 0)
    if c.get("norm_qk"):
        attn += norm_of(q) + norm_of(kv) if c.get("norm_qk_type") == "olmo2" else 2 * norm_of(hs)
    if c["mlp_class_name"] == "LLaMAMoE":
        ffn = e * c["n_expert"] + c["n_expert"] * mlp(c["moe_intermediate_size"] or c["intermediate_size"])
    else:
        ffn = mlp(c["intermediate_size"])
    norms = (norm if c.get("norm_1", True) else 0) + (norm if c.get("post_attention_norm") else 0) + (
        norm if c.get("norm_2", True) and not c.get("shared_attention_norm") else 0) + (
        norm if c.get("post_mlp_norm") else 0)
    head = 0 if tied else v * e + (v if c.get("lm_head_bias") else 0)
    return v * e + c["n_layer"] * (attn + ffn + norms) + norm + head


# -- llm-analysis ------------------------------------------------------------------------------------------
def llm_analysis_geometry(data: dict) -> dict:
    return {"vocab_size": data["vocab_size"], "hidden_size": data["hidden_dim"],
            "num_hidden_layers": data["num_layers"], "num_attention_heads": data["n_head"],
            "num_key_value_heads": data.get("num_key_value_heads") or data["n_head"],
            "head_dim": data["hidden_dim"] // data["n_head"], "intermediate_size": data["ffn_embed_dim"],
            "max_position_embeddings": data.get("max_seq_len"), "model_type": data.get("model_type")}


def gpt2_params(g: dict, positions: int) -> int:
    """transformers GPT2Model: wte + wpe + per block (ln_1, c_attn, c_proj, ln_2, c_fc, c_proj) + ln_f; head tied."""
    h, f = g["hidden_size"], g["intermediate_size"]
    block = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h)
    return g["vocab_size"] * h + positions * h + g["num_hidden_layers"] * block + 2 * h


# -- reading the wheels ------------------------------------------------------------------------------------
def extract(litgpt_wheel: Path | None, llm_analysis_wheel: Path | None) -> dict:
    """What the wheels say, per checkpoint name, with the file and line each value was read from."""
    out: dict = {"litgpt": None, "llm_analysis": None}
    if litgpt_wheel is not None:
        with zipfile.ZipFile(litgpt_wheel) as z:
            text = z.read("litgpt/config.py").decode("utf-8")
        defaults, configs = litgpt_configs(text)
        version = re.search(r"litgpt-([\w.]+)-py3", litgpt_wheel.name)
        out["litgpt"] = {"version": version.group(1) if version else "?", "defaults": defaults, "configs": configs}
    if llm_analysis_wheel is not None:
        with zipfile.ZipFile(llm_analysis_wheel) as z:
            files = {Path(n).stem: json.loads(z.read(n)) for n in sorted(z.namelist())
                     if n.startswith("llm_analysis/model_configs/") and n.endswith(".json")}
        version = re.search(r"llm_analysis-([\w.]+)-py3", llm_analysis_wheel.name)
        out["llm_analysis"] = {"version": version.group(1) if version else "?", "files": files}
    return out


# -- building the catalog ----------------------------------------------------------------------------------
def _first_match(rules: list, ident: str) -> list | None:
    for rule in rules:
        if re.search(rule[0], ident):
            return rule
    return None


def _entry(ident: str, model_type: str, architecture: str, geometry: dict, tie: bool | None, params: int | None,
           source: str, note: str, extra: dict | None = None) -> dict:
    entry = {"id": ident, "aliases": [], "model_type": model_type, "architecture": architecture,
             **{k: geometry.get(k) for k in FIELDS}, "tie_word_embeddings": tie, "num_parameters": params,
             "main_input_name": "input_ids", "max_position_embeddings": geometry.get("max_position_embeddings"),
             "num_local_experts": geometry.get("num_local_experts"),
             "num_experts_per_tok": geometry.get("num_experts_per_tok"),
             "attn_logit_softcapping": geometry.get("attn_logit_softcapping"), "source": source, "note": note}
    entry.update(extra or {})
    return entry


def from_litgpt(extracted: dict, curated: dict, log: list[str]) -> list[dict]:
    if not extracted:
        return []
    out = []
    for raw in extracted["configs"]:
        hf = raw.get("hf_config") or {}
        ident = f"{hf.get('org')}/{hf.get('name')}"
        if ident in curated.get("litgpt_skip", []):
            continue
        kind = _first_match(curated["litgpt_model_types"], ident)
        if kind is None:
            log.append(f"litgpt {ident}: no model_type rule, left out")
            continue
        c = litgpt_geometry(extracted["defaults"], raw)
        geometry = {"vocab_size": c["padded_vocab_size"], "hidden_size": c["n_embd"], "num_hidden_layers": c["n_layer"],
                    "num_attention_heads": c["n_head"], "num_key_value_heads": c["n_query_groups"],
                    "head_dim": c["head_size"], "intermediate_size": c["intermediate_size"],
                    "max_position_embeddings": c["block_size"],
                    "num_local_experts": c["n_expert"] or None, "num_experts_per_tok": c["n_expert_per_token"] or None,
                    "attn_logit_softcapping": c.get("attention_logit_softcapping")}
        tie_rule = _first_match(curated["tie"], ident)
        tie = tie_rule[1] if tie_rule else None
        params = litgpt_params(c, tie) if tie is not None else None
        source = (f"litgpt=={extracted['version']} litgpt/config.py line {raw['_line']} (geometry transcribed there "
                  f"from the checkpoint's config.json; HF vocab_size = padded_vocab_size)")
        note = (f"tie_word_embeddings={tie}: {tie_rule[2]}; num_parameters computed from the geometry "
                f"(scripts/build_catalog.py litgpt_params)" if tie is not None else
                "tie_word_embeddings not confirmed: parameter count left out")
        # a mixture-of-experts config's expert width (litgpt's moe_intermediate_size = HF's; intermediate_size is then
        # the dense MLP width HF also states), so knowledge/moe.py reads the routed layers from the entry
        extra = {"moe_intermediate_size": c["moe_intermediate_size"]} if c["n_expert"] and c.get(
            "moe_intermediate_size") else None
        out.append(_entry(ident, kind[1], kind[2], geometry, tie, params, source, note, extra))
    return out


def from_llm_analysis(extracted: dict, curated: dict, log: list[str]) -> list[dict]:
    if not extracted:
        return []
    out = []
    for stem, data in extracted["files"].items():
        ident = curated["llm_analysis_ids"].get(stem)
        if ident is None:
            continue
        g = llm_analysis_geometry(data)
        if g["model_type"] == "llama":
            g["intermediate_size"] = None  # llm-analysis writes 4 x hidden there, not Llama's MLP width
        kind = _first_match(curated["llm_analysis_model_types"], g["model_type"] or "")
        if kind is None:
            log.append(f"llm-analysis {stem}: model_type {g['model_type']!r} has no rule, left out")
            continue
        tie_rule = _first_match(curated["tie"], ident)
        tie = tie_rule[1] if tie_rule else None
        params, how = None, "parameter count not computed (no formula tested for this architecture)"
        if kind[1] == "gpt2" and tie and g["max_position_embeddings"]:
            params, how = gpt2_params(g, g["max_position_embeddings"]), "num_parameters computed (gpt2_params)"
        source = (f"llm-analysis=={extracted['version']} llm_analysis/model_configs/{stem}.json "
                  f"(hidden, layers, heads, vocab, ffn)")
        note = (f"tie_word_embeddings={tie}: {tie_rule[2]}; " if tie is not None else
                "tie_word_embeddings not confirmed; ") + how
        out.append(_entry(ident, kind[1], kind[2], g, tie, params, source, note))
    return out


def build(extracted: dict, curated: dict, log: list[str] | None = None) -> dict:
    """models.json from the extract and the curated file: curated entries first, then litgpt, then llm-analysis;
    a checkpoint named by several sources keeps the first and lists the others that agree on its geometry."""
    log = log if log is not None else []
    entries: list[dict] = []
    index: dict[str, dict] = {}
    for entry in curated["entries"]:
        entry = dict(entry)
        entry["aliases"] = list(entry.get("aliases", []))
        entries.append(entry)
    for entry in entries:
        for key in (entry["id"], *entry["aliases"]):
            index[key.lower()] = entry
    declared = {alias.lower(): ident.lower() for ident, aliases in curated.get("aliases", {}).items()
                for alias in aliases}
    for entry in from_litgpt(extracted.get("litgpt"), curated, log) + from_llm_analysis(
            extracted.get("llm_analysis"), curated, log):
        known = index.get(entry["id"].lower()) or index.get(declared.get(entry["id"].lower(), ""))
        if known is None:
            entries.append(entry)
            index[entry["id"].lower()] = entry
            continue
        differ = [k for k in FIELDS if known.get(k) is not None and entry.get(k) is not None and known[k] != entry[k]]
        if differ:
            log.append(f"{entry['id']}: {entry['source'].split(' (')[0]} differs from the entry kept on "
                       f"{', '.join(f'{k} {entry[k]} vs {known[k]}' for k in differ)}")
        elif entry["source"].split(" (")[0] not in known["source"]:
            known["source"] += f"; geometry also in {entry['source'].split(' (')[0]}"
    for ident, aliases in curated.get("aliases", {}).items():
        target = index.get(ident.lower())
        if target is None:
            log.append(f"aliases for {ident}: no such entry")
            continue
        for alias in aliases:
            if index.get(alias.lower()) is None or index[alias.lower()] is target and alias not in (
                    target["id"], *target["aliases"]):
                target["aliases"].append(alias)
                index[alias.lower()] = target
                if "re-upload" not in target["note"]:
                    target["note"] += f"; aliases: {curated['alias_source']}"
    entries.sort(key=lambda e: e["id"].lower())
    return {"schema": 1, "generated_by": "scripts/build_catalog.py (do not edit by hand)", "models": entries}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--litgpt", type=Path, help="litgpt wheel (re-extract it)")
    parser.add_argument("--llm-analysis", type=Path, help="llm-analysis wheel (re-extract it)")
    parser.add_argument("--check", action="store_true", help="exit 1 when models.json is not what this builds")
    args = parser.parse_args(argv)
    extracted = json.loads(EXTRACTED.read_text(encoding="utf-8")) if EXTRACTED.exists() else {}
    if args.litgpt or args.llm_analysis:
        fresh = extract(args.litgpt, args.llm_analysis)
        extracted.update({k: v for k, v in fresh.items() if v is not None})
        EXTRACTED.write_text(json.dumps(extracted, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    log: list[str] = []
    text = json.dumps(build(extracted, json.loads(CURATED.read_text(encoding="utf-8")), log), indent=2) + "\n"
    for line in log:
        print(line, file=sys.stderr)
    if args.check:
        return 0 if OUTPUT.read_text(encoding="utf-8") == text else 1
    OUTPUT.write_text(text, encoding="utf-8")
    data = json.loads(text)["models"]
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {len(data)} entries, {sum(1 + len(e['aliases']) for e in data)} ids")
    return 0


if __name__ == "__main__":
    sys.exit(main())
