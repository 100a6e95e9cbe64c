"""One path from settings to a ready agent: the transport, the toolbox and the hooks, built the
same way for the command line, for subagents and for Neovim. Nothing is patched afterwards."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agi.checkpoints.snapshots import for_run, protected_paths
from agi.claude.subagents import MAX_DEPTH, Task, subagent_dir
from agi.context.compaction import Compactor
from agi.engine.absent import NO_CHECKPOINTS, NO_GUARD, NO_HOOKS
from agi.engine.loop import Agent
from agi.errors import LimitReached, ProviderError, TimeLimit, ToolError, UsageError
from agi.messages import drain
from agi.providers.protocols import transport_for
from agi.providers.transport import Fallback
from agi.sessions.session import MemorySession, Session
from agi.tools import Toolbox, ToolContext, builtin_tools

if TYPE_CHECKING:
    from pathlib import Path

    from agi.claude.hooks.lifecycle import Lifecycle
    from agi.claude.subagents import AgentFile
    from agi.engine.seams import Ask, Event, ModelStream, PermissionGuard, TurnCheckpoints
    from agi.options.config import ModelConfig
    from agi.options.settings import Settings
    from agi.policy.permissions import Rule
    from agi.providers.cost import Meter
    from agi.providers.transport import Transport
    from agi.providers.wire import Pool
    from agi.tools import Tool


def _ignore(value: object) -> None:
    pass


@dataclass
class Context:
    """Where and within what limits agents run; one per run, shared (deeper) by its subagents."""

    cwd: str = field(default_factory=os.getcwd)
    deadline: float | None = None  # time.monotonic() value
    depth: int = 0  # 0 for the run's own agent, 1 for its subagents, ...
    warn: Callable[[str], None] = _ignore
    env: dict[str, str] = field(default_factory=dict)  # hook exports, for every process tools start
    tools: list[Tool] | None = None  # the run's tools, built once, shared with its subagents
    transports: list[Transport] = field(default_factory=list)  # every one made: cancelled at exit
    meter: Meter | None = None  # every model call's usage and cost, and the --max-cost budget
    checkpoints: TurnCheckpoints | None = None  # the run's (agi.checkpoints), subagents' too
    ask: Ask | None = None  # the front end's permission question (agi.policy.asking); None: tty
    default_asks: bool = False  # ACP: in mode `default`, calls that change something ask
    mode: str | None = None  # the permission mode a front end switched to (ACP set_mode)
    on_child_event: Callable[[Event], None] | None = None  # ACP: subagents' events (tool calls)
    on_allowed: Callable[[str], None] | None = None  # ACP: the calls let run (subagents' too)
    pool: Pool | None = None  # HTTP clients and one backoff per endpoint, shared by runs
    learned: list[Rule] = field(default_factory=list)  # "always" answers, every guard's
    roots: list[str] = field(default_factory=list)  # acceptEdits: more directories, every guard's
    fallback: ModelConfig | None = None  # the model once the run's fails (agi.providers.transport)
    strict_mcp: bool = False  # the front end's MCP sources alone (build_tools' `added`)

    def deeper(self) -> Context:
        """A subagent's context: the same limits, tools, environment and transports list."""
        return replace(self, depth=self.depth + 1)

    def set_deadline(self, deadline: float | None) -> None:
        """A new deadline (a REPL's next turn), for the transports made so far too."""
        self.deadline = deadline
        for transport in self.transports:
            transport.deadline = deadline

    def cancel(self) -> None:
        """Close every model connection at once (from any thread)."""
        for transport in list(self.transports):
            transport.cancel()

    def resume(self) -> None:
        """After a cancelled turn (an editor's cancel): the transports send requests again."""
        for transport in list(self.transports):
            transport.cancelled.clear()


