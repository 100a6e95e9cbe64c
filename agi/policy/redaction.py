"""Keeping API keys out of every output: files, stdout, stderr, and streamed chunks.

A key streamed in pieces is spread over several chunks that each look harmless; the trace keeps
chunks, so they are redacted by the text they spell together, field by field.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the CLI imports this before it parses a flag
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET = 8  # shorter values (a local server's "ollama", "EMPTY") would redact words


def usable(secrets: list[str | None]) -> list[str]:
    return [s for s in secrets if s and len(s) >= MIN_SECRET]


def redact(text: str, secrets: list[str]) -> str:
    """`text` without the secrets, also as JSON writes them (`"` as `\\"`, `\\` doubled): a
    JSON line or answer made from a value holding one is redacted as well."""
    for secret in secrets:
        for form in _forms(secret):
            text = text.replace(form, REDACTED)
    return text


_FORMS: dict[str, tuple[str, ...]] = {}


def _forms(secret: str) -> tuple[str, ...]:
    """The secret, and its forms inside a JSON string when JSON escapes any of its characters."""
    forms = _FORMS.get(secret)
    if forms is None:
        if secret.isascii() and secret.isprintable() and '"' not in secret and "\\" not in secret:
            forms = (secret,)
        else:
            import json

            found = [secret]
            for ascii_only in (False, True):
                escaped = json.dumps(secret, ensure_ascii=ascii_only)[1:-1]
                if escaped not in found:
                    found.append(escaped)
            forms = tuple(found)
        _FORMS[secret] = forms
    return forms


def redact_values(value: Any, secrets: list[str]) -> Any:
    """A JSON value with every secret cut out of each string in it (object keys too): redacted
    value by value, so a secret that JSON would escape (`"`, `\\`) is caught, and the text
    of the value (json.dumps) holds no trace of it."""
    if not secrets:
        return value
    return map_strings(value, lambda text: redact(text, secrets))


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """A copy of a JSON value (text, lists, tuples and objects of it) with `fn` applied to every
    string in it, object keys too. Walked without recursion: any depth."""
    if not isinstance(value, (dict, list, tuple)):
        return fn(value) if isinstance(value, str) else value
    top: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(top, 0, value)]  # (holder, key, value to copy)
    while stack:
        holder, key, item = stack.pop()
        if isinstance(item, dict):
            copy: Any = {}
            for k, v in item.items():
                k = fn(k) if isinstance(k, str) else k
                copy[k] = None
                stack.append((copy, k, v))
        elif isinstance(item, (list, tuple)):
            copy = [None] * len(item)
            stack.extend((copy, i, v) for i, v in enumerate(item))
        else:
            copy = fn(item) if isinstance(item, str) else item
        holder[key] = copy
    return top[0]


def redact_chunks(chunks: list[Any], secrets: list[str]) -> list[Any]:
    """Chunks with every secret removed from the text they stream, even split across them."""
    if not secrets:
        return chunks
    import copy

    chunks = copy.deepcopy(chunks)
    fields: dict[tuple[Any, ...], list[tuple[Any, Any]]] = {}  # field -> (holder, key) pieces
    for chunk in chunks:
        block = chunk.get("index") if isinstance(chunk, dict) else None
        _collect(chunk, (block,), fields)
    for pieces in fields.values():
        _redact_pieces(pieces, secrets)
    return chunks


def _collect(value: Any, path: tuple[Any, ...], fields: dict[tuple[Any, ...], list[Any]]) -> None:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in items:
        if isinstance(item, str):
            fields.setdefault((*path, key), []).append((value, key))
        elif isinstance(item, (dict, list)):
            _collect(item, (*path, key), fields)


def _redact_pieces(pieces: list[tuple[Any, Any]], secrets: list[str]) -> None:
    """Cut every secret out of the pieces' joined text: its first piece gets the marker."""
    texts = [holder[key] for holder, key in pieces]
    joined = "".join(texts)
    hidden = [False] * len(joined)
    for secret in secrets:
        start = joined.find(secret)
        while start >= 0:
            hidden[start : start + len(secret)] = [True] * len(secret)
            start = joined.find(secret, start + 1)
    if not any(hidden):
        return
    at = 0
    for (holder, key), text in zip(pieces, texts, strict=True):
        out = []
        for i, char in enumerate(text, at):
            if not hidden[i]:
                out.append(char)
            elif i == 0 or not hidden[i - 1]:
                out.append(REDACTED)
        holder[key] = "".join(out)
        at += len(text)


class Held:
    """Streamed text with the secrets taken out even when a piece ends inside one: the end of
    each piece that could begin a secret is held back until the next piece, or flush()."""

    def __init__(self, secrets: list[str]):
        self.secrets, self.tail = secrets, ""

    def feed(self, text: str) -> str:
        if not self.secrets:
            return text
        text = redact(self.tail + text, self.secrets)
        cut = len(text) - self._opening(text)
        self.tail = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        tail, self.tail = self.tail, ""
        return tail

    def _opening(self, text: str) -> int:
        """How many of the last characters could be the beginning of a secret."""
        longest = 0
        for secret in self.secrets:
            for n in range(min(len(secret) - 1, len(text)), longest, -1):
                if secret.startswith(text[-n:]):
                    longest = n
                    break
        return longest


class HeldText:
    """A view's streamed text (the answer's and the reasoning's deltas) with the secrets taken
    out across deltas: each kind's pieces that may begin a secret wait for the next delta of
    that kind, or for `release`, which any other event calls first."""

    def __init__(self, secrets: Any):
        self.secrets = secrets  # a callable: the secrets known now (a session's, once open)
        self.held: dict[type, Held] = {}

    def feed(self, event: Any, show: Any) -> None:
        """Show `event` (with `show`), a text delta redacted; other events after what waits."""
        # lazy: agi --version loads this module, not that one
        from agi.messages import ReasoningDelta, TextDelta

        if isinstance(event, (TextDelta, ReasoningDelta)):
            text = self._of(type(event)).feed(event.text)
            if text:
                show(type(event)(text))
            return
        self.release(show)
        show(event)

    def release(self, show: Any) -> None:
        """Show the streamed text held back so far (the stream it belonged to has moved on)."""
        # lazy: agi --version loads this module, not that one
        from agi.messages import ReasoningDelta, TextDelta

        for kind in (TextDelta, ReasoningDelta):
            rest = self._of(kind).flush()
            if rest:
                show(kind(rest))

    def _of(self, kind: type) -> Held:
        if kind not in self.held:
            self.held[kind] = Held(list(self.secrets()))
        return self.held[kind]
