"""Where hook events fire in a run, and what their outcomes do to it (docs: hooks).

`agi.claude.hooks.run` runs the scripts and merges their answers; this module builds the
payloads, records every hook run in the trace, shows messages, and turns outcomes into results,
context blocks, continuations and HookStopped (exit 6).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agi.claude.transcript import Transcript
from agi.errors import HookStopped
from agi.messages import ToolCall

if TYPE_CHECKING:
    from agi.claude.hooks.merge import Outcome
    from agi.claude.hooks.run import Hooks
    from agi.engine.seams import PermissionGuard
    from agi.policy.asking import AskRequest
    from agi.sessions.session import Session

Judge = Callable[[str, str | None, float], Any]  # a prompt hook's question -> its JSON answer


def context_block(source: str, parts: list[str]) -> str:
    """Hook context, marked so the model (and a reader of the session) knows where it came from."""
    body = "\n\n".join(p.strip() for p in parts if p.strip())
    return f'<context source="{source} hook">\n{body}\n</context>' if body else ""


def with_context(text: str, source: str, parts: list[str]) -> str:
    block = context_block(source, parts)
    return f"{text}\n\n{block}" if block else text


class Lifecycle:
    """Fires the hook events of one agent (the main one, or a subagent)."""

    def __init__(
        self,
        hooks: Hooks,
        session: Session,
        warn: Callable[[str], None],
        stop_event: str = "Stop",
        agent_type: str | None = None,
        env: dict[str, str] | None = None,
        permission_mode: str = "default",
    ):
        # lazy: agi.claude.hooks.runs loads concurrent
        from agi.claude.hooks.runs import Rewakes, Running

        self.hooks, self.session, self.warn = hooks, session, warn
        self.stop_event, self.agent_type = stop_event, agent_type
        self.stop_active = False
        self.mode = permission_mode  # hooks see it as `permission_mode` (the guard's, if set)
        self.guard: PermissionGuard | None = None  # agi.policy.guard: its mode is the hooks'
        self.judge: Judge | None = None  # answers "type": "prompt" hooks (engine.assemble)
        self.rewakes = Rewakes()  # what asyncRewake hooks of this agent reported
        self.running = Running()  # this agent's hook processes, ended by close()
        self.transcript: Transcript | None = None  # transcript.jsonl, once a hook first runs
        self.cwd: str | None = None  # the run's working directory (an MCP call's); None: ours
        # what SessionStart hooks export: shared with the tools' context, so later calls see it
        self.env: dict[str, str] = {} if env is None else env

    def close(self) -> None:
        """End the hook processes of this agent still running (a call cut short, asyncRewake
        hooks not waited for); other agents' and other runs' hooks are left alone."""
        self.running.end()

    def fire(self, event: str, **fields: Any) -> Outcome:
        """Run one event's hooks; trace them, show their messages, honour `continue: false`."""
        # lazy: agi.claude.hooks.run loads concurrent
        from agi.claude.hooks.run import base_payload

        payload = base_payload(
            self.session.path.name,
            self.transcript_path(),
            self.cwd or os.getcwd(),
            event,
            self.permission_mode,
        )
        payload.update(fields)
        if self.session.secrets:  # API keys never reach a hook, even inside a tool's output
            payload = json.loads(self.session.redact(json.dumps(payload)))
        outcome = self.hooks.run(
            event,
            payload,
            env=self.env or None,
            judge=self.judge,
            rewakes=self.rewakes,
            running=self.running,
        )
        for run in outcome.runs:
            self.session.trace(run)
        for message in outcome.messages:
            self.warn(message)
        if outcome.stop:
            raise HookStopped(outcome.stop_reason or f"a {event} hook stopped the run")
        return outcome

    @property
    def permission_mode(self) -> str:
        return self.guard.mode if self.guard is not None else self.mode

    def transcript_path(self) -> str:
        """transcript.jsonl (Claude Code's format), brought up to date for the hook about to run;
        "" in an ephemeral run, which keeps no file (docs: volume)."""
        if self.session.ephemeral:
            return ""
        if self.transcript is None:
            self.transcript = Transcript(self.session, self.cwd)
        return str(self.transcript.update())

    def session_start(self, source: str, model: str) -> str:
        """Context for the first prompt; the exports hooks wrote apply to later tool calls."""
        if not self.hooks.has("SessionStart"):
            return ""
        outcome = self.fire("SessionStart", source=source, model=model)
        self.env.update(outcome.env)
        return context_block("SessionStart", outcome.context)

    def pre_compact(self, trigger: str, focus: str) -> None:
        """Before a compaction (matcher `auto` or `manual`); it cannot be blocked."""
        if self.hooks.has("PreCompact"):
            self.fire("PreCompact", trigger=trigger, custom_instructions=focus)

    def session_end(self, reason: str) -> None:
        if self.hooks.has("SessionEnd"):
            self.fire("SessionEnd", reason=reason)

    def prompt(self, prompt: str) -> str:
        """The user's message as stored: blocked prompts end the run (exit 6), never stored."""
        if not self.hooks.has("UserPromptSubmit"):
            return prompt
        outcome = self.fire("UserPromptSubmit", prompt=prompt)
        if outcome.blocked:
            raise HookStopped(f"a UserPromptSubmit hook blocked the prompt: {outcome.reason}")
        return with_context(prompt, "UserPromptSubmit", outcome.context)

    def before_tool(
        self, call: ToolCall, input: dict[str, Any]
    ) -> tuple[dict[str, Any], str | None, list[str], bool | str]:
        """(input to run with, a denial text or None, context for the model, what a hook said
        of the call: True when one allowed it (then ask rules and the mode do not apply, deny
        rules still do), the reason when one asks (the Guard puts the question), else False)."""
        if not self.hooks.has("PreToolUse"):
            return input, None, [], False
        outcome = self.fire(
            "PreToolUse", tool_name=call.name, tool_input=input, tool_use_id=call.id
        )
        if outcome.blocked or outcome.permission == "deny":
            denial = f"Blocked by a PreToolUse hook: {outcome.reason}".strip()
            return input, denial, outcome.context, False
        if outcome.updated_input is not None:
            self.session.trace(
                {"type": "hook_input", "id": call.id, "input": outcome.updated_input}
            )
            input = outcome.updated_input
        said: bool | str = outcome.permission == "allow"
        if outcome.permission == "ask":
            said = outcome.reason or "no reason given"
        return input, None, outcome.context, said

    def permission_request(
        self, request: AskRequest
    ) -> tuple[str | None, str, dict[str, Any] | None]:
        """PermissionRequest hooks, before a person is asked: ("allow" | "deny" | None, why,
        the input to run with instead). An allow's `updatedPermissions` are applied to the
        guard here, for the rest of the session."""
        if not self.hooks.has("PermissionRequest"):
            return None, "", None
        suggested: list[dict[str, Any]] = []
        for rule in request.suggestions:  # none when no "always" rule fits the call
            tool, _, content = rule.partition("(")
            suggestion: dict[str, Any] = {"toolName": tool}
            if content:
                suggestion["ruleContent"] = content[:-1]
            suggested.append(suggestion)
        offers = [
            {"type": "addRules", "rules": suggested, "behavior": "allow", "destination": "session"}
        ]
        outcome = self.fire(
            "PermissionRequest",
            tool_name=request.tool,
            tool_input=request.input,
            permission_suggestions=offers if suggested else [],
        )
        if outcome.blocked or outcome.permission == "deny":
            return "deny", outcome.reason, None
        if outcome.permission != "allow":
            return None, outcome.reason, None
        if outcome.permission_updates and self.guard is not None:
            for note in self.guard.update(outcome.permission_updates, "a PermissionRequest hook"):
                self.warn(note)
        if outcome.updated_input is not None:
            self.session.trace(
                {"type": "hook_input", "id": request.call_id, "input": outcome.updated_input}
            )
        return "allow", outcome.reason, outcome.updated_input

    def notification(self, message: str, kind: str) -> None:
        """Notification hooks: agi is about to ask a person (`permission_prompt`)."""
        if self.hooks.has("Notification"):
            self.fire("Notification", message=message, title="agi", notification_type=kind)

    def after_tool(
        self,
        call: ToolCall,
        input: dict[str, Any],
        result: str,
        is_error: bool,
        response: dict[str, Any] | None,
    ) -> list[str]:
        """Feedback and context that hooks add to the result the model sees."""
        event = "PostToolUseFailure" if is_error else "PostToolUse"
        if not self.hooks.has(event):
            return []
        fields: dict[str, Any] = {
            "tool_name": call.name,
            "tool_input": input,
            "tool_use_id": call.id,
        }
        if is_error:
            fields.update(error=result, is_interrupt=False)
        else:
            fields["tool_response"] = response if response is not None else result
        outcome = self.fire(event, **fields)
        notes = list(outcome.context)
        if outcome.blocked and outcome.reason:
            notes.insert(0, f"{event} hook feedback: {outcome.reason}")
        return notes

    def stop(self, answer: str) -> str | None:
        """A reason to go on instead of stopping (a blocking Stop hook, or an asyncRewake hook
        that exited 2: the turn does not end while those run), or None."""
        if self.hooks.has(self.stop_event):
            go_on = self._stop_hooks(answer)
            if go_on is not None:
                return go_on
        woken = self.rewakes.wait()
        for summary, _ in woken:
            self.warn(summary)
        return "\n\n".join(message for _, message in woken) or None

    def woken(self) -> str | None:
        """What asyncRewake hooks reported since the last look (without waiting for those
        still running): given to the agent after the step's tool results, so a report that
        arrives mid-turn reaches the model at its next call."""
        woken = self.rewakes.take()
        for summary, _ in woken:
            self.warn(summary)
        return "\n\n".join(message for _, message in woken) or None

    def _stop_hooks(self, answer: str) -> str | None:
        fields: dict[str, Any] = {
            "stop_hook_active": self.stop_active,
            "last_assistant_message": answer,
        }
        if self.agent_type:
            fields.update(
                agent_type=self.agent_type,
                agent_id=self.session.path.name,
                agent_transcript_path=self.transcript_path(),
            )
        outcome = self.fire(self.stop_event, **fields)
        if outcome.blocked:
            self.stop_active = True
            return with_context(
                f"A {self.stop_event} hook asks you to continue: {outcome.reason}",
                self.stop_event,
                outcome.context,
            )
        return None
