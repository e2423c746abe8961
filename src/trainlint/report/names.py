"""Output format names, importable without loading any formatter (the CLI needs them at start-up)."""

# text is the default (Ruff's concise form; `concise` is its alias). The others are for CI and code
# review: full (text with source excerpts), json / json-lines (Ruff's JSON objects), junit, github
# (workflow commands), gitlab (Code Quality), rdjson (reviewdog) and sarif (code scanning).
FORMAT_NAMES = ("text", "concise", "full", "json", "json-lines", "junit", "github", "gitlab", "rdjson", "sarif")
