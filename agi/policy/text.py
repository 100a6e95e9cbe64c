"""One text-safety policy: what agi prints of text it did not write (a model's answer, a tool's
output, a file name, a provider's error) cannot drive the terminal it is printed on.

Control characters but newline and tab are shown escaped: ESC (OSC 52 clipboard writes, titles,
screen clears), BEL, CR, backspace, DEL and the C1 controls (0x9b is a CSI of its own). Text is
escaped as `\\x1b`; JSON text keeps being JSON, its DEL and C1 codes written `\\u009b`
(json.dumps leaves them raw)."""

from __future__ import annotations

import re

CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
JSON_RAW = re.compile("[\x7f-\x9f]")  # what json.dumps leaves unescaped of CONTROLS


def escape_controls(text: str) -> str:
    """Text safe to print to a terminal: control characters shown escaped (`\\x1b`), so that
    nothing but agi's own colours drives the terminal."""
    if not CONTROLS.search(text):
        return text
    return CONTROLS.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def escape_json_controls(text: str) -> str:
    """JSON text safe to print to a terminal, and still the same JSON: DEL and the C1 controls
    as `\\u` escapes."""
    return JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", text)


def for_terminal(text: str, json_text: bool = False) -> str:
    """`text` as a terminal may be shown it: escaped by the policy of its kind."""
    return escape_json_controls(text) if json_text else escape_controls(text)
