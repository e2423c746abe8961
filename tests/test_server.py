"""`trainlint server`: the real server process, driven over stdio by a real LSP client (pytest-lsp's, built on
pygls' client). Each test opens documents in a temporary workspace and asserts what comes back: diagnostic
ranges in the client's position encoding, the edits code actions return, hovers, and the bad inputs the
server must survive."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pytest_lsp", reason="pytest-lsp and pygls are in the test extra")

from lsprotocol import types as t  # noqa: E402
from pytest_lsp.client import (DEFAULT_CLIENT_FEATURES, LanguageClient, client_capabilities,  # noqa: E402
                               register_lsp_features)
from pygls.protocol import default_converter  # noqa: E402

SERVER = [sys.executable, "-m", "trainlint", "server"]
EAGER = ("from transformers import AutoModelForCausalLM\n"
         "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', revision='\U0001f999', "
         "attn_implementation='eager')\n"
         "MAX_SEQ_LENGTH = 8192\n")
SDPA = EAGER.replace("'eager'", "'sdpa'")
LIGER = ("from transformers import AutoModelForCausalLM, Trainer, TrainingArguments\n"
         "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', attn_implementation='sdpa')\n"
         "args = TrainingArguments(output_dir='o', per_device_train_batch_size=4)\n"
         "Trainer(model=model, args=args).train()\n"
         "MAX_SEQ_LENGTH = 4096\n")

pytestmark = pytest.mark.asyncio


def _record(client: LanguageClient, params: t.PublishDiagnosticsParams) -> None:
    client.diagnostics[params.uri] = params.diagnostics
    client.published.append(params)


def _register(client: LanguageClient, params: t.RegistrationParams) -> None:
    client.registrations.extend(params.registrations)  # (VS Code would start watching the files)


@contextlib.asynccontextmanager
async def session(root: Path, command: list[str] | None = None, caps: t.ClientCapabilities | None = None,
                  debounce_ms: int = 100):
    """A client (VS Code's capabilities unless given) connected to a fresh server process, initialized with
    `root` as the workspace; `client.initialized_with` is the server's InitializeResult."""
    client = LanguageClient(converter_factory=default_converter)
    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: _record,
                                   t.CLIENT_REGISTER_CAPABILITY: _register})
    client.published, client.registrations = [], []
    await client.start_io(*(command or SERVER))
    client.initialized_with = await client.initialize_session(t.InitializeParams(
        capabilities=caps or client_capabilities("visual-studio-code"), root_uri=root.as_uri(),
        workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name="w")],
        initialization_options={"debounceMs": debounce_ms}))
    try:
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()


