"""Inline suggestions on the Python host: one request in flight per buffer, each on its own
thread; the text so far goes to Lua's `require('agi.suggest')._event` as it streams in.

Imported on the host's event loop, so it imports nothing heavy: `agi.providers.fim` (httpx,
settings) is imported on the worker thread.
"""

from __future__ import annotations

import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

from agi.frontends.nvim.cancel import Cancellable

if TYPE_CHECKING:
    from agi.providers.fim import Completer

DELIVER = "require('agi.suggest')._event(...)"
SHOW_EVERY = 0.03  # seconds between updates of a growing suggestion (the first goes at once)


class Flight(Cancellable):
    """One suggestion request: its buffer, the transport to close when a newer one comes."""

    def __init__(self, request: dict[str, Any]):
        super().__init__()
        self.request = request
        self.id = int(request["id"])
        self.buf = int(request.get("buf") or 0)
        self.shown = 0.0


class Suggestions:
    """Starts and cancels suggestion requests; called on the host's event loop. Next-edit
    suggestions (agi.frontends.nvim.nes) are the same machinery with another `answer`."""

    deliver_to = DELIVER  # the Lua function the events go to

    def __init__(self, nvim: Any):
        self.nvim = nvim
        self.lock = threading.Lock()
        self.flights: dict[int, Flight] = {}  # the one in flight, by buffer
        self.completer: Completer | None = None  # made on the first worker thread

    def request(self, request: dict[str, Any]) -> None:
        flight = Flight(request)
        with self.lock:
            older = self.flights.get(flight.buf)
            self.flights[flight.buf] = flight
        if older is not None:
            older.cancel()
        threading.Thread(target=self.work, args=(flight,), name="agi-suggest", daemon=True).start()

    def cancel(self, buf: int, request_id: Any = None) -> None:
        """Cancel the buffer's request in flight (only if it is `request_id`, when given)."""
        with self.lock:
            flight = self.flights.get(buf)
            if flight is None or (request_id is not None and flight.id != int(request_id)):
                return
            del self.flights[buf]
        flight.cancel()

    def work(self, flight: Flight) -> None:
        try:
            event = self.outcome(flight)
        finally:
            with self.lock:
                if self.flights.get(flight.buf) is flight:
                    del self.flights[flight.buf]
        if event is not None and not flight.cancelled.is_set():
            self.send(flight.id, event)

    def outcome(self, flight: Flight) -> dict[str, Any] | None:
        """The event that ends the request (None when cancelled: nobody waits for it)."""
        try:
            # lazy: Neovim is told when agi cannot be imported
            from agi.errors import AgiError, Cancelled

            # lazy: Neovim is told when agi cannot be imported
            from agi.providers.fim import Completer
        except ImportError as e:  # pragma: no cover - the shim already imported agi
            return {"type": "error", "message": str(e)}
        with self.lock:
            if self.completer is None:
                self.completer = Completer()
            completer = self.completer
        try:
            event = self.answer(completer, flight)
        except Cancelled:
            return None
        except AgiError as e:
            return None if flight.cancelled.is_set() else error(str(e) or type(e).__name__)
        except Exception as e:
            if flight.cancelled.is_set():
                return None
            detail = "".join(traceback.format_exception_only(type(e), e)).strip()
            return error(f"internal error: {detail}")
        return event

    def answer(self, completer: Completer, flight: Flight) -> dict[str, Any]:
        """The request's final event: the suggestion, streamed in through `show`."""
        text = completer.complete(flight.request, lambda t: self.show(flight, t), flight.attach)
        return {"type": "done", "text": text}

    def show(self, flight: Flight, text: str) -> None:
        """The text so far, at most every SHOW_EVERY seconds (the first at once)."""
        now = time.monotonic()
        if flight.cancelled.is_set() or now - flight.shown < SHOW_EVERY:
            return
        flight.shown = now
        self.send(flight.id, {"type": "partial", "text": text})

    def send(self, request_id: int, event: dict[str, Any]) -> None:
        try:
            self.nvim.async_call(self.deliver, request_id, event)
        except Exception:  # Neovim is going away
            pass

    def deliver(self, request_id: int, event: dict[str, Any]) -> None:
        self.nvim.exec_lua(self.deliver_to, request_id, event, async_=True)


def error(message: str) -> dict[str, Any]:
    return {"type": "error", "message": message}
