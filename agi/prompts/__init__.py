"""The built-in system prompt and the harness's texts to the model, kept as .md files."""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent


def default_system_prompt() -> str:
    return (HERE / "system.md").read_text(encoding="utf-8").strip()


@cache
def harness_text(name: str) -> str:
    """A section `## name` of harness.md: what the harness says to the model in situation `name`."""
    text = (HERE / "harness.md").read_text(encoding="utf-8")
    sections = {}
    for block in text.split("\n## ")[1:]:
        title, _, body = block.partition("\n")
        sections[title.strip()] = body.strip()
    return sections[name]
