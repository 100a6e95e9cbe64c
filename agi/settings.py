"""The settings of a run: defaults < config.toml < environment < flags, resolved once."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.config import ModelConfig
from agi.errors import UsageError
from agi.sandbox import Policy


def system_prompt(files: list[str] | None) -> str:
    """The --sys files concatenated in order (`default` is the built-in prompt)."""
    from agi.prompts import default_system_prompt

    if not files:
        return default_system_prompt()
    parts = []
    for name in files:
        if name == "default":
            parts.append(default_system_prompt())
            continue
        try:
            parts.append(Path(name).expanduser().read_text(encoding="utf-8").strip())
        except OSError as e:
            raise UsageError(f"cannot read --sys file {name}: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise UsageError(f"--sys file {name} is not UTF-8 text") from e
    return "\n\n".join(parts)


def allowlist(value: Any) -> list[str] | None:
    if value is None:
        return None
    names = value.split(",") if isinstance(value, str) else value
    return [n.strip() for n in names if n.strip()]


def judge_criteria(value: Any) -> str | None:
    """--exit-code: None when off, "" for the generic rule (`exit_code = true` in the config)."""
    if value is None or value is False:
        return None
    return "" if value is True else str(value)


def listed(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def choose_tools(tools: list[Any], allow: list[str] | None) -> list[Any]:
    """Apply the --tools allowlist; an unknown name is a usage error."""
    if allow is None:
        return tools
    known = {t.name for t in tools}
    unknown = [n for n in allow if n not in known]
    if unknown:
        raise UsageError(
            f"unknown tool in --tools: {', '.join(unknown)} (available: {', '.join(sorted(known))})"
        )
    return [t for t in tools if t.name in allow]


@dataclass
class Settings:
    """Everything a run needs, from defaults < config file < environment < flags."""

    model: ModelConfig
    system: str
    tools: list[Any]
    max_steps: int = 50
    timeout: float | None = None
    output: str = "text"
    verbose: bool = False
    quiet: bool = False
    home: Path = field(default_factory=Path)
    hooks: Any = None  # agi.hooks.Hooks, when any hooks file is given
    agents: list[Any] = field(default_factory=list)  # subagent definitions
    warnings: list[str] = field(default_factory=list)  # to show once the view exists
    react: bool = False  # the text ReAct protocol instead of native tool calls
    schema: dict[str, Any] | None = None  # --schema, as JSON Schema
    judge: str | None = None  # --exit-code: its criteria, "" for the generic rule
    sandbox: Policy = field(default_factory=Policy)  # --sandbox, --allow-write, --no-network

    @classmethod
    def load(cls, flags: dict[str, Any]) -> Settings:
        from agi.config import agi_home, config_path, load_file, merged, paths, resolve_model
        from agi.tools import builtin_tools

        path = config_path()
        file = load_file(path)
        model = resolve_model(flags, file, path)
        mode = merged(flags, file, "sandbox", "off")
        if flags.get("allow_write") and mode != "workspace":
            raise UsageError("--allow-write needs --sandbox workspace")
        sandbox = Policy.load(
            mode,
            listed(merged(flags, file, "allow_write")),
            bool(merged(flags, file, "no_network")),
        )
        sandbox.check()  # bwrap missing or unusable: exit 2 before anything reaches a model
        system = system_prompt(merged(flags, file, "sys"))
        schema = None
        if merged(flags, file, "schema") is not None:
            from agi.schema import parse_schema

            schema = parse_schema(merged(flags, file, "schema"))
        warnings: list[str] = []
        hooks = None
        hook_files = paths(flags, file, "hooks", path.parent / "hooks.json")
        if hook_files:
            from agi.hooks import load_hooks

            hooks = load_hooks(hook_files)
            warnings += hooks.warnings
        agents: list[Any] = []
        agent_dirs = paths(flags, file, "agents", path.parent / "agents")
        if agent_dirs:
            from agi.subagents import load_agents

            agents, found = load_agents(agent_dirs)
            warnings += found
        own: list[Any] = []  # the user's tools and skills
        tool_files = [Path(p).expanduser() for p in listed(merged(flags, file, "tool"))]
        tool_dirs = paths(flags, file, "tools_dir", path.parent / "tools")
        if tool_files or tool_dirs:
            from agi.tools.external import load_tools

            own, found = load_tools(tool_files, tool_dirs, agi_home() / "tool-cache.json")
            warnings += found
        mcp_files = paths(flags, file, "mcp", path.parent / "mcp.json")
        if mcp_files and not merged(flags, file, "no_tools"):
            from agi.mcp import load_mcp

            mcp_tools, found = load_mcp(mcp_files, agi_home() / "mcp-cache.json")
            own += mcp_tools
            warnings += found
        skills: list[Any] = []
        skill_dirs = paths(flags, file, "skills", path.parent / "skills")
        if skill_dirs:
            from agi.skills import SkillTool, load_skills, skills_prompt

            skills, found = load_skills(skill_dirs)
            warnings += found
            if skills_prompt(skills):
                own.append(SkillTool(skills))
        tools: list[Any] = []
        if not merged(flags, file, "no_tools"):
            from agi.subagents import Task

            builtin = [] if merged(flags, file, "no_bash") else [*builtin_tools(), Task(agents)]
            tools = choose_tools([*builtin, *own], allowlist(merged(flags, file, "tools")))
        if any(t.name == "Skill" for t in tools):
            system += "\n\n" + skills_prompt(skills)
        return cls(
            model=model,
            system=system,
            tools=tools,
            max_steps=merged(flags, file, "max_steps", 50),
            timeout=merged(flags, file, "timeout"),
            output=merged(flags, file, "output", "text"),
            verbose=bool(merged(flags, file, "verbose")),
            quiet=bool(merged(flags, file, "quiet")),
            home=agi_home(),
            hooks=hooks,
            agents=agents,
            warnings=warnings,
            schema=schema,
            judge=judge_criteria(merged(flags, file, "exit_code")),
            react=bool(merged(flags, file, "react")),
            sandbox=sandbox,
        )
