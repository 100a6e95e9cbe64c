"""The runs behind `agi --serve`'s requests: the server's settings (resolved once, at start), one
pool of HTTP clients and backoffs, one budget and the metrics, shared by every request; per
request a run opened through the engine's door on a thread of its own, its events handed to the
event loop as they come, its result without the API key. Plain Python: no ASGI here."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agi import engine
from agi.api.budget import Budget
from agi.api.events import Event, StepEvent, UsageEvent, typed
from agi.api.options import NoOne
from agi.engine.budget import BudgetedMeter
from agi.engine.result import RunResult
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import AgiError, Cancelled
from agi.frontends.serve.requests import Limits, Refused, RunRequest
from agi.frontends.views.terminal import Silent
from agi.options.config import config_path, load_file
from agi.options.settings import Settings, model_for
from agi.options.values import overlay, request_layer
from agi.providers.endpoint import configured_providers, require_configured
from agi.providers.pool import ClientPool

if TYPE_CHECKING:
    from agi.engine.run import Run
    from agi.options.values import Layer

SOURCE = "request"


class Metrics:
    """What `/metrics` tells, in Prometheus' text format; thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs = 0
        self.exits: dict[int, int] = {}
        self.tokens = {"input": 0, "output": 0, "cached": 0, "reasoning": 0}
        self.cost = 0.0
        self.calls = 0
        self.call_seconds = 0.0
        self.running = 0

    def started(self) -> None:
        with self.lock:
            self.runs += 1
            self.running += 1

    def ended(self, result: RunResult) -> None:
        with self.lock:
            self.running -= 1
            self.exits[result.exit_code] = self.exits.get(result.exit_code, 0) + 1
            usage = result.usage
            for name in self.tokens:
                self.tokens[name] += int(getattr(usage, name, 0) or 0)
            self.cost += usage.cost or 0.0

    def model_call(self, seconds: float) -> None:
        with self.lock:
            self.calls += 1
            self.call_seconds += seconds

    def text(self) -> str:
        with self.lock:
            lines = [
                "# HELP agi_runs_total Runs started.",
                "# TYPE agi_runs_total counter",
                f"agi_runs_total {self.runs}",
                "# HELP agi_runs_running Runs in progress.",
                "# TYPE agi_runs_running gauge",
                f"agi_runs_running {self.running}",
                "# HELP agi_run_failures_total Runs that ended with an exit code other than 0.",
                "# TYPE agi_run_failures_total counter",
            ]
            lines += [
                f'agi_run_failures_total{{exit_code="{code}"}} {n}'
                for code, n in sorted(self.exits.items())
                if code != 0
            ]
            lines += ["# HELP agi_tokens_total Tokens of the runs' model calls.",
                      "# TYPE agi_tokens_total counter"]  # fmt: skip
            lines += [f'agi_tokens_total{{kind="{k}"}} {v}' for k, v in self.tokens.items()]
            lines += [
                "# HELP agi_cost_usd_total USD the runs' model calls cost (where known).",
                "# TYPE agi_cost_usd_total counter",
                f"agi_cost_usd_total {self.cost:.6f}",
                "# HELP agi_model_call_seconds Model calls: time from sending to the usage.",
                "# TYPE agi_model_call_seconds summary",
                f"agi_model_call_seconds_sum {self.call_seconds:.6f}",
                f"agi_model_call_seconds_count {self.calls}",
            ]
            return "\n".join(lines) + "\n"


@dataclasses.dataclass
class Loaded:
    """The server's options resolved: settings for runs that keep a session and for those that
    keep none, the limits of every request, the profiles, the providers a model may use."""

    kept: Settings
    ephemeral: Settings
    limits: Limits
    profiles: dict[str, dict[str, Any]]
    configured: set[str]


def load(layer: Layer, budget: float | None) -> Loaded:
    """Resolve the server's options once; a bad option or config is an AgiError (exit 2)."""
    anchor = os.getcwd()  # relative path rules where given (docs: security)
    kept = Settings.load(layer, anchor=anchor)
    kept.warnings.extend(kept.check_rules())
    for warning in kept.warnings:  # shown once, at start
        sys.stderr.write(f"agi: {warning}\n")
    kept.warnings.clear()
    ephemeral = kept.over(overlay(SOURCE, ephemeral=True))  # nothing read again
    mode = kept.permissions.mode if kept.permissions is not None else "default"
    tools = None if kept.tools.allow is None else list(kept.tools.allow)
    if kept.tools.none:
        tools = []
    limits = Limits(kept.max_steps, kept.timeout, kept.max_cost, tools, mode)
    if budget is not None and kept.max_cost is None:  # each request's ceiling: the budget
        limits.max_cost = budget
    profiles = load_file(config_path()).get("profiles") or {}
    return Loaded(kept, ephemeral, limits, dict(profiles), configured_providers(layer))


