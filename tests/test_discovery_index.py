"""Launch discovery at scale (issue 29, "Keep, and scale"): in a git repository the candidate launchers come from
`git ls-files` (tracked and untracked, not ignored), elsewhere from the folder walk, the same files in the same
order; and the discovery index kept in the cache folder sees every change that matters on the next run (a
launcher added untracked, edited to run another script, deleted; a .gitignored one is not a candidate).

Truth used: real git repositories in tmp_path driven by the git CLI, and the real `trainlint check` command
(its JSON findings) for the end-to-end cases.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainlint.launch import store, tree
from trainlint.launch.discover import clear_caches, launcher_files, task_files, tree_files

LAYOUT = Path(__file__).parent / "fixtures" / "launch" / "layouts" / "fastchat_lora"
SCRIPT = "chatlora/train/train_lora.py"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


def _tree(root: Path) -> None:
    """Every kind of file the launch layer looks at, and the folders it keeps out."""
    files = {
        "run.sh": "python train.py\n",
        "README.md": "python train.py --lr 1\n",
        "train.py": "import argparse\n",
        "a/b/launch": "#!/usr/bin/env bash\npython train.py\n",  # a launcher by its shebang
        "a/b/notes": "plain text\n",  # no suffix, no shebang
        "a/job.slurm": "srun python train.py\n",
        "a/task.yaml": "resources:\n  accelerators: A100:8\nrun: python train.py\n",  # a SkyPilot task
        "a/other.yml": "key: 1\n",
        "a/Z.sh": "echo\n",
        "a/b.sh": "echo\n",
        "a b/space name.sh": "echo\n",
        "docs/guide.markdown": "python train.py\n",
        ".github/workflows/ci.sh": "python train.py\n",  # a hidden folder: kept out
        "node_modules/x/run.sh": "python train.py\n",
        "build/run.sh": "python train.py\n",
        "venv/bin/activate.sh": "x\n",
        "pkg/site-packages/lib/run.sh": "x\n",
        ".env.sh": "export A=1\n",  # a hidden file (not a folder) is looked at, as the walk did
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _rel(paths, root: Path) -> list[str]:
    return [p.relative_to(root).as_posix() for p in paths]


def _found(root: Path) -> tuple[list[str], list[str], list[str]]:
    clear_caches()
    root = root.resolve()
    return _rel(launcher_files(root), root), _rel(task_files(root), root), _rel(tree_files(root), root)


@pytest.fixture(autouse=True)
def _no_store():
    store.use(None)
    clear_caches()
    yield
    store.use(None)
    clear_caches()


def test_git_ls_files_and_the_walk_find_the_same_candidates_in_the_same_order(tmp_path):
    plain = tmp_path / "plain"
    _tree(plain)
    repo = tmp_path / "repo"
    _tree(repo)
    git("init", "-q", cwd=repo)
    git("add", "run.sh", "a", cwd=repo)  # some tracked, some untracked: both count
    git("commit", "-qm", "x", cwd=repo)
    walked = _found(plain)
    listed = _found(repo)
    assert tree.listing(repo.resolve())[0] == "git" and tree.listing(plain.resolve())[0] == "walk"
    assert listed == walked
    # the walk's order: a folder's files (sorted), then its folders (sorted)
    assert walked[0] == [".env.sh", "README.md", "run.sh", "a/Z.sh", "a/b.sh", "a/job.slurm", "a/b/launch",
                         "a b/space name.sh", "docs/guide.markdown"]
    assert walked[1] == ["a/task.yaml"]
    # and the index (cache on) gives the same again, built and then read
    store.use(tmp_path / "cache")
    assert _found(repo)[:2] == walked[:2]
    assert _found(repo)[:2] == walked[:2]
    assert _found(plain)[:2] == walked[:2]
    assert _found(plain)[:2] == walked[:2]


def test_git_lists_what_is_not_ignored_and_still_on_disk(tmp_path):
    repo = tmp_path / "repo"
    _tree(repo)
    (repo / ".gitignore").write_text("ignored/\n*.local.sh\n")
    for rel in ("ignored/run.sh", "a/mine.local.sh", "gone.sh"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("python train.py\n")
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    (repo / "gone.sh").unlink()  # deleted, not yet `git rm`
    launchers = _found(repo)[0]
    assert "ignored/run.sh" not in launchers and "a/mine.local.sh" not in launchers
    assert "gone.sh" not in launchers and "gone.sh" not in _found(repo)[2]
    assert "run.sh" in launchers


def test_without_git_the_folder_is_walked(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    _tree(repo)
    git("init", "-q", cwd=repo)
    expected = _found(repo)
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no git to run
    assert tree.listing(repo.resolve())[0] == "walk"
    assert _found(repo) == expected


def test_a_nested_repository_and_a_submodule_are_listed_like_folders(tmp_path):
    repo = tmp_path / "repo"
    _tree(repo)
    git("init", "-q", cwd=repo)
    inner = repo / "third_party" / "lib"
    inner.mkdir(parents=True)
    (inner / "go.sh").write_text("python train.py\n")
    git("init", "-q", cwd=inner)
    assert "third_party/lib/go.sh" in _found(repo)[0]


def _index_used(monkeypatch) -> list[str]:
    """Record each time the tree is listed or walked anew (the index not used)."""
    calls: list[str] = []
    real = tree._build

    def build(root, recursive):
        calls.append(str(root))
        return real(root, recursive)

    monkeypatch.setattr(tree, "_build", build)
    return calls


def _settle() -> None:
    time.sleep(0.02)


def test_the_index_is_read_when_nothing_changed_and_sees_every_change(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    _tree(repo)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "x", cwd=repo)
    store.use(tmp_path / "cache")
    monkeypatch.setattr(tree, "_RACY_NS", 0)  # (a test changes files within milliseconds of the build)
    builds = _index_used(monkeypatch)
    first = _found(repo)[0]
    assert len(builds) == 1
    assert _found(repo)[0] == first and len(builds) == 1  # nothing changed: read, not built
    # a file that cannot be a launcher, added or edited: the index holds (its folder is listed again)
    (repo / "a" / "new.py").write_text("x = 1\n")
    (repo / "train.py").write_text("import argparse  # edited\n")
    assert _found(repo)[0] == first and len(builds) == 1
    # an editor's save by rename (a temporary file renamed over the launcher): same names, the index holds
    tmp = repo / "a" / ".b.sh.swp"
    tmp.write_text("echo 2\n")
    os.replace(tmp, repo / "a" / "b.sh")
    assert _found(repo)[0] == first and len(builds) == 1
    # a launcher added, untracked: seen
    (repo / "a" / "b" / "new.sh").write_text("python train.py\n")
    assert "a/b/new.sh" in _found(repo)[0]
    # a file without a suffix given a shebang: now a launcher
    (repo / "a" / "b" / "notes").write_text("#!/bin/sh\npython train.py\n")
    assert "a/b/notes" in _found(repo)[0]
    # a YAML file that becomes a SkyPilot task, and stops being one
    (repo / "a" / "other.yml").write_text("resources:\n  accelerators: H100\nrun: python train.py\n")
    assert "a/other.yml" in _found(repo)[1]
    (repo / "a" / "other.yml").write_text("key: 2\n")
    assert "a/other.yml" not in _found(repo)[1]
    # deleted: gone
    (repo / "a" / "b" / "new.sh").unlink()
    assert "a/b/new.sh" not in _found(repo)[0]
    # a new folder with a launcher in it
    (repo / "c" / "d").mkdir(parents=True)
    (repo / "c" / "d" / "go.sh").write_text("python train.py\n")
    assert "c/d/go.sh" in _found(repo)[0]
    # .gitignored: out, and back in when the rule goes
    (repo / ".gitignore").write_text("c/\n")
    assert "c/d/go.sh" not in _found(repo)[0]
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".gitignore").write_text("")
    assert "c/d/go.sh" in _found(repo)[0]
    (repo / ".git" / "info" / "exclude").write_text("go.sh\n")
    assert "c/d/go.sh" not in _found(repo)[0]
    # and the last answer is what a fresh listing gives
    indexed = _found(repo)
    store.use(None)
    assert _found(repo)[:2] == indexed[:2]


def test_an_index_answer_always_equals_a_fresh_listing(tmp_path):
    """Changes made right after the index was built (within the clock's resolution) are not missed."""
    repo = tmp_path / "repo"
    _tree(repo)
    git("init", "-q", cwd=repo)
    steps = [
        lambda: (repo / "a" / "fresh.sh").write_text("python train.py\n"),
        lambda: (repo / "a" / "b" / "notes").write_text("#!/bin/bash\n"),
        lambda: (repo / "a" / "fresh.sh").unlink(),
        lambda: (repo / "e").mkdir(),
        lambda: (repo / "e" / "x.md").write_text("python train.py\n"),
        lambda: (repo / ".gitignore").write_text("e/\n"),
    ]
    store.use(tmp_path / "cache")
    _found(repo)
    for step in steps:
        folders = [d for d in [repo, *repo.rglob("*")] if d.is_dir() and ".git" not in d.parts]
        before = {d: d.stat().st_mtime_ns for d in folders}
        step()
        for d, ns in before.items():  # the change in the same clock tick as the build: no folder's mtime moved
            if d.exists():
                os.utime(d, ns=(ns, ns))
        store.use(tmp_path / "cache")
        indexed = _found(repo)
        store.use(None)
        assert indexed[:2] == _found(repo)[:2]


def test_a_corrupt_index_is_built_again(tmp_path):
    repo = tmp_path / "repo"
    _tree(repo)
    store.use(tmp_path / "cache")
    expected = _found(repo)
    for entry in (tmp_path / "cache" / "trees").iterdir():
        entry.write_text('{"format": 1, "root": 3')
    assert _found(repo) == expected
    for entry in (tmp_path / "cache" / "trees").iterdir():
        entry.write_text(json.dumps({"format": 1, "root": str(repo.resolve()), "recursive": True, "kind": "walk",
                                     "dirs": {"": ["x"]}, "checked": {}, "excludes": {}, "launchers": ["../../x"],
                                     "tasks": []}))
    assert _found(repo) == expected


def test_what_a_launcher_mentions_answers_as_its_bytes_do():
    """index_for asks whether a launcher names the script (`train.py`, `pkg.train`); the index answers from the
    dotted words it kept, exactly as a search of the bytes would, or says it cannot tell."""
    import random

    rng = random.Random(29)
    alphabet = "ab.py/_-+ :=\n\t\"'$\\xé"
    names = [b"a.py", b"b.py", b"ab.py", b"a.b", b"py", b"a", b"x.a", b".py", b"b/a.py", b"a b.py", "é.py".encode()]
    for _ in range(3000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))).encode()
        said = tree.mentions_of(raw)
        for name in names:
            answer = tree.mentioned(name, said)
            if answer is not None:
                assert answer == (name in raw), (raw, name)
    assert tree.mentioned(b"train", "train.py") is None  # no dot: the file is read
    assert tree.mentioned(b"a b.py", "") is None


