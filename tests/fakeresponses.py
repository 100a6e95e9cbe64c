"""Steps of the scripted server (tests/fakeserver.py) for OpenAI's Responses API (`POST
/v1/responses`), written from OpenAI's API reference ("Streaming events"): each event is an SSE
frame `event: TYPE` / `data: {"type": TYPE, "sequence_number": N, ...}`, in the order the API
sends them — `response.created`, `response.in_progress`, per output item
`response.output_item.added`, its deltas (`response.reasoning_summary_text.delta`,
`response.output_text.delta`, `response.function_call_arguments.delta`) and their `.done`,
`response.output_item.done` (the whole item: a reasoning item with its `encrypted_content`), then
`response.completed` (or `response.incomplete`, `response.failed`) with the response object and
its usage (`input_tokens`, `input_tokens_details.cached_tokens`, `output_tokens`,
`output_tokens_details.reasoning_tokens`). An `error` event carries `code`, `message`, `param`.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

Step = dict[str, Any]
_ids = itertools.count(1)

R_USAGE = {"input": 40, "cached": 0, "output": 12, "reasoning": 4}


def usage(input: int = 40, cached: int = 0, output: int = 12, reasoning: int = 4) -> dict[str, Any]:
    return {
        "input_tokens": input,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input + output,
    }


class Events:
    """The frames of one streamed response, numbered as the API numbers them."""

    def __init__(self, model: str = "gpt-5.1") -> None:
        self.seq = itertools.count(0)
        self.frames: list[bytes] = []
        self.output: list[dict[str, Any]] = []
        self.response = {
            "id": f"resp_{next(_ids):06d}",
            "object": "response",
            "created_at": 1760000000,
            "status": "in_progress",
            "model": model,
            "output": [],
            "store": False,
            "usage": None,
            "error": None,
            "incomplete_details": None,
        }
        self.add("response.created", response=dict(self.response))
        self.add("response.in_progress", response=dict(self.response))

    def add(self, kind: str, **fields: Any) -> None:
        data = {"type": kind, "sequence_number": next(self.seq), **fields}
        self.frames.append(f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode())

    def reasoning(self, summary: str = "", encrypted: str | None = None) -> str:
        index, rid = len(self.output), f"rs_{next(_ids):06d}"
        encrypted = encrypted or f"gAAAAAB-enc-{rid}"
        self.add(
            "response.output_item.added",
            output_index=index,
            item={"id": rid, "type": "reasoning", "summary": []},
        )
        parts = []
        if summary:
            part = {"type": "summary_text", "text": ""}
            self.add(
                "response.reasoning_summary_part.added",
                item_id=rid,
                output_index=index,
                summary_index=0,
                part=part,
            )
            half = len(summary) // 2
            for piece in (summary[:half], summary[half:]):
                self.add(
                    "response.reasoning_summary_text.delta",
                    item_id=rid,
                    output_index=index,
                    summary_index=0,
                    delta=piece,
                )
            self.add(
                "response.reasoning_summary_text.done",
                item_id=rid,
                output_index=index,
                summary_index=0,
                text=summary,
            )
            parts = [{"type": "summary_text", "text": summary}]
            self.add(
                "response.reasoning_summary_part.done",
                item_id=rid,
                output_index=index,
                summary_index=0,
                part=parts[0],
            )
        item = {"id": rid, "type": "reasoning", "summary": parts, "encrypted_content": encrypted}
        self.add("response.output_item.done", output_index=index, item=item)
        self.output.append(item)
        return encrypted

    def message(self, text: str, pieces: int = 3) -> None:
        index, mid = len(self.output), f"msg_{next(_ids):06d}"
        started = {"id": mid, "type": "message", "status": "in_progress", "role": "assistant"}
        self.add("response.output_item.added", output_index=index, item={**started, "content": []})
        empty = {"type": "output_text", "text": "", "annotations": []}
        self.add(
            "response.content_part.added",
            item_id=mid,
            output_index=index,
            content_index=0,
            part=empty,
        )
        size = max(1, len(text) // pieces + 1)
        for i in range(0, len(text), size):
            self.add(
                "response.output_text.delta",
                item_id=mid,
                output_index=index,
                content_index=0,
                delta=text[i : i + size],
                logprobs=[],
            )
        self.add(
            "response.output_text.done",
            item_id=mid,
            output_index=index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        part = {**empty, "text": text}
        self.add(
            "response.content_part.done",
            item_id=mid,
            output_index=index,
            content_index=0,
            part=part,
        )
        item = {**started, "status": "completed", "content": [part]}
        self.add("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def call(self, name: str, args: dict[str, Any]) -> str:
        index, fid, call_id = len(self.output), f"fc_{next(_ids):06d}", f"call_{next(_ids):06d}"
        base = {"id": fid, "type": "function_call", "call_id": call_id, "name": name}
        self.add(
            "response.output_item.added",
            output_index=index,
            item={**base, "arguments": "", "status": "in_progress"},
        )
        arguments = json.dumps(args)
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            self.add(
                "response.function_call_arguments.delta",
                item_id=fid,
                output_index=index,
                delta=piece,
            )
        self.add(
            "response.function_call_arguments.done",
            item_id=fid,
            output_index=index,
            arguments=arguments,
        )
        item = {**base, "arguments": arguments, "status": "completed"}
        self.add("response.output_item.done", output_index=index, item=item)
        self.output.append(item)
        return call_id

    def completed(self, used: dict[str, Any] | None = None) -> Step:
        final = {**self.response, "status": "completed", "output": self.output}
        self.add("response.completed", response={**final, "usage": used or usage()})
        return self.step()

    def incomplete(self, reason: str = "max_output_tokens") -> Step:
        final = {**self.response, "status": "incomplete", "output": self.output}
        final["incomplete_details"] = {"reason": reason}
        self.add("response.incomplete", response={**final, "usage": usage()})
        return self.step()

    def failed(self, code: str = "server_error", message: str = "The server had an error") -> Step:
        final = {**self.response, "status": "failed", "output": self.output}
        final["error"] = {"code": code, "message": message}
        self.add("response.failed", response=final)
        return self.step()

    def error(self, code: str, message: str) -> Step:
        self.add("error", code=code, message=message, param=None)
        return self.step()

    def step(self) -> Step:
        return {"kind": "sse", "frames": self.frames, "delay": 0.0}


def r_text(
    content: str,
    summary: str = "",
    encrypted: str | None = None,
    reasoning: bool = True,
    used: dict[str, Any] | None = None,
) -> Step:
    """A streamed reply: a reasoning item (encrypted; a summary when given), then the text."""
    events = Events()
    if reasoning:
        events.reasoning(summary, encrypted)
    events.message(content)
    return events.completed(used)


def r_call(
    name: str,
    args: dict[str, Any],
    summary: str = "",
    encrypted: str | None = None,
    text: str = "",
    used: dict[str, Any] | None = None,
) -> Step:
    """A streamed reply: a reasoning item, optional text, then one function call."""
    events = Events()
    events.reasoning(summary, encrypted)
    if text:
        events.message(text)
    events.call(name, args)
    return events.completed(used)


def r_failed(code: str = "server_error", message: str = "The server had an error") -> Step:
    return Events().failed(code, message)


def r_error(code: str, message: str) -> Step:
    return Events().error(code, message)


def r_incomplete(content: str, reason: str = "max_output_tokens") -> Step:
    events = Events()
    events.message(content)
    return events.incomplete(reason)
