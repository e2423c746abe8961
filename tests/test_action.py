"""The GitHub Action (action.yml, composite): valid action metadata, and its steps, run as the runner runs them.

The metadata is validated against SchemaStore's schema for action.yml (tests/data/action/, see its README;
GitHub publishes none of its own) and against what GitHub's metadata-syntax documentation requires. The steps
are run here as a script: each `run` step's own text, under `bash --noprofile --norc -eo pipefail` (the
runner's invocation for `shell: bash`), with its `env` expressions evaluated from the inputs and the
`github` / `steps` contexts, in a local pull-request layout (a clone of a bare origin, the base branch
fetched by the action itself). The `uses:` step (upload-sarif) cannot run outside GitHub: its condition and
inputs are checked instead."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def test_action_yml_is_valid_against_the_action_metadata_schema():
    import jsonschema

    schema = json.loads((DATA / "action" / "github-action.schema.json").read_text(encoding="utf-8"))
    assert schema["$id"] == "https://json.schemastore.org/github-action.json"
    jsonschema.Draft7Validator.check_schema(schema)
    errors = list(jsonschema.Draft7Validator(schema).iter_errors(ACTION))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]


def test_action_yml_follows_the_documented_metadata_rules():
    # docs.github.com, "Metadata syntax for GitHub Actions": name, description and runs are required; a
    # composite action's runs.using is "composite"; a `run` step needs `shell`; an input's id is a string of
    # letters, digits, '-' and '_'; an output of a composite action needs `value`.
    for key in ("name", "description", "runs"):
        assert ACTION.get(key), key
    assert ACTION["runs"]["using"] == "composite"
    steps = ACTION["runs"]["steps"]
    ids = [s["id"] for s in steps if "id" in s]
    assert len(ids) == len(set(ids))
    for step in steps:
        assert ("run" in step) != ("uses" in step), step.get("name")
        if "run" in step:
            assert step["shell"] == "bash"
            assert "${{" not in step["run"], f"{step['name']}: an expression inside a script is shell injection"
    for name, spec in ACTION["inputs"].items():
        assert re.fullmatch(r"[A-Za-z_][\w-]*", name) and spec["description"]
    for name, spec in ACTION["outputs"].items():
        assert spec["description"] and EXPR.fullmatch(spec["value"].strip())
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    used = set(re.findall(r"inputs\.([\w-]+)", text))
    assert used == set(ACTION["inputs"]), "every input is used and every use is declared"
    for step_id in re.findall(r"steps\.([\w-]+)\.outputs", text):
        assert step_id in ids


class Context:
    """The expression contexts a run reads: inputs (with their defaults), github, steps.<id>.outputs."""

    def __init__(self, inputs: dict[str, str], github: dict[str, str]):
        self.inputs = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()} | inputs
        self.github = github
        self.steps: dict[str, dict[str, str]] = {}

    def value(self, expr: str) -> str:
        """A context path or a quoted literal: the only expressions action.yml uses (anything else fails)."""
        m = re.fullmatch(r"'([^']*)'", expr)
        if m:
            return m.group(1)
        parts = expr.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return self.inputs[parts[1]]
        if parts[0] == "github" and len(parts) == 2:
            return self.github[parts[1]]
        if parts[0] == "steps" and len(parts) == 4 and parts[2] == "outputs":
            return self.steps.get(parts[1], {}).get(parts[3], "")
        raise AssertionError(f"expression this test cannot evaluate: {expr!r}")

    def condition(self, expr: str) -> bool:
        ok = True
        for term in (t.strip() for t in expr.split("&&")):
            m = re.fullmatch(r"(\S+)\s*(==|!=)\s*(\S+)", term)
            if term == "always()":
                continue
            assert m, f"condition this test cannot evaluate: {term!r}"
            left, op, right = self.value(m.group(1)), m.group(2), self.value(m.group(3))
            ok = ok and ((left == right) if op == "==" else (left != right))
        return ok

    def expand(self, text: str) -> str:
        return EXPR.sub(lambda m: self.value(m.group(1)), text)


def run_action(workspace: Path, ctx: Context, tmp: Path, skip: set[str] = frozenset()) -> dict:
    """Run the composite's steps in order, as the runner would (after a failed step, only `always()` steps
    run); returns what each did."""
    done: dict = {}
    failed = False
    for n, step in enumerate(ACTION["runs"]["steps"]):
        step_id = step.get("id", f"step{n}")
        cond = step.get("if")
        if step_id in skip or (failed and "always()" not in (cond or "")) or (cond and not ctx.condition(cond)):
            done[step_id] = "skipped"
            continue
        if "uses" in step:
            done[step_id] = {"uses": step["uses"], "with": {k: ctx.expand(str(v)) for k, v in step["with"].items()}}
            continue
        output = tmp / f"output-{step_id}"
        output.write_text("")
        script = tmp / f"{step_id}.sh"
        script.write_text(step["run"])
        env = {**os.environ, "GITHUB_OUTPUT": str(output), "RUNNER_TEMP": str(tmp), "GITHUB_ACTIONS": "true",
               **{k: ctx.expand(str(v)) for k, v in step.get("env", {}).items()}}
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=workspace,
                           env=env, capture_output=True, text=True, timeout=900)
        ctx.steps[step_id] = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        done[step_id] = r
        failed = failed or r.returncode != 0
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """The install step, run once: a virtualenv in RUNNER_TEMP with this checkout installed (as `uses:` with
    no `version` does); its outputs."""
    runner = tmp_path_factory.mktemp("runner")
    ctx = Context({}, {"action_path": str(ROOT), "base_ref": ""})
    only_install = {s.get("id", f"step{n}") for n, s in enumerate(ACTION["runs"]["steps"])} - {"install"}
    r = run_action(runner, ctx, runner, skip=only_install)["install"]
    assert r.returncode == 0, r.stdout + r.stderr
    assert Path(ctx.steps["install"]["trainlint"]).is_file()
    return ctx.steps["install"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def pull_request(tmp_path: Path) -> Path:
    """A clone whose HEAD is a pull-request commit: the base branch `main` has a script training at batch 8,
    the pull request halves it to 2 (TL401 against the base) and loads a model with eager attention (TL101)."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(origin), str(work))
    (work / "sft.py").write_text("from trl import SFTConfig\ncfg = SFTConfig(output_dir='o', per_device_train_batch_size=8)\n")
    git(work, "checkout", "-q", "-b", "main")
    git(work, "add", "sft.py")
    git(work, "commit", "-qm", "base")
    git(work, "push", "-q", "origin", "main")
    git(work, "checkout", "-q", "-b", "feature")
    (work / "sft.py").write_text((work / "sft.py").read_text().replace("=8)", "=2)"))
    (work / "train.py").write_text(
        "from transformers import AutoModelForCausalLM\n"
        "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='eager')\n"
        "MAX_SEQ_LENGTH = 8192\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "pull request")
    git(work, "update-ref", "-d", "refs/remotes/origin/main")  # as a shallow PR checkout: the base is not there
    return work


def test_action_steps_annotate_a_pull_request_against_its_base_and_write_sarif(pull_request, installed, tmp_path):
    ctx = Context({"sarif": "true"}, {"action_path": str(ROOT), "base_ref": "main"})
    ctx.steps["install"] = installed
    done = run_action(pull_request, ctx, tmp_path, skip={"install"})
    check = done["check"]
    assert check.returncode == 1, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    assert any(re.fullmatch(r"::error file=sft\.py,line=2,col=\d+,endLine=2,endColumn=\d+,title=TL401::"
                            r"per_device_train_batch_size 8 -> 2 but gradient_accumulation_steps stays 1.*", line)
               for line in lines), check.stdout
    assert any(line.startswith("::error file=train.py,line=2,col=73,") and "title=TL101::eager attention" in line
               for line in lines), check.stdout
    assert ctx.steps["check"]["exit-code"] == "1"
    assert ctx.steps["check"]["sarif-file"] == "trainlint.sarif"
    log = json.loads((pull_request / "trainlint.sarif").read_text())
    import jsonschema

    schema = json.loads((DATA / "report" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    assert not list(jsonschema.Draft4Validator(schema).iter_errors(log))
    assert sorted(r["ruleId"] for r in log["runs"][0]["results"]) == ["TL101", "TL401"]
    # the check failed, and the upload still runs (always()), with the file the check wrote
    assert done["step2"] == {"uses": "github/codeql-action/upload-sarif@v3",
                             "with": {"sarif_file": "trainlint.sarif", "category": "trainlint"}}

    # the base matters: compared with HEAD (the pull request itself), the batch did not change
    head_ctx = Context({"diff-base": "HEAD"}, {"action_path": str(ROOT), "base_ref": "main"})
    head_ctx.steps["install"] = installed
    head = run_action(pull_request, head_ctx, tmp_path, skip={"install"})
    assert head["check"].returncode == 1 and "TL401" not in head["check"].stdout
    assert "title=TL101" in head["check"].stdout
    assert head["step2"] == "skipped"  # sarif is off


def test_action_outside_a_pull_request_compares_with_head_and_passes_a_clean_tree(installed, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q")
    (work / "ok.py").write_text("from trl import SFTConfig\ncfg = SFTConfig(output_dir='o')\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "one")
    ctx = Context({"args": "--select TL4 --no-launches", "sarif": "true"}, {"action_path": str(ROOT), "base_ref": ""})
    ctx.steps["install"] = installed
    done = run_action(work, ctx, tmp_path, skip={"install"})
    assert done["check"].returncode == 0, done["check"].stdout + done["check"].stderr
    assert done["check"].stdout == "" and ctx.steps["check"]["exit-code"] == "0"
    assert json.loads((work / "trainlint.sarif").read_text())["runs"][0]["results"] == []
    assert done["step2"]["with"]["sarif_file"] == "trainlint.sarif"
