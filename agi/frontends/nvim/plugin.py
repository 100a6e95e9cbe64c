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

import agi
from agi.errors import AgiError, Cancelled
from agi.frontends.nvim.cancel import Cancellable
from agi.frontends.nvim.engine import run_request
from agi.frontends.nvim.health import engine_problem
from agi.frontends.nvim.nes import NextEdits
from agi.frontends.nvim.suggest import Suggestions
from agi.frontends.views.terminal import describe_input, short
from agi.options.config import PROVIDERS, config_path, load_file, split_model
from agi.options.settings import model_for
from agi.providers.cost import BUILTIN

UPDATE_EVERY = 0.05  # seconds: at most one progress message (spinner, preview) per request
DELIVER = "require('agi')._event(...)"
MODELS = "require('agi')._models(...)"


class EditorRequest(Cancellable):
    """One request from Neovim: its cancel flag, the run a cancel stops, its progress.

    Progress reaches Lua batched: what streamed in since the last message (text, tool steps),
    at most every UPDATE_EVERY seconds, the last of a burst sent by a timer."""

    def __init__(self, plugin: Plugin, request: dict[str, Any]):
        super().__init__()
        self.plugin, self.request = plugin, request
        self.id = int(request["id"])
        self.meter: Any = None  # agi.providers.cost.Meter of the request, set by the engine
        self.chars = 0
        self.phase = "waiting"
        self.sent = 0.0
        self.lock = threading.Lock()
        self.ops: list[list[Any]] = []  # preview changes not sent yet, in order
        self.dirty = False
        self.timer: threading.Timer | None = None
        self.closed = False

    def send(self, event: dict[str, Any]) -> None:
        self.plugin.send(self.id, event)

    def started(self, log: str, session: str = "") -> None:
        self.send({"type": "started", "log": log, "session": session})

    def check(self) -> None:
        if self.cancelled.is_set():
            raise Cancelled()

    def notice(self, text: str) -> None:
        self.send({"type": "notice", "message": text})

    def usage(self) -> dict[str, Any] | None:
        """`{input, output, cost}` of the model calls so far (cost None when unknown)."""
        if self.meter is None:
            return None
        total = self.meter.total.to_dict()
        return {"input": total["input"], "output": total["output"], "cost": total["cost"]}

    def progress(self, event: Any) -> None:
        """Note what streams in (text, tool steps, usage); tell Neovim soon, batched."""
        kind = getattr(event, "type", "")
        if kind == "notice":
            self.notice(event.text)
            return
        with self.lock:
            if kind == "text":
                self.chars += len(event.text)
                self.phase = "writing"
                if self.ops and self.ops[-1][0] == "text":
                    self.ops[-1][1] += event.text
                else:
                    self.ops.append(["text", event.text])
            elif kind == "reasoning":
                if self.phase == "thinking":
                    return
                self.phase = "thinking"
            elif kind == "step":
                if event.step > 1:  # a new model call: the text of the one before was no answer
                    self.ops.append(["step"])
            elif kind in ("tool_start", "tool_end"):
                self.ops.append(["tool", event.call.id, tool_line(event)])
                self.phase = f"running {event.call.name}" if kind == "tool_start" else "thinking"
            elif kind != "usage":
                return
            self.dirty = True
        self.schedule()

    def schedule(self) -> None:
        """Send now if the last message is old enough, else once it is (one timer at a time)."""
        with self.lock:
            if not self.dirty or self.closed or self.timer is not None:
                return
            wait = self.sent + UPDATE_EVERY - time.monotonic()
            if wait > 0:
                self.timer = threading.Timer(wait, self.flush)
                self.timer.daemon = True
                self.timer.start()
                return
        self.flush()

    def flush(self) -> None:
        with self.lock:  # held while sending: messages leave in the order they were made
            self.timer = None
            if self.closed or not self.dirty:
                return
            ops, self.ops, self.dirty = self.ops, [], False
            self.sent = time.monotonic()
            event = {"type": "progress", "phase": self.phase, "chars": self.chars, "ops": ops}
            event["usage"] = self.usage()
            self.send(event)

    def close(self) -> None:
        """No progress after the event that ends the request."""
        with self.lock:
            self.closed = True
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None


def tool_line(event: Any) -> str:
    """A tool step in one line, as the terminal view shows it: `Read(notes.txt)`, then how it
    ended: `Read(notes.txt) ✓ 0.01s`, or with ✗ and the error's first line."""
    try:
        args = event.call.parse_arguments()
    except ValueError:
        args = {}
    line = f"{event.call.name}({describe_input(args)})"
    if event.type == "tool_end":
        error = short((event.result.splitlines() or [""])[0], 60) if event.is_error else ""
        line += f" {'✗ ' + error if error else '✓'} {event.seconds:.2f}s"
    return line


