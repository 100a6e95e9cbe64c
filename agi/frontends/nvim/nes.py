"""Next-edit suggestions on the Python host: the request in the backend's prompt format, the
answer read back into hunks of the window it rewrote.

Three formats, one reader. `"zeta"` is Zed's Zeta (huggingface.co/zed-industries/zeta; Zed's
crates/zeta): an instruction, the user's edits as diffs, and the excerpt with the editable region
between `<|editable_region_start|>` and `<|editable_region_end|>` and the cursor at
`<|user_cursor_is_here|>`; the model writes the excerpt back. `"sweep"` is sweep-next-edit's
(huggingface.co/sweepai/sweep-next-edit-1.5B): `<|file_sep|>` sections with each change as
`original:`/`updated:` blocks, then the window before the last change, as it is now, and an open
`updated/` section the model fills. `"chat"` is agi's own prompt (agi/prompts/nes.md) for any
chat model, asking for the region back between Zeta's markers.

The request machinery (one request per buffer on its own thread, cancelled by closing its
connection) is the inline suggestions' (agi.frontends.nvim.suggest); like it, this module is
imported on the host's event loop and imports nothing heavy.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agi.frontends.nvim.suggest import Flight, Suggestions

if TYPE_CHECKING:
    from agi.providers.fim import Completer

FORMATS = ("chat", "zeta", "sweep")
START, END = "<|editable_region_start|>", "<|editable_region_end|>"
CURSOR, START_OF_FILE = "<|user_cursor_is_here|>", "<|start_of_file|>"
FILE_SEP, END_OF_TEXT = "<|file_sep|>", "<|endoftext|>"
DEADLINE = 30.0  # seconds one request may take, retries included
MAX_TOKENS = 2048  # the window comes back whole

# Zeta's instruction, as its model card and Zed's crates/zeta send it
ZETA = (
    "### Instruction:\n"
    "You are a code completion assistant and your task is to analyze user edits and then "
    "rewrite an excerpt that the user provides, suggesting the appropriate edits within the "
    "excerpt, taking into account the cursor location.\n\n"
    "### User Edits:\n\n{events}\n\n"
    "### User Excerpt:\n\n{excerpt}\n\n"
    "### Response:\n\n"
)


def window_text(request: dict[str, Any]) -> str:
    """The window's lines with the cursor marker where the cursor is."""
    lines = [str(line) for line in request.get("window") or []]
    cursor = request.get("cursor") or [0, 0]
    row = int(cursor[0]) - int(request.get("first") or 0)
    if 0 <= row < len(lines):
        col = int(cursor[1])
        lines[row] = lines[row][:col] + CURSOR + lines[row][col:]
    return "\n".join(lines)


def excerpt(request: dict[str, Any]) -> str:
    """Zeta's excerpt: a fence named by the file, the editable region marked."""
    head = START_OF_FILE + "\n" if int(request.get("first") or 0) == 0 else ""
    body = f"{head}{START}\n{window_text(request)}\n{END}"
    return f"```{request.get('filename') or 'untitled'}\n{body}\n```"


def events(request: dict[str, Any]) -> str:
    """The recent changes as Zeta writes them: `User edited PATH:` and a diff block each."""
    name = request.get("filename") or "untitled"
    diffs = [str(d).rstrip("\n") for d in request.get("history") or [] if str(d).strip()]
    return "\n\n".join(f"User edited {name}:\n```diff\n{d}\n```" for d in diffs)


def original_updated(diff: str) -> tuple[str, str]:
    """A unified diff's hunks as sweep's blocks: the lines before, and the lines after."""
    before, after = [], []
    for line in diff.split("\n"):
        if line.startswith(("@@", "---", "+++", "\\")):
            continue
        mark, text = line[:1], line[1:]
        if mark in (" ", "-"):
            before.append(text)
        if mark in (" ", "+"):
            after.append(text)
    return "\n".join(before), "\n".join(after)


def sweep_prompt(request: dict[str, Any]) -> str:
    name = request.get("filename") or "untitled"
    parts = []
    for diff in request.get("history") or []:
        before, after = original_updated(str(diff))
        parts.append(f"{FILE_SEP}{name}.diff\noriginal:\n{before}\nupdated:\n{after}")
    original = request.get("original") or request.get("window") or []
    parts.append(f"{FILE_SEP}original/{name}\n" + "\n".join(map(str, original)))
    parts.append(f"{FILE_SEP}current/{name}\n" + "\n".join(map(str, request.get("window") or [])))
    parts.append(f"{FILE_SEP}updated/{name}\n")
    return "\n".join(parts)


