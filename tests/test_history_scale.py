"""The git base of one file without reading the whole tree (issue 29, "Keep, and scale"): `git ls-tree` of the
file's folder answers a one-file check; past a few folders the whole tree is read once. Truth used: git's own
`rev-parse HEAD:path` on a real repository in tmp_path."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from trainlint import history

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    names = ["top.py", "odd [x]*.py"] + [f"d{i}/sub/f{i}.py" for i in range(12)]
    for i, rel in enumerate(names):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"x = {i}\n")
    git("init", "-q", cwd=root)
    git("add", "-A", cwd=root)
    git("commit", "-qm", "x", cwd=root)
    history.clear_caches()
    yield root.resolve(), names
    history.clear_caches()


def test_blob_ids_are_gits_whether_one_folder_or_many_are_asked(repo, monkeypatch):
    root, names = repo
    calls = []
    real = history._git
    monkeypatch.setattr(history, "_git", lambda args, cwd: calls.append(args) or real(args, cwd))
    assert history.base_blob(root / "d3/sub/f3.py") == git("rev-parse", "HEAD:d3/sub/f3.py", cwd=root)
    assert not any("-r" in c for c in calls)  # one file: its folder only, not the whole tree
    for rel in names:
        assert history.base_blob(root / rel) == git("rev-parse", f"HEAD:{rel}", cwd=root), rel
    assert sum("-r" in c for c in calls) == 1  # many folders: the whole tree, once
    assert history.base_version(root / "odd [x]*.py").text == "x = 1\n"


def test_a_renamed_or_new_file(repo):
    root, _ = repo
    git("mv", "d1/sub/f1.py", "d1/moved.py", cwd=root)
    (root / "new.py").write_text("y = 1\n")
    history.clear_caches()
    assert history.base_blob(root / "d1/moved.py") == git("rev-parse", "HEAD:d1/sub/f1.py", cwd=root)
    assert history.base_blob(root / "new.py") is None
    assert history.base_version(root / "new.py").note.startswith("new file")
