"""The settings of a run: defaults < config.toml < environment < flags, resolved once into plain
data. Nothing here starts a process or builds a tool; `agi.engine.assemble` does that."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.attachments import check_model, read
from agi.claude.project import Project, apply_project
from agi.claude.subagents import load_agents
from agi.errors import UsageError
from agi.fileio import PROMPT_LIMIT, read_text
from agi.options.config import ModelConfig, agi_home, config_path, load_file, resolve_model, seconds
from agi.options.values import NAMES, Layer, ToolChoice, env_layer, file_layer, resolve
from agi.options.values import RUN_FIELDS as PER_RUN  # what one run may change alone
from agi.policy.sandbox import Policy
from agi.prompts import default_system_prompt

if TYPE_CHECKING:
    from agi.attachments import Attachment
    from agi.claude.commands import Command
    from agi.claude.hooks.run import Hooks
    from agi.claude.plugins import Plugin
    from agi.claude.skills import Skill
    from agi.claude.subagents import AgentFile
    from agi.options.values import Options, Resolved
    from agi.policy.permissions import Permissions


def system_prompt(files: list[str] | None, where: str = "--sys", tools: bool = True) -> str:
    """The system prompt files concatenated in order (`default` is the built-in prompt, its
    lean form for a run that offers no tools); `where` names the option in errors (`--sys`,
    `config.toml: sys`)."""
    if not files:
        return default_system_prompt(tools)
    parts = []
    for name in files:
        if name == "default":
            parts.append(default_system_prompt(tools))
            continue
        try:  # docs: security (bounded; a pipe only from the command line, within --timeout)
            text = read_text(name, PROMPT_LIMIT, pipes=where in ("--sys", "/sys"))
            parts.append(text.strip())
        except OSError as e:
            raise UsageError(f"{where}: cannot read {name}: {e.strerror}") from e
        except UnicodeDecodeError as e:
            raise UsageError(f"{where}: {name} is not UTF-8 text") from e
    return "\n\n".join(parts)


def judge_criteria(value: Any) -> str | None:
    """--exit-code: None when off, "" for the generic rule (`exit_code = true` in the config)."""
    if value is None or value is False:
        return None
    return "" if value is True else str(value)


@dataclass
class ToolSources:
    """Where a run's tools come from; `agi.engine.assemble` builds them (--describe, MCP lists)."""

    builtin: bool = True  # the built-in tools (Bash, files, Terminal, calculate) and Task
    files: list[Path] = field(default_factory=list)  # --tool
    dirs: list[Path] = field(default_factory=list)  # --tools-dir, and tools/ beside the config
    mcp: list[Any] = field(default_factory=list)  # --mcp, mcp.json beside the config: Path or
    # agi.tools.mcp_config.McpSource (a plugin's servers, or a file with settings files' env)
    allow: list[str] | None = None  # --tools: the names offered (None: all)
    none: bool = False  # --no-tools
    allow_source: str = "--tools"  # where the allowlist came from, for errors
    exclude: list[str] = field(default_factory=list)  # never offered (an agent's disallowedTools)
    named: list[str] = field(default_factory=list)  # opt-in tools (Grep, ...) offered as well:
    # a command's `allowed-tools` names them (without --tools; docs: plugins)


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
    color: str = "auto"  # --color: auto, always or never (NO_COLOR under auto)
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
    layers: tuple[Layer, ...] = field(default=(), compare=False, repr=False)  # the sources
    checkpoints: bool = True  # --no-checkpoints, checkpoints = false
    web_allow_private: bool = False  # WebFetch may fetch private addresses (docs: tools)
    webfetch_raw: bool = False  # WebFetch returns the page instead of an answer about it
    stdin_limit: int | None = None  # bytes of stdin a run reads at most (None: the default)
    ephemeral: bool = False  # --ephemeral: the run writes nothing of its own (docs: volume)
    keep_sessions: float | None = None  # seconds: prune older sessions when a run ends
    attachments: tuple[Attachment, ...] = ()  # -a FILE, read and checked (docs: attachments)
    project: Project | None = None  # --project: the working directory's Claude Code files

    @property
    def state(self) -> Path | None:
        """Where the run may write what it learns (caches of tool descriptions, MCP lists,
        context windows, refused structured-output forms): $AGI_HOME, or None when the run is
        ephemeral (docs: volume)."""
        return None if self.ephemeral else self.home

    def check_rules(self) -> list[str]:
        """A server's start (`--acp`, `--mcp-serve`): rules naming no tool agi knows fail it
        (exit 2) before anything is served; returns the warnings (docs: permissions)."""
        if self.permissions is None:
            return []
        # lazy: only a server with rules loads the judge's checks (docs: development)
        from agi.policy.permissions import check_at_start

        users = bool(self.tools.files or self.tools.dirs)
        return check_at_start(self.permissions.rules, users)

    def for_agent(self, agent: AgentFile, model: ModelConfig | None = None) -> Settings:
        """A subagent's settings: its file's prompt, tools (less its `disallowedTools`) and
        model; no ghost exchanges."""
        tools = self.tools
        if agent.tools is not None:
            allowed = [t for t in agent.tools if self.tools.allow is None or t in self.tools.allow]
            tools = dataclasses.replace(self.tools, allow=allowed)
        if agent.disallowed:
            tools = dataclasses.replace(tools, exclude=[*tools.exclude, *agent.disallowed])
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
    def load(
        cls,
        *layers: Layer,
        defaults: Options | None = None,
        isolated: bool = False,
        anchor: str | None = None,
    ) -> Settings:
        """The settings from built-in defaults < `defaults` < the config file < the environment
        < `layers` (each front end's own, in order). Reads the config file and the files it
        names; starts nothing. `isolated` (the Python API's hermetic runs): neither the config
        file, nor what lies beside it, nor the environment's AGI_* options. `anchor` (a server
        whose runs work in other directories): relative path rules rooted in that directory,
        where they were given (docs: security)."""
        path = config_path()
        sources = [] if isolated else [file_layer(load_file(path), path), env_layer()]
        first = [Layer(defaults, "defaults")] if defaults is not None else []
        r = resolve([*first, *sources, *layers])
        project = apply_project(r, anchor)  # --project: the working directory's .claude/
        o = r.options
        warnings: list[str] = []
        model = resolve_model(r, path)
        beside = None if isolated else path.parent  # tools/, hooks.json, agents/, ...
        extensions = _extensions(r, beside, warnings, project)
        if anchor is not None and extensions["permissions"] is not None:
            # lazy: only a run with hooks, rules or commands loads it (docs: development)
            from agi.policy.anchors import anchored

            extensions["permissions"] = anchored(extensions["permissions"], anchor)
        tools = _tools_with(_tool_sources(r, beside), extensions)
        return cls(
            model=model,
            system=system_prompt(o.sys, r.where("sys"), offers_tools(tools)),
            tools=tools,
            max_steps=o.max_steps or 50,
            timeout=seconds(o.timeout),
            output=o.output or "text",
            verbose=bool(o.verbose),
            quiet=bool(o.quiet),
            color=o.color or "auto",
            home=agi_home(),
            warnings=warnings,
            schema=_schema(o.schema, r.where("schema")),
            judge=judge_criteria(o.exit_code),
            react=bool(o.react),
            sandbox=_sandbox(r),
            max_cost=o.max_cost,
            prices=o.prices or {},
            window=_window(r),
            checkpoints=o.checkpoints is not False,
            web_allow_private=bool(o.web_allow_private),
            webfetch_raw=bool(o.webfetch_raw),
            stdin_limit=o.stdin_limit,
            ephemeral=bool(o.ephemeral),
            keep_sessions=_keep(o.keep_sessions, r.where("keep_sessions")),
            attachments=_attachments(o.attachments, o.attach_limit, model),
            layers=(*first, *sources, *layers),
            project=project,
            **extensions,
        )

    def with_agents(self, agents: list[AgentFile]) -> Settings:
        """These settings with `agents` first (a front end's own definitions: the SDKs'
        `initialize`); an agent file of the same name is left out, as in Claude Code."""
        given = {a.name for a in agents}
        kept = [a for a in self.agents if a.name not in given]
        return dataclasses.replace(self, agents=[*agents, *kept]) if agents else self

    def over(self, layer: Layer) -> Settings:
        """These settings with a front end's last `layer` over them, as `load` would make them
        with that layer last, for the options one run may change alone (`PER_RUN`: an MCP
        call's fields, a batch job's limits, the REPL's /sys): nothing but what they name is
        read again (docs: configuration). Any other option is loaded with the rest (ValueError)."""
        o = layer.options
        other = [n for n in NAMES if getattr(o, n) is not None and n not in PER_RUN]
        if other:
            raise ValueError(f"{layer.source}: {', '.join(other)}: load these with the settings")
        changed: dict[str, Any] = {"layers": (*self.layers, layer)}
        if o.schema is not None:
            changed["schema"] = _schema(o.schema, layer.where("schema"))
        if o.exit_code is not None:
            changed["judge"] = judge_criteria(o.exit_code)
        if o.sys is not None:
            changed["system"] = system_prompt(o.sys, layer.where("sys"), offers_tools(self.tools))
        if o.ephemeral is not None:  # an MCP call's `ephemeral` (docs: volume)
            changed["ephemeral"] = bool(o.ephemeral)
        if o.model is not None:  # as -m would be, with the layers these settings came from
            changed["model"] = resolve_model(resolve([*self.layers, layer]), config_path())
        if o.max_steps is not None:
            changed["max_steps"] = o.max_steps
        if o.timeout is not None:
            changed["timeout"] = seconds(o.timeout)
        if o.max_cost is not None:
            changed["max_cost"] = o.max_cost
        if o.attachments is not None:  # checked against the run's model (docs: attachments)
            limit = resolve([*self.layers, layer]).options.attach_limit
            model = changed.get("model", self.model)
            changed["attachments"] = _attachments(o.attachments, limit, model)
        return dataclasses.replace(self, **changed)


