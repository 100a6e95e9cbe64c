"""Permissions through the editor (docs: acp). The decisions are agi.policy.guard's
(rules first, then the session's mode); this module is the editor's side: the modes as ACP
lists them, the question as `session/request_permission` (sent after the `tool_call` it
concerns, with its diff), and the rules `allow_always` / `reject_always` add, kept in the
session directory in Claude Code's settings format (`settings.json`)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.fileio import loads, read_text
from agi.policy.guard import LEARNED
from agi.policy.permissions import parse_rule

MODES = {
    "default": ("Default", "Calls that can change something ask first"),
    "acceptEdits": ("Accept edits", "Edits inside the working directory run without asking"),
    "plan": ("Plan", "Only tools that change nothing are offered"),
    "bypassPermissions": ("Bypass permissions", "Nothing asks, except ask rules and hooks"),
}
OPTIONS = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]
RULES_FILE = "settings.json"


# agi's modes ACP has no id for: reported as the nearest one, whose description says so; the
# server's own option binds its sessions (docs: acp)
NEAREST = {"dontAsk": "default"}
KEPT = {
    "dontAsk": "dontAsk (the server's --permission-mode): calls no rule allows are denied, "
    "never asked"
}


def reported(mode: str) -> str:
    """The ACP mode id a session in agi's `mode` is shown in."""
    return NEAREST.get(mode, mode)


def listed(current: str) -> list[tuple[str, str, str]]:
    """(id, name, description) of each mode offered, the one `current` is shown in saying what
    it really is."""
    shown = reported(current)
    return [
        (mode, name, KEPT[current] if mode == shown and current in KEPT else about)
        for mode, (name, about) in MODES.items()
    ]


def modes_state(current: str) -> dict[str, Any]:
    return {
        "currentModeId": reported(current),
        "availableModes": [
            {"id": mode, "name": name, "description": about}
            for mode, name, about in listed(current)
        ],
    }


def bound_mode(server: str, asked: str) -> str:
    """The mode a session takes when the client asks for `asked` under the server's mode: a
    mode ACP has no id for stays when its nearest id is asked, and is never relaxed (only
    `plan`, which runs less, may replace it); UsageError otherwise."""
    if server not in NEAREST:
        return asked
    if asked == NEAREST[server]:
        return server
    if asked == "plan":
        return asked
    raise UsageError(
        f"the server's --permission-mode {server} binds its sessions: mode {asked!r} would run "
        "calls no rule allows"
    )


class SessionRules:
    """The rules a person added in the editor, in `SESSION/settings.json` as Claude Code
    writes them: `{"permissions": {"allow": [...], "deny": [...]}}`."""

    def __init__(self, directory: Path):
        self.file = directory / RULES_FILE
        self.lock = threading.Lock()
        self.allow: list[str] = []
        self.deny: list[str] = []
        try:
            table = loads(read_text(self.file)).get("permissions") or {}  # docs: security
            self.allow = [r for r in table.get("allow") or [] if isinstance(r, str)]
            self.deny = [r for r in table.get("deny") or [] if isinstance(r, str)]
        except (OSError, ValueError, AttributeError):
            pass

    def rules(self) -> list[Any]:
        """As agi.policy.permissions rules (a hand-edited bad one is skipped)."""
        out = []
        for kind, texts in (("deny", self.deny), ("allow", self.allow)):
            for text in texts:
                try:
                    out.append(parse_rule(text, kind, LEARNED, str(self.file.parent)))
                except Exception:
                    continue
        return out

    def add(self, answer: str, rule: str) -> None:
        """Keep the rule an `allow_always` or `reject_always` answer added."""
        with self.lock:
            target = self.allow if answer == "allow_always" else self.deny
            if rule in target:
                return
            target.append(rule)
            data = {"permissions": {"allow": self.allow, "deny": self.deny}}
            tmp = self.file.with_name(f".{RULES_FILE}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp, self.file)


def options(request: Any) -> list[dict[str, str]]:
    """The answers offered: "always" ones only when the call has rules to add (a line whose
    command names are not plain words has none; docs: acp)."""
    if getattr(request, "suggestions", None):
        return OPTIONS
    return [o for o in OPTIONS if not o["optionId"].endswith("_always")]


class EditorAsk:
    """The Guard's `ask` callback (agi.policy.asking): `session/request_permission`."""

    def __init__(self, session: Any):
        self.session = session

    def present(self) -> bool:
        return True  # a person is at the editor: Notification hooks fire

    def __call__(self, request: Any) -> str | None:
        session = self.session
        tool_call = session.announce(request.call_id, request.tool, request.input)
        call = session.bridge.conn.request_permission(
            session_id=session.id, tool_call=tool_call, options=options(request)
        )
        answer = self.answer(call)
        if answer not in ("allow_once", "allow_always"):
            session.rejected.add(request.call_id)
        if answer is None:
            return None
        if answer in ("allow_always", "reject_always") and not request.suggestions:
            return "allow_once" if answer == "allow_always" else "reject_once"  # not offered
        if answer in ("allow_always", "reject_always"):
            kind = "allow" if answer == "allow_always" else "deny"
            for rule in request.suggestions:  # one per command of the line
                session.rules.add(answer, rule)
                session.learned.append(parse_rule(rule, kind, LEARNED, session.cwd))
        return str(answer)

    def answer(self, call: Any) -> str | None:
        """The option the person chose; None when nobody answered (dropped, client gone)."""
        # lazy: agi.frontends.acp.bridge loads asyncio
        from agi.frontends.acp.bridge import Dropped

        try:
            response = self.session.bridge.call(call)
        except Dropped:
            return None
        except Exception:  # the client failed or went away: nobody answered
            return None
        outcome = response.outcome
        if getattr(outcome, "outcome", None) == "cancelled":
            return "reject_once"  # the person dismissed the question: a no, this once
        answer = getattr(outcome, "option_id", None)
        return str(answer) if answer in [o["optionId"] for o in OPTIONS] else None
