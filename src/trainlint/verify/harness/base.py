"""Small pieces every part of the harness shares: its log line, the cap on listed items, and the two
BaseExceptions that end a script without being one of its errors."""

from __future__ import annotations

import sys

MAX_LISTED = 200  # paths, warnings: a script that writes thousands of files must not bloat the result


class StopAfterSteps(BaseException):
    """Raised by the optimizer hooks once N steps are done; the harness treats it as a normal end."""


class Terminated(BaseException):
    """SIGTERM arrived while the script ran (reported as the error; the result is still written)."""


def log(msg: str) -> None:
    print(f"[trainlint verify harness] {msg}", file=sys.stderr, flush=True)
