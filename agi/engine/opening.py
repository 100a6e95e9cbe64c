"""What a run is opened with, from its spec (agi.engine.spec): the view, the meter, the
context, and the session chosen (named, continued, forked or new)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agi.engine.assemble import Context, deadline_for
from agi.errors import UsageError
from agi.frontends.views.terminal import Silent, Terminal, colored
from agi.providers.cost import Meter
from agi.sessions.files import make_private_dir
from agi.sessions.fork import fork
from agi.sessions.session import MemorySession, Session, SessionIndex

if TYPE_CHECKING:
    from agi.engine.seams import View
    from agi.engine.spec import Budget, RunSpec, SessionChoice
    from agi.options.settings import Settings
    from agi.options.values import Layer


def make_view(settings: Settings, interactive: bool) -> View:
    """The terminal view when a person watches stderr (or -v), else silence."""
    tty = sys.stderr.isatty()
    if settings.quiet or not (tty or settings.verbose):
        return Silent()
    color = colored(settings.color, tty)
    return Terminal(color=color, spinner=tty and not interactive, cursor=tty)


def open_session(settings: Settings, choice: SessionChoice) -> Session:
    """The session chosen: the one named, the last one used (`-c`), a fork made first, or a new
    one; recorded in the index. One the front end holds is used as it is."""
    if choice.held is not None:
        return choice.held
    if settings.ephemeral:  # docs: volume
        return ephemeral_session(settings, choice)
    index = SessionIndex(settings.home)
    path = choice.path
    if choice.cont:
        path = index.latest()
        if path is None:
            raise UsageError("no session to continue: none has been used yet")
    if choice.fork is not None:
        path = path or index.default_path()
        fork(choice.fork, path)
    if choice.compact and path is not None and not (path / "messages.jsonl").is_file():
        raise UsageError(f"nothing to compact: {path} holds no agi conversation")
    key = settings.model.api_key
    session = Session.open(path or fresh_path(index), secrets=[key] if key else [])
    index.record(session.path, choice.latest)
    return session


def ephemeral_session(settings: Settings, choice: SessionChoice) -> Session:
    """An ephemeral run's conversation, in memory alone; a session named, continued or forked
    is one it would have to keep: a usage error."""
    asked = [
        name
        for name, given in (
            ("--session", choice.path),
            ("--continue", choice.cont),
            ("--fork", choice.fork),
            ("--compact", choice.compact),
        )
        if given
    ]
    if asked:
        raise UsageError(f"--ephemeral keeps no session: it cannot be used with {asked[0]}")
    key = settings.model.api_key
    return MemorySession(secrets=[key] if key else [])


def fresh_path(index: SessionIndex) -> Path:
    """A new session directory, made here: two runs starting at once never share one."""
    while True:
        path = index.default_path()
        make_private_dir(path.parent)
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)  # whatever the umask
        return path


def own_meter(settings: Settings, budget: Budget | None = None, own: Layer | None = None) -> Meter:
    """A meter of the run's own: every model call, subagents and ghosts included, and its
    --max-cost; with a `budget` shared with other runs, every call spends it too, and the run's
    own limit is only the one its layer `own` gives (the settings' is the budget's)."""
    if budget is not None:
        limit = None if own is None else own.options.max_cost
        # lazy: only a run that uses it loads it: one-shot start-up (docs: development)
        from agi.engine.budget import BudgetedMeter

        return BudgetedMeter(settings.prices, limit, budget)
    return Meter(settings.prices, settings.max_cost)


def context_for(
    spec: RunSpec, settings: Settings, started: float, warn: Callable[[str], None], meter: Meter
) -> Context:
    """The run's context from its spec: where it works, its deadline, who is asked, the pool,
    the rules a person gave before (shared by the run's guards)."""
    ctx = Context(
        cwd=spec.cwd or os.getcwd(),
        deadline=deadline_for(settings, started),
        warn=warn,
        meter=meter,
        ask=spec.ask,
        default_asks=spec.default_asks,
        mode=spec.mode,
        on_child_event=spec.on_child_event,
        on_allowed=spec.on_allowed,
        pool=spec.pool,
        learned=list(spec.rules),
        roots=list(spec.roots),
        fallback=spec.fallback,
        strict_mcp=spec.strict_mcp,
    )
    return ctx