def assemble(
    settings: Settings,
    session: Session,
    ctx: Context,
    agent_type: str | None = None,
) -> Agent:
    """The agent for a session: its transport, its toolbox (with `Task` wired to run subagents
    through this same function) and its hooks. `agent_type` names a subagent's file."""
    transport = make_transport(settings, session, ctx)
    lifecycle = make_lifecycle(settings, session, ctx, agent_type)
    hooks = NO_HOOKS if lifecycle is None else lifecycle
    prepare_tools(settings, ctx)
    tools = choose(settings, ctx, session)
    system = system_text(settings, settings.system, tools)
    parent = getattr(ctx.checkpoints, "session", session)  # a subagent's: its parent's too
    protected, unreadable = protected_paths(settings.home, session.path, parent.path)
    sandbox = settings.sandbox.widened(ctx.roots)  # the spec's roots: writable as cwd is
    if sandbox.enabled:  # commands cannot read the records' key either
        sandbox.hidden = unreadable
    tool_ctx = ToolContext(
        cwd=ctx.cwd,
        deadline=ctx.deadline,
        sandbox=sandbox,
        env=ctx.env,
        protected=protected,
        unreadable=unreadable,
        reader=PageReader(settings, session, ctx),
        web_allow_private=settings.web_allow_private,
        webfetch_raw=settings.webfetch_raw,
    )
    guard = make_guard(settings, session, ctx, lifecycle, tools)
    if ctx.depth == 0 and ctx.checkpoints is None and not settings.ephemeral:
        ctx.checkpoints = for_run(settings, session, ctx.cwd, ctx.warn)
    checkpoints = NO_CHECKPOINTS if ctx.checkpoints is None else ctx.checkpoints
    owner = ctx.depth == 0
    toolbox = Toolbox(tools, tool_ctx, hooks, owner=owner, guard=guard, checkpoints=checkpoints)
    chat: ModelStream = transport
    if ctx.fallback is not None and ctx.depth == 0:  # the SDKs' --fallback-model
        other = replace(settings, model=ctx.fallback)
        chat = Fallback(transport, lambda: make_transport(other, session, ctx), ctx.warn)
    if settings.react:
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.react import ReactTransport

        chat = ReactTransport(transport)  # servers that reject `stop` get it dropped on retry
    compactor = Compactor(settings, session, transport, hooks, ctx.warn)
    return Agent(chat, toolbox, session, system, settings.max_steps, hooks, compactor)


def make_lifecycle(
    settings: Settings, session: Session, ctx: Context, agent_type: str | None
) -> Lifecycle | None:
    """Where the hooks fire for this agent (`agent_type`: a subagent's); None without hooks,
    and then nothing of the hooks' code is imported."""
    if settings.hooks is None:
        return None
    # lazy: only a run with hooks, rules or commands loads it (docs: development)
    from agi.claude.hooks.lifecycle import Lifecycle

    stop = "SubagentStop" if agent_type else "Stop"
    lifecycle = Lifecycle(settings.hooks, session, ctx.warn, stop, agent_type, env=ctx.env)
    lifecycle.judge = HookJudge(settings, session, ctx)  # "type": "prompt" hooks
    lifecycle.cwd = ctx.cwd  # hooks see the run's cwd (an MCP call's may differ from ours)
    return lifecycle


def make_guard(
    settings: Settings,
    session: Session,
    ctx: Context,
    lifecycle: Lifecycle | None,
    tools: list[Tool],
) -> PermissionGuard:
    """The permission check: rules, the mode (`ctx.mode` once a front end changed it) and the
    front end's `ctx.ask` (agi.policy.asking; the terminal question when None). NoGuard when
    nothing could be decided: no rules, agi's default mode that asks nothing (a front end's
    `ask` is then never put a question), no hooks, no one told of the calls let run."""
    quiet = ctx.mode is None and not ctx.default_asks and not ctx.learned
    quiet = quiet and not ctx.roots and ctx.on_allowed is None
    if settings.permissions is None and lifecycle is None and quiet:
        return NO_GUARD
    # lazy: only a run with hooks, rules or commands loads it (docs: development)
    from agi.policy.guard import Guard
    from agi.policy.permissions import Permissions, check_run

    permissions = settings.permissions or Permissions()
    if ctx.depth == 0:  # rules name real tools (docs: permissions): a usage error otherwise
        rules = [*permissions.rules, *hook_conditions(settings)]  # hooks' `if` too (docs: hooks)
        _warn_all(ctx, check_run(rules, list(ctx.tools or []), settings.agents))
    if ctx.mode is not None:
        permissions = Permissions(permissions.rules, ctx.mode)
    read_only = {t.name for t in tools if getattr(t, "read_only", False)}
    guard = Guard(
        permissions,
        session.trace,
        ctx.ask,
        hooks=lifecycle,
        read_only=read_only,
        default_asks=ctx.default_asks,
        on_allowed=ctx.on_allowed,  # a subagent's calls too: ACP reads their diffs then
        learned=ctx.learned,  # an "always" answer holds for every agent of the run
        roots=ctx.roots,
    )
    if lifecycle is not None:
        lifecycle.guard = guard  # hooks see the mode in `permission_mode`
    return guard


HOOK_JUDGE = (
    "You check a condition for a hook of agi, a command-line agent. The user's message states "
    'the condition and the event it is about. Answer {"ok": true} when the condition is met, '
    'or {"ok": false, "reason": "..."} saying what is missing; the reason goes to the agent.'
)


