"""File tools with Claude Code's names and inputs: Read, Write, Edit, TempDir.

Read streams the lines it returns (agi.tools.reading); Edit decodes with `surrogateescape`, so
the bytes of a file that is not UTF-8 are written back exactly as they were, except where the
edit is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agi.errors import ToolError
from agi.policy.decoding import clean
from agi.tools.protocol import ToolContext, require
from agi.tools.reading import (
    SNIFF,
    Lines,
    check_writable,
    deadline_check,
    open_for_writing,
    open_regular,
    read_some,
)

READ_LIMIT = 2000  # lines returned by default
LINE_LIMIT = 2000  # characters per line
NOT_UTF8 = (
    "; {path} is not valid UTF-8: Read showed its other bytes as U+FFFD, which no "
    "old_string can match (match the text around them)"
)


def resolve(file_path: str, ctx: ToolContext) -> Path:
    if "\0" in file_path:
        raise ToolError("no file has a name with a NUL byte in it")
    path = Path(file_path).expanduser()
    return path if path.is_absolute() else Path(ctx.cwd) / path


EDIT_LIMIT = 16 << 20  # bytes: a larger file is refused by Edit unread (docs: tools)


def writable(file_path: str, ctx: ToolContext) -> Path:
    """The path Write or Edit may change: allowed by the sandbox, and not a file of the
    running session (its directory, agi's checkpoint records; docs: checkpoints)."""
    path = ctx.sandbox.check_write(resolve(file_path, ctx))
    real = os.path.realpath(path)
    for root in ctx.protected:
        if real == root or real.startswith(root.rstrip("/") + "/"):
            raise ToolError(
                f"{path} belongs to the running session (its directory, or agi's checkpoint "
                "records): Write and Edit do not change it"
            )
    return path


def readable(path: Path, ctx: ToolContext) -> Path:
    """Read refuses the key agi's checkpoint records are signed with."""
    if ctx.unreadable and os.path.realpath(path) in ctx.unreadable:
        raise ToolError(
            f"{path} is the key of the running session's checkpoint records: "
            "the file tools do not read it"
        )
    return path


def read_text(path: Path) -> str:
    """A whole text file, decoded so that writing it back gives the same bytes."""
    with open_regular(path) as f:
        data = read_some(f, -1, path)
    if b"\0" in data[:SNIFF]:
        raise ToolError(f"{path} is a binary file")
    return data.decode("utf-8", "surrogateescape")


def positive_int(input: dict[str, Any], key: str, default: int) -> int:
    value = input.get(key)
    if value is None or value == 0 and not isinstance(value, bool):  # 0: not given, as before
        return default
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolError("'offset' and 'limit' must be positive integers")
    return value


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

    def __init__(self) -> None:
        self.interrupted = 0  # interrupt() counts up; a read that began before it stops

    def interrupt(self) -> None:
        self.interrupted += 1

    close = interrupt

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = readable(resolve(require(input, "file_path"), ctx), ctx)
        offset = positive_int(input, "offset", 1)
        limit = positive_int(input, "limit", READ_LIMIT)
        started = self.interrupted
        check = deadline_check(ctx.deadline, lambda: self.interrupted != started)
        with open_regular(path) as f:
            if b"\0" in read_some(f, SNIFF, path):
                raise ToolError(f"{path} is a binary file")
            f.seek(0)
            lines = Lines(f, check, LINE_LIMIT * 4)  # a character is at most 4 bytes
            return self.numbered(path, lines, offset, limit)

    def numbered(self, path: Path, lines: Lines, offset: int, limit: int) -> str:
        skipped = lines.skip(offset - 1)
        out: list[str] = []
        while len(out) < limit and (got := lines.next()) is not None:
            data, cut = got
            text = data.removesuffix(b"\r").decode("utf-8", "replace")
            out.append(read_line(offset + len(out), text, cut))
        if not out:
            if skipped == 0:
                return f"({path} is empty)"
            raise ToolError(f"{path} has only {skipped} lines; offset {offset} is past the end")
        return read_output(out, lines.count_rest(), offset + len(out))


def read_line(number: int, text: str, cut: bool = False) -> str:
    """One line of Read's output: its number, a tab, the line (cut at LINE_LIMIT characters)."""
    cut = cut or len(text) > LINE_LIMIT
    return f"{number:6}\t{text[:LINE_LIMIT]}" + (" [line truncated]" * cut)


def read_output(out: list[str], rest: int | None, after: int) -> str:
    """Read's output: the numbered lines, then how to read on (`rest` None: unknown)."""
    if rest is None:
        out.append(f"(more lines follow; read on with offset {after})")
    elif rest > 0:
        out.append(f"({rest} more lines; read on with offset {after})")
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
        path = writable(require(input, "file_path"), ctx)
        content = clean(require(input, "content"))
        if path.is_dir():
            raise ToolError(f"{path} is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        with open_for_writing(path) as f:
            f.write(content.encode("utf-8"))
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
        path = writable(require(input, "file_path"), ctx)
        old, new = require(input, "old_string"), require(input, "new_string")
        if old == new:
            raise ToolError("old_string and new_string are the same")
        if not old:
            raise ToolError("old_string is empty; use Write to create a file")
        text = self.read(path)
        count = text.count(old)
        if count == 0:
            undecoded = any("\udc80" <= c <= "\udcff" for c in text)
            raise ToolError(
                f"old_string was not found in {path}" + (NOT_UTF8.format(path=path) * undecoded)
            )
        every = bool(input.get("replace_all"))
        if count > 1 and not every:
            raise ToolError(
                f"old_string occurs {count} times in {path}; give more context to "
                "make it unique, or set replace_all"
            )
        self.write(path, text.replace(old, new) if every else text.replace(old, new, 1))
        return f"Edited {path}: replaced {count if every else 1} occurrence(s)"

    def read(self, path: Path) -> str:
        """The file's text (bytes that are not UTF-8 kept as surrogates, to be written back);
        a file over EDIT_LIMIT is refused before anything of it is read."""
        check_writable(path)
        try:
            size = os.stat(path).st_size
        except OSError:
            size = 0  # open_regular says why
        if size > EDIT_LIMIT:
            raise ToolError(
                f"{path} is {size / (1 << 20):.0f} MB: Edit works on files up to "
                f"{EDIT_LIMIT >> 20} MB (it reads the whole file); use Bash (e.g. sed -i) "
                "or Write for a larger one"
            )
        return read_text(path)

    def write(self, path: Path, text: str) -> None:
        with open_for_writing(path) as f:
            f.write(text.encode("utf-8", "surrogateescape"))


class TempDir:
    name = "TempDir"
    description = "Create a new private temporary directory and return its path."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        self.made: list[str] = []  # removed at the end of the run (close)
        self.policies: list[Any] = []

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = ctx.sandbox.temp_dir()  # in a sandbox: a directory its commands may write too
        self.made.append(path)
        if all(p is not ctx.sandbox for p in self.policies):
            self.policies.append(ctx.sandbox)
        return path

    def close(self) -> None:
        """Remove the directories this run made (and the sandbox's scratch parent)."""
        import shutil

        scratch = [p.scratch for p in self.policies if getattr(p, "scratch", None)]
        for path in [*self.made, *scratch]:
            shutil.rmtree(path, ignore_errors=True)
        self.made.clear()
