"""Merging what one event's hooks said into one verdict (`Outcome`): any block wins,
permissions are deny > ask > allow, contexts and messages add up (docs: hooks, claude-code)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agi.claude.hooks.settings import Hook

BLOCKING = frozenset(  # exit 2 / decision "block" mean something here only
    {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest"}
    | {"UserPromptSubmit", "Stop", "SubagentStop"}
)
DECIDING = frozenset({"PreToolUse", "PermissionRequest"})  # they answer allow / deny / ask
PLAIN_CONTEXT = frozenset({"UserPromptSubmit", "SessionStart"})
CONTEXT_LIMIT = 10_000  # characters of one hook's context, as Claude Code caps hook output


@dataclass
class Outcome:
    """The merged verdict of one event's hooks. What the loop does with it, per event:

    PreToolUse: `blocked` (permission "deny") -> do not run; the model gets `reason` as the
    result. "ask" -> the Guard asks (agi.policy.guard); no -> a denial. Otherwise run with
    `updated_input` if set. `context` goes to the model with the result.
    PostToolUse / PostToolUseFailure: `blocked` -> the model gets `reason` as hook feedback after
    the result; `context` too.
    UserPromptSubmit: `blocked` -> the prompt is not stored or sent; show `reason`; exit 6.
    `context` is stored with the user's message as a marked context block.
    Stop / SubagentStop: `blocked` -> the agent continues with `reason` as a user message
    (the next Stop payload has `stop_hook_active: true`).
    SessionStart: `context` is stored as context; `env` is merged into later Bash calls.
    PermissionRequest: `permission` allow -> the call runs without asking (with
    `updated_input` if set, after `permission_updates` are applied); deny (or `blocked`)
    -> a denial with `reason`; None -> the person is asked.
    SessionEnd, Notification, PreCompact: nothing to decide.
    Every event: `stop` (continue: false, winning over any block) -> end the run, show
    `stop_reason`, exit 6; print `messages` to stderr; write `runs` to the trace.
    """

    blocked: bool = False
    reason: str = ""  # the block reason, or for "ask" the question's explanation
    permission: str | None = None  # PreToolUse: allow | deny | ask | None (no decision)
    updated_input: dict[str, Any] | None = None
    # PermissionRequest's `updatedPermissions` (with an allow): Claude Code's permission updates
    permission_updates: list[dict[str, Any]] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    stop: bool = False
    stop_reason: str = ""
    messages: list[str] = field(default_factory=list)  # for the user's stderr, one line each
    env: dict[str, str] = field(default_factory=dict)  # SessionStart: CLAUDE_ENV_FILE exports
    runs: list[dict[str, Any]] = field(default_factory=list)  # one trace record per hook run


@dataclass
class _Tally:
    """What the runs said, before the rules combine it."""

    reasons: list[str] = field(default_factory=list)  # blocks and denials
    asks: list[str] = field(default_factory=list)
    decisions: set[str] = field(default_factory=set)  # PreToolUse permissions given
    updates: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def merge(event: str, hooks: list[Hook], runs: list[dict[str, Any]]) -> Outcome:
    """Combine the runs: deny > ask > allow, any block wins, contexts and messages add up."""
    out, tally = Outcome(runs=runs), _Tally()
    for hook, run in zip(hooks, runs, strict=True):
        name = f"`{_short(hook.command)}`"
        code, stderr, stdout = run["exit_code"], run["stderr"].strip(), run["stdout"].strip()
        if run.get("async") and code is not None:
            continue  # started in the background: its output is not used
        if run["timed_out"]:
            out.messages.append(f"{event} hook {name} timed out after {hook.timeout:g} s; ignored")
        elif code is None:
            out.messages.append(f"{event} hook {name} {_first_line(stderr)}; ignored")
        elif code == 2 and event in BLOCKING:
            tally.reasons.append(stderr or f"blocked by hook {name}")
            tally.decisions.add("deny")
        elif code == 2:  # Session* events cannot block: stderr is for the user only
            out.messages.append(f"{event} hook {name}: {_first_line(stderr)}")
        elif code != 0:
            tail = f": {_first_line(stderr)}" if stderr else ""
            out.messages.append(f"{event} hook {name} failed with exit code {code}{tail}; ignored")
        elif (data := _json_object(stdout)) is not None:
            run["suppress_output"] = data.get("suppressOutput") is True
            _apply(event, name, data, out, tally)
        elif event in PLAIN_CONTEXT and stdout:
            out.context.append(_cap(stdout))
    if event in DECIDING:
        out.permission = next((p for p in ("deny", "ask", "allow") if p in tally.decisions), None)
    updates = {json.dumps(u, sort_keys=True) for _, u in tally.updates}
    if tally.reasons:
        out.blocked, out.reason = True, "\n".join(tally.reasons)
    elif len(updates) > 1:
        # Hooks rewrote the input differently: running one rewrite would silently drop the
        # other's, so the call is refused (fail closed) and the user is told why.
        names = ", ".join(n for n, _ in tally.updates)
        out.blocked, out.permission = True, "deny"
        out.reason = f"hooks {names} returned different updatedInput; the call was not run"
        out.messages.append(out.reason)
    elif updates:
        out.updated_input = tally.updates[0][1]
    if not out.blocked and out.permission == "ask":
        out.reason = "\n".join(tally.asks)
    return out


def _apply(event: str, name: str, data: dict[str, Any], out: Outcome, tally: _Tally) -> None:
    """Take in one hook's JSON answer (exit 0)."""
    if data.get("continue") is False:
        out.stop = True
        out.stop_reason = "\n".join(filter(None, [out.stop_reason, _text(data.get("stopReason"))]))
    if _text(data.get("systemMessage")):
        out.messages.append(data["systemMessage"])
    specific = data.get("hookSpecificOutput")
    if not isinstance(specific, dict):
        specific = {}
    elif specific.get("hookEventName", event) != event:
        out.messages.append(f"{event} hook {name} answered for {specific['hookEventName']}")
        specific = {}
    reason, decision = _text(data.get("reason")), data.get("decision")
    if event == "PreToolUse":
        # the deprecated top-level decision, still honoured: approve = allow, block = deny
        legacy = {"approve": "allow", "block": "deny"}.get(_text(decision))
        permission = specific.get("permissionDecision") or legacy
        why = _text(specific.get("permissionDecisionReason")) or reason
        if permission in ("allow", "deny", "ask"):
            tally.decisions.add(permission)
            if permission == "deny":
                tally.reasons.append(why or f"denied by hook {name}")
            elif permission == "ask" and why:
                tally.asks.append(why)
        elif permission not in (None, "defer"):
            out.messages.append(f"{event} hook {name}: bad permissionDecision {permission!r}")
        new_input = specific.get("updatedInput")
        if isinstance(new_input, dict) and permission != "deny":
            tally.updates.append((name, new_input))
        elif new_input is not None and not isinstance(new_input, dict):
            out.messages.append(f"{event} hook {name}: updatedInput is not an object; ignored")
    elif event == "PermissionRequest":
        _permission_request(name, specific.get("decision"), out, tally)
    elif decision == "block" and event in BLOCKING:
        tally.reasons.append(reason or f"blocked by hook {name}")
    if _text(specific.get("additionalContext")):
        out.context.append(_cap(specific["additionalContext"]))


