"""Glob patterns as Claude Code's Glob and ripgrep's `--glob` read them: `*` within a path
segment, `**` any number of segments, `?`, `[...]` and `{a,b}`."""

from __future__ import annotations

import re
from functools import lru_cache


def _class(pattern: str, at: int) -> tuple[str, int]:
    """A `[...]` class starting at `at`: its regex and the index after it (a lone `[` is itself)."""
    end = at + 1
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1
    while end < len(pattern) and pattern[end] != "]":
        end += 1
    if end >= len(pattern):
        return re.escape("["), at + 1
    body = pattern[at + 1 : end]
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    body = body.replace("\\", "\\\\")
    return ("[^/" if negate else "[") + body + "]", end + 1


def _braces(pattern: str, at: int) -> tuple[list[str], int] | None:
    """The alternatives of a `{a,b}` starting at `at` and the index after it; None if unclosed."""
    depth, start, parts = 0, at + 1, []
    for i in range(at, len(pattern)):
        c = pattern[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                parts.append(pattern[start:i])
                return parts, i + 1
        elif c == "," and depth == 1:
            parts.append(pattern[start:i])
            start = i + 1
    return None


def translate(pattern: str) -> str:
    """The regex (to fullmatch a `/`-separated path) for a glob pattern."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            before_ok = i == 0 or pattern[i - 1] == "/"
            j = i + 2
            if before_ok and pattern.startswith("/", j):
                out.append("(?:.*/)?")
                i = j + 1
                continue
            if before_ok and j == len(pattern):
                out.append(".*")
                i = j
                continue
            out.append("[^/]*")
            i = j
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            regex, i = _class(pattern, i)
            out.append(regex)
        elif c == "{" and (found := _braces(pattern, i)) is not None:
            parts, i = found
            out.append("(?:" + "|".join(translate(p) for p in parts) + ")")
        elif c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


@lru_cache(maxsize=64)
def compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(translate(pattern), re.S)


def path_glob(pattern: str, rel: str) -> bool:
    """Glob's test: the whole path relative to the searched directory."""
    return compiled(pattern).fullmatch(rel) is not None


def file_glob(pattern: str, rel: str) -> bool:
    """ripgrep's `--glob` test: a pattern with no `/` matches the file's name at any depth,
    one with a `/` the path from the searched directory (a leading `/` anchors it there)."""
    if pattern.startswith("!"):
        return not file_glob(pattern[1:], rel)
    if "/" not in pattern.rstrip("/"):
        return compiled(pattern).fullmatch(rel.rpartition("/")[2]) is not None
    return compiled(pattern.lstrip("/")).fullmatch(rel) is not None