def chat_messages(request: dict[str, Any]) -> list[dict[str, str]]:
    # lazy: the prompts package reads files; only chat requests need it
    from agi.prompts import sections

    texts = sections("nes.md")
    user = texts["user"].format(
        filename=request.get("filename") or "untitled",
        filetype=request.get("filetype") or "text",
        events=events(request) or "(none recorded)",
        excerpt=excerpt(request),
    )
    return [{"role": "system", "content": texts["system"]}, {"role": "user", "content": user}]


def prompt(request: dict[str, Any]) -> str:
    """The completion prompt of a next-edit model (`zeta`, `sweep`)."""
    if nes_format(request) == "sweep":
        return sweep_prompt(request)
    return ZETA.format(events=events(request), excerpt=excerpt(request))


def nes_format(request: dict[str, Any]) -> str:
    found = str((request.get("options") or {}).get("format") or "chat")
    return found if found in FORMATS else "chat"


def read_window(text: str, fmt: str) -> list[str] | None:
    """The rewritten window in a reply, or None when the reply holds none (cut short, no
    markers). Zeta's and agi's replies hold it between the region markers; sweep's is the
    text up to its next separator."""
    text = text.replace("\r\n", "\n").replace(CURSOR, "")
    if fmt == "sweep":
        for stop in (FILE_SEP, END_OF_TEXT):
            text = text.split(stop, 1)[0]
        if text.endswith("\n"):
            text = text[:-1]
        return text.split("\n")
    start = text.find(START)
    if start < 0:
        return None
    rest = text[start + len(START) :]
    newline = rest.find("\n")
    if newline < 0:
        return None
    rest = rest[newline + 1 :]
    end = rest.rfind(END)
    if end < 0:
        return None
    body = rest[:end]
    if not body:
        return []
    if not body.endswith("\n"):  # the marker belongs on its own line; take it as said
        return body.split("\n")
    return body[:-1].split("\n")


def hunks(first: int, old: list[str], new: list[str]) -> list[dict[str, Any]]:
    """The changes from `old` to `new` (the window at buffer row `first`, 0-based), each over
    the rows it is checked against (`start`, `count`) with its `lines`: they replace those rows
    (`at = "replace"`) or, for an insertion, go `"below"` or `"above"` the one row it is
    anchored to (the row before it; the row after it at the window's top)."""
    import difflib  # lazy: only an answer needs it

    out: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        lines = new[j1:j2]
        if i1 < i2:
            out.append({"start": first + i1, "count": i2 - i1, "lines": lines, "at": "replace"})
        elif i1 > 0:
            out.append({"start": first + i1 - 1, "count": 1, "lines": lines, "at": "below"})
        elif old:
            out.append({"start": first, "count": 1, "lines": lines, "at": "above"})
    return out


def ask(completer: Completer, request: dict[str, Any], attach: Callable[[Any], None]) -> str:
    """One request to the backend, to the end of its reply (or of the rewritten window)."""
    options = request.get("options") or {}
    key, settings = completer.settings(options)
    fmt = nes_format(request)
    kind = "chat" if fmt == "chat" else "prompt"
    transport = completer.take(key, kind, settings, deadline=time.monotonic() + DEADLINE)
    attach(transport)
    max_tokens = int(options.get("max_tokens") or MAX_TOKENS)
    if kind == "chat":
        stream = transport.stream(chat_messages(request), [], max_tokens=max_tokens)
    else:
        stop = [FILE_SEP, END_OF_TEXT] if fmt == "sweep" else [END_OF_TEXT]
        stream = transport.stream([], [], prefix=prompt(request), max_tokens=max_tokens, stop=stop)
    text, finished = "", False
    try:
        for event in stream:
            if getattr(event, "type", "") == "text":
                text += event.text
                if fmt != "sweep" and END in text:
                    break  # the region is whole: the rest is the excerpt's fence
        finished = True
    finally:
        stream.close()
        if finished and not transport.cancelled.is_set():
            completer.give(key, kind, transport)
        else:
            transport.close()
    return text


class NextEdits(Suggestions):
    """Starts and cancels next-edit requests: one per buffer, the newest replacing the one in
    flight, as for inline suggestions; the answer goes to `require('agi.nes')._event`."""

    deliver_to = "require('agi.nes')._event(...)"

    def answer(self, completer: Completer, flight: Flight) -> dict[str, Any]:
        request = flight.request
        text = ask(completer, request, flight.attach)
        window = [str(line) for line in request.get("window") or []]
        new = read_window(text, nes_format(request))
        if new is None:
            return {"type": "done", "hunks": [], "note": "the reply holds no rewritten window"}
        return {"type": "done", "hunks": hunks(int(request.get("first") or 0), window, new)}
