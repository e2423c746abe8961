"""The protocol side of `trainlint server` (pygls): documents in, diagnostics, code actions and hovers out.

Analyses run on the server's event-loop thread, one at a time, so the per-file time limit of the lint API
(SIGALRM, main thread only) still holds, and no two analyses share the lint caches at once. A change is
analysed once the client has been quiet for `debounce` seconds (a burst of keystrokes is one analysis); an
open or a save is analysed at once. Text is synced whole (TextDocumentSyncKind.Full), so a change that
arrives out of order (a version not newer than the document's) can be dropped instead of being spliced
into newer text; a change to a document that was never opened is ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from pathlib import Path
from urllib.parse import unquote

from lsprotocol import types as t
from lsprotocol.converters import get_converter
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from trainlint import __version__
from trainlint.config import ConfigError
from trainlint.server.analysis import (Cell, Document, Finding, analyse, fix_action, fix_all_action, hover_text,
                                       notebook_json, settings_for)

logger = logging.getLogger("trainlint.server")
DEBOUNCE_S = 0.3
FIX_ALL = "source.fixAll.trainlint"
# what the checks of open documents read from disk: launchers, configs and args files, pin files, the git HEAD
WATCHED = "**/{*.sh,*.bash,*.slurm,*.sbatch,*.md,*.yaml,*.yml,*.json,*.toml,*.cfg,requirements*.txt,HEAD}"
_CONVERTER = get_converter()
_ENCODINGS = {t.PositionEncodingKind.Utf8: "utf-8", t.PositionEncodingKind.Utf16: "utf-16",
              t.PositionEncodingKind.Utf32: "utf-32"}


class _Protocol(LanguageServerProtocol):
    """pygls' protocol, with stale and unknown changes dropped before they reach the workspace."""

    @lsp_method(t.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: t.DidChangeTextDocumentParams):
        current = self.workspace.text_documents.get(unquote(params.text_document.uri))
        if current is None:
            logger.warning("change to %s, which is not open: ignored", params.text_document.uri)
            return
        if current.version is not None and params.text_document.version <= current.version:
            logger.warning("change to %s version %s arrived after version %s: dropped", params.text_document.uri,
                           params.text_document.version, current.version)
            return
        yield from super().lsp_text_document__did_change(params)

    @lsp_method(t.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: t.DidChangeNotebookDocumentParams):
        current = self.workspace.get_notebook_document(notebook_uri=params.notebook_document.uri)
        if current is None or params.notebook_document.version <= current.version:
            logger.warning("notebook change to %s version %s: not open or stale, dropped",
                           params.notebook_document.uri, params.notebook_document.version)
            return
        yield from super().lsp_notebook_document__did_change(params)


