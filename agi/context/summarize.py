"""Compaction: a summary stands in for the earlier conversation in the model's view (docs:
long-sessions), while the session stays append-only (`Session.append_compaction`).

Pure parts (what to keep, what the summariser is shown and in how many pieces, the mechanical
fallback, the record) and one driver, `compact`, around `ask`: the caller's ghost exchange.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agi.context.estimate import BYTES_PER_TOKEN, text_size
from agi.context.estimate import estimate as estimate_tokens
from agi.errors import AgiError, Interrupted, LimitReached, ProviderError
from agi.messages import COMPACTION
from agi.prompts import sections
from agi.providers.errors import is_too_long, stated_window, too_long

Message = dict[str, Any]
Ask = Callable[[list[Message]], str]
Estimate = Callable[[list[Message]], int]

KEEP_SHARE = 0.25  # of the window: the recent turns kept verbatim
PIECE_SHARE = 0.55  # of the window: one piece of conversation shown to the summariser
FALLBACK_WINDOW = 32_768  # tokens, when the window is unknown
MIN_TOOL_CAP = 600  # a tool output or input cut to fit keeps at least this much (bytes)
SEPARATOR = "\n\n"


class SummaryFailed(AgiError):
    """The model produced no summary (an error, an empty reply); the caller falls back."""

    def __init__(self, message: str, too_long: bool = False):
        super().__init__(message)
        self.too_long = too_long


def text(name: str, **fields: Any) -> str:
    """A text of agi/prompts/compact.md, its {slots} filled."""
    body = sections("compact.md")[name]
    return body.format(**fields) if fields else body


def is_record(message: Message) -> bool:
    return isinstance(message.get(COMPACTION), dict)


def plan(
    view: list[Message], keep_tokens: int, estimate: Estimate
) -> tuple[list[Message], list[Message]]:
    """(to summarise, to keep verbatim). The kept part is the longest recent stretch within
    `keep_tokens` that starts where a turn may start: never at a tool result, so a call and its
    results stay together. The user prompt of the current turn is kept too when it fits, ahead
    of that stretch, even if the turn itself is too long to keep whole."""
    sizes = [estimate([m]) for m in view]
    first = 1 if view and is_record(view[0]) else 0  # an old summary is merged, never copied
    prompt = next((i for i in range(len(view) - 1, first - 1, -1) if _is_prompt(view[i])), None)
    start = _tail(view, sizes, keep_tokens, first)
    if prompt is None or prompt >= start or sizes[prompt] > keep_tokens:
        return view[:start], view[start:]
    start = _tail(view, sizes, keep_tokens - sizes[prompt], prompt + 1)
    return view[:start], [view[prompt], *view[start:]]


def _is_prompt(message: Message) -> bool:
    return message.get("role") == "user" and not is_record(message)


def _tail(view: list[Message], sizes: list[int], budget: int, lowest: int) -> int:
    """Start of the longest suffix within budget that begins at index >= lowest, not at a
    tool result."""
    start, used = len(view), 0
    for i in range(len(view) - 1, lowest - 1, -1):
        used += sizes[i]
        if used > budget:
            break
        if view[i].get("role") != "tool":
            start = i
    return start


@dataclass
class Block:
    """One message (or one tool call) as the summariser reads it."""

    head: str
    body: str
    cuttable: bool  # a tool's output or input: cut first when the whole does not fit

    def render(self) -> str:
        return f"{self.head}\n{self.body}"


def blocks(messages: list[Message]) -> list[Block]:
    """The conversation as labelled text blocks; reasoning is left out."""
    names: dict[str, str] = {}
    out: list[Block] = []
    for m in messages:
        role, body = m.get("role"), _content(m.get("content"))
        if is_record(m):
            out.append(Block("EARLIER SUMMARY:", body, False))
        elif role == "assistant":
            if body.strip():
                out.append(Block("ASSISTANT:", body, False))
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                names[call.get("id") or ""] = name = str(fn.get("name") or "?")
                out.append(Block(f"ASSISTANT CALLED {name}:", str(fn.get("arguments") or ""), True))
        elif role == "tool":
            name = names.get(m.get("tool_call_id") or "", "a tool")
            out.append(Block(f"RESULT OF {name}:", body, True))
        else:
            out.append(Block(f"{str(role).upper()}:", body, False))
    return out


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else None for p in content]
        return "\n".join(p if isinstance(p, str) else "[image or file]" for p in parts)
    return "" if content is None else str(content)


def cut(body: str, limit: int) -> str:
    """`body` within about `limit` bytes: its head and tail, with a note of what was cut."""
    size = text_size(body)
    if size <= limit:
        return body
    keep = max(0, int((limit - 60) * len(body) / size))
    head, tail = keep * 2 // 3, keep // 3
    note = f"[... {len(body) - head - tail} of {len(body)} characters cut ...]"
    return f"{body[:head]}\n{note}\n{body[len(body) - tail :]}".rstrip("\n")


def pieces(to_summarise: list[Message], budget: int) -> list[str]:
    """The conversation as texts of at most `budget` bytes each, in order. Every user message
    is shown in full; tool outputs and inputs are cut (head and tail, with a note) only when
    everything does not fit in one piece, and as little as lets it fit (never below
    MIN_TOOL_CAP); a single block larger than a whole piece is cut to fit, whatever it is."""
    items = blocks(to_summarise)
    over = {id(b): text_size(b.head) + 1 + len(SEPARATOR) for b in items}
    if sum(over.values()) + sum(text_size(b.body) for b in items) > budget:
        fixed = sum(over[id(b)] + (0 if b.cuttable else text_size(b.body)) for b in items)
        cap = _water_level([text_size(b.body) for b in items if b.cuttable], budget - fixed)
        for b in items:
            if b.cuttable:
                b.body = cut(b.body, max(cap, MIN_TOOL_CAP))
    out: list[str] = []
    current: list[str] = []
    used = 0
    for b in items:
        b.body = cut(b.body, max(MIN_TOOL_CAP, budget - over[id(b)]))
        size = over[id(b)] + text_size(b.body)
        if current and used + size > budget:
            out.append(SEPARATOR.join(current))
            current, used = [], 0
        current.append(b.render())
        used += size
    if current:
        out.append(SEPARATOR.join(current))
    return out


def _water_level(sizes: list[int], room: int) -> int:
    """The largest cap with sum(min(s, cap)) <= room (0 when even nothing fits)."""
    ordered = sorted(sizes)
    for i, size in enumerate(ordered):  # the smaller ones fit whole while the level is above
        cap = room // (len(ordered) - i)
        if cap < size:
            return max(0, cap)
        room -= size
    return max(sizes, default=0)


def summarise(ask: Ask, parts: list[str], focus: str = "") -> str:
    """One ghost request per piece, each carrying the summary so far; the last reply is the
    summary. Errors and empty replies raise SummaryFailed; interruptions and limits pass."""
    summary = ""
    for index, piece in enumerate(parts, 1):
        request = [text("part", index=index, count=len(parts)), piece, text("instruction")]
        if summary:
            request[:0] = [text("earlier"), summary]
        if focus.strip():
            request.append(text("focus", focus=focus.strip()))
        try:
            reply = ask([{"role": "user", "content": SEPARATOR.join(request)}])
        except (Interrupted, LimitReached):
            raise
        except Exception as e:
            refused = too_long(e) if isinstance(e, ProviderError) else is_too_long(None, str(e))
            raise SummaryFailed(f"the summary request failed: {e}", refused) from e
        if not isinstance(reply, str) or not reply.strip():
            raise SummaryFailed("the model's summary was empty")
        summary = reply.strip()
    return summary


def mechanical_summary(to_summarise: list[Message], limit: int = 24_000) -> str:
    """Without the model: an earlier summary, the first request, the user's later messages and
    the latest turns; tool outputs elided, long texts cut. At most about `limit` bytes."""
    items = blocks(to_summarise)
    users = [b for b in items if b.head in ("USER:", "EARLIER SUMMARY:")]
    out = [text("mechanical")]
    if users:
        out.append(f"{users[0].head}\n{cut(users[0].body, limit // 4)}")
    later: list[str] = []
    room = limit // 3
    for b in reversed(users[1:]):  # the most recent first, as many as fit
        shown = f"{b.head}\n{cut(b.body, 2000)}"
        if text_size(shown) > room:
            later.insert(0, f"[{users.index(b)} earlier user messages left out]")
            break
        later.insert(0, shown)
        room -= text_size(shown)
    out += later
    latest: list[str] = []
    room = limit // 3
    for b in reversed(items[-12:]):
        body = f"[{len(b.body)} characters elided]" if b.head.startswith("RESULT") else b.body
        shown = f"{b.head}\n{cut(body, 300 if b.cuttable else 1500)}"
        if text_size(shown) > room:
            break
        latest.insert(0, shown)
        room -= text_size(shown)
    if latest:
        out.append("LATEST TURNS:\n\n" + SEPARATOR.join(latest))
    return SEPARATOR.join(out)


def record(
    summary: str,
    trigger: str,
    summarized: int,
    tokens_before: int,
    tokens_after: int,
    kept: int = 0,
    **extra: Any,
) -> Message:
    """The compaction line: a user message the model reads as a summary of what came before."""
    info = {
        "trigger": trigger,
        "summarized": summarized,
        "tokens_before": tokens_before,
        "tokens_after": tokens_after,
        "kept": kept,
        **extra,
    }
    content = f"{text('record', count=summarized)}\n\n{summary}"
    return {"role": "user", "content": content, COMPACTION: info}


@dataclass
class Compaction:
    """What `compact` made: append `record` and `kept` with Session.append_compaction."""

    record: Message
    kept: list[Message]
    summary: str
    mechanical: bool = False
    warning: str | None = None  # why the summary is mechanical
    requests: int = 0  # ghost requests sent


def compact(
    view: list[Message],
    ask: Ask,
    trigger: str = "auto",
    window: int | None = None,
    estimate: Estimate | None = None,
    focus: str = "",
    keep_tokens: int | None = None,
    bytes_per_token: float = BYTES_PER_TOKEN,
) -> Compaction | None:
    """Summarise what does not fit (all of it when nothing else would go), keeping the recent
    turns; the model's summary, else a mechanical one with a warning. None: an empty view.

    `window` and `keep_tokens` are in the estimator's tokens; `bytes_per_token` is the
    estimator's effective ratio (Estimator.effective_bytes_per_token), to size the pieces.
    """
    measure = estimate or estimate_tokens
    window = window or FALLBACK_WINDOW
    keep = int(window * KEEP_SHARE) if keep_tokens is None else keep_tokens
    to_summarise, kept = plan(view, keep, measure)
    if not to_summarise:
        to_summarise, kept = plan(view, 0, measure)
    if not to_summarise:
        return None
    prompt_size = sum(text_size(text(n)) for n in ("instruction", "earlier", "part")) + len(focus)
    budget = int(window * PIECE_SHARE * bytes_per_token) - prompt_size
    calls = [0]

    def counted(messages: list[Message]) -> str:
        calls[0] += 1
        return ask(messages)

    summary, warning = "", None
    for attempt in (1, 2):  # a piece the provider finds too long: once more, in halves
        try:
            summary = summarise(counted, pieces(to_summarise, budget), focus)
            break
        except SummaryFailed as e:
            warning = str(e)
            if not e.too_long or attempt == 2:
                break
            budget //= 2
    mechanical = not summary
    if mechanical:
        summary = mechanical_summary(to_summarise, limit=int(window * bytes_per_token * 0.15))
    kept = [{k: v for k, v in m.items() if k != COMPACTION} for m in kept]
    before = measure(view)
    line = record(summary, trigger, len(to_summarise), before, 0, len(kept))
    if mechanical:
        line[COMPACTION]["mechanical"] = True
    line[COMPACTION]["tokens_after"] = measure([line, *kept])
    return Compaction(line, kept, summary, mechanical, warning if mechanical else None, calls[0])


def reactive_window(known: int | None, error: Any, estimated: int) -> int:
    """The window to compact for after a provider rejected a request of `estimated` tokens for
    its length: the smallest of what the error names, the known window and that request."""
    found = [w for w in (stated_window(error), known, estimated) if w and w > 0]
    return max(1024, min(found)) if found else FALLBACK_WINDOW
