"""Files an option, a call or a batch line names, read with a bound (docs: security).

Prompts, settings, hooks, MCP configs, schemas, agents and skills are small: each is read up to
a limit (FILE_LIMIT unless the caller gives one), and one that is larger is refused with one
line (`agi: FILE: larger than N bytes`, exit 2) before much of it is read. Only regular files
are read: a device (`/dev/zero`), a socket or a FIFO is opened without blocking, checked and
refused, unless the caller accepts pipes (a file the command line names, such as
`--sys <(...)`), which are then read up to the same limit and within `--timeout`. JSON from
such files and from protocol lines is decoded by `loads`, for which nesting too deep is a
decoding error with its line and column, never a RecursionError.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from agi.errors import UsageError

FILE_LIMIT = 1 << 20  # bytes of a settings, hooks, MCP config, schema, agent or skill file
PROMPT_LIMIT = 10 << 20  # bytes of a system prompt file (as stdin's default `stdin_limit`)
CHUNK = 1 << 16


class TooLarge(UsageError):
    """A named file over its limit (exit 2)."""


def larger(name: str | Path, limit: int) -> TooLarge:
    return TooLarge(f"{name}: larger than {limit} bytes")


def read_limited(path: str | Path, limit: int = FILE_LIMIT, pipes: bool = False) -> bytes:
    """The bytes of the file `path` (`~` expanded), at most `limit` of them: a larger file is
    TooLarge, anything but a regular file (or a pipe, when `pipes`) a UsageError; OSError as
    `open` raises it (a missing file, no permission)."""
    name = Path(path).expanduser()
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: opens at once
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode):
            if st.st_size > limit:  # a sparse file of gigabytes: nothing of it is read
                raise larger(path, limit)
        elif pipes and (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):
            os.set_blocking(fd, True)  # a writer that waits: --timeout's alarm ends the read
        else:
            raise UsageError(f"{path}: not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, min(CHUNK, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise larger(path, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path, limit: int = FILE_LIMIT, pipes: bool = False) -> str:
    """read_limited as UTF-8 text (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_limited(path, limit, pipes).decode("utf-8")


MAX_DEPTH = 500  # nesting that the decoder refuses (Python's own stack ends near 1,000)


def loads(text: str | bytes) -> Any:
    """json.loads, where nesting deeper than the interpreter can decode is a JSONDecodeError
    at the bracket that goes too deep (its line and column), not a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        doc = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise json.JSONDecodeError("nested too deep", doc, too_deep(doc)) from None


def too_deep(doc: str, limit: int = MAX_DEPTH) -> int:
    """The position of the first bracket nested deeper than `limit` (outside strings), or the
    end of `doc` when none is (the decoder's own stack ran out first)."""
    depth = 0
    in_string = escaped = False
    for pos, char in enumerate(doc):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return pos
        elif char in "]}":
            depth -= 1
    return len(doc)
