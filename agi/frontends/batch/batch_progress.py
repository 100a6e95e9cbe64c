"""What a person sees and does while `agi --batch --batch-api` waits (docs: batch): the
progress line on a terminal, and the signals (the first stops waiting; a second Ctrl-C before
agi exits cancels the batches)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from agi.frontends.batch.shared import clock


class BatchProgress:
    """On a terminal: `agi batch: 3 batches submitted (120 jobs), 80 done, 2 failed,
    in_progress, 1m05s`, redrawn in place; nothing when stderr is not one."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.batches = self.submitted = self.done = self.failed = 0
        self.status = "submitting"
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def text(self) -> str:
        with self._lock:
            plural = "" if self.batches == 1 else "es"
            parts = [
                f"{self.batches} batch{plural} submitted ({self.submitted} jobs)",
                f"{self.done} done",
                f"{self.failed} failed",
                self.status,
                clock(time.monotonic() - self.started),
            ]
        return "agi batch: " + ", ".join(parts)

    def update(self, **values: Any) -> None:
        with self._lock:
            for name, value in values.items():
                setattr(self, name, value)

    def ended(self, code: int) -> None:
        with self._lock:
            self.done += 1
            self.failed += code != 0

    def start(self) -> None:
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, name="agi-progress", daemon=True)
            self._thread.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            self.draw()

    def draw(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K" + self.text())
            sys.stderr.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self._thread = None
            self.draw()
            sys.stderr.write("\n")
            sys.stderr.flush()


class Interrupts:
    """SIGINT, SIGTERM and SIGHUP while the batches are submitted and waited for: `stopped`
    is set by the first; `again` by a second SIGINT before agi exits (it waits GRACE seconds
    for one once it has said what a second would do)."""

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.again = threading.Event()
        self.signum: int | None = None
        self.first = 0.0

    def handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum, self.first = signum, time.monotonic()
            self.stopped.set()
        elif signum == signal.SIGINT:  # before agi exits: within the grace it announced
            self.again.set()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        old = {signum: signal.signal(signum, self.handle) for signum in held}
        try:
            yield
        finally:
            for signum, handler in old.items():
                signal.signal(signum, handler)
