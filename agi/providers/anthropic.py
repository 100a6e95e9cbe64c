"""Anthropic's Messages API, the second wire protocol beside chat completions.

Sessions stay in OpenAI format; this module converts them to content blocks on the way out
(system, tool_use/tool_result, merged turns, cache breakpoints, thinking blocks sent back) and
`agi.providers.stream` decodes the events on the way in. HTTP, retries, deadlines, the idle limit,
cancel
and the trace are `Transport`'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import Any

from agi import __version__
from agi.errors import ProviderError
from agi.messages import THINKING_BLOCKS, Reply
from agi.providers.stream import anthropic_error
from agi.providers.transport import Event, Transport

API_VERSION = "2023-06-01"
CACHE = {"type": "ephemeral"}
THINKING = ("thinking", "redacted_thinking")
ANSWER = "answer"  # the tool --schema forces, so the JSON comes as the tool's input

# a subagent file's `model: sonnet|opus|haiku` under a parent that speaks Anthropic
CLAUDE_MODELS = {"opus": "claude-opus-5", "sonnet": "claude-sonnet-5", "haiku": "claude-haiku-4-5"}

# max_tokens is required; without `max_tokens` in the config, the first prefix that matches
MAX_TOKENS = (
    ("claude-3-5-", 8192),
    ("claude-3-7-", 32000),
    ("claude-3-", 4096),
    ("claude-2", 4096),
    ("claude-instant", 4096),
    ("claude-", 32000),
)
OTHER_MAX_TOKENS = 8192  # a non-Claude model behind a Messages-compatible endpoint

# chat-completions parameters with no Messages API meaning (or one converted below)
OPENAI_ONLY = {
    "stream_options",
    "response_format",
    "n",
    "logprobs",
    "top_logprobs",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "parallel_tool_calls",
    "max_completion_tokens",
    "max_tokens",
    "reasoning_effort",
    "user",
    "stop",
    "tool_choice",
}


def claude_model(alias: str | None) -> str | None:
    """The current Claude model of a family (`sonnet`, `opus`, `haiku`); None for anything else."""
    return CLAUDE_MODELS.get((alias or "").strip().lower())


def default_max_tokens(model: str) -> int:
    name = model[model.find("claude-") :] if "claude-" in model else ""
    return next((n for prefix, n in MAX_TOKENS if name.startswith(prefix)), OTHER_MAX_TOKENS)


def messages_url(base_url: str) -> str:
    """`{base}/v1/messages`; a base that already ends in /v1 (or names the endpoint) is kept."""
    base = base_url.rstrip("/")
    if base.endswith("/v1/messages"):
        return base
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + "/v1/messages"


# ---- OpenAI-format conversation -> Messages API request ----


def text_blocks(content: Any) -> list[dict[str, Any]]:
    """Content as blocks: text (never empty: the API rejects blank text) and images."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text") and str(part.get("text") or "").strip():
            blocks.append({"type": "text", "text": str(part["text"])})
        elif kind == "image_url":
            url = part.get("image_url")
            url = url.get("url") if isinstance(url, dict) else url
            if isinstance(url, str) and url:
                blocks.append({"type": "image", "source": image_source(url)})
        elif kind == "image":  # already a Messages API block
            blocks.append(dict(part))
    return blocks


def image_source(url: str) -> dict[str, Any]:
    match = re.match(r"data:([^;,]+);base64,(.*)", url, re.S)
    if match:
        return {"type": "base64", "media_type": match.group(1), "data": match.group(2)}
    return {"type": "url", "url": url}


