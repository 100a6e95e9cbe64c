"""Claude Code plugins, loaded unchanged from `--plugin-dir DIR` (docs: permissions).

A plugin directory holds `.claude-plugin/plugin.json` (its `name`; without one the directory's
name), `hooks/hooks.json`, `agents/*.md`, `skills/*/SKILL.md`, `commands/*.md` and `.mcp.json`;
the manifest's `commands`, `agents`, `skills`, `hooks` and `mcpServers` add paths (or inline
hooks and servers) to those defaults. Its skills, agents and commands are named `PLUGIN:NAME`.
Loading reads small files only: hooks run, servers start and command bodies are read when used.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.claude.commands import find_commands
from agi.claude.hooks.settings import parse_hooks, read_json
from agi.claude.qualified import clashes
from agi.claude.skills import load_skills
from agi.claude.subagents import load_agents
from agi.errors import UsageError
from agi.tools.mcp_config import McpSource

if TYPE_CHECKING:
    from agi.claude.commands import Command
    from agi.claude.hooks.run import Hook
    from agi.claude.skills import Skill
    from agi.claude.subagents import AgentFile

MANIFEST = Path(".claude-plugin") / "plugin.json"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass
class Plugin:
    name: str
    root: Path
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        version = self.manifest.get("version")
        return f"{self.name} {version}" if isinstance(version, str) else self.name


@dataclass
class Parts:
    """What the plugins of a run bring, each part already named `PLUGIN:NAME`."""

    plugins: list[Plugin] = field(default_factory=list)
    hooks: list[tuple[str, Hook]] = field(default_factory=list)
    skills: list[Skill] = field(default_factory=list)
    agents: list[AgentFile] = field(default_factory=list)
    commands: list[Command] = field(default_factory=list)
    mcp: list[McpSource] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def read_plugin(directory: Path) -> Plugin:
    """The plugin in a directory; a missing directory or a malformed manifest is a usage error."""
    root = directory.expanduser().absolute()
    if not root.is_dir():
        raise UsageError(f"plugin directory {directory}: not a directory")
    manifest: dict[str, Any] = {}
    if (root / MANIFEST).is_file():
        data = read_json(root / MANIFEST, "plugin manifest")
        if not isinstance(data, dict):
            raise UsageError(f"plugin manifest {root / MANIFEST}: the top level must be an object")
        manifest = data
    name = manifest.get("name", root.name)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UsageError(
            f"plugin manifest {root / MANIFEST}: name must be a word of letters, digits, "
            f"'-', '_' or '.', not {name!r}"
        )
    return Plugin(name, root, manifest)


def _places(plugin: Plugin, key: str, default: str) -> list[Path]:
    """The default directory (when present) and the manifest's paths for one kind of part."""
    value = plugin.manifest.get(key)
    given = [value] if isinstance(value, str) else value
    if given is not None and not (
        isinstance(given, list) and all(isinstance(v, str) for v in given)
    ):
        raise UsageError(
            f"plugin manifest {plugin.root / MANIFEST}: {key} must be a path or a list of paths"
        )
    found = [plugin.root / default] if (plugin.root / default).exists() else []
    return found + [plugin.root / p for p in given or [] if plugin.root / p not in found]


def load_plugins(dirs: list[Path]) -> Parts:
    """Every part of every plugin, in the order given; clashing bare names are warned about."""
    parts = Parts()
    for directory in dirs:
        plugin = read_plugin(Path(directory))
        if any(p.name == plugin.name for p in parts.plugins):
            parts.warnings.append(
                f"plugin {plugin.name} ({plugin.root}) is loaded already; skipped"
            )
            continue
        parts.plugins.append(plugin)
        _hooks(plugin, parts)
        _skills_and_agents(plugin, parts)
        _commands(plugin, parts)
        _mcp(plugin, parts)
    for kind, names in (
        ("skill", [s.name for s in parts.skills]),
        ("agent", [a.name for a in parts.agents]),
        ("command", [c.name for c in parts.commands]),
    ):
        parts.warnings += clashes(kind, names)
    return parts


def _hooks(plugin: Plugin, parts: Parts) -> None:
    root = str(plugin.root)
    inline = plugin.manifest.get("hooks")
    if isinstance(inline, dict):
        where = str(plugin.root / MANIFEST)
        parts.hooks += parse_hooks(inline, where, parts.warnings, root, "plugin manifest")
        inline = None
    for path in _places(
        dataclasses.replace(plugin, manifest={"hooks": inline}), "hooks", "hooks/hooks.json"
    ):
        data = read_json(path, "hooks file")
        parts.hooks += parse_hooks(data, str(path), parts.warnings, root)


def _skills_and_agents(plugin: Plugin, parts: Parts) -> None:
    for kind, load, found in (
        ("skills", load_skills, parts.skills),
        ("agents", load_agents, parts.agents),
    ):
        for place in _places(plugin, kind, kind):
            if not place.is_dir():
                parts.warnings.append(
                    f"plugin {plugin.name}: {kind} {place}: not a directory; skipped"
                )
                continue
            loaded, warnings = load([place])
            parts.warnings += warnings
            found += [_named(part, plugin) for part in loaded]


def _named(part: Any, plugin: Plugin) -> Any:
    return dataclasses.replace(part, name=f"{plugin.name}:{part.name}")


def _commands(plugin: Plugin, parts: Parts) -> None:
    places = _places(plugin, "commands", "commands")
    parts.commands += find_commands(places, plugin.name, str(plugin.root), parts.warnings)


def _mcp(plugin: Plugin, parts: Parts) -> None:
    root = str(plugin.root)
    if (plugin.root / ".mcp.json").is_file():
        parts.mcp.append(McpSource(path=plugin.root / ".mcp.json", plugin_root=root))
    servers = plugin.manifest.get("mcpServers")
    if isinstance(servers, str):
        parts.mcp.append(McpSource(path=plugin.root / servers, plugin_root=root))
    elif isinstance(servers, dict):
        parts.mcp.append(McpSource(data=servers, plugin_root=root))
    elif servers is not None:
        raise UsageError(
            f"plugin manifest {plugin.root / MANIFEST}: mcpServers must be a path or an object"
        )
