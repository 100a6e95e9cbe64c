"""The built-in system prompt and the harness's texts to the model, kept as .md files."""

from __future__ import annotations

from functools import cache
from pathlib import Path

HERE = Path(__file__).parent


def default_system_prompt(tools: bool = True) -> str:
    """The built-in system prompt: system.md, or answer.md for a run that offers no tools
    (nothing in it about tools or steps it cannot take: docs: prompts)."""
    return (HERE / ("system.md" if tools else "answer.md")).read_text(encoding="utf-8").strip()


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


def tool_less_system(system: str, enforced: bool = False) -> str:
    """`system` for a request that offers no tools (docs: prompts): the built-in prompt in it in
    its lean form, and nothing at all when that is all of it and the server holds the reply to a
    schema (`enforced`): the schema says what the lean prompt would."""
    lean = default_system_prompt(False)
    system = system.replace(default_system_prompt(True), lean)
    return "" if enforced and system == lean else system