class HookJudge:
    """What a `"type": "prompt"` hook asks: one JSON exchange with the hook's model (else the
    run's), counted in usage and under --max-cost; returns the model's {ok, reason}."""

    def __init__(self, settings: Settings, session: Session, ctx: Context):
        self.settings, self.session, self.ctx = settings, session, ctx

    def __call__(self, prompt: str, model: str | None, timeout: float) -> Any:
        # lazy: only a run with hooks, rules or commands loads it (docs: development)
        from agi.claude.extensions import command_model

        config = command_model(self.settings.model, model) if model else self.settings.model
        transport = make_transport(replace(self.settings, model=config), self.session, self.ctx)
        limit = time.monotonic() + timeout
        transport.deadline = min(limit, self.ctx.deadline or limit)
        try:
            schema = {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
                "required": ["ok"],
            }
            system = {"role": "system", "content": HOOK_JUDGE}
            # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
            from agi.structured.schema import ghost_json

            return drain(ghost_json(transport, [system], schema, prompt, attempts=2))
        except TimeLimit:
            if self.ctx.deadline is not None and self.ctx.deadline <= limit:
                raise  # the run's own --timeout
            raise TimeoutError(f"the prompt hook took over {timeout:g} s") from None
        finally:
            transport.close()
            if transport in self.ctx.transports:
                self.ctx.transports.remove(transport)


class PageReader:
    """What WebFetch asks about a page: one request without tools to the run's model, with
    the page and the prompt (as Claude Code asks its small model), counted in usage and
    under --max-cost."""

    def __init__(self, settings: Settings, session: Session, ctx: Context):
        self.settings, self.session, self.ctx = settings, session, ctx

    def __call__(self, page: str, prompt: str) -> str:
        # lazy: only a run that fetches a page loads them
        from agi.structured.schema import ask_once
        from agi.tools.webfetch import READER_PROMPT

        transport = make_transport(self.settings, self.session, self.ctx)
        try:
            text = READER_PROMPT.format(page=page, prompt=prompt)
            reply = drain(ask_once(transport, [{"role": "user", "content": text}], {}))
            return str(reply.text)
        except ProviderError as e:
            raise ToolError(f"the request about the page failed: {e}") from e
        finally:
            transport.close()
            if transport in self.ctx.transports:
                self.ctx.transports.remove(transport)


def system_text(settings: Settings, prompt: str, tools: list[Tool]) -> str:
    """The system prompt an agent is sent: `prompt`, and the skills' list when it offers Skill."""
    if not any(t.name == "Skill" for t in tools):
        return prompt
    # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
    from agi.claude.skills import skills_prompt

    return prompt + "\n\n" + skills_prompt(settings.skills)


def make_transport(settings: Settings, session: Session, ctx: Context) -> Transport:
    """The transport for the model's wire protocol (agi.providers.protocols), traced into the
    session and known to the run's context (deadline, meter, cancel)."""
    transport = transport_for(
        settings.model,
        session.trace,
        deadline=ctx.deadline,
        timeout=settings.timeout,
        meter=ctx.meter,
        home=settings.state,
        windows=settings.window.windows,
        pool=ctx.pool,
    )
    ctx.transports.append(transport)
    return transport


def build_tools(settings: Settings, ctx: Context, added: Sequence[Any] = ()) -> list[Tool]:
    """Every tool the run may offer: built-ins, the user's tools (`--describe`, cached), MCP
    servers' tools (cached lists; servers start when first called; `added`: the front end's
    sources, after the settings') and the Skill tool."""
    sources = settings.tools
    if sources.none:
        return []
    tools: list[Tool] = []
    if sources.builtin:
        tools += builtin_tools()
    if sources.files or sources.dirs:
        # lazy: agi.tools.external loads concurrent
        from agi.tools.external import load_tools

        cache = cache_file(settings, "tool-cache.json")
        own, warnings = load_tools(sources.files, sources.dirs, cache)
        tools += own
        _warn_all(ctx, warnings)
    mcp = [*([] if ctx.strict_mcp else sources.mcp), *added]
    if mcp:
        # lazy: agi.tools.mcp loads concurrent
        from agi.tools.mcp import load_mcp

        mcp_tools, warnings = load_mcp(mcp, cache_file(settings, "mcp-cache.json"))
        tools += mcp_tools
        _warn_all(ctx, warnings)
    if settings.skills:
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.claude.skills import SkillTool, skills_prompt

        if skills_prompt(settings.skills):
            tools.append(SkillTool(settings.skills))
    if settings.commands:
        # lazy: only a run with hooks, rules or commands loads it (docs: development)
        from agi.claude.slash_command import SlashCommandTool

        slash = SlashCommandTool(settings.commands, settings)
        if slash.commands:  # some command the model may run
            tools.append(slash)
    return tools


def cache_file(settings: Settings, name: str) -> Path | None:
    """A cache under $AGI_HOME; none for an ephemeral run, which writes nothing (docs: volume)."""
    state = settings.state
    return None if state is None else state / name