def tool_id(value: Any) -> str:
    """An id the API accepts (`[a-zA-Z0-9_-]+`): other providers' ids may hold `.` or `:`.
    tool_use and tool_result go through the same function, so they still match."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", str(value or "")) or "toolu_unnamed"


def tool_input(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def assistant_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    """Thinking first (on tool-use turns, unchanged, as the API requires), text, tool calls."""
    calls = [c for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
    blocks: list[dict[str, Any]] = []
    if calls:
        kept = msg.get(THINKING_BLOCKS) or []
        blocks += [dict(b) for b in kept if isinstance(b, dict) and b.get("type") in THINKING]
    blocks += [b for b in text_blocks(msg.get("content")) if b["type"] == "text"]
    for call in calls:
        fn = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_id(call.get("id")),
                "name": str(fn.get("name") or ""),
                "input": tool_input(fn.get("arguments")),
            }
        )
    return blocks


def tool_result_block(msg: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id(msg.get("tool_call_id"))}
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif text_blocks(content):
        block["content"] = text_blocks(content)
    return block


Blocks = list[dict[str, Any]]
# id(stored message) -> (the message, its role, its blocks): a transport converts each message
# of a tool loop once, not at every step (the entry keeps the message alive, so its id is its own)
Memo = dict[int, tuple[dict[str, Any], str, Blocks]]


def convert(msg: dict[str, Any]) -> tuple[str, Blocks]:
    """One stored message as (role, blocks); role "system" for the system prompt's."""
    role = msg.get("role")
    if role in ("system", "developer"):
        return "system", [b for b in text_blocks(msg.get("content")) if b["type"] == "text"]
    if role == "tool":
        return "user", [tool_result_block(msg)]
    if role == "assistant":
        return "assistant", assistant_blocks(msg)
    return "user", text_blocks(msg.get("content"))


def to_messages(messages: list[dict[str, Any]], memo: Memo | None = None) -> tuple[Blocks, Blocks]:
    """(system blocks, turns): system messages go to `system`; tool results become tool_result
    blocks in a user turn; consecutive same-role messages merge, so the results of one turn's
    calls share one user message. With `memo` (kept by the caller between requests), messages
    converted before are not converted again; it is left holding this conversation's only.
    Blocks are shared with the memo: what changes them (cache breakpoints) replaces them."""
    system: Blocks = []
    turns: Blocks = []
    seen: Memo = {}
    for msg in messages:
        if memo is None:
            role, blocks = convert(msg)
        else:
            key = id(msg)
            hit = memo.get(key)
            if hit is None or hit[0] is not msg:
                hit = (msg, *convert(msg))
            seen[key] = hit
            role, blocks = hit[1], hit[2]
        if role == "system":
            system += blocks
        elif not blocks:
            continue
        elif turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": list(blocks)})
    if memo is not None:
        memo.clear()
        memo.update(seen)
    return system, turns


