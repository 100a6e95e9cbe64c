"""The text ReAct protocol (`--react`): prompt, turn parser, and a transport adapter.

`ReactTransport` stands in for a `Transport`, so the agent loop does not change: the session keeps
the native format (assistant `tool_calls`, `role: tool` results) and every request is converted
to the text protocol (Thought / Action / Observation / Final Answer); every reply is parsed back
into a native `Reply`. Servers may ignore `stop`, so the streamed text is also cut here at the
first `Observation:` and the stream closed: a hallucinated observation never enters the session.
The system prompt (format rules, tools, example) is rendered by agi.providers.react_prompt.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agi.messages import Notice, ReasoningDelta, Reply, Returning, TextDelta, ToolCall
from agi.providers.react_prompt import (
    ToolLike,
    input_schema,
    json_form,
    react_system_prompt,
    react_text,
    tool_table,
)

__all__ = [
    "ReactTransport",
    "Turn",
    "TurnStream",
    "parse_turn",
    "react_messages",
    "react_system_prompt",
    "react_text",
]

if TYPE_CHECKING:
    from agi.providers.transport import Transport
    from agi.tools import Tool

STOP = "Observation:"
# A marker starts a line; tolerate markdown decoration (`**Action:**`) and any case.
MARKER = re.compile(
    r"^[ \t*_#>]*(thought|action input|action|final[ \t]+answer)[*_ \t]*:[*_]*[ \t]?",
    re.IGNORECASE | re.MULTILINE,
)
KEYWORDS = ("thought:", "actioninput:", "action:", "finalanswer:")
NAME = re.compile(r"[ \t`]*([^\W\d][\w.\-]*)")
QUOTES = ('"""', "'''", '"', "'", "`")


@dataclass
class Turn:
    """One model turn in the text protocol: an action, a final answer, or neither."""

    thought: str = ""
    action: tuple[str, dict[str, Any]] | None = None
    final: str | None = None
    error: str | None = None  # an `Action:` that cannot be read: what to tell the model


def _unmark(text: str) -> str:
    """The text without its `Thought:` markers."""
    return MARKER.sub(lambda m: "" if m.group(1).lower() == "thought" else m.group(0), text)


def _decisive(text: str) -> re.Match[str] | None:
    """The first `Action:` or `Final Answer:` marker."""
    for m in MARKER.finditer(text):
        if m.group(1).lower() not in ("thought", "action input"):
            return m
    return None


def _close_paren(s: str, start: int) -> int | None:
    """Index of the `)` matching s[start] == "(", skipping quoted strings; None if unbalanced."""
    depth, quote, escaped = 0, "", False
    for i in range(start, len(s)):
        c = s[i]
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


def _unquote(text: str) -> str:
    for q in QUOTES:
        if len(text) >= 2 * len(q) and text.startswith(q) and text.endswith(q):
            return text[len(q) : -len(q)]
    return text


def _bad(reason: str, name: str, table: dict[str, tuple[str, dict[str, Any]]]) -> str:
    if name in table:
        parameters = table[name][1]
        forms = [f"Action: {json_form(name, parameters)}"]
        required = input_schema(parameters)[1]
        if len(required) == 1:
            forms.append(f'or, with the {required[0]} as raw text: Action: {name}("...")')
    else:
        known = ", ".join(table) or "none"
        forms = [f'Action: TOOL_NAME({{"input_name": "value"}})  (tools: {known})']
    return react_text("bad_action").format(reason=reason, format="\n".join(forms))


def _arguments(raw: str, known: bool, required: list[str]) -> dict[str, Any] | None:
    """ARGS as a tool input: a JSON object, or the raw text for a one-required-input tool."""
    text = raw.strip()
    if not text:
        return {}
    try:
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return value
    if not known:
        return {"input": _unquote(text)}  # the tool runner answers that there is no such tool
    if len(required) != 1:
        return None
    key = required[0]
    m = re.match(rf"{re.escape(key)}\s*[=:]\s*", text)  # calculate(expression="2+2")
    return {key: _unquote(text[m.end() :].strip() if m else text)}


def _action(text: str, table: dict[str, tuple[str, dict[str, Any]]]) -> Turn:
    """Parse what follows `Action:`: NAME(ARGS), or NAME and an `Action Input:` line."""
    m = NAME.match(text)
    if not m:
        return Turn(error=_bad("no tool name after 'Action:'", "", table))
    name, rest = m.group(1), text[m.end() :]
    if name not in table:  # small models miss the case of a name
        folded = [n for n in table if n.lower() == name.lower()]
        name = folded[0] if len(folded) == 1 else name
    following = MARKER.search(rest)
    end = following.start() if following else len(rest)
    if rest.lstrip(" \t`").startswith("("):
        start = len(rest) - len(rest.lstrip(" \t`"))
        close = _close_paren(rest, start)
        if close is None:  # unbalanced, or quotes that are apostrophes: the last ")" before end
            close = rest.rfind(")", start, end) if end > start else -1
            if close < 0:
                return Turn(error=_bad(f"no ')' closes '{name}('", name, table))
        raw = rest[start + 1 : close]
    elif following and following.group(1).lower() == "action input" and not rest[:end].strip():
        after = rest[following.end() :]
        later = MARKER.search(after)
        raw = after[: later.start() if later else len(after)]
    else:
        return Turn(error=_bad(f"expected '(' after the tool name {name!r}", name, table))
    parameters = table.get(name, ("", {}))[1]
    args = _arguments(raw, name in table, input_schema(parameters)[1])
    if args is None:
        return Turn(error=_bad("ARGS must be a JSON object for this tool", name, table))
    return Turn(action=(name, args))


def parse_turn(text: str, tools: Iterable[ToolLike]) -> Turn:
    """Read one reply of the text protocol; never raises.

    The text is cut at the first `Observation:`. The first `Action:` or `Final Answer:` line
    decides the turn; a `Final Answer:` runs to the end of the text. An `Action:` naming an unknown
    tool is still an action (the tool runner answers `there is no tool named …`); one that cannot
    be read gives `error`, a reply that shows the exact format.
    """
    text = text.split(STOP, 1)[0]
    table = tool_table(tools)
    m = _decisive(text)
    if m is None:
        return Turn(thought=_unmark(text).strip())
    thought = _unmark(text[: m.start()]).strip()
    if m.group(1).lower() != "action":
        return Turn(thought=thought, final=text[m.end() :].strip())
    turn = _action(text[m.end() :], table)
    turn.thought = thought
    return turn


def _content(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    return content if isinstance(content, str) else json.dumps(content) if content else ""


def _action_line(call: dict[str, Any]) -> str:
    tc = ToolCall.from_dict(call)
    try:
        args = json.dumps(tc.parse_arguments(), ensure_ascii=False)
    except ValueError:
        args = tc.arguments
    return f"Action: {tc.name}({args})"


def react_messages(
    messages: list[dict[str, Any]], tools: Sequence[Tool] | Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The native conversation as the text protocol: system prompt with the tools, assistant
    tool calls as `Thought:`/`Action:` text, tool results as `Observation:` user messages.

    Only role and content are sent; adjacent messages of one role are joined, as strict chat
    templates require alternating roles.
    """
    out: list[dict[str, Any]] = []
    queued: list[dict[str, Any]] = []  # further calls of one assistant turn, one per Observation

    def add(role: str, content: Any) -> None:
        last = out[-1] if out else {"role": "", "content": None}
        joinable = isinstance(content, str) and isinstance(last["content"], str)
        if last["role"] == role != "system" and joinable:
            out[-1] = {"role": role, "content": f"{last['content']}\n\n{content}"}
            return
        out.append({"role": role, "content": content})

    if not any(m.get("role") == "system" for m in messages):
        add("system", react_system_prompt(tools, ""))
    for n, msg in enumerate(messages):
        role = msg.get("role")
        if role == "system":
            add("system", react_system_prompt(tools, _content(msg)))
        elif role == "tool":
            add("user", f"Observation: {_content(msg)}")
            if queued:
                add("assistant", _action_line(queued.pop(0)))
        elif role == "assistant":
            thought = (
                _content(msg).strip()
                or str(msg.get("reasoning_content") or msg.get("reasoning") or "").strip()
            )
            head = f"Thought: {thought}\n" if thought else ""
            calls = [c for c in msg.get("tool_calls") or [] if isinstance(c, dict)]
            if calls:
                add("assistant", head + _action_line(calls[0]))
                queued = calls[1:]
                continue
            text = _content(msg).strip()
            after = messages[n + 1] if n + 1 < len(messages) else {}
            if not text:
                continue
            if after.get("role") == "user" and _content(after).startswith(STOP):
                add("assistant", text)  # a nudged turn, verbatim
            elif not (m := _decisive(text)) or m.group(1).lower() == "action":
                reasoning = str(msg.get("reasoning_content") or msg.get("reasoning") or "")
                lead = f"Thought: {reasoning.strip()}\n" if reasoning.strip() else ""
                add("assistant", f"{lead}Final Answer: {text}")
            else:
                add("assistant", text)
        else:
            add(str(role or "user"), msg.get("content"))
    return out


class TurnStream:
    """Cuts streamed text at the first `Observation:`, across chunk boundaries, and turns it into
    display events: thoughts as reasoning, the final answer as text, actions not at all.

    Text that could still become a marker or the stop word is held back until it is decided.
    Each character is looked at a bounded number of times, so long replies stream in linear time.
    """

    def __init__(self) -> None:
        self.text = ""
        self.cut = False
        self.decided = ""  # "action" or "final", once the first such marker is seen
        self.shown_to = 0  # text[:shown_to] has been shown, or skipped
        self.started = False  # some text has been shown (leading whitespace is skipped)

    def feed(self, chunk: str) -> list[TextDelta | ReasoningDelta]:
        if self.cut:
            return []
        start = max(0, len(self.text) - len(STOP) + 1)
        self.text += chunk
        i = self.text.find(STOP, start)
        if i >= 0:
            self.text, self.cut = self.text[:i], True
            return self._release(len(self.text), more=False)
        hold = next((k for k in range(len(STOP) - 1, 0, -1) if self.text.endswith(STOP[:k])), 0)
        return self._release(len(self.text) - hold, more=True)

    def finish(self) -> list[TextDelta | ReasoningDelta]:
        return self._release(len(self.text), more=False)

    def _show(self, piece: str, kind: type[TextDelta] | type[ReasoningDelta]) -> list[Any]:
        piece = piece if self.started else piece.lstrip()
        self.started = self.started or bool(piece)
        return [kind(piece)] if piece else []

    def _release(self, end: int, more: bool) -> list[TextDelta | ReasoningDelta]:
        text, pos, out = self.text, self.shown_to, []
        while not self.decided and pos < end:
            if pos == 0 or text[pos - 1] == "\n":  # a line start: is it a marker?
                m = MARKER.match(text, pos, end)
                if m and more and m.end() == end:
                    break  # `**` or a space after the colon may follow
                kind = m.group(1).lower() if m else ""
                if kind in ("action", "final answer") and m:
                    self.decided, pos, self.started = kind.split()[0], m.end(), False
                    break
                if kind == "thought" and m:
                    pos = m.end()
                    continue
                line = text[pos:end]
                if more and "\n" not in line:
                    head = re.sub(r"[\s*_#>]+", "", line.lstrip(" \t*_#>")[:40]).lower()
                    if not m and any(k.startswith(head) for k in KEYWORDS):
                        break  # this line may still become a marker
            nl = text.find("\n", pos, end)
            stop = end if nl < 0 else nl + 1
            out += self._show(text[pos:stop], ReasoningDelta)
            pos = stop
        if self.decided == "final" and end > pos:
            out += self._show(text[pos:end], TextDelta)
            pos = end
        self.shown_to = pos if self.decided != "action" else len(text)
        return out


class ReactTransport:
    """A Transport for models without native tool calls: same `stream` contract, text inside.

    `send_stop=False` for models that reject `stop` (OpenAI's o-series): the cut still happens.
    """

    def __init__(self, transport: Transport, send_stop: bool = True):
        self.transport, self.send_stop = transport, send_stop

    def __getattr__(self, name: str) -> Any:  # config, trace, deadline, ... of the inner transport
        if name == "transport":
            raise AttributeError(name)
        return getattr(self.transport, name)

    def close(self) -> None:
        self.transport.close()

    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        mark: dict[str, Any] | None = None,
        **extra: Any,
    ) -> Generator[TextDelta | ReasoningDelta | Notice, None, Reply]:
        """Yield thoughts as reasoning and the final answer as text; return a native Reply."""
        if self.send_stop:
            stop = extra.get("stop") or []
            stop = [stop] if isinstance(stop, str) else list(stop)
            extra["stop"] = stop if STOP in stop else [*stop, STOP]
        inner = self.transport.stream(react_messages(messages, tools), [], mark, **extra)
        turn, run = TurnStream(), Returning(inner)
        try:
            for event in run:
                if isinstance(event, TextDelta):
                    yield from turn.feed(event.text)
                else:
                    yield event  # native reasoning (reasoning_content, <think>) passes through
                if turn.cut:
                    break
        finally:
            inner.close()  # at a cut: GeneratorExit closes the HTTP response in Transport._once
        inner_reply = None if turn.cut else run.value
        yield from turn.finish()
        if turn.cut:
            trace = getattr(self.transport, "trace", None)
            if callable(trace):
                trace({"type": "react_cut", "kept": turn.text, **(mark or {})})
        return self.reply(turn.text, messages, tools, inner_reply)

    def reply(
        self,
        text: str,
        messages: list[dict[str, Any]],
        tools: Sequence[Tool] | Sequence[dict[str, Any]],
        inner: Reply | None = None,
    ) -> Reply:
        """The native Reply for one text turn; it carries a `nudge` when it is not yet an answer."""
        turn = parse_turn(text, tools)
        usage = inner.usage if inner else None
        finish = inner.finish_reason if inner else "stop"
        if turn.action:
            name, args = turn.action
            call = ToolCall(f"call_{uuid.uuid4().hex[:24]}", name, json.dumps(args))
            return Reply(
                "", turn.thought, tool_calls=[call], usage=usage, finish_reason="tool_calls"
            )
        if turn.final is not None:
            return Reply(turn.final, turn.thought, usage=usage, finish_reason=finish)
        body = text.strip()
        if turn.error:
            return Reply(body, usage=usage, finish_reason=finish, nudge=turn.error)
        no_action = react_text("no_action")
        last = messages[-1] if messages else {}
        if body and last.get("role") == "user" and last.get("content") == no_action:
            # the second turn in a row without an action: small models drop `Final Answer:`
            return Reply(turn.thought, usage=usage, finish_reason=finish)
        return Reply(body, usage=usage, finish_reason=finish, nudge=no_action)
