"""The system prompt of the text ReAct protocol: the format rules, the tools, a worked example.

Also what a tool table looks like to the parser (agi.providers.react), which shows the same forms
when
an `Action:` cannot be read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from agi.prompts import sections

if TYPE_CHECKING:
    from agi.tools import Tool

ToolLike = Any  # a Tool, or its OpenAI `tools` entry ({"type": "function", "function": {...}})


def react_text(name: str) -> str:
    """A section `## name` of prompts/react.md."""
    return sections("react.md")[name]


def tool_table(tools: Iterable[ToolLike]) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (description, parameters), from Tool objects or their `tools` entries."""
    out = {}
    for t in tools:
        if isinstance(t, dict):
            fn = t.get("function") or t
            out[str(fn.get("name", ""))] = (fn.get("description") or "", fn.get("parameters") or {})
        else:
            out[t.name] = (t.description, t.parameters)
    return out


def input_schema(parameters: Any) -> tuple[dict[str, Any], list[str]]:
    """(properties, required) of a tool's JSON Schema, whatever a user-defined tool put there."""
    p = parameters if isinstance(parameters, dict) else {}
    props, required = p.get("properties"), p.get("required")
    return (
        props if isinstance(props, dict) else {},
        [r for r in required if isinstance(r, str)] if isinstance(required, list) else [],
    )


def _type(schema: Any) -> str:
    if not isinstance(schema, dict):
        return "any"
    if isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    return "|".join(map(str, kind)) if isinstance(kind, list) else str(kind)


def json_form(name: str, parameters: dict[str, Any]) -> str:
    """`NAME({"key": placeholder, ...})` with the required keys (or the first one)."""
    props, required = input_schema(parameters)
    blank = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    args = {k: blank.get(_type(props.get(k)), "...") for k in required or list(props)[:1]}
    return f"{name}({json.dumps(args, ensure_ascii=False)})"


def _describe(name: str, description: str, parameters: dict[str, Any]) -> str:
    summary = " ".join(description.strip().split("\n\n")[0].split()) or "(no description)"
    props, required = input_schema(parameters)
    inputs = [
        f"{key} ({_type(schema)}{', required' if key in required else ''})"
        for key, schema in props.items()
    ]
    return f"- {name}: {summary}\n  input: {'; '.join(inputs) or 'none, write ' + name + '({})'}"


def _example(table: dict[str, tuple[str, dict[str, Any]]]) -> str:
    if "calculate" in table:
        action, observation, answer = 'calculate("(12 * 9) + 3")', "111", "111"
        thought = "I should compute this with the calculator."
    elif table:
        name, (_, parameters) = next(iter(table.items()))
        action, observation, answer = json_form(name, parameters), "(the result)", "(the answer)"
        thought = f"I need {name} to answer."
    else:
        return "Thought: I can answer this myself.\nFinal Answer: (the answer)"
    return (
        f"Thought: {thought}\nAction: {action}\nObservation: {observation}\n"
        f"Thought: I now know the answer.\nFinal Answer: {answer}"
    )


def react_system_prompt(tools: Sequence[Tool] | Sequence[dict[str, Any]], base: str = "") -> str:
    """The system prompt for the text protocol: `base`, then the format rules and the tools."""
    table = tool_table(tools)
    listing = "\n".join(_describe(n, d, p) for n, (d, p) in table.items())
    single = [n for n, (_, p) in table.items() if len(input_schema(p)[1]) == 1]
    several = [n for n, (_, p) in table.items() if input_schema(p)[0]]
    raw = 'calculate("2 + 2")' if "calculate" in single else f'{single[0]}("...")' if single else ""
    text = (
        react_text("system")
        .replace("{tools}", listing or "(none: answer with a Final Answer)")
        .replace(
            "{json_example}",
            json_form(several[0], table[several[0]][1]) if several else 'TOOL({"key": "value"})',
        )
        .replace("{raw_example}", raw or 'TOOL("text")')
        .replace("{example}", _example(table))
    )
    return f"{base.strip()}\n\n{text}" if base.strip() else text