def offers_tools(tools: ToolSources) -> bool:
    """Whether a run with these tool sources may offer any (not `--no-tools`, `--tools ""`)."""
    return not tools.none and tools.allow != []


def model_for(*layers: Layer) -> ModelConfig:
    """The model, endpoint and key a run with these layers would use (nothing else is read)."""
    path = config_path()
    return resolve_model(resolve([file_layer(load_file(path), path), env_layer(), *layers]), path)


def _attachments(
    names: list[str] | None, limit: int | None, model: ModelConfig
) -> tuple[Attachment, ...]:
    """The files to send with the prompt, read and checked now: exit 2 before anything is sent
    (docs: attachments)."""
    if not names:
        return ()
    found = read(names, limit)
    check_model(found, model)
    return found


def _sandbox(r: Resolved) -> Policy:
    o = r.options
    mode = o.sandbox or "off"
    if o.allow_write and mode != "workspace":
        raise UsageError(f"{r.where('allow_write')} needs --sandbox workspace")
    return Policy.load(mode, list(o.allow_write or []), bool(o.no_network))
    # agi.engine.assemble.prepare_tools checks that bwrap can build it


def _keep(age: str | None, where: str) -> float | None:
    if age is None:
        return None
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.sessions.prune import age_of

    return age_of(age, where)