def to_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI `tools` entry as `{name, description, input_schema}`."""
    fn = spec.get("function") if spec.get("type") == "function" else spec
    fn = fn if isinstance(fn, dict) else {}
    schema = fn.get("parameters") or fn.get("input_schema") or {"type": "object", "properties": {}}
    name, description = fn.get("name") or "", fn.get("description") or ""
    return {"name": name, "description": description, "input_schema": schema}


def to_tool_choice(choice: Any, parallel: Any = None) -> dict[str, Any] | None:
    """OpenAI's tool_choice ("auto", "required", "none", {"function": {"name"}}) or Anthropic's."""
    result: dict[str, Any] | None = None
    if choice in ("auto", "none"):
        result = {"type": choice}
    elif choice in ("required", "any"):
        result = {"type": "any"}
    elif isinstance(choice, dict) and choice.get("type") == "function":
        result = {"type": "tool", "name": (choice.get("function") or {}).get("name") or ""}
    elif isinstance(choice, dict) and choice.get("type") in ("auto", "any", "tool", "none"):
        result = dict(choice)
    if parallel is False and (result or {}).get("type") != "none":
        result = {**(result or {"type": "auto"}), "disable_parallel_tool_use": True}
    return result


def add_cache_breakpoints(body: dict[str, Any]) -> None:
    """cache_control on the last tool, the last system block and the newest message's last
    block (3 of the 4 allowed): each step of a tool loop reads what came before from the cache."""
    if body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": CACHE}
    if body.get("system"):
        body["system"][-1] = {**body["system"][-1], "cache_control": CACHE}
    if body.get("messages"):
        content = body["messages"][-1]["content"]
        for pos in range(len(content) - 1, -1, -1):
            if content[pos].get("type") not in THINKING:  # thinking cannot carry it
                content[pos] = {**content[pos], "cache_control": CACHE}
                break


def thinking_on(params: dict[str, Any]) -> bool:
    thinking = params.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def drop_unmatched_thinking(body: dict[str, Any]) -> None:
    """With thinking on, the assistant turn a tool loop continues must begin with its thinking.
    A turn another provider made has none to give back: that request goes without thinking."""
    turns = body["messages"]
    if not thinking_on(body) or len(turns) < 2 or turns[-2]["role"] != "assistant":
        return
    blocks = turns[-2]["content"]
    if any(b.get("type") == "tool_use" for b in blocks) and blocks[0].get("type") not in THINKING:
        del body["thinking"]


def request_body(
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    params: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    memo: Memo | None = None,
) -> dict[str, Any]:
    """The streaming Messages API request for an OpenAI-format conversation.

    `params` (the config's params and the call's extras) pass through, except chat-completions
    ones: `stop` becomes `stop_sequences`, tool_choice is translated, max_tokens is always set.
    `memo`: see to_messages.
    """
    params = dict(params or {})
    system, turns = to_messages(messages, memo)
    chosen = max_tokens or params.get("max_tokens") or params.get("max_completion_tokens")
    if not chosen:
        chosen = default_max_tokens(model)
        budget = (params.get("thinking") or {}).get("budget_tokens") if thinking_on(params) else 0
        if isinstance(budget, int) and budget >= chosen:
            chosen = budget + OTHER_MAX_TOKENS  # max_tokens must leave room past the thinking
    body: dict[str, Any] = {"model": model, "max_tokens": int(chosen), "messages": turns}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [to_tool(t) for t in tools]
        choice = to_tool_choice(params.get("tool_choice"), params.get("parallel_tool_calls"))
        if choice:
            body["tool_choice"] = choice
    stop = params.get("stop")
    if stop:
        given = params.get("stop_sequences") or []
        body["stop_sequences"] = [*given, *([stop] if isinstance(stop, str) else stop)]
    body.update({k: v for k, v in params.items() if k not in OPENAI_ONLY and k not in body})
    body["stream"] = True
    drop_unmatched_thinking(body)
    add_cache_breakpoints(body)
    return body


def answer_tool(response_format: Any, thinking: bool) -> dict[str, Any] | None:
    """--schema's structured output as a forced tool whose input is the JSON (an object schema
    only; forcing a tool is not allowed with thinking): None leaves it to the instructions."""
    if thinking or not isinstance(response_format, dict):
        return None
    schema = (response_format.get("json_schema") or {}).get("schema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    description = "Give the answer: its input is the JSON asked for."
    fn = {"name": ANSWER, "description": description, "parameters": schema}
    return {"type": "function", "function": fn}


class AnthropicMessages(Transport):
    """`Transport` speaking the Messages API: `POST {base}/v1/messages`, x-api-key."""

    @property
    def url(self) -> str:
        return messages_url(self.config.base_url)

    def _headers(self) -> dict[str, str]:
        headers = {
            "User-Agent": f"agi/{__version__}",
            "Accept": "text/event-stream",
            "anthropic-version": API_VERSION,
        }
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        return headers

    def payload(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any
    ) -> dict[str, Any]:
        params = {**self.config.params, **extra}
        max_tokens = getattr(self.config, "max_tokens", None)
        memo = self.__dict__.setdefault("_memo", {})  # each message converted once
        return request_body(self.config.model, messages, tools, params, max_tokens, memo)

    def error_from(self, status: int, body: Any) -> ProviderError:
        return anthropic_error(body, status)

    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        mark: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Generator[Event, None, Reply]:
        """As Transport's; a `response_format` (--schema) becomes a forced `answer` tool whose
        input is returned as the reply's text."""
        forced = answer_tool(
            extra.pop("response_format", None), thinking_on({**self.config.params, **extra})
        )
        if forced is None:
            return (yield from super().stream(messages, tools, mark, **extra))
        extra["tool_choice"] = {"type": "tool", "name": ANSWER}
        reply = yield from super().stream(messages, [*tools, forced], mark, **extra)
        answer = next((c for c in reply.tool_calls if c.name == ANSWER), None)
        if answer is not None:
            reply.text, reply.tool_calls, reply.finish_reason = answer.arguments, [], "stop"
        return reply