class TrainlintServer(LanguageServer):
    def __init__(self, debounce: float = DEBOUNCE_S) -> None:
        super().__init__(
            "trainlint", __version__, text_document_sync_kind=t.TextDocumentSyncKind.Full,
            notebook_document_sync=t.NotebookDocumentSyncOptions(
                notebook_selector=[t.NotebookDocumentFilterWithCells(
                    cells=[t.NotebookCellLanguage(language="python")], notebook="jupyter-notebook")],
                save=True),
            protocol_cls=_Protocol)
        self.debounce = debounce
        # source document uri -> (uri -> findings) its last analysis placed there; a document's diagnostics
        # are the union of what every open document's analysis says about it (a launcher's value is found by
        # the analysis of the script it launches, and by the launcher's own).
        self.contributions: dict[str, dict[str, list[Finding]]] = {}
        self.published: dict[str, list[Finding]] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.told: set[str] = set()

    # -- documents ----------------------------------------------------------------------------------------

    @property
    def encoding(self) -> str:
        return _ENCODINGS.get(self.workspace.position_encoding, "utf-16")

    def document(self, uri: str) -> Document | None:
        """The open document `uri` (a notebook with its code cells), or None; a cell is not a document here."""
        ws = self.workspace
        nb = ws.get_notebook_document(notebook_uri=uri)
        if nb is not None:
            cells = []
            for cell in nb.cells:
                text = ws.text_documents.get(unquote(cell.document))
                if cell.kind == t.NotebookCellKind.Code and text is not None and \
                        (text.language_id or "python") == "python":
                    cells.append(Cell(cell.document, text.source))
            metadata = nb.metadata if isinstance(nb.metadata, dict) else None
            return Document(uri, _path(uri, ".ipynb"), notebook_json(tuple(cells), metadata), nb.version,
                            tuple(cells))
        text = ws.text_documents.get(unquote(uri))
        if text is None or ws.get_notebook_document(cell_uri=uri) is not None:
            return None
        return Document(uri, _path(uri, ".py"), text.source, text.version)

    def open_uris(self) -> list[str]:
        ws = self.workspace
        return list(ws.notebook_documents) + [u for u in ws.text_documents
                                              if ws.get_notebook_document(cell_uri=u) is None]

    def by_path(self, path: Path) -> Document | None:
        for uri in self.open_uris():
            if _path(uri, "").resolve() == path.resolve():
                return self.document(uri)
        return None

    def buffer(self, path: Path) -> str | None:
        doc = self.by_path(path)
        return doc.text if doc is not None else None

    def owner(self, uri: str) -> str:
        nb = self.workspace.get_notebook_document(cell_uri=uri)
        return nb.uri if nb is not None else uri

    # -- analysis -----------------------------------------------------------------------------------------

    def schedule(self, uri: str, delay: float) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self.pending[uri] = asyncio.get_running_loop().call_later(delay, self.analyse_now, uri)

    def analyse_now(self, uri: str) -> None:
        self.pending.pop(uri, None)
        doc = self.document(uri)
        if doc is None:
            return
        try:
            settings = settings_for(doc.path)
        except ConfigError as exc:
            self.tell(f"trainlint: {exc}; {doc.path.name} is not checked until the configuration is fixed")
            self.replace(uri, {})
            return
        try:
            found = analyse(doc, self.buffer, self.encoding, settings)
        except Exception:  # noqa: BLE001 - one document's failure is reported and the server goes on
            logger.exception("analysis of %s failed", uri)
            self.window_log_message(t.LogMessageParams(
                type=t.MessageType.Error, message=f"trainlint: analysis of {uri} failed (its diagnostics were "
                                                  f"left as they were; please report it):\n{traceback.format_exc()}"))
            return
        self.replace(uri, found)

    def replace(self, source: str, found: dict[str, list[Finding]]) -> None:
        open_by_path = {_path(u, "").resolve(): u for u in self.open_uris() if u.startswith("file:")}
        found = {open_by_path.get(_path(u, "").resolve(), u) if u.startswith("file:") else u: items
                 for u, items in found.items()}  # a file the client has open keeps the client's spelling of its uri
        old = self.contributions.pop(source, {})
        self.contributions[source] = found
        for uri in dict.fromkeys([*old, *found]):
            self.publish(uri)

    def drop(self, source: str) -> None:
        handle = self.pending.pop(source, None)
        if handle is not None:
            handle.cancel()
        for uri in self.contributions.pop(source, {}):
            self.publish(uri)

    def publish(self, uri: str) -> None:
        owner = self.owner(uri)
        merged: list[Finding] = []
        seen: set[tuple] = set()
        for source, per in sorted(self.contributions.items(), key=lambda kv: kv[0] != owner):  # its own first
            for finding in per.get(uri, ()):
                key = (finding.diag.code, finding.diag.span, finding.diag.cell)
                if key not in seen:
                    seen.add(key)
                    merged.append(finding)
        self.published[uri] = merged
        text = self.workspace.text_documents.get(unquote(uri))
        self.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
            uri=uri, diagnostics=[_CONVERTER.structure(f.lsp, t.Diagnostic) for f in merged],
            version=text.version if text is not None else None))

    def tell(self, message: str) -> None:
        """Show a message once (a broken configuration would otherwise be shown on every keystroke)."""
        logger.error("%s", message)
        if message not in self.told:
            self.told.add(message)
            self.window_show_message(t.ShowMessageParams(type=t.MessageType.Error, message=message))

    # -- requests -----------------------------------------------------------------------------------------

    def code_actions(self, params: t.CodeActionParams) -> list[t.CodeAction]:
        uri = params.text_document.uri
        only = params.context.only

        def wanted(kind: str) -> bool:
            return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

        out: list[t.CodeAction] = []
        if wanted("quickfix"):
            for finding in self.published.get(uri, ()):
                if not _overlaps(finding.lsp["range"], params.range) or not finding.diag.fix:
                    continue
                action = self._safely(fix_action, finding, self.by_path(finding.linted), self.buffer,
                                      self.encoding)
                if action is not None:
                    out.append(t.CodeAction(title=action.title, kind=t.CodeActionKind.QuickFix,
                                            diagnostics=[_CONVERTER.structure(finding.lsp, t.Diagnostic)],
                                            is_preferred=action.preferred, edit=self.workspace_edit(action.edits)))
        doc = self.document(self.owner(uri))
        if wanted(FIX_ALL) and doc is not None and any(
                f.diag.fix and f.diag.fix.safe for u in self.contributions.get(doc.uri, {})
                for f in self.contributions[doc.uri][u]):
            action = self._safely(fix_all_action, doc, self.encoding)
            if action is not None:
                out.append(t.CodeAction(title=action.title, kind=FIX_ALL, edit=self.workspace_edit(action.edits)))
        return out

    def _safely(self, fn, *args):
        try:
            return fn(*args)
        except Exception:  # noqa: BLE001 - a failing fix is no action, never a failed request
            logger.exception("computing a code action failed")
            self.window_log_message(t.LogMessageParams(type=t.MessageType.Error,
                                                       message=f"trainlint: a code action failed:\n"
                                                               f"{traceback.format_exc()}"))
            return None

    def workspace_edit(self, edits: dict[str, list[dict]]) -> t.WorkspaceEdit:
        """Versioned document edits where the client takes them (it then refuses an edit made for an older
        version of the text), else plain changes. Edits for a document the client has open use its uri."""
        by_path = {_path(u, "").resolve(): u for u in self.workspace.text_documents}
        ready = {by_path.get(_path(uri, "").resolve(), uri) if uri.startswith("file:") else uri:
                 [_CONVERTER.structure(e, t.TextEdit) for e in items] for uri, items in edits.items()}
        caps = self.client_capabilities.workspace
        if caps and caps.workspace_edit and caps.workspace_edit.document_changes:
            changes = []
            for uri, items in ready.items():
                text = self.workspace.text_documents.get(unquote(uri))
                changes.append(t.TextDocumentEdit(
                    text_document=t.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=text.version if text is not None else None), edits=items))
            return t.WorkspaceEdit(document_changes=changes)
        return t.WorkspaceEdit(changes=ready)

    def hover(self, params: t.HoverParams) -> t.Hover | None:
        here = (params.position.line, params.position.character)
        codes: list[str] = []
        first = None
        for finding in self.published.get(params.text_document.uri, ()):
            r = finding.lsp["range"]
            start, end = (r["start"]["line"], r["start"]["character"]), (r["end"]["line"], r["end"]["character"])
            if start <= here <= end or (start == end and here[0] == start[0]):
                first = first or finding
                codes.append(finding.diag.code)
        if not codes:
            return None
        text = "\n\n---\n\n".join(hover_text(code) for code in dict.fromkeys(codes))
        return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=text),
                       range=_CONVERTER.structure(first.lsp["range"], t.Range))