class Shared:
    """What every request shares: the loaded options, the pool, the budget, the metrics."""

    def __init__(self, layer: Layer, budget: float | None):
        self.layer = layer
        self.budget = Budget(budget) if budget is not None else None
        self.pool = ClientPool()  # one pool and backoff per endpoint for the whole server
        self.metrics = Metrics()
        self.loaded: Loaded | None = None

    def settings(self, request: RunRequest) -> Settings:
        """The settings a request's run starts from: the server's, with the request's tools and
        a model it names checked against the providers the operator configured."""
        assert self.loaded is not None
        base = self.loaded.ephemeral if request.ephemeral else self.loaded.kept
        if request.model is not None:
            named = overlay(SOURCE, {"model": "model"}, model=request.model)
            model = model_for(self.layer, named)
            require_configured(model, base.model, self.loaded.configured, "model")
        if request.tools is not None:
            tools = dataclasses.replace(base.tools, allow=list(request.tools))
            base = dataclasses.replace(base, tools=tools)
        return base


class Watch(Silent):
    """A run's view: each event typed, without the API key, to `put`; model-call latency to
    the metrics; warnings to the server's stderr."""

    def __init__(self, put: Callable[[Event], None], metrics: Metrics):
        super().__init__(sys.stderr)
        self.put, self.metrics = put, metrics
        self.redact: Callable[[str], str] = lambda s: s
        self.step_at: float | None = None

    def handle(self, event: Any) -> None:
        shown = typed(event, self.redact)
        if shown is None:
            return
        if isinstance(shown, StepEvent):
            self.step_at = time.monotonic()
        elif isinstance(shown, UsageEvent) and self.step_at is not None:
            self.metrics.model_call(time.monotonic() - self.step_at)
            self.step_at = None
        self.put(shown)


class Job:
    """One request's run. `execute()` on a worker thread; `cancel()` from any thread, at any
    time (the model connection closed, the commands it started ended)."""

    def __init__(self, request: RunRequest, shared: Shared, put: Callable[[Event], None]):
        self.request, self.shared = request, shared
        self.view = Watch(put, shared.metrics)
        self.lock = threading.Lock()
        self.cancelled = False
        self.run: Run | None = None

    def open(self) -> Run:
        """The run opened (a bad request is an AgiError before anything runs)."""
        settings = self.shared.settings(self.request)
        meter = None
        if self.shared.budget is not None:
            cost = self.request.max_cost or settings.max_cost
            meter = BudgetedMeter(settings.prices, cost, self.shared.budget)
        spec = RunSpec(
            settings,
            layer=request_layer(SOURCE, self.request),
            view=self.view,
            ask=NoOne(),  # no person at a server: what the rules leave to one is denied
            pool=self.shared.pool,
            meter=meter,
            mode=self.request.permission_mode,
            session=SessionChoice(path=self.request.session, latest=False),  # not -c's
        )
        run = engine.open(spec)
        self.view.redact = run.redact
        with self.lock:
            self.run, cancelled = run, self.cancelled
        if cancelled:
            close(run)
            raise Cancelled()
        return run

    def execute(self, run: Run) -> RunResult:
        """The run to its result, the API key taken out; a run that fails (a limit reached, the
        provider's error) is a result with its exit code."""
        self.shared.metrics.started()
        result = RunResult()
        try:
            result = run.ask(self.request.prompt)
        except Cancelled:
            result = run.result(Cancelled())
            raise
        except AgiError as e:
            result = run.result(e)
        finally:
            self.shared.metrics.ended(result)
            close(run)
        return result.redacted(run.redact)

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            run = self.run
        if run is not None:
            run.cancel()


def close(run: Run) -> None:
    """SessionEnd's hooks, then every connection and process of the run closed."""
    try:
        run.end_hooks("other")
    except AgiError as e:
        sys.stderr.write(f"agi: {run.redact(str(e))}\n")
    finally:
        run.close()


def refused(error: AgiError, redact: Callable[[str], str] | None = None) -> Refused:
    """An error before the run started as the request's refusal (4xx)."""
    if isinstance(error, Refused):
        return error
    message = str(error)
    if redact is not None:
        message = redact(message)
    status = 403 if type(error).__name__ == "Unconfigured" else 400
    return Refused(message, status=status, code=type(error).__name__.lower())
