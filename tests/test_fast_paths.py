"""The shortcuts the start-up and the cache key take give what the general code they replace gives."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from trainlint.knowledge.versions import _UNSURE, _scan_dist_info


@pytest.mark.parametrize("name", ["transformers", "trl", "peft", "torch", "libcst", "click", "PyYAML",
                                  "typing-extensions", "typing_extensions", "trainlint", "no-such-distribution"])
def test_installed_version_reads_what_importlib_metadata_reads(name):
    try:
        expected = metadata.version(name)
    except metadata.PackageNotFoundError:
        expected = None
    found = _scan_dist_info(name)
    assert found is _UNSURE or found == expected


def test_a_one_file_check_does_not_import_importlib_metadata(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("from transformers import AutoModelForCausalLM\n"
                      "m = AutoModelForCausalLM.from_pretrained('x/y', attn_implementation='eager')\n")
    probe = ("import sys\nfrom trainlint.cli import main\ntry:\n    main(['check', '--no-cache', sys.argv[1]])\n"
             "except SystemExit:\n    pass\nprint('LOADED', sorted(m for m in sys.modules if m.startswith("
             "('importlib.metadata', 'trainlint.verify', 'trainlint.memory.estimate', 'trainlint.report.estimate',"
             " 'trainlint.planning', 'trainlint.fix'))))\n")
    r = subprocess.run([sys.executable, "-c", probe, str(script)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert "LOADED []" in r.stdout, r.stdout + r.stderr[-2000:]


def _pins_walking_up(directory):
    """project_pins as it was: every folder up from `directory`, for each file's folder anew."""
    from trainlint.knowledge.versions import LIBRARIES, PIN_FILES, _pins_in_file

    found = {}
    for folder in (directory, *directory.parents):
        for pattern in PIN_FILES:
            for candidate in sorted(folder.glob(pattern)):
                for name, spec in _pins_in_file(candidate).items():
                    found.setdefault(name, (spec, str(candidate)))
        if (folder / ".git").exists() or len(found) == len(LIBRARIES):
            break
    return tuple((name, spec, where) for name, (spec, where) in found.items())


def test_project_pins_reuses_the_parents_answer_and_still_finds_the_nearest_pin(tmp_path):
    from trainlint.knowledge.versions import project_pins

    (tmp_path / "requirements.txt").write_text("peft==0.10.0\ntrl>=0.8\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "pyproject.toml").write_text('[project]\ndependencies = ["transformers<5", "trl==0.9.0"]\n')
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "requirements-dev.txt").write_text("transformers==4.40.0\n")
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "x").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "requirements.txt").write_text("transformers==4.1\ntrl==0.1\npeft==0.1\n")
    folders = [tmp_path / "a" / "b" / "c", tmp_path / "a" / "b", tmp_path / "a", tmp_path, tmp_path / "repo" / "x",
               tmp_path / "repo", tmp_path / "full"]
    for order in (folders, folders[::-1]):
        project_pins.cache_clear()
        assert [project_pins(f) for f in order] == [_pins_walking_up(f) for f in order]
    project_pins.cache_clear()


def test_repo_root_reuses_the_parents_answer_only_where_git_would_give_it(tmp_path):
    from trainlint.history import _git, _repo_root

    def git_says(folder):
        r = _git(["rev-parse", "--show-toplevel"], folder)
        return None if r is None or r.returncode != 0 else Path(r.stdout.decode().strip()).resolve()

    outer = tmp_path / "outer"
    (outer / "src" / "pkg").mkdir(parents=True)
    (outer / "nested" / "deep").mkdir(parents=True)
    (outer / "bare.git").mkdir()
    for repo in (outer, outer / "nested"):
        subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "init", "-q", "--bare"], cwd=outer / "bare.git", check=True)
    (tmp_path / "plain" / "sub").mkdir(parents=True)
    folders = [outer / "src" / "pkg", outer / "src", outer, outer / "nested" / "deep", outer / "nested",
               outer / "bare.git", tmp_path / "plain" / "sub", tmp_path / "plain"]
    _repo_root.cache_clear()
    assert [_repo_root(f.resolve()) for f in folders] == [git_says(f) for f in folders]
    _repo_root.cache_clear()


def test_resolving_a_file_through_its_folder_is_path_resolve(tmp_path, monkeypatch):
    from trainlint.runner import _resolve

    (tmp_path / "real" / "d").mkdir(parents=True)
    (tmp_path / "real" / "d" / "f.py").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "real" / "d" / "g.py").symlink_to(tmp_path / "real" / "d" / "f.py")
    monkeypatch.chdir(tmp_path)
    paths = [tmp_path / "link" / "d" / "f.py", tmp_path / "link" / "d" / "g.py", Path("link/d/f.py"),
             Path("real/d/g.py"), Path("real/d/../d/f.py")]
    assert [_resolve(p) for p in paths] == [p.resolve() for p in paths]
    monkeypatch.chdir(tmp_path / "real")
    assert _resolve(Path("d/f.py")) == (tmp_path / "real" / "d" / "f.py").resolve()


_SNIPPETS = [
    "m = AutoModelForCausalLM.from_pretrained('x')",
    "m = transformers.AutoModelForCausalLM \\\n    .from_pretrained(\n 'x')",
    "loss = F.cross_entropy (logits, y)",
    "out = model(input_ids=x, labels=y)",
    "out = model(x, labels =y)",
    "m = LlamaForCausalLM(cfg)",
    "apply_liger_kernel_to_llama()",
    "model._apply_liger_kernel_to_instance(model=m)",
    "args = parser.parse_args_into_dataclasses()",
    "t = Trainer(model=m)",
    "x = [DataLoader(d) for d in ds]",
    "print('from_pretrained')",  # text, no call: neither
    "def from_pretrained(cls): pass",
    "# Trainer(model=m)\nx = 1",  # a comment: the text matches, the ast does not (walked, not relevant)
]


@pytest.mark.parametrize("text", _SNIPPETS)
def test_relevant_call_text_is_implied_by_every_relevant_call(text):
    """lint.py walks a file's ast for relevant calls only when _RELEVANT_CALL_TEXT finds one's text: it must
    match wherever _is_relevant would find a call (it may match more: the walk decides)."""
    import ast

    from trainlint.lint import _RELEVANT_CALL_TEXT, _is_relevant

    if _is_relevant(ast.parse(text)):
        assert _RELEVANT_CALL_TEXT.search(text)


def test_relevant_call_text_on_real_files():
    import ast
    import warnings

    from trainlint.lint import _RELEVANT_CALL_TEXT, _is_relevant

    repo = Path(__file__).resolve().parent.parent
    files = [*(repo / "tests" / "fixtures").rglob("*.py"), *(repo / "examples").glob("*.py")]
    trl = Path(metadata.distribution("trl").locate_file("trl"))
    files += sorted(trl.rglob("*.py"))
    relevant = 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except SyntaxError:
            continue
        if _is_relevant(tree):
            relevant += 1
            assert _RELEVANT_CALL_TEXT.search(text), path
    assert relevant > 50
