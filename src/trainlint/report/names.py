"""Output format names, importable without loading any formatter (the CLI needs them at start-up)."""

FORMAT_NAMES = ("text", "concise", "json")
