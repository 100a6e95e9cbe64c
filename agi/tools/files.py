"""File tools with Claude Code's names and inputs: Read, Write, Edit, TempDir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agi.errors import ToolError
from agi.tools.protocol import ToolContext, require

READ_LIMIT = 2000  # lines returned by default
LINE_LIMIT = 2000  # characters per line


def resolve(file_path: str, ctx: ToolContext) -> Path:
    path = Path(file_path).expanduser()
    return path if path.is_absolute() else Path(ctx.cwd) / path


def read_text(path: Path) -> str:
    if path.is_dir():
        raise ToolError(f"{path} is a directory")
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        raise ToolError(f"{path} is a binary file")
    return data.decode("utf-8", "replace")


class Read:
    name = "Read"
    description = (
        "Read a text file; returns numbered lines. Use offset (first line, 1-based) and limit "
        f"(number of lines, default {READ_LIMIT}) for long files."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "offset": {"type": "integer", "description": "Line number to start at (1-based)"},
            "limit": {"type": "integer", "description": "Number of lines to read"},
        },
        "required": ["file_path"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = resolve(require(input, "file_path"), ctx)
        offset = input.get("offset") or 1
        limit = input.get("limit") or READ_LIMIT
        if not isinstance(offset, int) or not isinstance(limit, int) or offset < 1 or limit < 1:
            raise ToolError("'offset' and 'limit' must be positive integers")
        lines = read_text(path).splitlines()
        if not lines:
            return f"({path} is empty)"
        chosen = lines[offset - 1 : offset - 1 + limit]
        if not chosen:
            raise ToolError(f"{path} has only {len(lines)} lines; offset {offset} is past the end")
        out = [
            f"{n:6}\t{line[:LINE_LIMIT]}" + (" [line truncated]" if len(line) > LINE_LIMIT else "")
            for n, line in enumerate(chosen, offset)
        ]
        rest = len(lines) - (offset - 1 + len(chosen))
        if rest > 0:
            out.append(f"({rest} more lines; read on with offset {offset + len(chosen)})")
        return "\n".join(out)


class Write:
    name = "Write"
    description = "Write a file (created with its parent directories, or replaced)."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "content": {"type": "string", "description": "The whole new content"},
        },
        "required": ["file_path", "content"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = ctx.sandbox.check_write(resolve(require(input, "file_path"), ctx))
        content = require(input, "content")
        if path.is_dir():
            raise ToolError(f"{path} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        path.write_text(content, encoding="utf-8")
        verb = "Replaced" if existed else "Created"
        return f"{verb} {path} ({len(content.encode())} bytes, {content.count(chr(10)) + 1} lines)"


class Edit:
    name = "Edit"
    description = (
        "Replace old_string with new_string in a file. old_string must match exactly and be "
        "unique in the file unless replace_all is true."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file"},
            "old_string": {"type": "string", "description": "The exact text to replace"},
            "new_string": {"type": "string", "description": "The replacement"},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence"},
        },
        "required": ["file_path", "old_string", "new_string"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = ctx.sandbox.check_write(resolve(require(input, "file_path"), ctx))
        old, new = require(input, "old_string"), require(input, "new_string")
        if old == new:
            raise ToolError("old_string and new_string are the same")
        if not old:
            raise ToolError("old_string is empty; use Write to create a file")
        text = read_text(path)
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old_string was not found in {path}")
        if count > 1 and not input.get("replace_all"):
            raise ToolError(
                f"old_string occurs {count} times in {path}; give more context to "
                "make it unique, or set replace_all"
            )
        path.write_text(
            text.replace(old, new) if input.get("replace_all") else text.replace(old, new, 1),
            encoding="utf-8",
        )
        return f"Edited {path}: replaced {count if input.get('replace_all') else 1} occurrence(s)"


class TempDir:
    name = "TempDir"
    description = "Create a new private temporary directory and return its path."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        return ctx.sandbox.temp_dir()  # in a sandbox: a directory its commands may write too
