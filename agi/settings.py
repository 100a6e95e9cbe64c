"""The settings of a run: defaults < config.toml < environment < flags, resolved once into plain
data. Nothing here starts a process or builds a tool; `agi.assemble` does that."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.config import ModelConfig
from agi.errors import UsageError
from agi.tools.sandbox import Policy

if TYPE_CHECKING:
    from agi.claude.commands import Command
    from agi.claude.hooks import Hooks
    from agi.claude.permissions import Permissions
    from agi.claude.plugins import Plugin
    from agi.claude.skills import Skill
    from agi.claude.subagents import AgentFile


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


@dataclass
class ToolSources:
    """Where a run's tools come from; `agi.assemble` builds them (runs --describe, reads MCP)."""

    builtin: bool = True  # the built-in tools (Bash, files, Terminal, calculate) and Task
    files: list[Path] = field(default_factory=list)  # --tool
    dirs: list[Path] = field(default_factory=list)  # --tools-dir, and tools/ beside the config
    mcp: list[Any] = field(default_factory=list)  # --mcp, mcp.json beside the config: Path or
    # agi.tools.mcp_config.McpSource (a plugin's servers, or a file with settings files' env)
    allow: list[str] | None = None  # --tools: the names offered (None: all)
    none: bool = False  # --no-tools


@dataclass
class Window:
    """How a session is kept within the model's context window."""

    compact: bool = True  # compact = "auto" (default); "off" or --no-compact: never
    threshold: float = 0.8  # compact before a request passing this fraction of the window
    windows: dict[str, Any] = field(default_factory=dict)  # context_window, [models."NAME"]


@dataclass
class Settings:
    """Everything a run needs, from defaults < config file < environment < flags."""

    model: ModelConfig
    system: str
    tools: ToolSources = field(default_factory=ToolSources)
    max_steps: int = 50
    timeout: float | None = None
    output: str = "text"
    verbose: bool = False
    quiet: bool = False
    home: Path = field(default_factory=Path)
    hooks: Hooks | None = None  # when any hooks file is given
    agents: list[AgentFile] = field(default_factory=list)  # subagent definitions
    skills: list[Skill] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # to show once the view exists
    react: bool = False  # the text ReAct protocol instead of native tool calls
    schema: dict[str, Any] | None = None  # --schema, as JSON Schema
    judge: str | None = None  # --exit-code: its criteria, "" for the generic rule
    sandbox: Policy = field(default_factory=Policy)  # --sandbox, --allow-write, --no-network
    max_cost: float | None = None  # --max-cost: USD a run may spend
    prices: dict[str, Any] = field(default_factory=dict)  # [prices."MODEL"] tables, USD per Mtok
    window: Window = field(default_factory=Window)  # compaction: compact, threshold, windows
    permissions: Permissions | None = None  # rules and mode (section 12), when any are given
    commands: list[Command] = field(default_factory=list)  # slash commands, by name
    env: dict[str, str] = field(default_factory=dict)  # settings files' env: tools, hooks, MCP
    plugins: list[Plugin] = field(default_factory=list)  # --plugin-dir, for listings

    def for_agent(self, agent: AgentFile, model: ModelConfig | None = None) -> Settings:
        """A subagent's settings: its file's prompt, tools and model; no ghost exchanges."""
        tools = self.tools
        if agent.tools is not None:
            allowed = [t for t in agent.tools if self.tools.allow is None or t in self.tools.allow]
            tools = dataclasses.replace(self.tools, allow=allowed)
        return dataclasses.replace(
            self,
            model=model or self.model,
            system=agent.system or self.system,
            tools=tools,
            schema=None,
            judge=None,
            warnings=[],
        )

    @classmethod
    def load(cls, flags: dict[str, Any]) -> Settings:
        from agi.config import agi_home, config_path, load_file, merged, resolve_model, seconds

        path = config_path()
        file = load_file(path)
        warnings: list[str] = []
        model = resolve_model(flags, file, path)
        extensions = _extensions(flags, file, path, warnings)
        tools = _tool_sources(flags, file, path.parent)
        tools.mcp += extensions.pop("mcp", [])
        if extensions.get("env"):
            from agi.tools.mcp_config import McpSource

            env = extensions["env"]
            tools.mcp = [
                McpSource(path=p, env=env) if isinstance(p, Path) else p for p in tools.mcp
            ]
        return cls(
            model=model,
            system=system_prompt(listed(merged(flags, file, "sys"))),  # "p.md": one file
            tools=tools,
            max_steps=merged(flags, file, "max_steps", 50),
            timeout=seconds(merged(flags, file, "timeout")),
            output=merged(flags, file, "output", "text"),
            verbose=bool(merged(flags, file, "verbose")),
            quiet=bool(merged(flags, file, "quiet")),
            home=agi_home(),
            warnings=warnings,
            schema=_schema(merged(flags, file, "schema")),
            judge=judge_criteria(merged(flags, file, "exit_code")),
            react=bool(merged(flags, file, "react")),
            sandbox=_sandbox(flags, file),
            max_cost=merged(flags, file, "max_cost"),
            prices=file.get("prices") or {},
            window=_window(flags, file),
            **extensions,
        )


