"""Grep's search in Python, for when ripgrep is not installed: the records ripgrep's would give.

A match is a line with a match in it, or with `multiline` one group of lines that matches
overlapping on a line make; binary files (a NUL byte) are skipped, as ripgrep skips them.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Any, BinaryIO

from agi.errors import ToolError

# matching and context lines a search gathers at most (a match on every line of a few MB took
# hundreds of MB before the output bound applied); past it the search stops and says so
RECORD_LIMIT = 20_000
BIG = 8 << 20  # a file over this many bytes is read a line at a time (not whole), unless multiline
LINE_LIMIT = 1 << 20  # bytes of one line of such a file kept (the rest of the line is skipped)

if TYPE_CHECKING:
    from agi.tools.grep_query import Query


@dataclass
class Hits:
    """One file's matches: line number -> (text, is a matching line), and how many matches."""

    path: str
    lines: dict[int, tuple[str, bool]] = field(default_factory=dict)
    matches: int = 0

    def add(self, first: int, texts: list[str], matched: bool) -> None:
        for i, text in enumerate(texts):
            number = first + i
            if matched or number not in self.lines:
                self.lines[number] = (text, matched)


def regex_for(query: Query) -> re.Pattern[str]:
    flags = re.M | (re.I if query.ignore_case else 0) | (re.S if query.multiline else 0)
    try:
        return re.compile(query.pattern, flags)
    except re.error as e:
        raise ToolError(f"the pattern is not a valid regular expression: {e}") from e


def line_text(text: str) -> str:
    return text.rstrip("\n").rstrip("\r")


def search_python(query: Query, files: list[str], check: Callable[[], None]) -> list[Hits]:
    regex = regex_for(query)
    found, left = [], RECORD_LIMIT
    for n, path in enumerate(files):
        if n % 64 == 0:
            check()
        if left <= 0:
            query.cut = RECORD_LIMIT
            break
        hits = scan(path, regex, query, left)
        if hits is not None:
            found.append(hits)
            left -= len(hits.lines)  # counts and file names keep no lines
    return found


def scan(path: str, regex: re.Pattern[str], query: Query, left: int = RECORD_LIMIT) -> Hits | None:
    """The file's matches (None: none, binary, or unreadable), at most `left` lines of them
    (`query.cut` set when more were left out)."""
    try:
        if not query.multiline and os.path.getsize(path) > BIG:
            return scan_lines(path, regex, query, left)
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if b"\0" in data:
        return None
    text = data.decode("utf-8", "replace")
    if regex.search(text) is None:
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    hits = Hits(path)
    found = _groups(regex, text, lines) if query.multiline else _matching(regex, lines)
    if query.mode == "count":  # a count keeps no lines
        hits.matches = sum(1 for _ in found)
        return hits if hits.matches else None
    if query.mode == "files_with_matches":
        hits.matches = 1 if next(found, None) is not None else 0
        return hits if hits.matches else None
    groups = list(islice(found, left))
    if next(found, None) is not None:
        query.cut = RECORD_LIMIT
    for n, (first, last) in enumerate(groups, 1):
        hits.matches += 1
        hits.add(first + 1, [line_text(t) for t in lines[first : last + 1]], True)
        if len(hits.lines) >= left and n < len(groups):
            query.cut = RECORD_LIMIT
            return hits
    if not hits.matches:
        return None
    if query.before or query.after:
        for first, last in groups:
            if len(hits.lines) >= left:
                query.cut = RECORD_LIMIT
                break
            lo, hi = max(0, first - query.before), min(len(lines) - 1, last + query.after)
            hits.add(lo + 1, [line_text(t) for t in lines[lo : hi + 1]], False)
    return hits


def scan_lines(path: str, regex: re.Pattern[str], query: Query, left: int) -> Hits | None:
    """`scan` of a big file, a line at a time: the same records, in bounded memory."""
    hits, before = Hits(path), deque[tuple[int, str]](maxlen=query.before or None)
    after = 0  # context lines still to keep after the last match
    with open(path, "rb") as f:
        for number, raw in enumerate(_lines(f), 1):
            if b"\0" in raw:
                return None
            text = line_text(raw.decode("utf-8", "replace"))
            if regex.search(text) is None:
                if after:
                    hits.add(number, [text], False)
                    after -= 1
                elif query.before:
                    before.append((number, text))
                continue
            hits.matches += 1
            if query.mode == "files_with_matches":
                return hits
            if query.mode == "content":
                if len(hits.lines) >= left:
                    query.cut = RECORD_LIMIT
                    return hits
                for n, t in before:
                    hits.add(n, [t], False)
                before.clear()
                hits.add(number, [text], True)
                after = query.after
    return hits if hits.matches else None


def _lines(f: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each cut at LINE_LIMIT bytes (the rest of a longer line skipped)."""
    while line := f.readline(LINE_LIMIT):
        if len(line) == LINE_LIMIT and not line.endswith(b"\n"):
            while (rest := f.readline(LINE_LIMIT)) and not rest.endswith(b"\n"):
                pass
        yield line


def _matching(regex: re.Pattern[str], lines: list[str]) -> Iterator[tuple[int, int]]:
    return ((i, i) for i, line in enumerate(lines) if regex.search(line) is not None)


def _groups(regex: re.Pattern[str], text: str, lines: list[str]) -> Iterator[tuple[int, int]]:
    """Each match's lines (0-based, first and last), those sharing a line merged."""
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    import bisect

    group: tuple[int, int] | None = None
    for m in regex.finditer(text):
        first = bisect.bisect_right(starts, m.start()) - 1
        end = max(m.start(), m.end() - 1)
        last = bisect.bisect_right(starts, end) - 1
        if m.start() >= len(text) and m.start() == m.end():  # an empty match at the very end
            continue
        first, last = min(first, len(lines) - 1), min(last, len(lines) - 1)
        if group is not None and first <= group[1]:
            group = (group[0], max(last, group[1]))
        else:
            if group is not None:
                yield group
            group = (first, last)
    if group is not None:
        yield group


def decoded(field: dict[str, Any]) -> str:
    """ripgrep's JSON text field: `{"text": …}` or, for bytes that are not UTF-8, `{"bytes": …}`."""
    if "text" in field:
        return str(field["text"])
    import base64

    return base64.b64decode(field.get("bytes", "")).decode("utf-8", "replace")
