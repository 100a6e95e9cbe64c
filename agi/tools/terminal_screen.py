"""The screen a Terminal tool (agi.tools.terminal) shows: pyte's, made on first use, with the
lines scrolled off its top kept, the alternate screen of full-screen programs, and a stream
that skips the sequences pyte cannot handle."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

SCROLLBACK = 500  # lines that scrolled off, kept until the next look
ALTERNATE_SCREEN = {47, 1047, 1049}  # private modes of full-screen programs (vi, less, top)

_classes: tuple[Any, Any] | None = None  # the pyte Screen and ByteStream subclasses, made on use


def pyte_classes() -> tuple[Any, Any]:
    """A pyte screen that keeps the lines scrolling off its top and knows the alternate screen,
    and a stream that survives sequences pyte cannot handle."""
    global _classes
    if _classes is None:
        import pyte
        from wcwidth import wcwidth

        class Screen(pyte.Screen):  # type: ignore[misc]
            def __init__(self, cols: int, rows: int, reply: Callable[[bytes], None]):
                super().__init__(cols, rows)
                self.reply = reply
                self.scrolled: deque[Any] = deque(maxlen=SCROLLBACK)
                self.dropped = 0
                self.saved: tuple[dict[int, Any], int, int] | None = None

            def index(self) -> None:
                top, bottom = self.margins or (0, self.lines - 1)
                if self.cursor.y == bottom and top == 0 and self.saved is None:
                    if len(self.scrolled) == SCROLLBACK:
                        self.dropped += 1
                    self.scrolled.append(self.buffer.get(0))
                super().index()

            def set_mode(self, *modes: int, **kwargs: Any) -> None:
                if kwargs.get("private") and ALTERNATE_SCREEN & set(modes) and not self.saved:
                    self.saved = (dict(self.buffer), self.cursor.x, self.cursor.y)
                    self.buffer.clear()
                super().set_mode(*modes, **kwargs)

            def reset_mode(self, *modes: int, **kwargs: Any) -> None:
                if kwargs.get("private") and ALTERNATE_SCREEN & set(modes) and self.saved:
                    buffer, self.cursor.x, self.cursor.y = self.saved
                    self.saved = None
                    self.buffer.clear()
                    self.buffer.update(buffer)
                    self.dirty.update(range(self.lines))
                super().reset_mode(*modes, **kwargs)

            def write_process_input(self, data: str) -> None:
                self.reply(data.encode())  # answers to the program's queries (cursor position)

            def text(self, line: Any) -> str:
                chars, wide = [], False
                for x in range(self.columns if line else 0):
                    if not wide:  # not the stub after a double-width character
                        chars.append(line[x].data)
                    wide = not wide and wcwidth(line[x].data[:1] or " ") == 2
                return "".join(chars).rstrip()

        class Stream(pyte.ByteStream):  # type: ignore[misc]
            def _send_to_parser(self, data: str) -> bool | None:
                try:
                    return super()._send_to_parser(data)  # type: ignore[no-any-return]
                except Exception:  # e.g. CSI ? 4 m: pyte has reset its parser; skip the sequence
                    return True

        _classes = Screen, Stream
    return _classes