class Plugin:
    """Starts, cancels and reports requests; called by the rplugin shim on the event loop."""

    def __init__(self, nvim: Any):
        self.nvim = nvim
        self.jobs: dict[int, EditorRequest] = {}
        self.lock = threading.Lock()

    def request(self, request: dict[str, Any]) -> None:
        job = EditorRequest(self, request)
        with self.lock:
            self.jobs[job.id] = job
        worker = threading.Thread(target=self.work, args=(job,), name=f"agi-{job.id}", daemon=True)
        worker.start()

    def cancel(self, ids: list[Any]) -> None:
        with self.lock:
            jobs = [self.jobs[int(i)] for i in ids if int(i) in self.jobs]
        for job in jobs:
            job.cancel()

    def work(self, job: EditorRequest) -> None:
        try:
            event = outcome(job)
            job.close()
            event["usage"] = job.usage()
            job.send(event)
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

    def models(self) -> None:
        """For :AgiModel's completion: the names, found on a thread, sent to Lua's `_models`."""

        def find() -> None:
            found = model_names()
            try:
                self.nvim.async_call(lambda: self.nvim.exec_lua(MODELS, found, async_=True))
            except Exception:  # Neovim is going away
                pass

        threading.Thread(target=find, name="agi-models", daemon=True).start()

    def suggest(self, request: dict[str, Any]) -> None:
        """An inline suggestion (agi.frontends.nvim.suggest); it replaces the one in flight."""
        self.suggestions().request(request)

    def suggest_cancel(self, buf: Any, request_id: Any = None) -> None:
        self.suggestions().cancel(int(buf), request_id)

    def suggestions(self) -> Any:
        if getattr(self, "_suggestions", None) is None:
            self._suggestions = Suggestions(self.nvim)
        return self._suggestions

    def nes(self, request: dict[str, Any]) -> None:
        """A next-edit request (agi.frontends.nvim.nes); it replaces the buffer's one in flight."""
        self.next_edits().request(request)

    def nes_cancel(self, buf: Any, request_id: Any = None) -> None:
        self.next_edits().cancel(int(buf), request_id)

    def next_edits(self) -> Any:
        if getattr(self, "_next_edits", None) is None:
            self._next_edits = NextEdits(self.nvim)
        return self._next_edits

    def info(self) -> dict[str, Any]:
        """For :checkhealth: which Python runs the host, and whether the engine imports."""
        found: dict[str, Any] = {"python": sys.executable, "agi": agi.__version__}
        problem = engine_problem()
        if problem:
            found["engine_error"] = problem
        return found


def outcome(job: EditorRequest) -> dict[str, Any]:
    """Run the job to the event that ends it: done, cancelled or error."""
    try:
        # lazy: Neovim is told when agi cannot be imported
        from agi.errors import AgiError, Cancelled
    except ImportError as e:  # pragma: no cover - the shim already imported agi
        return {"type": "error", "message": str(e)}
    try:
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


def model_names() -> dict[str, Any]:
    """`provider:model` names for completion: the ones the configuration mentions (`model`,
    AGI_MODEL, `[models."…"]`, `[prices."…"]`), the built-in price table's models under their
    provider, and every provider as `provider:`; with the model a request would use now."""
    import os

    path = config_path()
    try:
        file = load_file(path)
    except AgiError:
        file = {}
    custom = file.get("providers") or {}
    fallback = file.get("provider") or "openai"
    names: set[str] = set()
    mentioned = [file.get("model"), os.environ.get("AGI_MODEL")]
    mentioned += list(file.get("models") or {}) + list(file.get("prices") or {})
    for spec in mentioned:
        if isinstance(spec, str) and spec:
            provider, model = split_model(spec, custom)
            names.add(f"{provider or fallback}:{model}")
    for model in BUILTIN:
        vendor = next((p for prefix, p in VENDORS if model.startswith(prefix)), None)
        if vendor:
            names.add(f"{vendor}:{model}")
    try:
        configured: str | None = model_for().label
    except AgiError:
        configured = None
    providers = sorted(set(PROVIDERS) | set(custom))
    return {"names": sorted(names) + [f"{p}:" for p in providers], "configured": configured}


# who serves the built-in price table's models (agi.providers.cost.BUILTIN), by name prefix
VENDORS = (
    ("gpt-", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("deepseek-", "deepseek"),
    ("claude-", "anthropic"),
    ("gemini-", "gemini"),
)


def missing_engine(error: ImportError) -> str:
    from pathlib import Path

    checkout = Path(__file__).resolve().parents[2]  # agi's repository, when installed from it
    return (
        f"the Python host ({sys.executable}) cannot load agi: {error}. Install agi with its "
        f"dependencies there ({sys.executable} -m pip install -e '{checkout}[nvim]', the "
        "distribution agi-cli) or point "
        "g:python3_host_prog at a Python that has it; see :checkhealth agi"
    )