def _path(uri: str, suffix: str) -> Path:
    """The file of a document uri; a document without one (untitled:) is named in the working directory."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path:
        return Path(path)
    name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in unquote(uri).rsplit("/", 1)[-1]) or "untitled"
    return Path.cwd() / (name if Path(name).suffix else name + suffix)


def _overlaps(a: dict, b: t.Range) -> bool:
    a0, a1 = (a["start"]["line"], a["start"]["character"]), (a["end"]["line"], a["end"]["character"])
    b0, b1 = (b.start.line, b.start.character), (b.end.line, b.end.character)
    return a0 <= b1 and b0 <= a1


def forget() -> None:
    """Drop what the lint caches remember of the disk (launchers, configs, pins, git trees): after a save,
    what other documents were checked under may have changed."""
    from trainlint.history import clear_caches as clear_history
    from trainlint.knowledge.versions import project_pins
    from trainlint.launch.discover import clear_caches

    clear_caches()
    clear_history()
    project_pins.cache_clear()


def build(debounce: float = DEBOUNCE_S) -> TrainlintServer:
    server = TrainlintServer(debounce)

    @server.feature(t.INITIALIZE)
    def initialize(ls: TrainlintServer, params: t.InitializeParams) -> None:
        root = None
        if params.workspace_folders:
            root = to_fs_path(params.workspace_folders[0].uri)
        elif params.root_uri:
            root = to_fs_path(params.root_uri)
        elif params.root_path:
            root = params.root_path
        if root and Path(root).is_dir():
            os.chdir(root)  # paths in messages are relative to the workspace, as `trainlint check` prints them
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("debounceMs"), (int, float)):
            ls.debounce = max(0.0, float(options["debounceMs"]) / 1000)

    @server.feature(t.INITIALIZED)
    def initialized(ls: TrainlintServer, params: t.InitializedParams) -> None:
        caps = ls.client_capabilities.workspace
        if caps and caps.did_change_watched_files and caps.did_change_watched_files.dynamic_registration:
            ls.client_register_capability(t.RegistrationParams(registrations=[t.Registration(
                id="trainlint-watched-files", method=t.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=t.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[t.FileSystemWatcher(glob_pattern=WATCHED)]))]))

    @server.feature(t.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: TrainlintServer, params: t.DidChangeWatchedFilesParams) -> None:
        saved(ls, None)  # a launcher, a config, a pin file or the git HEAD changed outside the editor

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TrainlintServer, params: t.DidOpenTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri, 0)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TrainlintServer, params: t.DidChangeTextDocumentParams) -> None:
        doc = ls.document(params.text_document.uri)
        if doc is not None and doc.kind != "launch":  # launchers and configs are read from disk: on save
            ls.schedule(doc.uri, ls.debounce)

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE, t.SaveOptions(include_text=False))
    def did_save(ls: TrainlintServer, params: t.DidSaveTextDocumentParams) -> None:
        saved(ls, params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TrainlintServer, params: t.DidCloseTextDocumentParams) -> None:
        ls.drop(params.text_document.uri)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_OPEN)
    def nb_open(ls: TrainlintServer, params: t.DidOpenNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, 0)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def nb_change(ls: TrainlintServer, params: t.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri, ls.debounce)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_SAVE)
    def nb_save(ls: TrainlintServer, params: t.DidSaveNotebookDocumentParams) -> None:
        saved(ls, params.notebook_document.uri)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def nb_close(ls: TrainlintServer, params: t.DidCloseNotebookDocumentParams) -> None:
        ls.drop(params.notebook_document.uri)

    @server.feature(t.TEXT_DOCUMENT_CODE_ACTION, t.CodeActionOptions(
        code_action_kinds=[t.CodeActionKind.QuickFix, FIX_ALL]))
    def code_action(ls: TrainlintServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        return ls.code_actions(params)

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: TrainlintServer, params: t.HoverParams) -> t.Hover | None:
        return ls.hover(params)

    return server


def saved(ls: TrainlintServer, uri: str | None) -> None:
    """A saved file can change how every open document is checked (it may be their launcher or config)."""
    forget()
    if uri is not None:
        ls.schedule(uri, 0)
    for other in ls.open_uris():
        if other != uri:
            ls.schedule(other, ls.debounce)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="trainlint server: %(levelname)s %(message)s")
    build().start_io()
