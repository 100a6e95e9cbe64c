"""Glob and Grep with Claude Code's names, inputs and output shapes: read-only, bounded, and
blind to what `.gitignore` ignores and to files the `Read` rules keep from the run.

Grep runs ripgrep when it is installed (agi.tools.walk.ripgrep) and searches in Python
otherwise (agi.tools.grep_python); both give the matches as the same records, which are
sorted and shown here, so the results are the same either way (docs: tools).
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable
from typing import Any

from agi.errors import ToolError
from agi.tools.globbing import path_glob
from agi.tools.grep_python import Hits, search_python
from agi.tools.grep_query import MODES, Query
from agi.tools.protocol import ToolContext, require
from agi.tools.walk import listed, ripgrep, search_root, walk

GLOB_LIMIT = 100  # paths Glob returns at most
OUTPUT_LIMIT = 30_000  # characters of Grep output, about
LINE_LIMIT = 500  # characters of a matching line shown
SEARCH_SECONDS = 60.0  # a search that takes longer is stopped
TRUNCATED = "(Results are truncated. Consider using a more specific path or pattern.)"


def shown(path: str, cwd: str) -> str:
    """A path as results show it: relative to the working directory when inside it."""
    head, tail = os.path.split(path)
    if head and tail not in ("", ".", ".."):  # one relpath a directory: files share a few
        above = _relative(head, cwd)
        if not above.startswith(".."):  # inside: what relpath would give
            return tail if above == "." else f"{above}{os.sep}{tail}"
    rel = os.path.relpath(path, cwd)
    return path if rel == ".." or rel.startswith("../") else rel


@functools.lru_cache(maxsize=4096)
def _relative(directory: str, cwd: str) -> str:
    return os.path.relpath(directory, cwd)


def by_time(paths: list[str]) -> list[str]:
    """Newest first (as Claude Code sorts), then by name."""

    def key(path: str) -> tuple[float, str]:
        try:
            return -os.stat(path).st_mtime, path
        except OSError:
            return 0.0, path

    return sorted(paths, key=key)


def _checker(ctx: ToolContext) -> tuple[Callable[[], None], float]:
    """A check that raises once the search's time is up, and the seconds it has."""
    seconds = SEARCH_SECONDS
    left = ctx.remaining()
    if left is not None:
        seconds = min(seconds, left)
    deadline = time.monotonic() + seconds

    def check() -> None:
        if time.monotonic() > deadline:
            raise ToolError("the search took too long and was stopped; narrow it with path or glob")

    return check, seconds


def files_under(root: str, ctx: ToolContext) -> list[str]:
    """The files a search looks at, ripgrep's listing or the walk's (the same files)."""
    check, seconds = _checker(ctx)
    rg = ripgrep()
    if rg is not None and os.path.isdir(root):
        paths = listed(root, ctx.cwd, rg, seconds)
    else:
        paths = list(walk(root, ctx.cwd, check))
    return [p for p in paths if not ctx.hidden(p)]


