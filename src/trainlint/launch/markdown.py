"""README commands: the fenced shell blocks of a Markdown file read as launchers, in the file's own coordinates.
An indented code block (4 spaces, CommonMark) is read like a block tagged with another language.

Each block is read with every other line of the file blanked, so line and column numbers stay the Markdown
file's. Blocks are read in order with one shell state (an `export` in one block holds in the next, as in the
terminal the reader types them into). A block tagged with another language counts only when it launches.
"""

from __future__ import annotations

import re
from pathlib import Path

from trainlint.launch.model import ShellReading

_OPEN = re.compile(r"[ \t]*(`{3,}|~{3,})(.*)")
_CLOSE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*")
_PROMPT = re.compile(r"([ \t]*)\$ ")
# `<your_path>` and `{num_gpus}`: values the reader is to fill in. bash would read `<x>` as two redirections,
# so they are marked (same length: columns stay) and read as words whose value is unknown.
_ANGLE = re.compile(r"(?<![\w$<])<([A-Za-z_][\w.\-/]*)>(?![\w>])")
_BRACE = re.compile(r"(?<![\w${])\{([A-Za-z_][\w.\-]*)\}")
SHELL_INFO = frozenset(("", "sh", "bash", "shell", "console", "zsh"))


def fenced_blocks(lines: list[str]) -> list[tuple[str, int, int]]:
    """(info word, first body line index, end index) of each fenced block; an unclosed one runs to the end."""
    out, i = [], 0
    while i < len(lines):
        m = _OPEN.fullmatch(lines[i])
        if not m or (m.group(1)[0] == "`" and "`" in m.group(2)):
            i += 1
            continue
        fence = m.group(1)
        info = m.group(2).strip().lstrip("{").lstrip(".").split(" ")[0].split("}")[0].lower()
        j = i + 1
        while j < len(lines):
            c = _CLOSE.fullmatch(lines[j])
            if c and c.group(1)[0] == fence[0] and len(c.group(1)) >= len(fence):
                break
            j += 1
        out.append((info, i + 1, j))
        i = j + 1
    return out


_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
INDENTED = "(indented)"  # the info word of an indented code block: read like a block of another language


def _indented(line: str) -> bool:
    return line.startswith(("    ", "\t")) and bool(line.strip())


def indented_blocks(lines: list[str], fenced: list[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """CommonMark's indented code blocks (every line indented by 4 spaces or a tab) outside the fenced ones, as
    (INDENTED, first line index, end index). One cannot interrupt a paragraph, so it starts after a blank line
    (or the file's start); one after a list item's text is that item's content, not code, and is left out."""
    inside = set()
    for _, first, end in fenced:
        inside.update(range(first - 1, end + 1))
    out, i = [], 0
    while i < len(lines):
        if i in inside or not _indented(lines[i]) or (i > 0 and lines[i - 1].strip()):
            i += 1
            continue
        before = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        j = i
        while j < len(lines) and j not in inside and (_indented(lines[j]) or not lines[j].strip()):
            j += 1
        end = j
        while end > i and not lines[end - 1].strip():
            end -= 1
        if not (_LIST_ITEM.match(before) or _indented(before)):
            out.append((INDENTED, i, end))
        i = j
    return out


def strip_prompts(lines: list[str]) -> list[str]:
    """`$ cmd` lines lose the prompt (as spaces: columns stay); when prompts are used, other lines are the
    commands' output and are blanked, except continuation lines of a prompted command."""
    if not any(_PROMPT.match(line) for line in lines):
        return lines
    out, continued = [], False
    for line in lines:
        m = _PROMPT.match(line)
        if m:
            out.append(m.group(1) + "  " + line[m.end():])
            continued = line.rstrip().endswith("\\")
        elif continued:
            out.append(line)
            continued = line.rstrip().endswith("\\")
        else:
            out.append(" " * len(line))
    return out


def mark_placeholders(line: str) -> str:
    from trainlint.launch.shell_words import PLACEHOLDER_MARK as mark

    line = _ANGLE.sub(lambda m: mark + m.group(1) + mark, line)
    return _BRACE.sub(lambda m: mark + m.group(1) + mark, line)


def read_markdown(text: str, file: Path) -> ShellReading:
    from trainlint.launch.shell_run import Reader

    text = text.replace("\r\n", "\n")  # a \r before each newline: columns and lines stay the same
    lines = text.split("\n")
    reader = Reader(file)
    fenced = fenced_blocks(lines)
    for info, first, end in sorted(fenced + indented_blocks(lines, fenced), key=lambda b: b[1]):
        raw_body = lines[first:end]
        if info == "diff":
            # a command shown as a change: its lines after the change, each diff mark blanked in place (a removed
            # line is gone, so a `+` line continues the command the line before it continues)
            removed = {i for i, line in enumerate(raw_body) if line.startswith("-")}
            raw_body = [" " * len(line) if i in removed else (" " + line[1:] if line[:1] in ("+", " ") else line)
                        for i, line in enumerate(raw_body)]
            # an added line inside a continued command often lacks its own backslash (`+   --eos_token X` between
            # two `\`-ended lines): the change means the command to go on, so it does
            kept = [i for i, line in enumerate(raw_body) if line.strip()]
            for before, here, after in zip(kept, kept[1:], kept[2:]):
                if raw_body[before].rstrip().endswith("\\") and not raw_body[here].rstrip().endswith("\\") and \
                        raw_body[after].lstrip().startswith("-"):
                    raw_body[here] = raw_body[here].rstrip() + " \\"
            for i in sorted(removed):  # a removed line inside a continued command keeps it going (a lone `\`)
                if i > 0 and raw_body[i - 1].rstrip().endswith("\\") and raw_body[i]:
                    raw_body[i] = raw_body[i][:-1] + "\\"
            info = "sh"
        body = [mark_placeholders(line) for line in strip_prompts(raw_body)]
        # every other line blanked to its own length: offsets, lines and columns are the README's
        masked = "".join(" " * len(line) + "\n" for line in lines[:first]) + "\n".join(body) + "\n"
        if info in SHELL_INFO:
            reader.feed(masked, text)
            continue
        # another language: only commands that start a line count, and its lexing problems are not shell ones
        saved, n_inv, n_prob = reader.st.copy(), len(reader.invocations), len(reader.problems)
        reader.feed(masked, text)
        del reader.problems[n_prob:]
        found = [inv for inv in reader.invocations[n_inv:]
                 if inv.span.col == len(lines[inv.span.line - 1]) - len(lines[inv.span.line - 1].lstrip()) + 1]
        del reader.invocations[n_inv:]
        reader.invocations.extend(found)
        if not found:
            reader.st = saved
    invocations, problems = reader.result()
    return ShellReading(invocations, problems)