def _sandbox(flags: dict[str, Any], file: dict[str, Any]) -> Policy:
    from agi.config import merged

    mode = merged(flags, file, "sandbox", "off")
    if flags.get("allow_write") and mode != "workspace":
        raise UsageError("--allow-write needs --sandbox workspace")
    sandbox = Policy.load(
        mode,
        listed(merged(flags, file, "allow_write")),
        bool(merged(flags, file, "no_network")),
    )
    return sandbox  # agi.assemble.prepare_tools checks that bwrap can build it


def _window(flags: dict[str, Any], file: dict[str, Any]) -> Window:
    from agi.config import merged

    off = merged(flags, file, "no_compact") or merged(flags, file, "compact", "auto") == "off"
    windows = {"models": file.get("models") or {}}
    if merged(flags, file, "context_window") is not None:
        windows["context_window"] = merged(flags, file, "context_window")
    return Window(
        compact=not off,
        threshold=float(merged(flags, file, "compact_threshold", 0.8)),
        windows=windows,
    )


def _schema(spec: Any) -> dict[str, Any] | None:
    if spec is None:
        return None
    from agi.structured.schema import parse_schema

    return parse_schema(spec)


def _tool_sources(flags: dict[str, Any], file: dict[str, Any], home: Path) -> ToolSources:
    from agi.config import merged, paths

    none = bool(merged(flags, file, "no_tools"))
    return ToolSources(
        builtin=not merged(flags, file, "no_bash"),
        files=[Path(p).expanduser() for p in listed(merged(flags, file, "tool"))],
        dirs=paths(flags, file, "tools_dir", home / "tools"),
        mcp=[] if none else paths(flags, file, "mcp", home / "mcp.json"),
        allow=allowlist(merged(flags, file, "tools")),
        none=none,
    )


def _extensions(
    flags: dict[str, Any], file: dict[str, Any], config: Path, warnings: list[str]
) -> dict[str, Any]:
    """Hooks, subagent files, skills, plugins, commands, settings files and permission rules:
    read and checked now (bad files are usage errors); nothing is started."""
    from agi.config import merged, paths

    home = config.parent
    found: dict[str, Any] = {}
    claude = _claude(flags, file, config, warnings)
    found.update(claude)
    hook_files = paths(flags, file, "hooks", home / "hooks.json")
    extra_hooks = found.pop("extra_hooks")
    if hook_files or extra_hooks:
        from agi.claude.hooks import load_hooks

        found["hooks"] = load_hooks(hook_files, extra=extra_hooks)
        warnings += found["hooks"].warnings
    agent_dirs = paths(flags, file, "agents", home / "agents")
    found["agents"] = found.get("agents", [])
    if agent_dirs:
        from agi.claude.subagents import load_agents

        agents, more = load_agents(agent_dirs)
        found["agents"] = agents + found["agents"]
        warnings += more
    skill_dirs = paths(flags, file, "skills", home / "skills")
    found["skills"] = found.get("skills", [])
    if skill_dirs:
        from agi.claude.skills import load_skills

        skills, more = load_skills(skill_dirs)
        found["skills"] = skills + found["skills"]
        warnings += more
    command_dirs = paths(flags, file, "commands", home / "commands")
    if command_dirs:
        from agi.claude.commands import find_commands

        found["commands"] = find_commands(command_dirs, warnings=warnings) + found["commands"]
    if merged(flags, file, "permission_mode") is not None:
        from agi.claude.permissions import Permissions

        permissions = found["permissions"] or Permissions()
        found["permissions"] = Permissions(
            permissions.rules, merged(flags, file, "permission_mode")
        )
    return found


def _claude(
    flags: dict[str, Any], file: dict[str, Any], config: Path, warnings: list[str]
) -> dict[str, Any]:
    """Claude Code's parts: plugins, settings files, and the permission rules of every source."""
    from agi.config import merged

    found: dict[str, Any] = {"extra_hooks": [], "commands": [], "env": {}, "permissions": None}
    plugin_dirs = [Path(p) for p in listed(merged(flags, file, "plugins"))]
    if plugin_dirs:
        from agi.claude.plugins import load_plugins

        parts = load_plugins(plugin_dirs)
        warnings += parts.warnings
        found.update(plugins=parts.plugins, skills=parts.skills, agents=parts.agents)
        found.update(commands=parts.commands, mcp=parts.mcp, extra_hooks=parts.hooks)
    settings_files = [Path(p) for p in listed(merged(flags, file, "settings"))]
    rules_given = any(merged(flags, file, k) for k in ("allow", "ask", "deny"))
    if not settings_files and not rules_given:
        return found
    from agi.claude.permissions import COMMAND_LINE, KINDS, Permissions, notes, parse_rules
    from agi.claude.settings_files import read_claude_settings

    claude = read_claude_settings(settings_files)
    warnings += claude.warnings
    found["extra_hooks"] = claude.hooks + found["extra_hooks"]
    found["env"] = claude.env
    rules = list(claude.rules)
    for kind in KINDS:
        if flags.get(kind):
            rules += parse_rules(flags[kind], kind, COMMAND_LINE, os.getcwd())
        elif file.get(kind):
            rules += parse_rules(listed(file[kind]), kind, str(config), os.getcwd())
    found["permissions"] = Permissions(rules, claude.mode or "default")
    warnings += notes(found["permissions"])
    return found