async def published(client: LanguageClient, uri: str, after: int = 0, version: int | None = None,
                    timeout: float = 60) -> t.PublishDiagnosticsParams:
    """The first diagnostics published for `uri` after the first `after` notifications (for `version`)."""
    async def wait():
        while True:
            for p in client.published[after:]:
                if p.uri == uri and (version is None or p.version == version):
                    return p
            await client.wait_for_notification(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return await asyncio.wait_for(wait(), timeout)


def open_doc(client: LanguageClient, path: Path, text: str | None = None, language: str = "python",
             version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(t.DidOpenTextDocumentParams(t.TextDocumentItem(
        uri=uri, language_id=language, version=version, text=path.read_text() if text is None else text)))
    return uri


async def only_diagnostic(client: LanguageClient, path: Path, language: str = "python") -> tuple[str, t.Diagnostic]:
    """Open `path` and return its uri and the one diagnostic first published for it."""
    uri = open_doc(client, path, language=language)
    (diag,) = (await published(client, uri)).diagnostics
    return uri, diag


@pytest.fixture
def eager(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(EAGER)
    return path


def change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(t.DidChangeTextDocumentParams(
        t.VersionedTextDocumentIdentifier(uri=uri, version=version), [t.TextDocumentContentChangeWholeDocument(text)]))


async def actions(client: LanguageClient, uri: str, diag: t.Diagnostic, only=None) -> list[t.CodeAction]:
    return await client.text_document_code_action_async(t.CodeActionParams(
        t.TextDocumentIdentifier(uri), diag.range, t.CodeActionContext(diagnostics=[diag], only=only))) or []


def edits_of(action: t.CodeAction) -> dict[str, list[t.TextEdit]]:
    return {change.text_document.uri: list(change.edits) for change in action.edit.document_changes}


def apply(text: str, edits: list[t.TextEdit]) -> str:
    """Apply UTF-16 LSP edits to `text` (the client's side of a code action)."""
    lines = text.splitlines(keepends=True)

    def offset(p: t.Position) -> int:
        before = sum(len(line) for line in lines[:p.line])
        line = lines[p.line] if p.line < len(lines) else ""
        units, chars = 0, 0
        while units < p.character and chars < len(line):
            units += len(line[chars].encode("utf-16-le")) // 2
            chars += 1
        return before + chars

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[:offset(e.range.start)] + e.new_text + text[offset(e.range.end):]
        lines = text.splitlines(keepends=True)
    return text


def utf16(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


async def test_open_publishes_tl101_on_the_keyword_in_utf16_units(tmp_path, eager):
    async with session(tmp_path) as client:
        _, diag = await only_diagnostic(client, eager)
    line = EAGER.splitlines()[1]
    start = line.index("attn_implementation")
    assert diag.code == "TL101" and diag.source == "trainlint"
    assert diag.severity == t.DiagnosticSeverity.Error
    assert diag.message.startswith("eager attention at sequence length 8,192")
    # the llama emoji before it is one code point but two UTF-16 units
    assert (diag.range.start.line, diag.range.start.character) == (1, utf16(line[:start]))
    assert (diag.range.end.line, diag.range.end.character) == (1, utf16(line[:start + len("attn_implementation='eager'")]))
    assert diag.code_description.href.endswith("rules/TL101.md")


async def test_utf8_position_encoding_counts_bytes(tmp_path, eager):
    caps = client_capabilities("visual-studio-code")
    caps.general = t.GeneralClientCapabilities(position_encodings=[t.PositionEncodingKind.Utf8])
    async with session(tmp_path, caps=caps) as client:
        assert client.initialized_with.capabilities.position_encoding == t.PositionEncodingKind.Utf8
        _, diag = await only_diagnostic(client, eager)
    line = EAGER.splitlines()[1]
    assert diag.range.start.character == len(line[:line.index("attn_implementation")].encode("utf-8"))


async def test_safe_fix_is_a_preferred_quickfix_whose_edit_clears_the_finding(tmp_path, eager):
    async with session(tmp_path) as client:
        uri, diag = await only_diagnostic(client, eager)
        found = await actions(client, uri, diag)
        quick = [a for a in found if a.kind == t.CodeActionKind.QuickFix]
        (fix,) = quick
        assert fix.title == "Fix TL101: Set attn_implementation='sdpa'"
        assert fix.is_preferred is True
        ((edit_uri, edits),) = edits_of(fix).items()
        assert edit_uri == uri and fix.edit.document_changes[0].text_document.version == 1
        (edit,) = edits
        assert edit.range == diag.range and edit.new_text == "attn_implementation='sdpa'"
        fixed = apply(EAGER, edits)
        assert fixed == SDPA
        (fix_all,) = [a for a in found if a.kind == "source.fixAll.trainlint"]
        assert apply(EAGER, edits_of(fix_all)[uri]) == SDPA
        change(client, uri, 2, fixed)
        assert list((await published(client, uri, version=2)).diagnostics) == []


async def test_unsafe_fix_is_labelled_and_not_preferred(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(LIGER)
    async with session(tmp_path) as client:
        uri, diag = await only_diagnostic(client, path)
        assert diag.code == "TL301"
        (fix,) = await actions(client, uri, diag, only=[t.CodeActionKind.QuickFix])
    assert fix.title.startswith("Fix TL301 (unsafe fix): ")
    assert not fix.is_preferred
    fixed = apply(LIGER, edits_of(fix)[uri])
    assert "TrainingArguments(output_dir='o', per_device_train_batch_size=4, use_liger_kernel=True)" in fixed


async def test_changes_are_debounced_and_out_of_order_ones_dropped(tmp_path, eager):
    async with session(tmp_path, debounce_ms=400) as client:
        uri = open_doc(client, eager)
        await published(client, uri, version=1)
        mark = len(client.published)
        for version, text in ((2, EAGER + "\n"), (3, EAGER + "\n\n"), (4, SDPA)):  # a burst: one analysis
            change(client, uri, version, text)
        assert (await published(client, uri, after=mark)).version == 4
        assert list(client.diagnostics[uri]) == []
        await asyncio.sleep(1.0)
        assert [p.version for p in client.published[mark:] if p.uri == uri] == [4]
        change(client, uri, 3, EAGER)  # arrives late: older than the text the server has
        change(client, (tmp_path / "never_opened.py").as_uri(), 7, EAGER)
        await asyncio.sleep(1.0)
        assert [p.version for p in client.published[mark:] if p.uri == uri] == [4]
        assert await actions(client, uri, t.Diagnostic(t.Range(t.Position(1, 0), t.Position(1, 5)), "x")) == []
        change(client, uri, 5, EAGER)
        (diag,) = (await published(client, uri, version=5)).diagnostics
        assert diag.code == "TL101"


async def test_unparsable_document_gets_tl001_and_the_server_goes_on(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("from transformers import Trainer\ndef f(:\n")
    good = tmp_path / "train.py"
    good.write_text(EAGER)
    async with session(tmp_path) as client:
        uri = open_doc(client, path)
        (diag,) = (await published(client, uri)).diagnostics
        assert diag.code == "TL001" and diag.severity == t.DiagnosticSeverity.Warning
        assert diag.range.start.line == 1
        assert (await published(client, open_doc(client, good))).diagnostics[0].code == "TL101"


async def test_notebook_document_cells_get_their_own_diagnostics_and_fix(tmp_path):
    nb_uri = (tmp_path / "train.ipynb").as_uri()
    cells = ["from transformers import AutoModelForCausalLM\nMAX_SEQ_LENGTH = 8192",
             "!pip install -q peft\nmodel = AutoModelForCausalLM.from_pretrained(\n"
             "    'meta-llama/Llama-3.1-8B', attn_implementation='eager')"]
    cell_uris = [f"vscode-notebook-cell:{tmp_path}/train.ipynb#W{i}" for i in range(2)]
    async with session(tmp_path) as client:
        client.notebook_document_did_open(t.DidOpenNotebookDocumentParams(
            notebook_document=t.NotebookDocument(uri=nb_uri, notebook_type="jupyter-notebook", version=1, cells=[
                t.NotebookCell(kind=t.NotebookCellKind.Code, document=u) for u in cell_uris]),
            cell_text_documents=[t.TextDocumentItem(uri=u, language_id="python", version=1, text=c)
                                 for u, c in zip(cell_uris, cells)]))
        second = await published(client, cell_uris[1])
        await published(client, cell_uris[0])
        assert list(client.diagnostics[cell_uris[0]]) == []
        (diag,) = second.diagnostics
        assert diag.code == "TL101"
        assert (diag.range.start.line, diag.range.start.character) == (2, 31)  # rows count within the cell
        (fix,) = await actions(client, cell_uris[1], diag, only=[t.CodeActionKind.QuickFix])
        ((uri, edits),) = edits_of(fix).items()
        assert uri == cell_uris[1]
        assert apply(cells[1], edits) == cells[1].replace("'eager'", "'sdpa'")


async def test_notebook_edits_are_rechecked_and_a_stale_notebook_version_dropped(tmp_path):
    nb_uri = (tmp_path / "edit.ipynb").as_uri()
    first, added = f"vscode-notebook-cell:{tmp_path}/edit.ipynb#A", f"vscode-notebook-cell:{tmp_path}/edit.ipynb#B"
    eager = ("model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B', "
             "attn_implementation='eager')")

    def content(version: int, cell_version: int, text: str) -> t.DidChangeNotebookDocumentParams:
        return t.DidChangeNotebookDocumentParams(
            t.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=version),
            t.NotebookDocumentChangeEvent(cells=t.NotebookDocumentCellChanges(text_content=[
                t.NotebookDocumentCellContentChanges(t.VersionedTextDocumentIdentifier(uri=added, version=cell_version),
                                                     [t.TextDocumentContentChangeWholeDocument(text)])])))

    async with session(tmp_path) as client:
        client.notebook_document_did_open(t.DidOpenNotebookDocumentParams(
            notebook_document=t.NotebookDocument(uri=nb_uri, notebook_type="jupyter-notebook", version=1, cells=[
                t.NotebookCell(kind=t.NotebookCellKind.Code, document=first)]),
            cell_text_documents=[t.TextDocumentItem(uri=first, language_id="python", version=1, text=(
                "from transformers import AutoModelForCausalLM\nMAX_SEQ_LENGTH = 8192\n"))]))
        assert list((await published(client, first)).diagnostics) == []
        client.notebook_document_did_change(t.DidChangeNotebookDocumentParams(  # a cell added below
            t.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=2),
            t.NotebookDocumentChangeEvent(cells=t.NotebookDocumentCellChanges(structure=t.NotebookDocumentCellChangeStructure(
                array=t.NotebookCellArrayChange(1, 0, [t.NotebookCell(kind=t.NotebookCellKind.Code, document=added)]),
                did_open=[t.TextDocumentItem(uri=added, language_id="python", version=1, text=eager)])))))
        (diag,) = (await published(client, added)).diagnostics
        assert diag.code == "TL101" and diag.range.start.line == 0
        mark = len(client.published)
        client.notebook_document_did_change(content(3, 2, eager.replace("'eager'", "'sdpa'")))
        assert list((await published(client, added, after=mark)).diagnostics) == []
        mark = len(client.published)
        client.notebook_document_did_change(content(2, 3, eager))  # late: the notebook is at version 3
        await asyncio.sleep(1.0)
        assert not [p for p in client.published[mark:] if p.uri == added]
        assert list(client.diagnostics[added]) == []


async def test_notebook_json_opened_as_text(tmp_path):
    """A client without notebook support sends the .ipynb JSON: findings sit at the top and say the cell;
    JSON that does not load is TL002."""
    good = tmp_path / "good.ipynb"
    good.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# notes"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": EAGER.splitlines(keepends=True)}]}, indent=1))
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [')
    async with session(tmp_path) as client:
        good_uri = open_doc(client, good, language="json")
        (diag,) = (await published(client, good_uri)).diagnostics
        assert diag.code == "TL101" and diag.message.startswith("cell 2, line 2, column ")
        assert diag.range == t.Range(t.Position(0, 0), t.Position(0, 0))
        (fix,) = await actions(client, good_uri, diag, only=[t.CodeActionKind.QuickFix])
        fixed = json.loads(apply(good.read_text(), edits_of(fix)[good_uri]))
        assert "".join(fixed["cells"][1]["source"]) == SDPA
        bad_uri = open_doc(client, bad, language="json")
        (diag,) = (await published(client, bad_uri)).diagnostics
        assert diag.code == "TL002" and "not valid JSON" in diag.message


async def test_workspace_config_is_read_and_a_broken_one_is_shown_not_fatal(tmp_path, eager):
    path = eager
    (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nlong-context = 16384\n")
    async with session(tmp_path) as client:
        uri = open_doc(client, path)
        assert list((await published(client, uri)).diagnostics) == []  # 8,192 tokens is under the configured 16,384
        (tmp_path / "pyproject.toml").write_text("[tool.trainlint]\nlong-contxt = 1\n")
        mark = len(client.published)
        client.text_document_did_save(t.DidSaveTextDocumentParams(t.TextDocumentIdentifier(uri)))
        assert list((await published(client, uri, after=mark)).diagnostics) == []
        assert any("unknown key `long-contxt`" in m.message for m in client.messages)
        (tmp_path / "pyproject.toml").unlink()  # no config at all: the defaults
        mark = len(client.published)
        client.text_document_did_save(t.DidSaveTextDocumentParams(t.TextDocumentIdentifier(uri)))
        (diag,) = (await published(client, uri, after=mark)).diagnostics
        assert diag.code == "TL101"


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


async def test_launch_decided_finding_lands_in_the_launcher_with_its_fix(tmp_path):
    (tmp_path / "train.py").write_text(
        "from transformers import HfArgumentParser, TrainingArguments\n"
        "(args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()\n")
    launcher = tmp_path / "run.sh"
    launcher.write_text("torchrun --nproc_per_node 8 train.py \\\n    --per_device_train_batch_size 8 \\\n"
                        "    --gradient_accumulation_steps 2\n")
    (tmp_path / "other.sh").write_text("python missing.py --config recipe.yaml\n")
    (tmp_path / "recipe.yaml").write_text("model_name_or_path: [unclosed\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", "-A")
    _git(tmp_path, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "one")
    launcher.write_text(launcher.read_text().replace("batch_size 8", "batch_size 4"))
    async with session(tmp_path) as client:
        script_uri = open_doc(client, tmp_path / "train.py")
        assert list((await published(client, script_uri)).diagnostics) == []
        (diag,) = (await published(client, launcher.as_uri())).diagnostics
        assert diag.code == "TL401" and diag.message.startswith("train.py: per_device_train_batch_size 8 -> 4")
        assert (diag.range.start.line, diag.range.start.character) == (1, 34)
        assert diag.related_information[0].location.uri == script_uri
        (fix,) = await actions(client, launcher.as_uri(), diag, only=[t.CodeActionKind.QuickFix])
        ((uri, (edit,)),) = edits_of(fix).items()
        assert uri == launcher.as_uri() and edit.new_text == "4"
        assert (edit.range.start.line, edit.range.start.character) == (2, 34)
        # the launcher changes on disk, outside the editor: the watched-files notification re-checks the script
        (watch,) = client.registrations
        assert watch.method == t.WORKSPACE_DID_CHANGE_WATCHED_FILES
        assert "*.sh" in watch.register_options["watchers"][0]["globPattern"]
        launcher.write_text(launcher.read_text().replace("accumulation_steps 2", "accumulation_steps 4"))
        mark = len(client.published)
        client.workspace_did_change_watched_files(t.DidChangeWatchedFilesParams(
            [t.FileEvent(launcher.as_uri(), t.FileChangeType.Changed)]))
        assert list((await published(client, launcher.as_uri(), after=mark)).diagnostics) == []
        launcher.write_text(launcher.read_text().replace("accumulation_steps 4", "accumulation_steps 2"))
        mark = len(client.published)
        client.workspace_did_change_watched_files(t.DidChangeWatchedFilesParams(
            [t.FileEvent(launcher.as_uri(), t.FileChangeType.Changed)]))
        assert (await published(client, launcher.as_uri(), after=mark)).diagnostics[0].code == "TL401"
        # the launcher opened itself: the same finding, from its own analysis (launchers are read on disk)
        mark = len(client.published)
        launcher_uri = open_doc(client, launcher, language="shellscript")
        assert [d.code for d in (await published(client, launcher_uri, after=mark)).diagnostics] == ["TL401"]
        mark = len(client.published)
        client.text_document_did_close(t.DidCloseTextDocumentParams(t.TextDocumentIdentifier(script_uri)))
        assert [d.code for d in (await published(client, launcher_uri, after=mark)).diagnostics] == ["TL401"]
        assert list((await published(client, script_uri, after=mark)).diagnostics) == []  # closed: cleared
        # a config: the launcher that passes it is linted, so its YAML error and the missing script show
        yaml_uri = open_doc(client, tmp_path / "recipe.yaml", language="yaml")
        (diag,) = (await published(client, yaml_uri)).diagnostics
        assert diag.code == "TL005" and diag.range.start.line == 1
        (diag,) = (await published(client, (tmp_path / "other.sh").as_uri())).diagnostics
        assert diag.code == "TL006"


async def test_hover_shows_the_rule_page(tmp_path, eager):
    async with session(tmp_path) as client:
        uri, diag = await only_diagnostic(client, eager)
        hover = await client.text_document_hover_async(t.HoverParams(t.TextDocumentIdentifier(uri), diag.range.start))
        nothing = await client.text_document_hover_async(t.HoverParams(t.TextDocumentIdentifier(uri), t.Position(0, 0)))
    assert hover.contents.kind == t.MarkupKind.Markdown
    assert hover.contents.value.startswith("# TL101 eager-attention-at-long-context\n")
    assert "## Fix safety" in hover.contents.value
    assert nothing is None


# The server under a test-side patch (the process is still the real server speaking over stdio): one
# document's lint raises inside the lint API (reported as TL004, as `check` does), another's analysis raises
# in the server's own code; a probe at exit lists any training library that was imported.
_PATCHED = textwrap.dedent("""
    import atexit, sys
    import trainlint.lint, trainlint.report.lsp
    real_lint_text, real_diagnostic = trainlint.lint.lint_text, trainlint.report.lsp.diagnostic

    def lint_text(path, *args, **kwargs):
        if path.name == "lint_crash.py":
            raise RuntimeError("injected failure in the lint")
        return real_lint_text(path, *args, **kwargs)

    def diagnostic(d, *args, **kwargs):
        if d.filename.endswith("server_crash.py"):
            raise RuntimeError("injected failure in the server")
        return real_diagnostic(d, *args, **kwargs)

    trainlint.lint.lint_text, trainlint.report.lsp.diagnostic = lint_text, diagnostic
    HEAVY = ("torch", "transformers", "peft", "trl", "accelerate", "datasets")
    atexit.register(lambda: open(sys.argv[1], "w").write(
        " ".join(sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)) or "none"))
    from trainlint.server import main
    main()
""")


async def test_a_crash_in_one_analysis_is_logged_and_the_server_keeps_serving(tmp_path):
    probe = tmp_path / "heavy.txt"
    for name in ("lint_crash.py", "server_crash.py", "train.py"):
        (tmp_path / name).write_text("import torch, peft, trl\n" + EAGER)
    async with session(tmp_path, [sys.executable, "-c", _PATCHED, str(probe)]) as client:
        lint_uri = open_doc(client, tmp_path / "lint_crash.py")
        (diag,) = (await published(client, lint_uri)).diagnostics
        assert diag.code == "TL004" and "injected failure in the lint" in diag.message
        open_doc(client, tmp_path / "server_crash.py")
        good = open_doc(client, tmp_path / "train.py")
        (diag,) = (await published(client, good)).diagnostics
        assert diag.code == "TL101"
        logged = [m.message for m in client.log_messages if m.type == t.MessageType.Error]
        assert any("server_crash.py failed" in m and "injected failure in the server" in m for m in logged)
        assert not any(p.uri.endswith("server_crash.py") for p in client.published)
    assert probe.read_text() == "none"
