"""Read, Write and Edit through a Files backend other than the disk: an editor's buffers (ACP's
`fs/read_text_file` and `fs/write_text_file`, when the client advertises them), given in the
run's spec as `files`: the model sees unsaved buffers and edits land in the editor."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from agi.errors import ToolError
from agi.policy.decoding import clean
from agi.tools.files import (
    READ_LIMIT,
    Edit,
    Read,
    Write,
    positive_int,
    read_line,
    read_output,
    readable,
    resolve,
    writable,
)
from agi.tools.protocol import ToolContext, require


class Files(Protocol):
    """The editor's files: `read` gives a file's text (ToolError when it cannot), `write`
    replaces it; `reads`/`writes` say what the client advertised."""

    reads: bool
    writes: bool

    def read(self, path: str) -> str: ...
    def write(self, path: str, text: str) -> None: ...


def numbered(path: str, text: str, offset: int, limit: int) -> str:
    """What Read returns for `text`: numbered lines from `offset`, at most `limit`."""
    if not text:
        return f"({path} is empty)"
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if offset > len(lines):
        raise ToolError(f"{path} has only {len(lines)} lines; offset {offset} is past the end")
    shown = lines[offset - 1 : offset - 1 + limit]
    out = [read_line(n, line.removesuffix("\r")) for n, line in enumerate(shown, offset)]
    return read_output(out, len(lines) - (offset - 1 + len(shown)), offset + len(shown))


class EditorRead(Read):
    def __init__(self, files: Files):
        super().__init__()
        self.files = files

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = readable(resolve(require(input, "file_path"), ctx), ctx)
        offset = positive_int(input, "offset", 1)
        limit = positive_int(input, "limit", READ_LIMIT)
        text = self.files.read(str(path))
        if "\0" in text[:8192]:
            raise ToolError(f"{path} is a binary file")
        return numbered(str(path), text, offset, limit)


class EditorWrite(Write):
    def __init__(self, files: Files):
        self.files = files

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        path = writable(require(input, "file_path"), ctx)
        content = clean(require(input, "content"))
        if path.is_dir():
            raise ToolError(f"{path} is a directory")
        existed = path.exists()
        self.files.write(str(path), content)
        verb = "Replaced" if existed else "Created"
        return f"{verb} {path} ({len(content.encode())} bytes, {content.count(chr(10)) + 1} lines)"


class EditorEdit(Edit):
    """Edit, with the text read from and written to the editor's buffer."""

    def __init__(self, files: Files):
        self.files = files

    def read(self, path: Path) -> str:
        return self.files.read(str(path))

    def write(self, path: Path, text: str) -> None:
        self.files.write(str(path), text)


def through_editor(tools: list[Any], files: Files) -> list[Any]:
    """The run's tools with Read (when the client reads) and Write and Edit (when it writes)
    replaced by ones that go through the editor."""
    swap: dict[str, Any] = {}
    if files.reads:
        swap["Read"] = EditorRead
    if files.writes and files.reads:  # an Edit reads the text it changes
        swap["Edit"] = EditorEdit
    if files.writes:
        swap["Write"] = EditorWrite
    return [
        swap[t.name](files) if t.name in swap and type(t) in (Read, Write, Edit) else t
        for t in tools
    ]
