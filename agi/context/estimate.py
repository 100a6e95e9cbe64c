"""How big a request is, in tokens, estimated rather than tokenised: UTF-8 bytes over a ratio,
calibrated against the prompt tokens the provider reports, so the check before each request costs
next to nothing (docs: long-sessions). Compaction and Ollama's context sizing use it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agi.messages import REASONING_FIELDS

BYTES_PER_TOKEN = 3.6  # English prose is ~4, code and JSON ~3; calibration does the rest
MESSAGE_OVERHEAD = 12  # role and framing, in bytes (~3-4 tokens per message)
PART_BYTES = 3000  # an image or other non-text content part (~850 tokens)


def text_size(text: str) -> int:
    """Size in UTF-8 bytes; O(1) for ASCII text (CPython knows it), so CJK weighs more."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def message_size(message: Mapping[str, Any]) -> int:
    """Bytes of what a message sends: its text, tool calls and ids, and the reasoning that goes
    back with tool calls."""
    size = MESSAGE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str):
        size += text_size(content)
    elif isinstance(content, list):
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            size += text_size(text) if isinstance(text, str) else PART_BYTES
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        size += 24 + text_size(str(fn.get("name") or ""))
        size += text_size(str(fn.get("arguments") or ""))
    if message.get("tool_calls"):  # reasoning goes back on tool-call turns (wire_message)
        for key in REASONING_FIELDS:
            if isinstance(message.get(key), str):
                size += text_size(message[key])
    if message.get("tool_call_id"):
        size += len(str(message["tool_call_id"]))
    return size


def estimate(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    bytes_per_token: float = BYTES_PER_TOKEN,
) -> int:
    """Estimated prompt tokens of a request (uncalibrated)."""
    size = sum(message_size(m) for m in messages)
    if tools:
        size += text_size(json.dumps(tools, ensure_ascii=False))
    return int(size / bytes_per_token)


class Calibrator:
    """Real tokens per estimated token, learnt from the prompt_tokens each response reports."""

    def __init__(self) -> None:
        self.ratio = 1.0

    def observe(self, estimated: int, actual: int) -> None:
        if estimated > 0 and actual > 0:
            # clamped: a provider that counts only uncached input must not talk us into 0
            self.ratio = min(4.0, max(0.25, actual / estimated))

    def apply(self, estimated: int) -> int:
        return int(estimated * self.ratio)


class Estimator:
    """The per-step check: each message is measured once, then looked up by identity."""

    def __init__(self, bytes_per_token: float = BYTES_PER_TOKEN):
        self.bytes_per_token = bytes_per_token
        self.calibrator = Calibrator()
        self.last = 0  # the uncalibrated estimate of the latest request, for observe()
        self._sizes: dict[int, tuple[Any, int]] = {}  # id -> (the object, kept alive; size)
        self._prefix: tuple[int, tuple[Any, Any, int]] = (0, (None, None, 0))  # the last list

    def _size(self, obj: Any, measure: Callable[[Any], int]) -> int:
        hit = self._sizes.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        size = measure(obj)
        self._sizes[id(obj)] = (obj, size)
        return size

    def raw(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        size = self._messages_size(messages)
        if tools:
            size += self._size(tools, lambda t: text_size(json.dumps(t, ensure_ascii=False)))
        return int(size / self.bytes_per_token)

    def _messages_size(self, messages: list[dict[str, Any]]) -> int:
        """The size of `messages`; when they start with the ones of the last call (the same
        objects: a conversation only grows between two steps), only the new ones are measured."""
        n, (head, tail, total) = self._prefix
        if n and len(messages) >= n and messages[0] is head and messages[n - 1] is tail:
            total += sum(self._size(m, message_size) for m in messages[n:])
        else:
            total = sum(self._size(m, message_size) for m in messages)
        if messages:
            self._prefix = (len(messages), (messages[0], messages[-1], total))
        return total

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> int:
        """Calibrated estimate of the request about to be sent; observe() will compare the
        provider's count with it."""
        self.last = self.raw(messages, tools)
        if len(self._sizes) > 2 * len(messages) + 64:  # a compaction dropped most of them
            keep = {id(m) for m in messages} | {id(tools)}
            self._sizes = {k: v for k, v in self._sizes.items() if k in keep}
        return self.calibrator.apply(self.last)

    def measure(self, messages: list[dict[str, Any]]) -> int:
        """Calibrated estimate of some messages (not a request: observe() ignores it)."""
        return self.calibrator.apply(self.raw(messages))

    def observe(self, prompt_tokens: int) -> None:
        """The provider's count for the request last estimated (usage `input`, cached included)."""
        self.calibrator.observe(self.last, prompt_tokens)

    @property
    def effective_bytes_per_token(self) -> float:
        return self.bytes_per_token / self.calibrator.ratio
