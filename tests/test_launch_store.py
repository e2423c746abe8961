"""The launcher store (launch/store.py): a launcher read once is not lexed again on the next run, unless its bytes
or a file it sources changed; a record that is not what the store writes is ignored."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

LAYOUT = Path(__file__).parent / "fixtures" / "launch" / "layouts" / "fastchat_lora"

PROBE = """
import json, sys
from pathlib import Path
from trainlint.config import discover
from trainlint.lint import enabled_codes
from trainlint.runner import run
settings = discover(Path.cwd())
out = run([Path("chatlora/train/train_lora.py")], settings, enabled_codes(settings), jobs=1, cache={cache})
print(json.dumps({{"shell": "trainlint.launch.shell_lex" in sys.modules,
                  "diags": [[d.code, d.filename, d.span.line, d.message] for o in out for d in o.diagnostics]}}))
"""


def _run(root: Path, cache: bool = True) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE.format(cache=cache)], cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _layout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(LAYOUT, root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_a_launcher_read_before_is_not_lexed_again(tmp_path):
    root = _layout(tmp_path)
    first = _run(root)
    assert first["shell"] and first["diags"]
    (root / "chatlora/train/train_lora.py").write_text((root / "chatlora/train/train_lora.py").read_text() + "\n")
    second = _run(root)  # the script changed (a cache miss for it), its launchers did not
    assert not second["shell"] and second["diags"] == first["diags"]


def test_a_changed_launcher_or_sourced_file_is_read_again(tmp_path):
    root = _layout(tmp_path)
    launcher = next((root / "scripts").glob("train_lora.sh"))
    env = root / "scripts" / "env.sh"
    env.write_text("BATCH=4\n")
    launcher.write_text("source env.sh\n" + launcher.read_text())  # (relative to the launcher, as the reader does)
    first = _run(root)
    assert first["shell"]
    (root / "chatlora/train/train_lora.py").write_text((root / "chatlora/train/train_lora.py").read_text() + "\n")
    env.write_text("BATCH=8\n")
    assert _run(root)["shell"]  # the sourced file changed: lexed again
    launcher.write_text(launcher.read_text() + "\n# a comment\n")
    assert _run(root)["shell"]


def test_a_record_that_is_not_the_stores_is_ignored(tmp_path):
    root = _layout(tmp_path)
    first = _run(root)
    for record in (root / ".trainlint_cache").rglob("launchers/*/*.json"):
        record.write_text(json.dumps({"invocations": [{"$type": "os.system", "x": 1}], "problems": [], "read": {}}))
    for record in (root / ".trainlint_cache").rglob("*.json"):
        if "launchers" not in record.parts:
            record.unlink()  # the script's own record too, so it is linted again
    again = _run(root)
    assert again["shell"] and again["diags"] == first["diags"]


def test_no_store_without_the_cache(tmp_path):
    root = _layout(tmp_path)
    _run(root, cache=False)
    assert not list(root.rglob("launchers"))
