"""A run's events as the SDK's stdout messages (docs: claude-agent-sdk): `assistant` messages
in Anthropic's content-block shape (thinking, text, tool_use) with the model, `user` messages
carrying each `tool_result`, and under --include-partial-messages the Messages API's stream
events (`stream_event`) as the reply comes. Warnings go to stderr, as Claude Code's do."""

from __future__ import annotations

import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from agi.context.windows import configured_window, known_window
from agi.messages import (
    AssistantText,
    Notice,
    ReasoningDelta,
    StepStart,
    TextDelta,
    ToolEnd,
    ToolStart,
    Usage,
    UsageEvent,
)

if TYPE_CHECKING:
    from agi.engine.seams import Event
    from agi.frontends.sdk.channel import Channel
    from agi.options.settings import Settings


def anthropic_usage(usage: Usage | None) -> dict[str, Any]:
    """agi's usage in the Messages API's field names (its `input` counts cached tokens too;
    Anthropic's `input_tokens` does not)."""
    if usage is None:
        return {"input_tokens": 0, "output_tokens": 0}
    fresh = max(usage.input - usage.cached - usage.cache_write, 0)
    return {
        "input_tokens": fresh,
        "output_tokens": usage.output,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cached,
    }


def model_usage(by_model: dict[str, Usage], settings: Settings) -> dict[str, Any]:
    """Claude Code's `modelUsage`: each model's calls in this process, in the SDKs' camelCase
    shape; the context window as configured or in agi's table (0: unknown)."""
    shown: dict[str, Any] = {}
    for model, usage in by_model.items():
        label = f"{settings.model.provider}:{model}"
        window = configured_window(label, model, settings.window.windows) or known_window(model)
        primary = model == settings.model.model
        shown[model] = {
            "inputTokens": anthropic_usage(usage)["input_tokens"],
            "outputTokens": usage.output,
            "cacheReadInputTokens": usage.cached,
            "cacheCreationInputTokens": usage.cache_write,
            "webSearchRequests": 0,
            "costUSD": usage.cost or 0.0,
            "contextWindow": window or 0,
            "maxOutputTokens": (settings.model.max_tokens or 0) if primary else 0,
        }
        if usage.reasoning:
            shown[model]["thinkingTokens"] = usage.reasoning
    return shown