class Glob:
    name = "Glob"
    opt_in = True  # offered only when named (agi.engine.assemble.choose)
    read_only = True
    per_call = True  # the toolbox says which files the Read rules hide
    description = (
        "Find files by name with a glob pattern (`**/*.py`, `src/**/*.{ts,tsx}`); returns "
        f"matching paths, newest first, at most {GLOB_LIMIT}. Skips what .gitignore ignores."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The glob pattern to match files against"},
            "path": {
                "type": "string",
                "description": "The directory to search in (default: the working directory)",
            },
        },
        "required": ["pattern"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        pattern = require(input, "pattern")
        root = search_root(input.get("path"), ctx.cwd)
        if os.path.isabs(pattern):  # `/abs/dir/**/*.py`: the literal directories are the root
            root, pattern = _split_absolute(pattern)
        if not os.path.isdir(root):
            raise ToolError(f"{shown(root, ctx.cwd)} is not a directory")
        found = [p for p in files_under(root, ctx) if path_glob(pattern, os.path.relpath(p, root))]
        if not found:
            return "No files found"
        paths = [shown(p, ctx.cwd) for p in by_time(found)]
        text = "\n".join(paths[:GLOB_LIMIT])
        return text + ("\n" + TRUNCATED if len(paths) > GLOB_LIMIT else "")


def _split_absolute(pattern: str) -> tuple[str, str]:
    parts = pattern.split("/")
    literal = 0
    while literal < len(parts) - 1 and not re.search(r"[*?\[{]", parts[literal]):
        literal += 1
    root = "/".join(parts[:literal]) or "/"
    if not os.path.isdir(root):
        raise ToolError(f"{root} is not a directory")
    return root, "/".join(parts[literal:])


class Grep:
    name = "Grep"
    opt_in = True  # offered only when named (agi.engine.assemble.choose)
    read_only = True
    per_call = True  # the toolbox says which files the Read rules hide
    description = (
        "Search file contents with a regular expression (ripgrep syntax). output_mode: "
        '"files_with_matches" (default: paths, newest first), "content" (matching lines, '
        'with -n line numbers and -A/-B/-C context) or "count". Filter files with glob '
        '("*.py") or type ("py"); -i ignores case; multiline lets a match span lines; '
        "head_limit keeps the first N results. Skips what .gitignore ignores."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "The regular expression to search for"},
            "path": {"type": "string", "description": "File or directory to search in"},
            "glob": {"type": "string", "description": 'Glob to filter files ("*.js")'},
            "type": {"type": "string", "description": 'File type to search ("py", "js")'},
            "output_mode": {"type": "string", "enum": list(MODES)},
            "-i": {"type": "boolean", "description": "Case insensitive search"},
            "-n": {"type": "boolean", "description": "Show line numbers (content mode)"},
            "-A": {"type": "number", "description": "Lines to show after each match"},
            "-B": {"type": "number", "description": "Lines to show before each match"},
            "-C": {"type": "number", "description": "Lines to show around each match"},
            "multiline": {"type": "boolean", "description": "Let . and a match span lines"},
            "head_limit": {"type": "number", "description": "Show only the first N results"},
            "offset": {"type": "number", "description": "Skip the first N results"},
        },
        "required": ["pattern"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        query = Query(input, ctx.cwd)
        check, seconds = _checker(ctx)
        rg = ripgrep()
        if rg is not None:
            # lazy: only a Grep with ripgrep installed loads it
            from agi.tools.grep_rg import search_rg

            hits = search_rg(query, rg, ctx.cwd, seconds)
        else:
            files = [p for p in walk(query.root, ctx.cwd, check) if query.wanted(p)]
            hits = search_python(query, files, check)
        hits = [h for h in hits if query.wanted(h.path) and not ctx.hidden(h.path)]
        return render(query, hits, ctx.cwd)


def render(query: Query, hits: list[Hits], cwd: str) -> str:
    """Claude Code's output shapes, within head_limit/offset and about OUTPUT_LIMIT characters;
    a note when the search stopped gathering at its bound."""
    text = _shaped(query, hits, cwd)
    if query.cut:
        text += (
            f"\n[... the search stopped after {query.cut} lines of matches; narrow it (path, "
            "glob, type) to see the rest]"
        )
    return text


def _shaped(query: Query, hits: list[Hits], cwd: str) -> str:
    if query.mode == "files_with_matches":
        if not hits:
            return "No files found"
        paths = [shown(p, cwd) for p in by_time([h.path for h in hits])]
        chosen, more = _window(paths, query)
        text = f"Found {len(chosen)} file{'s' if len(chosen) != 1 else ''}\n" + "\n".join(chosen)
        return _bounded(text, more, "files")
    hits = sorted(hits, key=lambda h: h.path)
    if query.mode == "count":
        rows = [f"{shown(h.path, cwd)}:{h.matches}" for h in hits]
        if not rows:
            return "No matches found"
        chosen, more = _window(rows, query)
        total = sum(int(r.rpartition(":")[2]) for r in chosen)
        files = len(chosen)
        tail = f"\n\nFound {total} total occurrence{'s' if total != 1 else ''} across "
        tail += f"{files} file{'s' if files != 1 else ''}."
        return _bounded("\n".join(chosen), more, "files") + tail
    lines = _content_lines(query, hits, cwd)
    if not lines:
        return "No matches found"
    chosen, more = _window(lines, query)
    return _bounded("\n".join(chosen), more, "lines")


def _content_lines(query: Query, hits: list[Hits], cwd: str) -> list[str]:
    out: list[str] = []
    spaced = bool(query.before or query.after)
    for hit in hits:
        name, previous = shown(hit.path, cwd), None
        for number in sorted(hit.lines):
            text, matched = hit.lines[number]
            apart = out if previous is None else number != previous + 1
            if spaced and apart:  # rg's separator between blocks of context
                out.append("--")
            previous = number
            if len(text) > LINE_LIMIT:
                text = text[:LINE_LIMIT] + " [...]"
            mark = ":" if matched else "-"
            out.append(
                f"{name}{mark}{number}{mark}{text}" if query.numbers else f"{name}{mark}{text}"
            )
    return out


def _window(rows: list[str], query: Query) -> tuple[list[str], int]:
    """offset, then head_limit: the rows shown and how many were left out after them."""
    rows = rows[query.offset :]
    if query.head is None or len(rows) <= query.head:
        return rows, 0
    return rows[: query.head], len(rows) - query.head


def _bounded(text: str, more: int, unit: str) -> str:
    """At most about OUTPUT_LIMIT characters, cut at a line, with a note on what was left out."""
    if len(text) > OUTPUT_LIMIT:
        cut = text.rfind("\n", 0, OUTPUT_LIMIT)
        cut = cut if cut > 0 else OUTPUT_LIMIT
        more += text.count("\n", cut) or 1
        text = text[:cut]
    if more:
        text += (
            f"\n[... {more} more {unit} not shown; narrow the search (path, glob, type) or "
            "use head_limit and offset]"
        )
    return text
