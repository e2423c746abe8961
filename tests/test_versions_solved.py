"""Versions solved together with what each release requires of the others (issue 25 item 5): the wheels'
Requires-Dist (knowledge/requires_dist.json, scripts/gen_requires_dist.py) next to the project's pins, ranges and the
file's calls; an unpinned library is the newest release the rest admits; the findings name the releases they were
judged on.

Shapes: a repository pinning an old trl and leaving transformers open; one pinning an old transformers and leaving trl
open; two pins no releases satisfy together."""

import importlib.util
import json
from pathlib import Path

from conftest import codes
from trainlint.config import Settings
from trainlint.knowledge.versions import decide_versions, metadata_requires, project_pins
from trainlint.lint import lint_file
from trainlint.report.formats import render
from trainlint.codes import enabled_codes

NEO = '''
from transformers import AutoModelForCausalLM
from trl import SFTTrainer

model = AutoModelForCausalLM.from_pretrained("EleutherAI/gpt-neo-125m")
enc = tokenizer(texts, max_length=2048, truncation=True)
'''


def _script(tmp_path: Path, requirements: str) -> Path:
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "requirements.txt").write_text(requirements)
    script = tmp_path / "train.py"
    script.write_text("")
    return script


def _generator():
    path = Path(__file__).resolve().parents[1] / "scripts" / "gen_requires_dist.py"
    spec = importlib.util.spec_from_file_location("gen_requires_dist", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generator_keeps_only_unconditional_requirements_on_the_three_libraries():
    metadata = ("Metadata-Version: 2.1\nName: trl\nVersion: 9.9.9\n"
                "Requires-Dist: torch>=1.4.0\n"
                "Requires-Dist: transformers (>=4.31.0)\n"
                "Requires-Dist: transformers!=4.57.0; python_version == \"3.9\"\n"
                "Requires-Dist: peft>=0.8.0; extra == \"peft\"\n"
                "Requires-Dist: accelerate\n"
                "\nRequires-Dist: transformers<1 (in the description, not a header)\n")
    assert _generator().requires(metadata) == {"transformers": ">=4.31.0"}


def test_the_table_holds_what_the_wheels_say():
    assert metadata_requires("trl", "0.12.2") == {"transformers": "<4.47.0"}
    assert metadata_requires("trl", "0.12.1") == {"transformers": ">=4.46.0"}
    assert metadata_requires("trl", "1.16.0") == {"transformers": ">=4.56.2"}
    assert metadata_requires("trl", "0.7.10") == {"transformers": ">=4.31.0"}
    assert metadata_requires("peft", "0.21.2") == {"transformers": ""}  # no bound
    assert metadata_requires("trl", "0.11.9") == metadata_requires("trl", "0.11.4")  # a later patch: its line's
    assert metadata_requires("trl", "7.0.0") == {}  # a line not read: no bound
    data = json.loads((Path(__file__).resolve().parents[1] / "src" / "trainlint" / "knowledge" /
                       "requires_dist.json").read_text())
    assert len(data["requires"]["trl"]) == 87 and "Requires-Dist" in data["generated_by"]


def test_a_pinned_trl_bounds_an_unpinned_transformers_by_its_requirement(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.12.2\n"), (), {})
    assert (v.trl.version, v.transformers.version) == ("0.12.2", "4.46.3")  # not 5.25.0
    assert v.transformers.bounded_by == "trl 0.12.2 requires transformers<4.47.0"
    assert not v.conflicts
    # trl 0.12's code passes Trainer(processing_class=) (RELEASE_REQUIRES): the lower bound its wheel lost
    v = decide_versions(_script(tmp_path, "trl==0.12.2\ntransformers<4.47\n"), (), {})
    assert v.transformers.version == "4.46.3"
    v = decide_versions(_script(tmp_path, "trl==0.12.2\ntransformers<4.46\n"), (), {})
    assert [c.library for c in v.conflicts] == ["transformers"]


def test_an_old_trl_pin_never_gets_transformers_5(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.7.10\n"), (), {})
    assert v.transformers.tuple[0] == 4 and v.transformers.version == "4.57.6"


def test_a_pinned_transformers_bounds_an_unpinned_trl_in_reverse(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "transformers==4.40.0\n"), (), {})
    assert v.transformers.version == "4.40.0"
    assert v.trl.version == "0.11.4"  # 0.12.x needs 4.46 (processing_class=); 0.11.4 asks >=4.40.0
    assert v.trl.bounded_by == "trl 1.16.0 requires transformers>=4.56.2, which transformers 4.40.0 rules out"
    v = decide_versions(_script(tmp_path, "transformers>=4.36,<4.40\n"), (), {})
    assert (v.transformers.version, v.trl.version) == ("4.39.3", "0.10.1")  # 0.11 asks >=4.40.0
    v = decide_versions(_script(tmp_path, ""), (), {})
    assert (v.transformers.version, v.trl.version) == ("5.25.0", "1.16.0")  # nothing pinned: the newest of each
    assert not v.transformers.bounded_by and not v.trl.bounded_by


def test_the_file_s_calls_and_the_requirements_hold_together(tmp_path: Path):
    """`Trainer(tokenizer=)` (gone in transformers 5.0) with trl unpinned: transformers 4.57.6, and trl the newest
    whose wheel admits it."""
    from trainlint.knowledge.api_versions import Bound, Evidence

    calls = {"transformers": Bound("transformers", (Evidence("transformers", "Trainer(tokenizer=)", 7, None, (5,),
                                                             "test"),))}
    v = decide_versions(_script(tmp_path, "trl<0.13\n"), (), {}, calls)
    assert (v.trl.version, v.transformers.version) == ("0.12.2", "4.46.3")
    v = decide_versions(_script(tmp_path, ""), (), {}, calls)
    assert (v.trl.version, v.transformers.version) == ("1.16.0", "4.57.6")


def test_settings_are_taken_as_written(tmp_path: Path):
    v = decide_versions(_script(tmp_path, "trl==0.12.2\n"), (), {"transformers": "5.25.0"})
    assert v.transformers.version == "5.25.0" and not v.conflicts


def test_a_reverse_bound_changes_tl101_and_the_finding_names_it(lint):
    """gpt-neo declares no `_supports_sdpa` in transformers 4.46 (attention_defaults.json); from 5.0 every
    architecture but the eager-by-default ones has SDPA."""
    assert lint(NEO, settings={"select": ["TL101"]}) == []
    found = lint(NEO, files={"requirements.txt": "trl==0.12.2\n"}, settings={"select": ["TL101"]})
    assert codes(found) == ["TL101"]
    assert "in transformers 4.46.3" in found[0][2]
    assert found[0][2].endswith("(transformers 4.46.3: trl 0.12.2 requires transformers<4.47.0)")


def test_an_unsatisfiable_set_is_a_tl009_not_a_traceback(lint):
    found = lint(NEO, files={"requirements.txt": "trl==0.12.2\ntransformers>=4.50\n"})
    tl009 = [f for f in found if f[0] == "TL009"]
    assert len(tl009) == 1 and tl009[0][1] == 1
    assert "transformers 5.25.0 (pinned transformers>=4.50" in tl009[0][2]
    assert "does not satisfy the other libraries' releases" in tl009[0][2]
    assert "trl 0.12.2 requires transformers<4.47.0" in tl009[0][2]
    assert "cannot run this file's calls" not in tl009[0][2]


def _diagnostics(tmp_path: Path, requirements: str | None, **settings):
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir(exist_ok=True)
    if requirements is not None:
        (tmp_path / "requirements.txt").write_text(requirements)
    script = tmp_path / "train.py"
    script.write_text(NEO)
    s = Settings(root=tmp_path, **settings)
    return lint_file(script, s, enabled_codes(s)).diagnostics


def test_the_versions_are_a_json_and_sarif_property(tmp_path: Path):
    diags = _diagnostics(tmp_path, "trl==0.12.2\n")
    assert [d.code for d in diags] == ["TL101"]
    assert diags[0].versions == (
        "transformers 4.46.3: not pinned: the newest release known that the rest admits; trl 0.12.2 requires "
        "transformers<4.47.0",
        "trl 0.12.2: pinned trl==0.12.2 in requirements.txt")
    record = json.loads(render("json", diags, 1))[0]
    assert record["versions"] == list(diags[0].versions)
    sarif = json.loads(render("sarif", diags, 1))["runs"][0]["results"][0]
    assert sarif["properties"]["versions"] == list(diags[0].versions)


def test_a_pinned_release_is_named_as_a_property_not_in_the_message(tmp_path: Path):
    diags = _diagnostics(tmp_path, "transformers==4.46.3\ntrl==0.12.2\n")
    assert [d.code for d in diags] == ["TL101"]
    assert diags[0].versions[0] == "transformers 4.46.3: pinned transformers==4.46.3 in requirements.txt"
    assert "requires transformers" not in diags[0].message


def test_a_finding_that_names_its_versions_is_no_assumption(tmp_path: Path):
    diags = _diagnostics(tmp_path, "trl==0.12.2\n", certain_only=True)  # --certain-only keeps it
    assert [d.code for d in diags] == ["TL101"] and diags[0].versions and not diags[0].assumptions


def test_the_newest_unpinned_releases_add_no_property(tmp_path: Path):
    """bloom is eager in every release (no `_supports_sdpa`): TL101 either way; the property only when pinned."""
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir()
    script = tmp_path / "train.py"
    script.write_text(NEO.replace("EleutherAI/gpt-neo-125m", "bigscience/bloom-560m"))
    s = Settings(root=tmp_path)
    diags = lint_file(script, s, enabled_codes(s)).diagnostics
    assert [d.code for d in diags] == ["TL101"] and diags[0].versions == ()
    assert "versions" not in json.loads(render("json", diags, 1))[0]
    (tmp_path / "requirements.txt").write_text("transformers==4.57.6\n")
    project_pins.cache_clear()
    diags = lint_file(script, s, enabled_codes(s)).diagnostics
    assert [d.code for d in diags] == ["TL101"]
    assert diags[0].versions[0] == "transformers 4.57.6: pinned transformers==4.57.6 in requirements.txt"


SFT = '''
from trl import SFTConfig, SFTTrainer
trainer = SFTTrainer(model="Qwen/Qwen2.5-7B", args=SFTConfig(output_dir="o", max_length=4096))
'''


def test_a_pinned_transformers_holds_trl_below_its_fused_loss_and_tl301_says_why(lint):
    """SFTConfig(max_length=) needs trl >= 0.16; transformers 4.46.3 admits trl up to 0.17.0 (0.18.0 asks >=4.50.0),
    whose SFTTrainer computes the full logits; unpinned, trl 1.16.0 fuses the LM head."""
    assert lint(SFT) == []
    found = lint(SFT, files={"requirements.txt": "transformers==4.46.3\n"})
    assert codes(found) == ["TL301"]
    assert "SFTTrainer in TRL 0.17.0" in found[0][2]
    assert found[0][2].endswith("(trl 0.17.0: trl 1.16.0 requires transformers>=4.56.2, which transformers 4.46.3 "
                                "rules out)")


AXOLOTL_SCRIPT = '''
from axolotl.cli.train import do_cli
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("EleutherAI/gpt-neo-125m")
'''


def test_a_script_importing_a_pinned_framework_runs_on_that_framework_s_pins(tmp_path: Path, monkeypatch):
    import libcst as cst

    from trainlint.facts import extract_facts
    from trainlint.lint import _framework_requires

    monkeypatch.chdir(tmp_path)  # the framework's pin is shown relative to where trainlint runs
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("axolotl==0.12.0\n")
    script = tmp_path / "train.py"
    script.write_text(AXOLOTL_SCRIPT)
    required = _framework_requires(script, extract_facts(cst.parse_module(AXOLOTL_SCRIPT), "train.py", AXOLOTL_SCRIPT))
    assert ("transformers", "==4.55.0", "axolotl 0.12.0 (pinned axolotl==0.12.0 in requirements.txt)") in required
    v = decide_versions(script, (), {}, None, (), required)
    assert (v.transformers.version, v.trl.version, v.peft.version) == ("4.55.0", "0.21.0", "0.17.0")
    assert v.transformers.source == "axolotl 0.12.0 (pinned axolotl==0.12.0 in requirements.txt) requires " \
                                    "transformers==4.55.0"
    # the project's own pin of a library wins over what the framework asks
    (tmp_path / "requirements.txt").write_text("axolotl==0.12.0\ntransformers==4.56.2\n")
    project_pins.cache_clear()
    v = decide_versions(script, (), {}, None, (), required)
    assert v.transformers.version == "4.56.2" and v.trl.version == "0.21.0"


def test_pins_of_other_libraries_are_left_to_their_own_readers(tmp_path: Path):
    """accelerate and liger-kernel are read by pinned_release; next to a transformers range they are no versions to
    solve (this crashed with KeyError: 'accelerate')."""
    v = decide_versions(_script(tmp_path, "accelerate>=0.21\nliger-kernel==0.5.2\ntransformers>=4.31.0,<4.46\n"),
                        (("accelerate", "==0.30.0"),), {}, None, (("accelerate", "==0.30.1", "nb output"),))
    assert v.transformers.version == "4.45.2"