def test_a_launcher_edited_within_the_clock_tick_of_its_reading_is_read_again(tmp_path):
    repo = tmp_path / "repo"
    _tree(repo)
    store.use(tmp_path / "cache")
    launcher = repo / "a" / "b.sh"
    _found(repo)
    clear_caches()
    said = tree.launcher_stamps(repo.resolve())[launcher.resolve()]
    assert said[1] == "" and launcher.read_text() == "echo\n"
    ns = launcher.stat().st_mtime_ns
    launcher.write_text("t.py\n")  # the same size, and (below) the same mtime: only "racy" can catch it
    os.utime(launcher, ns=(ns, ns))
    clear_caches()
    assert tree.launcher_stamps(repo.resolve())[launcher.resolve()][1] == "t.py"


# -- end to end: the real command, its cache on, in a git repository ------------------------------------------

def _check(repo: Path, *extra: str) -> list[tuple[str, str, int]]:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    r = subprocess.run([sys.executable, "-m", "trainlint", "check", "--output-format", "json", "--ignore", "TL501",
                        *extra, SCRIPT], cwd=repo, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return [(d["code"], d["filename"], d["location"]["row"]) for d in json.loads(r.stdout)]


def test_a_pre_commit_run_sees_launchers_added_edited_deleted_and_ignored(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(LAYOUT, repo)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "init", cwd=repo)
    launcher = (repo / "scripts" / "train_lora.sh").read_text()
    assert _check(repo) == [("TL201", "scripts/train_lora.sh", 14)]
    assert _check(repo) == [("TL201", "scripts/train_lora.sh", 14)]  # (from the cache)
    (repo / "scripts" / "again.sh").write_text(launcher)  # a new launcher, untracked
    assert _check(repo) == [("TL201", "scripts/again.sh", 14), ("TL201", "scripts/train_lora.sh", 14)]
    (repo / "scripts" / "again.sh").write_text(launcher.replace("train_lora.py", "train_unlaunched.py"))
    assert _check(repo) == [("TL201", "scripts/train_lora.sh", 14)]  # it runs another script now
    (repo / "scripts" / "again.sh").write_text(launcher)
    (repo / ".gitignore").write_text("scripts/again.sh\n")  # ignored: not a launcher of the repository
    assert _check(repo) == [("TL201", "scripts/train_lora.sh", 14)]
    (repo / "scripts" / "train_lora.sh").unlink()  # deleted (not yet `git rm`)
    assert _check(repo) == []
    assert _check(repo, "--no-cache") == []
    # the index is in the cache folder, and --no-cache neither reads nor writes it
    assert list((repo / ".trainlint_cache").rglob("trees/*.json"))
