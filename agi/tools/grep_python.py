"""Grep's search in Python, for when ripgrep is not installed: the records ripgrep's would give.

A match is a line with a match in it, or with `multiline` one group of lines that matches
overlapping on a line make; binary files (a NUL byte) are skipped, as ripgrep skips them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agi.errors import ToolError

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
    found = []
    for n, path in enumerate(files):
        if n % 64 == 0:
            check()
        hits = scan(path, regex, query)
        if hits is not None:
            found.append(hits)
    return found


def scan(path: str, regex: re.Pattern[str], query: Query) -> Hits | None:
    """The file's matches (None: none, binary, or unreadable)."""
    try:
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
    groups = _groups(regex, text, lines) if query.multiline else _matching(regex, lines)
    for first, last in groups:
        hits.matches += 1
        if query.mode == "files_with_matches":
            return hits
        hits.add(first + 1, [line_text(t) for t in lines[first : last + 1]], True)
    if not hits.matches:
        return None
    if query.before or query.after:
        for first, last in groups:
            lo, hi = max(0, first - query.before), min(len(lines) - 1, last + query.after)
            hits.add(lo + 1, [line_text(t) for t in lines[lo : hi + 1]], False)
    return hits


def _matching(regex: re.Pattern[str], lines: list[str]) -> list[tuple[int, int]]:
    return [(i, i) for i, line in enumerate(lines) if regex.search(line) is not None]


def _groups(regex: re.Pattern[str], text: str, lines: list[str]) -> list[tuple[int, int]]:
    """Each match's lines (0-based, first and last), those sharing a line merged."""
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    import bisect

    groups: list[tuple[int, int]] = []
    for m in regex.finditer(text):
        first = bisect.bisect_right(starts, m.start()) - 1
        end = max(m.start(), m.end() - 1)
        last = bisect.bisect_right(starts, end) - 1
        if m.start() >= len(text) and m.start() == m.end():  # an empty match at the very end
            continue
        first, last = min(first, len(lines) - 1), min(last, len(lines) - 1)
        if groups and first <= groups[-1][1]:
            groups[-1] = (groups[-1][0], max(last, groups[-1][1]))
        else:
            groups.append((first, last))
    return groups


def decoded(field: dict[str, Any]) -> str:
    """ripgrep's JSON text field: `{"text": …}` or, for bytes that are not UTF-8, `{"bytes": …}`."""
    if "text" in field:
        return str(field["text"])
    import base64

    return base64.b64decode(field.get("bytes", "")).decode("utf-8", "replace")