class SdkView:
    """The View of a run under the SDK's protocol: one `assistant` message per content block
    of a reply (as Claude Code sends them, sharing the reply's message id)."""

    def __init__(self, channel: Channel, session_id: str, model: str, partial: bool):
        self.channel, self.session_id, self.model, self.partial = (
            channel,
            session_id,
            model,
            partial,
        )
        self.kind = ""  # the block being streamed: "text", "thinking" or ""
        self.text: list[str] = []
        self.message_id = ""
        self.index = 0  # the next content block's index in the reply
        self.steps = 0
        self.api_seconds = 0.0
        self.step_started: float | None = None
        self.last_text = ""  # the turn's last assistant text: the result's `result`
        self.usage = Usage()  # the turn's model calls (the main loop's): the result's `usage`
        self.open = False  # a reply is under way (message_start sent)
        self.reply_usage: Usage | None = None  # the reply's, for its message_delta
        self.stop = "end_turn"  # the reply's stop_reason: "tool_use" once it has a call

    # the View protocol

    def handle(self, event: Event) -> None:
        if isinstance(event, StepStart):
            self.end_reply()
            self.steps += 1
            self.step_started = time.monotonic()
            self.message_id = f"msg_{uuid.uuid4().hex[:24]}"
            self.index, self.open = 0, True
            self.reply_usage, self.stop = None, "end_turn"
            self.partial_event({"type": "message_start", "message": self.shell([], None)})
        elif isinstance(event, TextDelta):
            self.delta("text", event.text)
        elif isinstance(event, ReasoningDelta):
            self.delta("thinking", event.text)
        elif isinstance(event, ToolStart):
            self.api_done()
            self.flush()
            call = event.call
            block: dict[str, Any] = {"type": "tool_use", "id": call.id, "name": call.name}
            block["input"] = event.input
            self.stop = "tool_use"
            if self.partial:
                start = {**block, "input": {}}
                self.partial_event({"type": "content_block_start", "index": self.index,
                                    "content_block": start})  # fmt: skip
                piece = {"type": "input_json_delta", "partial_json": event.call.arguments}
                self.partial_event({"type": "content_block_delta", "index": self.index,
                                    "delta": piece})  # fmt: skip
                self.partial_event({"type": "content_block_stop", "index": self.index})
            self.index += 1
            self.assistant([block], "tool_use")
        elif isinstance(event, ToolEnd):
            self.end_reply()  # every call's block came first (agi.tools.Toolbox.run_all)
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": event.call.id}
            result.update(content=event.result, is_error=event.is_error)
            self.channel.send(
                {
                    "type": "user",
                    "message": {"role": "user", "content": [result]},
                    "parent_tool_use_id": None,
                    "session_id": self.session_id,
                    "uuid": str(uuid.uuid4()),
                    "tool_use_result": event.result,
                }
            )
        elif isinstance(event, UsageEvent):
            self.api_done()
            self.usage.add(event.usage)
            self.reply_usage = event.usage  # sent as the reply ends, after its tool_use blocks
        elif isinstance(event, Notice):
            self.warn(event.text)
        elif isinstance(event, AssistantText):
            pass  # its text came as deltas; it is sent with the reply's tool calls

    def warn(self, text: str) -> None:
        sys.stderr.write(f"agi: {text}\n")
        sys.stderr.flush()

    def sandbox(self, label: str) -> None:
        pass  # system/init names the tools; the sandbox's line is the terminal's

    def judgement(self, success: bool, reason: str) -> None:
        pass  # no --exit-code under this protocol

    def finish(self, session: str, usage: Any, seconds: float, steps: int) -> None:
        pass  # the front end sends the `result`

    def close(self) -> None:
        self.end_reply()

    # the turn

    def begin_turn(self) -> None:
        self.steps, self.api_seconds, self.last_text, self.usage = 0, 0.0, "", Usage()

    def end_reply(self) -> None:
        """The reply's last block, and the end of its stream events: message_delta (its
        stop_reason and usage) and message_stop, as the Messages API ends a message."""
        self.api_done()
        self.flush()
        if self.open:
            self.open = False
            delta = {"stop_reason": self.stop, "stop_sequence": None}
            usage = anthropic_usage(self.reply_usage)
            self.partial_event({"type": "message_delta", "delta": delta, "usage": usage})
            self.partial_event({"type": "message_stop"})

    def api_done(self) -> None:
        if self.step_started is not None:
            self.api_seconds += time.monotonic() - self.step_started
            self.step_started = None

    def delta(self, kind: str, text: str) -> None:
        if not text:
            return
        if kind != self.kind:
            self.flush()
            self.kind = kind
            if self.partial:
                block = {"type": "text", "text": ""} if kind == "text" else {
                    "type": "thinking", "thinking": "", "signature": ""}  # fmt: skip
                self.partial_event({"type": "content_block_start", "index": self.index,
                                    "content_block": block})  # fmt: skip
        self.text.append(text)
        if self.partial:
            delta = {"type": "text_delta", "text": text} if kind == "text" else {
                "type": "thinking_delta", "thinking": text}  # fmt: skip
            self.partial_event({"type": "content_block_delta", "index": self.index,
                                "delta": delta})  # fmt: skip

    def flush(self) -> None:
        """The block streamed so far, as an `assistant` message of its own."""
        if not self.kind:
            return
        kind, text = self.kind, "".join(self.text)
        self.kind, self.text = "", []
        if self.partial:
            self.partial_event({"type": "content_block_stop", "index": self.index})
        self.index += 1
        if kind == "text":
            self.last_text = text
            self.assistant([{"type": "text", "text": text}], None)
        else:
            self.assistant([{"type": "thinking", "thinking": text, "signature": ""}], None)

    def shell(self, content: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": anthropic_usage(None),
        }

    def assistant(self, content: list[dict[str, Any]], stop: str | None) -> None:
        self.channel.send(
            {
                "type": "assistant",
                "message": self.shell(content, stop),
                "parent_tool_use_id": None,
                "session_id": self.session_id,
                "uuid": str(uuid.uuid4()),
            }
        )

    def partial_event(self, event: dict[str, Any]) -> None:
        if self.partial:
            self.channel.send(
                {
                    "type": "stream_event",
                    "uuid": str(uuid.uuid4()),
                    "session_id": self.session_id,
                    "event": event,
                    "parent_tool_use_id": None,
                }
            )
