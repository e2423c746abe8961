"""Output formats. Each takes Diagnostics (and run statistics) and returns text; none knows about rules."""

from trainlint.report.formats import FORMATS, render

__all__ = ["FORMATS", "render"]
