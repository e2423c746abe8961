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
class Edit:
    """One text edit of a fix: replace [start, end) with `content`; rows and columns 1-based (Ruff's convention,
    character columns, exclusive end)."""

    start: tuple[int, int]
    end: tuple[int, int]
    content: str

    def to_json(self) -> dict:
        """Ruff's JSON shape (`content`, `location`, `end_location`), what every report format starts from."""
        return {"content": self.content, "location": {"row": self.start[0], "column": self.start[1]},
                "end_location": {"row": self.end[0], "column": self.end[1]}}

    @staticmethod
    def from_json(data: dict) -> "Edit":
        return Edit((data["location"]["row"], data["location"]["column"]),
                    (data["end_location"]["row"], data["end_location"]["column"]), data["content"])


@dataclass(frozen=True)
class Fix:
    """A finding's fix: typed edits at the spans of the values that decided it. `file` is the file the edits
    apply to when it is not the file the finding is reported in (a launcher's word, a recipe's value)."""

    applicability: str  # "safe" | "unsafe"
    message: str
    edits: tuple[Edit, ...]
    file: str | None = None

    @property
    def safe(self) -> bool:
        return self.applicability == "safe"

    def to_json(self) -> dict:
        out = {"applicability": self.applicability, "message": self.message,
               "edits": [e.to_json() for e in self.edits]}
        if self.file is not None:
            out["file"] = self.file
        return out

    @staticmethod
    def from_json(data: dict) -> "Fix":
        return Fix(data["applicability"], data["message"], tuple(Edit.from_json(e) for e in data["edits"]),
                   data.get("file"))


# What a finding's setting is about, whatever a front end calls it (Setting.target): a framework config maps each to
# its own keys and levers (frameworks/fixes.py), the way spelling.Spelling words the advice.
ATTENTION = "attention"  # the attention implementation (transformers' attn_implementation)
FUSED_LOSS = "fused_loss"  # the loss path: a fused (Liger, cut-cross-entropy) or chunked cross-entropy
ACCUMULATION = "accumulation"  # gradient accumulation steps
SETTING_TARGETS = (ATTENTION, FUSED_LOSS, ACCUMULATION)


@dataclass(frozen=True)
class Setting:
    """What a finding asks the user to set, in the library's terms: `argument` = `value`, e.g.
    ("gradient_accumulation_steps", 8). `known_valid` False: whether the value loads for this architecture and
    version is not known (its fix is then unsafe). `target`: what the setting is about (SETTING_TARGETS), from which
    a front end that spells settings otherwise builds its own edit; None: no front end edit."""

    argument: str
    value: object
    known_valid: bool = True
    target: str | None = None

    def __post_init__(self) -> None:
        if self.target is not None and self.target not in SETTING_TARGETS:
            raise ValueError(f"Setting.target must be one of {SETTING_TARGETS} or None, not {self.target!r}")


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    filename: str
    span: Span
    url: str | None = None
    # Filled by later layers (fixes); kept here so every reporter sees one type.
    fix: Fix | None = field(default=None, compare=False)
    cell: int | None = None  # notebooks: the 1-based cell; span rows are then rows within that cell
    # Other places that bear on the finding: (display path, span, what it is), e.g. the script a launcher runs.
    related: tuple[tuple[str, Span, str], ...] = field(default=(), compare=False)
    # The defaults of a launch the finding rests on ("MODEL=org/model-7b, the default at finetune.sh:6"): it does
    # not hold once they are unknown, and the caller could override them. Empty for a certain finding.
    assumptions: tuple[str, ...] = field(default=(), compare=False)
    # The library releases the finding was judged on, with why each was chosen ("transformers 4.46.3: not pinned; trl
    # 0.12.2 requires transformers<4.47.0"), for the libraries the file uses; empty when they are all the newest
    # releases known, unpinned and unbounded (trainlint's default, which `--verbose` prints). Not an assumption:
    # `--certain-only` keeps the finding.
    versions: tuple[str, ...] = field(default=(), compare=False)
    # The setting the finding's advice asks for: a front end whose files spell settings otherwise (a framework
    # config) builds its own edit from it.
    setting: Setting | None = field(default=None, compare=False)
    # Figures the finding rests on that a later layer checks, by name: verify reads "effective_batch" (the samples
    # per optimizer step a "samples-per-step" rule's fix keeps, codes.VERIFY_KINDS) here, not from the message.
    data: dict = field(default_factory=dict, compare=False)

    def with_fix(self, fix: Fix | None) -> "Diagnostic":
        return replace(self, fix=fix)

    @property
    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.filename}:{cell}{self.span.line}:{self.span.col}"

    @property
    def sort_key(self) -> tuple:
        return (self.filename, self.cell or 0, self.span.line, self.span.col, self.code)