def _window(r: Resolved) -> Window:
    o = r.options
    windows: dict[str, Any] = {"models": o.models or {}}
    if o.context_window is not None:
        windows["context_window"] = o.context_window
    threshold = o.compact_threshold if o.compact_threshold is not None else 0.8
    return Window(compact=o.compact != "off", threshold=float(threshold), windows=windows)


def _schema(spec: str | None, where: str) -> dict[str, Any] | None:
    if spec is None:
        return None
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.structured.schema import parse_schema

    return parse_schema(spec, where)


def paths(r: Resolved, name: str, default: Path | None) -> list[Path]:
    """A repeatable path option: the config directory's default (if present), then the values
    of the last layer that gives any. A path named twice counts once."""
    given = getattr(r.options, name) or []
    found = [default] if default is not None and default.exists() else []
    unique: dict[str, Path] = {}
    for path in [*found, *(Path(p).expanduser() for p in given)]:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


def _tools_with(tools: ToolSources, extensions: dict[str, Any]) -> ToolSources:
    """The tool sources with the extensions' MCP servers added, each MCP file's servers under
    the extensions' `env`."""
    tools.mcp += extensions.pop("mcp", [])
    if extensions.get("env"):
        env = extensions["env"]
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.tools.mcp_config import McpSource

        tools.mcp = [McpSource(path=p, env=env) if isinstance(p, Path) else p for p in tools.mcp]
    return tools


