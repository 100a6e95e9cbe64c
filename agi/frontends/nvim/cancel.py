"""What a Neovim request and a suggestion share: a cancel that closes the model connection."""

from __future__ import annotations

import threading
from typing import Any


class Cancellable:
    """A request whose transport is closed at once on cancel, from any thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.transport: Any = None

    def attach(self, transport: Any) -> None:
        """The transport to cancel; a cancel that came first takes effect now."""
        self.transport = transport
        if self.cancelled.is_set():
            transport.cancel()

    def cancel(self) -> None:
        """Close the model connection at once (Transport.cancel); nothing is applied."""
        self.cancelled.set()
        transport = self.transport
        if transport is not None:
            transport.cancel()