def _json_object(stdout: str) -> dict[str, Any] | None:
    """stdout as a JSON object, or None when it is plain text (Claude Code's rule)."""
    try:
        data = json.loads(stdout) if stdout.startswith("{") else None
    except ValueError:
        data = None
    return data if isinstance(data, dict) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cap(text: str, limit: int = CONTEXT_LIMIT, more: str = "\n[hook output truncated]") -> str:
    return text if len(text) <= limit else text[:limit] + more


def _short(command: str) -> str:
    return _cap(" ".join(command.split()), 60, "...")


def _first_line(text: str) -> str:
    return _cap(text.strip().splitlines()[0], 200, "...") if text.strip() else "(no output)"


def _permission_request(name: str, chosen: Any, out: Outcome, tally: _Tally) -> None:
    """PermissionRequest's `hookSpecificOutput.decision`: {behavior: allow, updatedInput,
    updatedPermissions} or {behavior: deny, message, interrupt}; `interrupt: true` with a
    denial ends the run, as in Claude Code."""
    if not isinstance(chosen, dict):
        return
    behavior = chosen.get("behavior")
    if behavior == "allow":
        tally.decisions.add("allow")
        new_input, updates = chosen.get("updatedInput"), chosen.get("updatedPermissions")
        if isinstance(new_input, dict):
            tally.updates.append((name, new_input))
        elif new_input is not None:
            out.messages.append(f"PermissionRequest hook {name}: updatedInput is not an object")
        if isinstance(updates, list):
            out.permission_updates += [u for u in updates if isinstance(u, dict)]
    elif behavior == "deny":
        tally.decisions.add("deny")
        tally.reasons.append(_text(chosen.get("message")) or f"denied by hook {name}")
        if chosen.get("interrupt") is True:
            out.stop = True
            out.stop_reason = _text(chosen.get("message")) or f"hook {name} ended the run"
    elif behavior is not None:
        out.messages.append(f"PermissionRequest hook {name}: bad behavior {behavior!r}")
