"""The SDKs' programmatic subagents (docs: claude-agent-sdk): `initialize`'s `agents`, each an
`AgentDefinition` ({description, prompt, tools, disallowedTools, model}), as agi's subagents,
the same as an agent file's: the `Task` tool runs them. They come before the agent files of
the same name, as in Claude Code. A field agi does not honour is refused, naming it."""

from __future__ import annotations

from agi.claude.subagents import AgentFile
from agi.errors import UsageError

HONOURED = ("description", "prompt", "tools", "disallowedTools", "model")


def sdk_agents(table: object) -> list[AgentFile]:
    """The `agents` of `initialize` (none: [])."""
    if not table:
        return []
    if not isinstance(table, dict):
        raise UsageError("initialize: agents: expected {NAME: AgentDefinition, ...}")
    return [definition(str(name), value) for name, value in table.items()]


def definition(name: str, value: object) -> AgentFile:
    where = f"initialize: agent {name!r}"
    if not isinstance(value, dict):
        raise UsageError(f"{where}: expected an AgentDefinition object")
    other = sorted(k for k in value if k not in HONOURED)
    if other:
        raise UsageError(f"{where}: agi does not honour {', '.join(other)}")
    description, prompt = value.get("description"), value.get("prompt")
    if not isinstance(description, str) or not description.strip():
        raise UsageError(f"{where}: a description is required")
    if not isinstance(prompt, str):
        raise UsageError(f"{where}: a prompt is required")
    model = value.get("model")
    if model is not None and not isinstance(model, str):
        raise UsageError(f"{where}: model must be a string")
    return AgentFile(
        name,
        " ".join(description.split()),
        prompt.strip(),
        names(value.get("tools"), where, "tools"),
        names(value.get("disallowedTools"), where, "disallowedTools") or [],
        None if model in (None, "", "inherit") else model,
    )


def names(value: object, where: str, key: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise UsageError(f"{where}: {key} must be a list of tool names")
    return list(value)