def _tool_sources(r: Resolved, home: Path | None) -> ToolSources:
    choice = r.options.tools or ToolChoice()
    return ToolSources(
        builtin=choice.builtin,
        files=[Path(p).expanduser() for p in r.options.tool or []],
        dirs=paths(r, "tools_dir", home and home / "tools"),
        mcp=[] if choice.none else paths(r, "mcp", home and home / "mcp.json"),
        allow=None if choice.allow is None else list(choice.allow),
        none=choice.none,
        allow_source=r.where("tools"),
    )


def _extensions(
    r: Resolved, home: Path | None, warnings: list[str], project: Project | None = None
) -> dict[str, Any]:
    """Hooks, subagents, skills, plugins, commands (`project`'s first), settings files and rules
    (`home`: the config's directory's too): checked now (bad files: usage errors); none run."""
    found: dict[str, Any] = dict(_claude(r, warnings))
    hook_files = paths(r, "hooks", home and home / "hooks.json")
    extra_hooks = found.pop("extra_hooks")
    if hook_files or extra_hooks:
        # lazy: agi.claude.hooks.run loads concurrent
        from agi.claude.hooks.run import load_hooks

        found["hooks"] = load_hooks(hook_files, extra=extra_hooks)
        warnings += found["hooks"].warnings
    agent_dirs = paths(r, "agents", home and home / "agents")
    found["agents"] = found.get("agents", [])
    if agent_dirs:
        agents, more = load_agents(agent_dirs)
        found["agents"] = agents + found["agents"]
        warnings += more
    skill_dirs = paths(r, "skills", home and home / "skills")
    found["skills"] = found.get("skills", [])
    if skill_dirs:
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.claude.skills import load_skills

        skills, more = load_skills(skill_dirs)
        found["skills"] = skills + found["skills"]
        warnings += more
    command_dirs = [project.commands] if project and project.commands else []  # the user's after
    command_dirs += [home / "commands"] if home and (home / "commands").exists() else []
    if command_dirs:
        # lazy: only a run with hooks, rules or commands loads it (docs: development)
        from agi.claude.commands import find_commands

        found["commands"] = find_commands(command_dirs, warnings=warnings) + found["commands"]
    if r.options.permission_mode is not None:
        # lazy: only a run with hooks, rules or commands loads it (docs: development)
        from agi.policy.permissions import Permissions

        permissions = found["permissions"] or Permissions()
        found["permissions"] = Permissions(permissions.rules, r.options.permission_mode)
    return found


def _claude(r: Resolved, warnings: list[str]) -> dict[str, Any]:
    """Claude Code's parts: plugins, settings files, and the permission rules of every source."""
    o = r.options
    found: dict[str, Any] = {"extra_hooks": [], "commands": [], "env": {}, "permissions": None}
    plugin_dirs = [Path(p) for p in o.plugins or []]
    if plugin_dirs:
        # lazy: only a run with hooks, rules or commands loads it (docs: development)
        from agi.claude.plugins import load_plugins

        parts = load_plugins(plugin_dirs)
        warnings += parts.warnings
        found.update(plugins=parts.plugins, skills=parts.skills, agents=parts.agents)
        found.update(commands=parts.commands, mcp=parts.mcp, extra_hooks=parts.hooks)
    settings_files = [Path(p) for p in o.settings or []]
    rules_given = any(getattr(o, k) for k in ("allow", "ask", "deny"))
    if not settings_files and not rules_given:
        return found
    # lazy: only a run with hooks, rules or commands loads it (docs: development)
    from agi.claude.settings_files import read_claude_settings
    from agi.policy.permissions import KINDS, Permissions, notes, parse_rules

    claude = read_claude_settings(settings_files)
    warnings += claude.warnings
    found["extra_hooks"] = claude.hooks + found["extra_hooks"]
    found["env"] = claude.env
    rules = list(claude.rules)
    for kind in KINDS:
        given = getattr(o, kind)
        if given:
            rules += parse_rules(list(given), kind, _rule_source(r, kind), os.getcwd())
    found["permissions"] = Permissions(rules, claude.mode or "default")
    warnings += notes(found["permissions"])
    return found


def _rule_source(r: Resolved, kind: str) -> str:
    """Where a permission rule came from, as rule listings show it: the command line, the
    config file's path, or the front end's name."""
    # lazy: only a run with hooks, rules or commands loads it (docs: development)
    from agi.policy.permissions import COMMAND_LINE

    layer = r.layer_of(kind)
    if layer is None or layer.source == COMMAND_LINE:
        return COMMAND_LINE
    return layer.path or layer.source
