"""What the model sees of a session that holds rewind records (docs: checkpoints).

A rewind record is a line `{"role": "system", "content": TEXT, "rewind": {"turn": N, "to": I,
...}}` appended to messages.jsonl: from it on, the view is the view the session had when it held
I messages (just before turn N's prompt), then every line after the record. Nothing is erased:
the record itself is not in the view, and rewinding to a rewound turn brings it back.
"""

from __future__ import annotations

from typing import Any

REWIND = "rewind"


def rewind_target(message: dict[str, Any], index: int) -> int | None:
    """The message count a rewind record goes back to, or None for any other line."""
    info = message.get(REWIND)
    if not isinstance(info, dict) or message.get("role") != "system":
        return None
    to = info.get("to")
    if isinstance(to, int) and not isinstance(to, bool) and 0 <= to <= index:
        return to
    return None


def rewound_view(messages: list[dict[str, Any]], hidden: set[int]) -> list[int] | None:
    """The indices of the messages in view, or None when the session holds no rewind record
    (then the view is the last compaction record and what follows, as section 10 says)."""
    targets = {rewind_target(m, i) for i, m in enumerate(messages)} - {None}
    if not targets:
        return None
    saved: dict[int, list[int]] = {}
    view: list[int] = []
    for index, message in enumerate(messages):
        if index in targets:
            saved[index] = list(view)
        if index in hidden:
            continue
        to = rewind_target(message, index)
        if to is not None:
            view = list(saved.get(to, view))
        elif isinstance(message.get("compaction"), dict):
            view = [index]
        else:
            view.append(index)
    return view
