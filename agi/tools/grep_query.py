"""A Grep call's input, checked: the pattern, where to search, which files, what to show."""

from __future__ import annotations

import os
from typing import Any

from agi.errors import ToolError
from agi.tools.globbing import file_glob
from agi.tools.protocol import require
from agi.tools.walk import search_root

MODES = ("content", "files_with_matches", "count")
TYPES = {  # ripgrep's names for the common file types
    "c": "*.{c,h}", "cpp": "*.{cc,cpp,cxx,hpp,hh,hxx,h}", "cs": "*.cs", "css": "*.{css,scss}",
    "go": "*.go", "html": "*.{htm,html}", "java": "*.java", "js": "*.{js,jsx,mjs,cjs}",
    "json": "*.json", "kotlin": "*.{kt,kts}", "lua": "*.lua", "md": "*.{md,markdown}",
    "markdown": "*.{md,markdown}", "php": "*.php", "py": "*.{py,pyi}", "python": "*.{py,pyi}",
    "rb": "*.rb", "ruby": "*.rb", "rust": "*.rs", "sh": "*.{sh,bash,zsh}", "sql": "*.sql",
    "swift": "*.swift", "toml": "*.toml", "ts": "*.{ts,tsx,mts,cts}",
    "typescript": "*.{ts,tsx,mts,cts}", "txt": "*.txt", "xml": "*.xml", "yaml": "*.{yaml,yml}",
}  # fmt: skip


def _count(input: dict[str, Any], key: str) -> int | None:
    value = input.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():  # JSON numbers may come as 3.0
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ToolError(f"'{key}' must be a whole number of 0 or more")
    return value


def _flag(input: dict[str, Any], key: str, default: bool) -> bool:
    value = input.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(f"'{key}' must be true or false")
    return value


class Query:
    """A Grep call's input, checked."""

    def __init__(self, input: dict[str, Any], cwd: str):
        self.pattern: str = require(input, "pattern")
        self.root = search_root(input.get("path"), cwd)
        if not os.path.isdir(self.root) and not os.path.isfile(self.root):
            # a FIFO would hang the search, a device (/dev/zero) be read on and on
            raise ToolError(f"{input.get('path')} is not a regular file or a directory")
        self.mode = input.get("output_mode") or "files_with_matches"
        if self.mode not in MODES:
            raise ToolError(f"'output_mode' must be one of {', '.join(MODES)}")
        self.ignore_case = _flag(input, "-i", False)
        self.numbers = _flag(input, "-n", True)
        self.multiline = _flag(input, "multiline", False)
        context = _count(input, "-C")
        after, before = _count(input, "-A"), _count(input, "-B")
        self.after = after if after is not None else context or 0
        self.before = before if before is not None else context or 0
        if self.mode != "content":
            self.after = self.before = 0
        self.head = _count(input, "head_limit") or None  # 0: not given
        self.offset = _count(input, "offset") or 0
        self.cut = 0  # set to the bound when the search stopped gathering at it
        self.globs = []
        glob = input.get("glob")
        if glob is not None:
            if not isinstance(glob, str):
                raise ToolError("'glob' must be a string")
            self.globs += [g for g in glob.split() if g] or [glob]
        kind = input.get("type")
        if kind is not None:
            if kind not in TYPES:
                raise ToolError(f"unknown 'type' {kind!r} (one of {', '.join(sorted(TYPES))})")
            self.globs.append(TYPES[kind])

    def wanted(self, path: str) -> bool:
        """Whether the file passes `glob` and `type` (both must hold)."""
        if not self.globs or path == self.root:
            return True
        rel = os.path.relpath(path, self.root)
        return all(file_glob(g, rel) for g in self.globs)
