"""`trainlint server`: a Language Server Protocol server over stdio (needs the `lsp` extra: pygls).

`analysis` turns an open document into findings with the lint API and `report.lsp`; `app` speaks the
protocol. Neither imports torch or any training library: the server lints as `trainlint check` does."""

from __future__ import annotations


def main() -> None:
    from trainlint.server.app import main as run

    run()
