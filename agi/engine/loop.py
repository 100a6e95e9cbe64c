"""The agent loop: ask the model, run the tools it calls, repeat until it answers."""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from agi.attachments import Resolver, user_message
from agi.engine.absent import NO_CHECKPOINTS, NO_COMPACTION, NO_HOOKS, NoHooks
from agi.errors import StepLimit
from agi.messages import (
    AssistantText,
    Reply,
    StepStart,
    TextDelta,
    ToolCall,
    Usage,
    UsageEvent,
    tool_result,
    user,
    watch,
)
from agi.prompts import harness_text
from agi.sessions.session import Session
from agi.tools import Toolbox

if TYPE_CHECKING:
    from agi.attachments import Attachment
    from agi.engine.seams import (
        ContextCompactor,
        Event,
        HookEvents,
        ModelStream,
        TurnCheckpoints,
    )

REPEAT_LIMIT = 3  # the third identical call in a row gets a note


class Agent:
    def __init__(
        self,
        transport: ModelStream,
        toolbox: Toolbox,
        session: Session,
        system_prompt: str,
        max_steps: int = 50,
        hooks: HookEvents = NO_HOOKS,
        compactor: ContextCompactor = NO_COMPACTION,
    ):
        self.transport, self.toolbox, self.session = transport, toolbox, session
        self.system_prompt, self.max_steps = system_prompt, max_steps
        self.hooks = hooks  # UserPromptSubmit and Stop hooks (agi.claude.hooks.lifecycle)
        self.compactor = compactor  # keeps each request within the model's window
        self.usage = Usage()
        self.steps = 0
        self.partial: list[str] = []  # text of the reply being streamed, for salvage()
        self._system: dict[str, Any] = {}
        self.resolve = Resolver(session)  # attached files' bytes into requests
        self.recent: list[str] = []

    @property
    def lifecycle(self) -> HookEvents | None:
        """The hooks when any are configured (a front end firing SessionStart itself asks)."""
        return None if isinstance(self.hooks, NoHooks) else self.hooks

    @property
    def wire(self) -> ModelStream:
        """The plain transport under any protocol adapter: ghost exchanges ask for JSON there."""
        return getattr(self.transport, "transport", self.transport)

    def messages(self) -> list[dict[str, Any]]:
        """What the model is sent: the system prompt, then the session's view (the same
        message objects step after step, so that measuring them per request stays cheap)."""
        view = self.resolve(self.session.view())  # docs: attachments
        if not self.system_prompt:
            return view
        if self._system.get("content") is not self.system_prompt:  # /sys may replace it
            self._system = {"role": "system", "content": self.system_prompt}
        return [self._system, *view]

    def run(
        self, prompt: str, attachments: tuple[Attachment, ...] = ()
    ) -> Generator[Event, None, Reply]:
        """Yield events while working; return the final reply. A turn of the session's
        checkpoints (docs: checkpoints) when this agent owns them (a subagent's changes are
        its parent's turn's); `attachments` go with the prompt (docs: attachments)."""
        checkpoints = self.toolbox.checkpoints if self.toolbox.owner else NO_CHECKPOINTS
        try:
            return (yield from self._turn(prompt, checkpoints, attachments))
        finally:
            checkpoints.end()

    def _turn(
        self, prompt: str, checkpoints: TurnCheckpoints, attachments: tuple[Attachment, ...] = ()
    ) -> Generator[Event, None, Reply]:
        self.close_pending("interrupted: the run that made this call ended before it finished")
        prompt = self.hooks.prompt(prompt)
        checkpoints.begin(prompt)
        self.session.append(user_message(prompt, attachments, self.session))
        for step in range(1, self.max_steps + 1):
            self.steps = step
            yield StepStart(step)
            self.partial = []
            reply = yield from self._ask()
            self.partial = []
            if reply.usage:
                self.usage.add(reply.usage)
                yield UsageEvent(reply.usage)
            if not reply.text and not reply.tool_calls and not reply.nudge:
                reply.nudge = harness_text("empty_reply")
            if reply.nudge:
                if reply.text:
                    self.session.append(reply.to_message())
                self.session.append(user(reply.nudge))
                continue
            self.session.append(reply.to_message())
            if not reply.tool_calls:
                go_on = self.hooks.stop(reply.text)
                if go_on is None:
                    return reply
                self.session.append(user(go_on))
                continue
            if reply.text:
                yield AssistantText(reply.text)
            results = yield from self.toolbox.run_all(reply.tool_calls)
            for r in results:
                self.session.trace(
                    {
                        "type": "tool",
                        "id": r.call.id,
                        "name": r.call.name,
                        "input": r.call.arguments,
                        "result": r.text,
                        "is_error": r.is_error,
                        "seconds": round(r.seconds, 3),
                    }
                )
                self.session.append(tool_result(r.call.id, r.text + self._repeat_note(r.call)))
            woken = self.hooks.woken()
            if woken:  # an asyncRewake hook reported while the agent worked
                self.session.append(user(woken))
        raise StepLimit(self.max_steps)

    def _ask(self) -> Generator[Event, None, Reply]:
        """One model call; streamed text is kept in `partial` until the reply is whole. The
        compactor keeps the request within the window, and compacts once after a refusal (not
        once the reply has begun: what streamed stands)."""
        compactor, tools = self.compactor, self.toolbox.specs
        yield from compactor.before(self.messages(), tools)

        def send() -> Generator[Event, None, Reply]:
            return watch(self.transport.stream(self.messages(), tools), self._keep)

        reply = yield from compactor.resend_once(send, lambda: not self.partial)
        if reply.usage is not None:
            compactor.observe(reply.usage.input)
        return reply

    def _keep(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.partial.append(event.text)

    def _repeat_note(self, call: ToolCall) -> str:
        key = call.name + "\0" + _canonical(call.arguments)
        self.recent = [k for k in self.recent if k == key] + [key]
        if len(self.recent) >= REPEAT_LIMIT:
            return "\n\n" + harness_text("repeated_call").format(count=len(self.recent))
        return ""

    def close_pending(self, reason: str) -> None:
        """Answer every tool call left without a result, so the history stays valid."""
        for call in self.session.pending_tool_calls():
            self.session.append(tool_result(call.get("id", ""), f"Error: {reason}"))

    def close(self) -> None:
        """Close the model connection, and what the tools and the hooks started (the tools'
        when this agent owns them)."""
        self.transport.close()
        self.toolbox.close()
        self.hooks.close()

    def salvage(self, reason: str = "interrupted by the user") -> None:
        """After an interruption: keep streamed text, and close unanswered tool calls."""
        if self.partial:
            self.session.append({"role": "assistant", "content": "".join(self.partial)})
            self.partial = []
        self.close_pending(reason)


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except (ValueError, RecursionError):  # not JSON, or nested too deep to take apart
        return arguments
