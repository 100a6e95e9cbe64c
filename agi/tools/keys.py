"""Vim-style key names (<Enter>, <C-c>, <M-x>, <Up>) -> the bytes a terminal sends for them."""

from __future__ import annotations

import re

_NAMED = {
    "enter": "\r", "cr": "\r", "return": "\r", "nl": "\n", "tab": "\t", "s-tab": "\x1b[Z",
    "esc": "\x1b", "bs": "\x7f", "backspace": "\x7f", "space": " ", "lt": "<", "gt": ">",
    "bar": "|", "bslash": "\\", "del": "\x1b[3~", "delete": "\x1b[3~", "insert": "\x1b[2~",
    "pageup": "\x1b[5~", "pagedown": "\x1b[6~", "f1": "\x1bOP", "f2": "\x1bOQ", "f3": "\x1bOR",
    "f4": "\x1bOS", "f5": "\x1b[15~", "f6": "\x1b[17~", "f7": "\x1b[18~", "f8": "\x1b[19~",
    "f9": "\x1b[20~", "f10": "\x1b[21~", "f11": "\x1b[23~", "f12": "\x1b[24~",
}  # fmt: skip
_CURSOR_KEYS = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
_CONTROL = {"@": "\x00", "space": "\x00", "[": "\x1b", "\\": "\x1c", "]": "\x1d", "^": "\x1e",
            "_": "\x1f", "?": "\x7f"}  # fmt: skip
_KEY = re.compile(r"<([^<>\s]+)>")


def key(name: str, application: bool) -> str | None:
    """The bytes a terminal sends for a Vim-style key name, or None for a name it does not know."""
    lower = name.lower()
    if lower in _NAMED:
        return _NAMED[lower]
    if lower in _CURSOR_KEYS:
        return ("\x1bO" if application else "\x1b[") + _CURSOR_KEYS[lower]
    prefix, _, rest = lower.partition("-")
    if prefix == "c" and len(rest) == 1 and "a" <= rest <= "z":
        return chr(ord(rest) - 96)
    if prefix == "c" and rest in _CONTROL:
        return _CONTROL[rest]
    if prefix in ("m", "a") and rest:
        sent = name[2:] if len(rest) == 1 else key(name[2:], application)
        return None if sent is None else "\x1b" + sent
    return None


def encode_keys(keys: str, application: bool = False) -> bytes:
    """Text with <Names> for special keys -> bytes; unknown <names> are sent as they are."""

    def one(m: re.Match[str]) -> str:
        sent = key(m.group(1), application)
        return m.group(0) if sent is None else sent

    return _KEY.sub(one, keys).encode()