def _warn_all(ctx: Context, warnings: list[str]) -> None:
    for warning in warnings:
        ctx.warn(warning)


def prepare_tools(settings: Settings, ctx: Context, mcp: Sequence[Any] = ()) -> None:
    """Build the run's tools once (before any session is touched; `mcp`: MCP sources the
    front end adds) and check --tools against them: an unknown name is a usage error. A
    sandbox that bwrap cannot build is one too."""
    settings.sandbox.check()  # bwrap missing or unusable: exit 2 before anything reaches a model
    for name, value in settings.env.items():  # settings files' env; hooks' exports come later
        ctx.env.setdefault(name, value)
    if ctx.tools is not None:
        return
    ctx.tools = build_tools(settings, ctx, mcp)
    allow = settings.tools.allow
    if allow is None:
        return
    known = {t.name for t in ctx.tools} | ({"Task"} if _offers_task(settings) else set())
    unknown = [n for n in allow if n not in known]
    if unknown:
        where, available = settings.tools.allow_source, ", ".join(sorted(known)) or "none"
        raise UsageError(f"unknown tool in {where}: {', '.join(unknown)} (available: {available})")


def _offers_task(settings: Settings) -> bool:
    return settings.tools.builtin and not settings.tools.none


def choose(settings: Settings, ctx: Context, session: Session) -> list[Tool]:
    """The tools this agent offers: the allowlist applied, and `Task` (running subagents in
    sessions under this one) while subagents may go deeper."""
    available = list(ctx.tools or [])
    if _offers_task(settings) and ctx.depth < MAX_DEPTH:
        available.append(Task(settings.agents, Spawner(settings, ctx, session)))
    allow, exclude = settings.tools.allow, set(settings.tools.exclude)
    if allow is None:  # Glob, Grep, BashOutput, KillShell, WebFetch: only when named
        named = set(settings.tools.named)  # a command's allowed-tools, for its turn
        if settings.skills:
            # lazy: only a run with skills loads it: one-shot start-up (docs: development)
            from agi.claude.skills import named_tools

            named |= named_tools(settings.skills)
        chosen = [t for t in available if not getattr(t, "opt_in", False) or t.name in named]
    else:
        chosen = [t for t in available if t.name in allow]
    return [t for t in chosen if t.name not in exclude]


class Spawner:
    """What `Task` calls: run a subagent to its answer in its own session under the parent's."""

    def __init__(self, settings: Settings, ctx: Context, parent: Session):
        self.settings, self.ctx, self.parent = settings, ctx, parent

    def __call__(self, agent: AgentFile, prompt: str, description: str) -> str:
        settings = self.settings.for_agent(agent, subagent_model(self.settings, agent))
        parent = self.parent
        if parent.ephemeral:  # an ephemeral run's subagents keep nothing either
            session: Session = MemorySession(parent.secrets)
        else:
            session = Session.open(subagent_dir(parent.path, agent.name), parent.secrets)
        session.write_meta(
            model=settings.model.label,
            parent=str(parent.path),
            agent=agent.name,
            description=description,
        )
        child = assemble(settings, session, self.ctx.deeper(), agent_type=agent.name)
        try:
            return str(drain(child.run(prompt), self.ctx.on_child_event).text)
        except (ProviderError, LimitReached) as e:
            raise ToolError(f"the subagent failed: {e}") from e
        finally:
            session.add_usage(child.usage + child.compactor.usage)
            session.write_meta()
            child.close()


def subagent_model(settings: Settings, agent: AgentFile) -> ModelConfig | None:
    """A `provider:model` in the agent file is used as given; Claude's aliases (sonnet, opus,
    haiku) name the current model of that family when the parent speaks Anthropic, and the
    parent's model otherwise (as `inherit` does)."""
    if not agent.model:
        return None
    if ":" not in agent.model:
        if settings.model.provider != "anthropic":
            return None
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.providers.anthropic import claude_model

        alias = claude_model(agent.model)
        return replace(settings.model, model=alias) if alias else None
    provider, _, name = agent.model.partition(":")
    return replace(settings.model, provider=provider, model=name)


def deadline_for(settings: Settings, started: float | None = None) -> float | None:
    """The monotonic deadline of a run (or a REPL turn) that started at `started`."""
    if not settings.timeout:
        return None
    return (time.monotonic() if started is None else started) + settings.timeout


def hook_conditions(settings: Settings) -> list[Any]:
    """The permission rules hook entries' `if` name (agi.policy.permissions.Rule): checked with
    the run's rules, once the run's own tools are known."""
    if settings.hooks is None:
        return []
    entries = (hook for hooks in settings.hooks.hooks.values() for hook in hooks)
    return [hook.condition for hook in entries if hook.condition not in (None, False)]
