"""The Diagnostic and Span types every layer shares: rules produce them, reporters print them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True, order=True)
class Span:
    """A source range. Lines are 1-based; columns are 1-based character columns (like Ruff)."""

    line: int
    col: int
    end_line: int
    end_col: int
    # Set when the range is in another file than the script the facts are about: a value written in a
    # launcher or an args file (its display path). A rule reporting on such a span reports in that file.
    file: str | None = None

    @staticmethod
    def point(line: int, col: int = 1) -> "Span":
        return Span(line, col, line, col)

    def local(self) -> "Span":
        """The same range without its file."""
        return Span(self.line, self.col, self.end_line, self.end_col)

    def in_file(self, file: str | None) -> "Span":
        return Span(self.line, self.col, self.end_line, self.end_col, file)


@dataclass(frozen=True)
class Setting:
    """What a finding asks the user to set, in the library's terms: `argument` = `value`, e.g.
    ("gradient_accumulation_steps", 8). `known_valid` False: whether the value loads for this architecture and
    version is not known (its fix is then unsafe)."""

    argument: str
    value: object
    known_valid: bool = True


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    filename: str
    span: Span
    url: str | None = None
    # Filled by later layers (fixes); kept here so every reporter sees one type.
    fix: dict | None = field(default=None, compare=False)
    cell: int | None = None  # notebooks: the 1-based cell; span rows are then rows within that cell
    # Other places that bear on the finding: (display path, span, what it is), e.g. the script a launcher runs.
    related: tuple[tuple[str, Span, str], ...] = field(default=(), compare=False)
    # The defaults of a launch the finding rests on ("MODEL=org/model-7b, the default at finetune.sh:6"): it does
    # not hold once they are unknown, and the caller could override them. Empty for a certain finding.
    assumptions: tuple[str, ...] = field(default=(), compare=False)
    # The setting the finding's advice asks for: a front end whose files spell settings otherwise (a framework
    # config) builds its own edit from it.
    setting: Setting | None = field(default=None, compare=False)

    def with_fix(self, fix: dict | None) -> "Diagnostic":
        return replace(self, fix=fix)

    @property
    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.filename}:{cell}{self.span.line}:{self.span.col}"

    @property
    def sort_key(self) -> tuple:
        return (self.filename, self.cell or 0, self.span.line, self.span.col, self.code)
