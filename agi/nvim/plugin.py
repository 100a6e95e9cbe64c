"""The plugin the Python host runs: each request on its own worker thread, its progress and
result sent back to Lua through `nvim.async_call`.

This module is imported on the host's event loop, so it imports nothing heavy: the engine
(httpx, the agent) is imported on the worker thread, and Neovim never waits for it.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Any

PROGRESS_EVERY = 0.2  # seconds between progress messages for one request
DELIVER = "require('agi')._event(...)"


class Job:
    """One request: its cancel flag, the transport to close on cancel, its progress."""

    def __init__(self, plugin: Plugin, request: dict[str, Any]):
        self.plugin, self.request = plugin, request
        self.id = int(request["id"])
        self.cancelled = threading.Event()
        self.transport: Any = None
        self.chars = 0
        self.phase = "waiting"
        self.sent = 0.0

    def send(self, event: dict[str, Any]) -> None:
        self.plugin.send(self.id, event)

    def started(self, log: str) -> None:
        self.send({"type": "started", "log": log})

    def attach(self, transport: Any) -> None:
        """The transport to cancel; a cancel that came first takes effect now."""
        self.transport = transport
        if self.cancelled.is_set():
            transport.cancel()

    def cancel(self) -> None:
        """From the event loop: close the model connection at once (Transport.cancel)."""
        self.cancelled.set()
        transport = self.transport
        if transport is not None:
            transport.cancel()

    def check(self) -> None:
        if self.cancelled.is_set():
            from agi.errors import Cancelled

            raise Cancelled()

    def notice(self, text: str) -> None:
        self.send({"type": "notice", "message": text})

    def progress(self, event: Any) -> None:
        """Count what streams in; tell Neovim at most every PROGRESS_EVERY seconds."""
        kind = getattr(event, "type", "")
        phase = self.phase
        if kind == "text":
            self.chars += len(event.text)
            phase = "writing"
        elif kind == "reasoning":
            phase = "thinking"
        elif kind == "tool_start":
            phase = f"running {event.call.name}"
        elif kind == "notice":
            self.notice(event.text)
        now = time.monotonic()
        if phase != self.phase or now - self.sent >= PROGRESS_EVERY:
            self.phase, self.sent = phase, now
            self.send({"type": "progress", "phase": phase, "chars": self.chars})


class Plugin:
    """Starts, cancels and reports requests; called by the rplugin shim on the event loop."""

    def __init__(self, nvim: Any):
        self.nvim = nvim
        self.jobs: dict[int, Job] = {}
        self.lock = threading.Lock()

    def request(self, request: dict[str, Any]) -> None:
        job = Job(self, request)
        with self.lock:
            self.jobs[job.id] = job
        worker = threading.Thread(target=self.work, args=(job,), name=f"agi-{job.id}", daemon=True)
        worker.start()

    def cancel(self, ids: list[Any]) -> None:
        with self.lock:
            jobs = [self.jobs[int(i)] for i in ids if int(i) in self.jobs]
        for job in jobs:
            job.cancel()

    def work(self, job: Job) -> None:
        try:
            job.send(outcome(job))
        finally:
            with self.lock:
                self.jobs.pop(job.id, None)

    def send(self, request_id: int, event: dict[str, Any]) -> None:
        """From any thread: hand the event to Lua's `require('agi')._event`."""
        try:
            self.nvim.async_call(self.deliver, request_id, event)
        except Exception:  # Neovim is going away: nobody to tell
            pass

    def deliver(self, request_id: int, event: dict[str, Any]) -> None:
        self.nvim.exec_lua(DELIVER, request_id, event, async_=True)

    def info(self) -> dict[str, Any]:
        """For :checkhealth: which Python runs the host, and whether the engine imports."""
        import agi
        from agi.nvim.health import engine_problem

        found: dict[str, Any] = {"python": sys.executable, "agi": agi.__version__}
        problem = engine_problem()
        if problem:
            found["engine_error"] = problem
        return found


def outcome(job: Job) -> dict[str, Any]:
    """Run the job to the event that ends it: done, cancelled or error."""
    try:
        from agi.errors import AgiError, Cancelled
    except ImportError as e:  # pragma: no cover - the shim already imported agi
        return {"type": "error", "message": str(e)}
    try:
        from agi.nvim.engine import run_request

        lines = run_request(job)
    except Cancelled:
        return {"type": "cancelled"}
    except AgiError as e:
        return {"type": "error", "message": str(e) or type(e).__name__}
    except ImportError as e:
        return {"type": "error", "message": missing_engine(e)}
    except Exception as e:
        detail = "".join(traceback.format_exception_only(type(e), e)).strip()
        return {"type": "error", "message": f"internal error: {detail}"}
    if job.cancelled.is_set():  # cancelled as the reply completed: still nothing is applied
        return {"type": "cancelled"}
    return {"type": "done", "lines": lines}


def missing_engine(error: ImportError) -> str:
    from pathlib import Path

    checkout = Path(__file__).resolve().parents[2]  # agi's repository, when installed from it
    return (
        f"the Python host ({sys.executable}) cannot load agi: {error}. Install agi with its "
        f"dependencies there ({sys.executable} -m pip install -e '{checkout}[nvim]', the "
        "distribution agi-cli) or point "
        "g:python3_host_prog at a Python that has it; see :checkhealth agi"
    )
