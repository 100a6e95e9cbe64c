"""What a Neovim request and a suggestion share: a cancel that stops it at once (the request's
run, the suggestion's model connection)."""

from __future__ import annotations

import threading
from typing import Any


class Cancellable:
    """A request stopped at once on cancel, from any thread: what it attached is cancelled (a
    run: its model request closed, its commands killed; a FIM transport: its connection)."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.target: Any = None  # something with cancel(): agi.engine.run.Run, a transport

    def attach(self, target: Any) -> None:
        """What to cancel; a cancel that came first takes effect now."""
        self.target = target
        if self.cancelled.is_set():
            target.cancel()

    def cancel(self) -> None:
        """Stop what is attached at once; nothing is applied."""
        self.cancelled.set()
        target = self.target
        if target is not None:
            target.cancel()
