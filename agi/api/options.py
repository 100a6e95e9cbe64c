"""What the keyword arguments of `agi.run` and its kin become: the run's settings (the config
file's names, layered defaults < config file < environment < these arguments, or hermetic under
`isolated=True`), the prompt with `stdin=`, and the spec the engine opens the run from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.api.budget import Budget, BudgetMeter
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import ConfigError, UsageError
from agi.options.settings import Settings
from agi.options.values import layer_from_kwargs
from agi.policy.redaction import redact, usable

if TYPE_CHECKING:
    from agi.engine.seams import View
    from agi.providers.pool import ClientPool

OWN = ("isolated", "cwd", "stdin", "session", "ask", "budget")  # not options of the table
ANSWERS = {"allow": "allow_once", "deny": "reject_once", "allow_always": "allow_always"}


@dataclass
class Call:
    """One run asked for through the API, resolved (in the caller's thread, so that a bad
    option raises at once) but not started."""

    prompt: str
    settings: Settings
    source: str
    cwd: str | None
    session: Path | None
    ask: Any
    budget: Budget | None

    def spec(self, view: View, pool: ClientPool | None) -> RunSpec:
        """The engine's spec for this call, its events going to `view`."""
        meter = None
        if self.budget is not None:
            meter = BudgetMeter(self.settings.prices, self.settings.max_cost, self.budget)
        return RunSpec(
            self.settings,
            cwd=self.cwd,
            view=view,
            ask=Asking(self.ask, self.source) if self.ask is not None else NoOne(),
            pool=pool,
            meter=meter,
            session=SessionChoice(path=self.session),
        )

    def redact(self, text: str) -> str:
        return redact(text, usable([self.settings.model.api_key]))


def resolve(prompt: str, options: dict[str, Any], source: str) -> Call:
    """The call `agi.run(prompt, **options)` makes: a UsageError for a bad option or prompt, a
    TypeError for an unknown keyword."""
    own = {k: options.pop(k) for k in OWN if k in options}
    isolated = bool(own.get("isolated"))
    settings = settings_for(options, source, isolated)
    text = with_stdin(str(prompt or ""), own.get("stdin"))
    if not text:
        raise UsageError(f"{source}: no prompt: give one, or stdin=")
    ask = own.get("ask")
    if ask is not None and not callable(ask):
        raise UsageError(f"{source}: ask must be a function of an agi.AskRequest")
    budget = own.get("budget")
    if budget is not None and not isinstance(budget, Budget):
        raise UsageError(f"{source}: budget must be an agi.Budget")
    cwd = own.get("cwd")
    session = own.get("session")
    return Call(
        text,
        settings,
        source,
        None if cwd is None else os.fspath(cwd),
        None if session is None else Path(os.fspath(session)).expanduser(),
        ask,
        budget,
    )


def settings_for(options: dict[str, Any], source: str, isolated: bool) -> Settings:
    """The settings these options make, over the config file and the environment unless
    `isolated`; nothing is started."""
    layer = layer_from_kwargs(source, **options)
    if isolated and layer.options.model is None:
        raise ConfigError(
            f"{source}: no model: pass model=PROVIDER:MODEL (isolated=True reads neither the "
            "config file nor AGI_MODEL)"
        )
    return Settings.load(layer, isolated=isolated)


def with_stdin(prompt: str, stdin: Any) -> str:
    """The prompt as the command line makes it: `stdin` appended as a context block, or stdin
    alone when there is no prompt ("" when there is neither)."""
    piped = "" if stdin is None else str(stdin)
    prompt = prompt.strip()
    if prompt and piped.strip():
        return f"{prompt}\n\n<stdin>\n{piped.rstrip()}\n</stdin>"
    return prompt or piped.strip()


class Asking:
    """`ask=`: the user's function answers each permission question with "allow" (this call),
    "deny" or "allow_always" (the suggested rule, for the rest of the run); anything else
    denies. Called from the tool threads, possibly several at once."""

    def __init__(self, answer: Any, source: str):
        self.answer, self.source = answer, source

    def present(self) -> bool:
        return True  # a person (or a program) is asked: Notification hooks fire

    def __call__(self, request: Any) -> str:
        return ANSWERS.get(self.answer(request), "reject_once")


class NoOne:
    """No `ask=`: calls the rules leave to a person are decided as in a pipe (denied)."""

    def present(self) -> bool:
        return False

    def __call__(self, request: Any) -> None:
        return None
