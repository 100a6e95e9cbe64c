"""Subagents: Claude Code agent files (`NAME.md`) and the `Task` tool that runs one.

A subagent has its own context (a session under the parent's `subagents/`), its own system
prompt (the file's body) and the tools its file lists; several `Task` calls in one turn run
concurrently, because the toolbox runs a turn's calls in parallel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.fileio import read_text
from agi.prompts import harness_text
from agi.tools import ToolContext, ToolError, require

GENERAL = "general-purpose"
MAX_DEPTH = 2  # a subagent may start subagents, theirs may not


@dataclass
class AgentFile:
    name: str
    description: str
    system: str
    tools: list[str] | None = None  # None: the parent's tools
    disallowed: list[str] = field(default_factory=list)  # `disallowedTools`: never offered
    model: str | None = None  # None or "inherit": the parent's model
    path: Path | None = field(default=None, repr=False)
    note: str = field(default="", repr=False)  # a warning for the user: what was not read


def read_agent(path: Path) -> AgentFile:
    """An agent file. Front matter that cannot be read is dropped, as Claude Code drops it (the
    agent is named after its file), except its `tools` line: dropping that would give the agent
    every tool, so it is kept, and a file whose `tools` cannot be read is refused."""
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.claude.skills import lenient_front_matter, split_front_matter, written_keys

    lines, body = split_front_matter(read_text(path))  # bounded (docs: security)
    meta, problem = lenient_front_matter(lines)
    note = ""
    if problem is not None:
        meta = {"description": f"Agent {path.stem} (its front matter could not be read)"}
        for key in ("tools", "disallowedTools"):  # dropping either would widen what it may do
            if key in written_keys(lines):
                meta[key] = _tools_line(lines, problem, key)
        note = f"agent file {path}: front matter: {problem}; loaded without it, as Claude Code does"
    name = meta.get("name") or path.stem
    description = meta.get("description")
    if not isinstance(name, str) or not isinstance(description, str) or not description.strip():
        raise ValueError("'name' and 'description' are required in the front matter")
    tools = _names(meta.get("tools"), "tools")
    disallowed = _names(meta.get("disallowedTools"), "disallowedTools") or []
    model = meta.get("model")
    return AgentFile(
        name,
        " ".join(description.split()),
        body.strip(),
        tools,
        disallowed,
        model if isinstance(model, str) and model != "inherit" else None,
        path,
        note,
    )


def _names(value: Any, key: str) -> list[str] | None:
    """A list of tool names: a comma-separated string or a list of strings."""
    if isinstance(value, str):
        value = [t.strip() for t in value.split(",") if t.strip()]
    if value is not None and not (
        isinstance(value, list) and all(isinstance(t, str) for t in value)
    ):
        raise ValueError(f"'{key}' must be a comma-separated string or a list")
    return value


def _tools_line(lines: list[str], problem: str, key: str = "tools") -> Any:
    """The `tools` (or `disallowedTools`) of an unreadable front matter: its one line, read
    alone."""
    found = [line for line in lines if line.startswith(f"{key}:")]
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.claude.skills import FrontMatterError, parse_front_matter

    try:
        tools = parse_front_matter(found).get(key) if len(found) == 1 else None
    except FrontMatterError:
        tools = None
    if not tools:
        raise ValueError(f"front matter: {problem} (and its `{key}` cannot be read: refused)")
    return tools


def load_agents(dirs: list[Path]) -> tuple[list[AgentFile], list[str]]:
    """Agent files from each directory in order; the first of a name wins; bad files warn."""
    agents: dict[str, AgentFile] = {}
    warnings: list[str] = []
    for directory in dirs:
        directory = directory.expanduser()
        if not directory.is_dir():
            raise UsageError(f"agents directory {directory}: not a directory")
        for path in sorted(directory.glob("*.md")):
            try:
                agent = read_agent(path)
            except (ValueError, OSError) as e:
                warnings.append(f"agent file {path}: {e}; skipped")
                continue
            if agent.note:
                warnings.append(agent.note)
            if agent.name in agents:
                warnings.append(f"agent file {path}: the name {agent.name} is taken; skipped")
            else:
                agents[agent.name] = agent
    return list(agents.values()), warnings


class Task:
    """The `Task` tool: run a subagent to its final answer and return that answer."""

    name = "Task"

    def __init__(self, agents: list[AgentFile], spawn: Callable[[AgentFile, str, str], str]):
        """`spawn(agent_file, prompt, description) -> str` runs one subagent to its answer."""
        self.agents = {a.name: a for a in agents}
        self.spawn = spawn
        kinds = "".join(f"\n- {a.name}: {a.description}" for a in agents)
        self.description = harness_text("task_tool").format(general=GENERAL, kinds=kinds)
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "The task in 3-5 words"},
                "prompt": {"type": "string", "description": "The task, in full"},
                "subagent_type": {"type": "string", "enum": [GENERAL, *self.agents]},
            },
            "required": ["description", "prompt"],
        }

    def kind(self, input: dict[str, Any]) -> str:
        """The full name of the agent asked for: a plugin's agent also by its bare name."""
        kind = str(input.get("subagent_type") or GENERAL)
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.claude.qualified import resolve

        return resolve(kind, [GENERAL, *self.agents]) or kind

    def canonical(self, input: dict[str, Any]) -> set[str]:
        """For `Task(AGENT)` permission rules."""
        return {self.kind(input)}

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        prompt = require(input, "prompt")
        kind = self.kind(input)
        if kind == GENERAL:
            agent = AgentFile(GENERAL, "general-purpose subagent", "", None)
        elif kind in self.agents:
            agent = self.agents[kind]
        else:
            raise ToolError(
                f"there is no subagent type {kind!r} "
                f"(available: {', '.join([GENERAL, *self.agents])})"
            )
        return str(self.spawn(agent, prompt, str(input.get("description") or kind)))


def subagent_dir(parent: Path, name: str) -> Path:
    import secrets

    name = name.replace(":", "-")  # a plugin's agent: PLUGIN:NAME
    return parent / "subagents" / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}-{secrets.token_hex(3)}"
