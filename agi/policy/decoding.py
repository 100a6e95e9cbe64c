"""One decoding policy for text that comes from outside: argv, stdin, paths, files, streams.

Bytes that must round-trip (a file Edit writes back) are decoded with `surrogateescape`; text
for a model or a file is cleaned: surrogate pairs are joined and lone surrogates (a byte that
was not UTF-8, half of a `\\ud83d\\ude00` escape pair) become U+FFFD, so that nothing that
cannot be encoded as UTF-8 reaches a session file, a request or a terminal.
"""

from __future__ import annotations

import codecs
import os
import re

_SURROGATE = re.compile("[\ud800-\udfff]")
_HIGH = re.compile("[\ud800-\udbff]$")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def clean(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates replaced by U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def from_argv(word: str) -> str:
    """A command-line word (Python decodes argv with surrogateescape) as UTF-8 text."""
    return os.fsencode(word).decode("utf-8", "replace") if _SURROGATE.search(word) else word


def from_bytes(data: bytes) -> str:
    """Bytes from outside (stdin, a pipe, a file shown to the model) as text."""
    return data.decode("utf-8", "replace")


class SurrogateJoin:
    """Text arriving in pieces whose escape pairs may be split: a high surrogate at the end of a
    piece is held back until the next one; what is released is always clean."""

    def __init__(self) -> None:
        self.held = ""

    def feed(self, piece: str) -> str:
        text, self.held = self.held + piece, ""
        if _HIGH.search(text):
            text, self.held = text[:-1], text[-1]
        return clean(text)

    def flush(self) -> str:
        rest, self.held = self.held, ""
        return clean(rest)


def _stdio_errors(error: UnicodeError) -> tuple[bytes | str, int]:
    """For the standard streams: bytes from a non-UTF-8 path go out as they were, any other
    unencodable character as U+FFFD; printing never raises."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    out = bytearray()
    for char in error.object[error.start : error.end]:
        code = ord(char)
        out += bytes([code - 0xDC00]) if 0xDC80 <= code <= 0xDCFF else "\ufffd".encode()
    return bytes(out), error.end


codecs.register_error("agi.stdio", _stdio_errors)
STDIO_ERRORS = "agi.stdio"


def one_line(text: str) -> str:
    """Text for one field of a line (a path in a listing): control characters escaped."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
