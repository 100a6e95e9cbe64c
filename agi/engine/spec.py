"""The engine's door: everything a front end gives a run, once, in one immutable `RunSpec`
(`agi.engine.open(spec)` builds the run from it; nothing is set on the run afterwards), and the
Protocols of what it hands over (the view, the permission question, the files: agi.engine.seams
declares them with every other collaborator's)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agi.engine.seams import Ask, Files, View

if TYPE_CHECKING:
    import threading

    from agi.engine.seams import Event
    from agi.options.config import ModelConfig
    from agi.options.settings import Settings
    from agi.options.values import Layer
    from agi.policy.permissions import Rule
    from agi.providers.cost import Meter
    from agi.providers.wire import Pool
    from agi.sessions.session import Session


class Budget(Protocol):
    """USD that several runs spend together (a batch's --max-cost): the error a run gets once
    it is spent (None while it is not), and every model call's usage added to it."""

    def reached(self) -> Exception | None: ...
    def add(self, usage: Any) -> None: ...


@dataclass(frozen=True)
class SessionChoice:
    """The session a run opens: `path` (None: a new one under AGI_HOME), the last one used
    (`cont`, `-c`), a copy of `fork` made at `path` first (`--fork`), or one the front end has
    opened and holds locked itself (`held`: Neovim; it also saves that session's usage).
    `compact`: the session must already hold a conversation (`--compact`). `latest=False`: a
    run no person started at this machine's command line (batch, MCP, ACP, HTTP): the index
    lists it, `-c` never continues it (docs: sessions)."""

    path: Path | None = None
    cont: bool = False
    fork: Path | None = None
    held: Session | None = None
    compact: bool = False
    latest: bool = True


@dataclass(frozen=True)
class RunSpec:
    """What a front end gives the engine to open a run with (docs/python.md, "The door")."""

    settings: Settings  # resolved options: defaults < config file < environment < front end
    layer: Layer | None = None  # the run's own options over `settings` (Settings.over: limits,
    # the system prompt, schema, judge, model): an MCP call's fields, a batch job's limits
    cwd: str | None = None  # where tools and hooks run (None: this process's directory)
    view: View | None = None  # None: the terminal view on stderr when a person watches
    ask: Ask | None = None  # None: the y/N question on the terminal, when there is one
    mode: str | None = None  # a permission mode a front end chose (ACP), over the settings'
    default_asks: bool = False  # ACP: in mode `default`, calls that change something ask
    rules: tuple[Rule, ...] = ()  # rules a person gave before ("always" answers), over the
    # settings' own; the run's guards share them and those answered during the run
    roots: tuple[str, ...] = ()  # more directories than `cwd` edits run in under acceptEdits
    # (the SDKs' --add-dir), every guard's
    fallback: ModelConfig | None = None  # the model for every call once one to the run's failed
    strict_mcp: bool = False  # `mcp`'s servers alone, none of the settings' (--strict-mcp-config)
    mcp: tuple[Any, ...] = ()  # MCP sources the front end adds (an editor's session/new)
    files: Files | None = None  # None: the disk
    pool: Pool | None = None  # HTTP clients and backoff shared by runs (agi.providers.pool)
    meter: Meter | None = None  # None: the run's own; else one that also keeps a shared budget
    budget: Budget | None = None  # spent with other runs: checked before, added after each call;
    # the settings' max_cost is then the budget's (a batch's --max-cost), the run's own only
    # the one `layer` gives
    saved: int = 0  # the meter's calls already added to the session's meta.json
    on_child_event: Callable[[Event], None] | None = None  # subagents' events (ACP)
    on_allowed: Callable[[str], None] | None = None  # the id of each call let run (ACP)
    interrupted: threading.Event | None = None  # the front end's cancel ends a wait for the lock
    interactive: bool = False  # a person takes turns (REPL, editor): --timeout is per turn
    session: SessionChoice = field(default_factory=SessionChoice)
    session_start: bool = True  # SessionStart hooks when the run opens (not for --compact)
    record: Mapping[str, Any] = field(default_factory=dict)  # more fields of the run record
    started: float | None = None  # time.monotonic() the run's --timeout counts from
