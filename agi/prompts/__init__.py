"""The built-in system prompt and the harness's texts to the model, kept as .md files."""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent


def default_system_prompt() -> str:
    return (HERE / "system.md").read_text(encoding="utf-8").strip()


@cache
def sections(file: str) -> dict[str, str]:
    """The `## name` sections of a prompts file, by name."""
    text = (HERE / file).read_text(encoding="utf-8")
    found = {}
    for block in text.split("\n## ")[1:]:
        title, _, body = block.partition("\n")
        found[title.strip()] = body.strip()
    return found


def harness_text(name: str) -> str:
    """What the harness says to the model in situation `name` (a section of harness.md)."""
    return sections("harness.md")[name]
