"""Which library versions a file is linted against: settings, project pins, script pins, installed."""

from pathlib import Path

from trainlint.knowledge.versions import decide_versions, project_pins, resolve_spec, satisfies


def test_specifier_subset():
    assert satisfies("4.57.6", ">=4.40,<5")
    assert not satisfies("5.24.0", ">=4.40,<5")
    assert satisfies("4.34.1", "==4.34.*")
    assert satisfies("1.7.2", "~=1.7")
    assert not satisfies("2.0.0", "~=1.7")


def test_range_resolves_to_installed_if_it_fits_else_the_newest_release_read_inside_it():
    assert resolve_spec("transformers", "==4.34.0", "5.24.0") == "4.34.0"
    assert resolve_spec("transformers", ">=4.40", "5.24.0") == "5.24.0"
    assert resolve_spec("transformers", "<5", "5.24.0") == "4.57.6"  # the last 4.x release, not 4.57.0
    assert resolve_spec("transformers", ">=4.46.0,<4.47.0", None) == "4.46.3"
    assert resolve_spec("trl", ">=0.7,<0.8", None) == "0.7.11"


def test_nearest_project_pins_win_and_poetry_carets_are_understood(tmp_path: Path):
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("transformers==4.44.2\n")
    sub = tmp_path / "train"
    sub.mkdir()
    (sub / "pyproject.toml").write_text('[tool.poetry.dependencies]\ntrl = "^0.19"\n')
    script = sub / "sft.py"
    script.write_text("")
    v = decide_versions(script, (("transformers", "==4.30.0"),), {})
    assert (v.transformers.version, v.trl.version) == ("4.44.2", "0.19.1")  # ^0.19: the newest 0.19.x read
    assert "requirements.txt" in v.transformers.source
    v = decide_versions(script, (), {"transformers": "4.57.6"})
    assert v.transformers.version == "4.57.6" and v.transformers.source == "trainlint settings"


def test_script_pins_then_newest_never_what_is_installed_here(tmp_path: Path):
    project_pins.cache_clear()
    (tmp_path / ".git").mkdir()
    script = tmp_path / "nb.py"
    script.write_text("")
    v = decide_versions(script, (("peft", "==0.10.0"),), {})
    assert v.peft.version == "0.10.0" and "in the script" in v.peft.source
    # what is installed next to trainlint is trainlint's environment, not the run's: unpinned is the newest read
    assert v.transformers.source == "not pinned: the newest release known"
