"""The job runner of `agi --batch`: every job's settings (the command line's layer, then the
job's own), and the backend that runs jobs. `LocalRuns` runs each job as `agi PROMPT` would, in
this process, N at once on worker threads.

A backend is anything with `accepts(job, settings)` and `run(jobs, report, stop)`: it runs the
jobs it is given and calls `report(outcome)` as each one finishes (from any thread), starting
none once `stop.starting` is clear. A provider's batch API (upload the requests, poll, read the
results: half price for jobs without tools) would be a second backend that accepts tool-less,
session-less jobs; the front end, the output, resume, shards and the budget stay as they are."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agi import engine
from agi.engine.result import RunResult
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import AgiError
from agi.frontends.batch.jobs import BatchJob, mine
from agi.frontends.batch.shared import Budget, BudgetSpent, Outcome
from agi.frontends.views.terminal import Silent
from agi.options.settings import Settings
from agi.options.values import overlay
from agi.providers.endpoint import Unconfigured, configured_providers, require_configured

if TYPE_CHECKING:
    from agi.options.values import Layer

PER_JOB = ("timeout", "max_steps", "max_cost")  # the job's own layer, over its settings
KEPT_SETTINGS = 64  # different sets of job fields whose settings are kept loaded


class Plan:
    """The settings of each job: `Settings.load(command line, job)` once for each different
    set of the job's fields (the config file and the extension scans are not read again for
    jobs that say the same), and the layer of the job's limits, which its run lays over them."""

    def __init__(self, base: Settings, layer: Layer):
        self.base, self.layer = base, layer
        self.configured = configured_providers(layer)  # the providers a job's model may use
        self._loaded: OrderedDict[str, Settings] = OrderedDict()  # the latest KEPT_SETTINGS
        self._lock = threading.Lock()

    def settings(self, job: BatchJob) -> Settings:
        """What the job's run resolves: the settings its fields load, its limits over them."""
        return self.loaded(job).over(self.limits(job))

    def loaded(self, job: BatchJob) -> Settings:
        """The settings the job's fields load (shared by the jobs that give the same)."""
        given = {k: v for k, v in job.options.items() if k not in PER_JOB and k != "session"}
        key = json.dumps(given, sort_keys=True)
        with self._lock:
            settings = self._loaded.get(key)
            if settings is not None:
                self._loaded.move_to_end(key)
                return settings
        settings = self._load(job, given)
        with self._lock:
            self._loaded[key] = settings
            while len(self._loaded) > KEPT_SETTINGS:
                self._loaded.popitem(last=False)
        return settings

    def limits(self, job: BatchJob) -> Layer:
        """The job's own limits; its --max-cost alone (the command line's is the budget)."""
        return overlay(job.source, **{k: job.options.get(k) for k in PER_JOB})

    def _load(self, job: BatchJob, given: dict[str, Any]) -> Settings:
        if not given:
            return self.base
        schema = given.get("schema")
        if isinstance(schema, dict):
            schema = json.dumps(schema)
        sys_files = given.get("sys")
        job_layer = overlay(
            job.source,
            model=given.get("model"),
            schema=schema,
            exit_code=given.get("exit_code"),
            sys=[sys_files] if isinstance(sys_files, str) else sys_files,
            ephemeral=given.get("ephemeral"),
            attachments=[files] if isinstance(files := given.get("attachments"), str) else files,
        )
        settings = Settings.load(self.layer, job_layer)
        if given.get("model") is not None:  # on a provider the operator configured
            field = f"{job.source}: model"
            require_configured(settings.model, self.base.model, self.configured, field)
        return settings


class Stop:
    """The batch's state under signals: `starting` is cleared by the first Ctrl-C (or a spent
    budget for the jobs that would start), `hard` is set by a second one (or SIGTERM)."""

    def __init__(self) -> None:
        self.starting = threading.Event()
        self.starting.set()
        self.hard = threading.Event()
        self.signum: int | None = None


class Feed:
    """The jobs to run, taken one at a time by the workers as the input is read (docs: batch):
    the jobs of this shard that `done` (the `--batch-out` file) does not hold, each `admit`ted
    (its settings checked) as it is taken. A bad line or a read that waits too long ends the
    feed: `error` holds it, and no job is taken after it."""

    def __init__(
        self,
        jobs: Iterator[BatchJob],
        shard: tuple[int, int] | None = None,
        done: set[str] | frozenset[str] = frozenset(),
        admit: Callable[[BatchJob], None] | None = None,
        counted: Callable[[int, bool], None] | None = None,
    ):
        self.jobs, self.shard, self.done, self.admit = jobs, shard, done, admit
        self.counted = counted  # told (jobs taken, whether the input goes on) as it changes
        self.taken = 0
        self.ended = False
        self.error: AgiError | None = None
        self.lock = threading.Lock()

    def take(self) -> BatchJob | None:
        with self.lock:
            while not self.ended:
                try:
                    job = next(self.jobs, None)
                    if job is None:
                        self.ended = True
                        break
                    if not mine(job, self.shard) or job.key in self.done:
                        continue
                    if self.admit is not None:
                        self.admit(job)
                except AgiError as e:
                    self.error, self.ended = e, True
                    break
                self.taken += 1
                if self.counted is not None:
                    self.counted(self.taken, True)
                return job
            if self.counted is not None:
                self.counted(self.taken, False)
            return None


class Listed(Feed):
    """Jobs given as a list (a backend's share of them)."""

    def __init__(self, jobs: list[BatchJob]):
        super().__init__(iter(()))
        self.queue = deque(jobs)

    def take(self) -> BatchJob | None:
        try:
            return self.queue.popleft()
        except IndexError:
            return None


class Backend(Protocol):
    """What runs jobs: `LocalRuns` here; a provider's batch API could be another."""

    def accepts(self, job: BatchJob, settings: Settings) -> bool: ...

    def run(self, jobs: list[BatchJob], report: Callable[[Outcome], None], stop: Stop) -> None: ...

    def cancel(self) -> None: ...


def run_all(
    backends: list[Backend],
    plan: Plan,
    jobs: list[BatchJob],
    report: Callable[[Outcome], None],
    stop: Stop,
) -> None:
    """Each job to the first backend that accepts it, the backends side by side; the last one
    (`LocalRuns`, which takes every job) runs on this thread, which stays free for signals."""
    groups: list[list[BatchJob]] = [[] for _ in backends]
    for job in jobs:
        try:
            settings = plan.settings(job)
        except Unconfigured:  # a model the operator did not configure: LocalRuns fails the job
            groups[-1].append(job)
            continue
        groups[next(i for i, b in enumerate(backends) if b.accepts(job, settings))].append(job)
    others = [
        threading.Thread(target=b.run, args=(g, report, stop), name="agi-backend")
        for b, g in zip(backends[:-1], groups, strict=False)
        if g
    ]
    for thread in others:
        thread.start()
    backends[-1].run(groups[-1], report, stop)
    for thread in others:
        while thread.is_alive() and not stop.hard.is_set():
            thread.join(0.1)


class Warned:
    """The warnings the batch's jobs have shown (each different one once for the batch)."""

    def __init__(self, shown: list[str]) -> None:
        self.seen: set[str] = set(shown)  # the command line's, shown as the batch started
        self.lock = threading.Lock()

    def first(self, text: str) -> bool:
        """Whether `text` is shown for the first time (it is then noted)."""
        with self.lock:
            if text in self.seen:
                return False
            self.seen.add(text)
            return True


class JobView(Silent):
    """A job's view: nothing of its events; each different warning once for the batch."""

    def __init__(self, job: BatchJob, warned: Warned):
        super().__init__()
        self.job, self.warned = job, warned

    def warn(self, text: str) -> None:
        if self.warned.first(text):
            super().warn(f"{self.job.source}: {text}")


class LocalRuns:
    """Runs jobs in this process, `workers` at once: each a `Run` with its own session, meter
    and cancellation; the workers share the settings, the HTTP clients and the backoff."""

    def __init__(self, plan: Plan, budget: Budget, workers: int, progress: Any, pool: Any = None):
        self.plan, self.budget, self.workers, self.progress = plan, budget, workers, progress
        self.pool = pool  # agi.providers.pool.ClientPool: the HTTP clients and the backoff
        self.running: dict[int, Any] = {}  # the runs in progress, by job index
        self.warned = Warned(plan.base.warnings)  # each different warning once for the batch
        self._lock = threading.Lock()

    def accepts(self, job: BatchJob, settings: Settings) -> bool:
        return True

    def run(
        self, jobs: list[BatchJob] | Feed, report: Callable[[Outcome], None], stop: Stop
    ) -> None:
        """Run the jobs (a list, or a Feed read as the workers take them) on worker threads and
        wait for them (the caller's thread stays free for signals: it only joins, a short while
        at a time)."""
        feed = jobs if isinstance(jobs, Feed) else Listed(jobs)
        count = self.workers if isinstance(jobs, Feed) else min(self.workers, len(jobs))
        threads = [
            threading.Thread(target=self._work, args=(feed, report, stop), name=f"agi-job-{i}")
            for i in range(count)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive() and not stop.hard.is_set():
                thread.join(0.1)

    def cancel(self) -> None:
        """A second Ctrl-C: every run in progress is cut short (connections, commands)."""
        with self._lock:
            runs = list(self.running.values())
        for run in runs:
            run.cancel()

    def _work(self, feed: Feed, report: Callable[[Outcome], None], stop: Stop) -> None:
        while stop.starting.is_set():
            job = feed.take()
            if job is None:
                return
            spent = self.budget.reached()
            self.progress.began()
            if spent is not None:  # no job starts once the budget is spent
                report(Outcome(job.id, RunResult.failed(spent), budget=True))
                self.progress.ended(spent.exit_code)
                continue
            outcome = self.one(job, stop)
            self.progress.ended(None if outcome is None else outcome.exit)
            if outcome is not None and not stop.hard.is_set():
                report(outcome)

    def one(self, job: BatchJob, stop: Stop) -> Outcome | None:
        """One job to its outcome; None when a hard stop cut it short (nothing is written)."""
        run = None
        try:
            session = job.options.get("session")
            spec = RunSpec(
                self.plan.loaded(job),
                layer=self.plan.limits(job),  # the job's own limits, which the run lays over
                view=JobView(job, self.warned),
                budget=self.budget,  # the batch's --max-cost, spent by every job's model calls
                # None: new; never the session `-c` continues
                session=SessionChoice(path=Path(session) if session else None, latest=False),
                pool=self.pool,  # the workers' HTTP clients and one backoff per endpoint
            )
            run = engine.open(spec)
            with self._lock:
                self.running[job.index] = run
            if stop.hard.is_set():
                return None
            return finished(job, run.ask(job.prompt))
        except AgiError as e:
            if stop.hard.is_set():
                return None
            return dataclasses.replace(failed(job, run, e), budget=isinstance(e, BudgetSpent))
        except Exception as e:  # a fault of agi's own: the job fails, the batch goes on
            return failed(job, run, AgiError(f"internal error: {type(e).__name__}: {e}"))
        finally:
            with self._lock:
                self.running.pop(job.index, None)
            if run is not None:
                end(run)


def end(run: Any) -> None:
    """SessionEnd hooks, then what the run opened is closed, as at the end of `agi PROMPT`."""
    try:
        run.end_hooks("other")
    except AgiError as e:
        run.view.warn(run.redact(str(e)))
    finally:
        run.close()


def finished(job: BatchJob, result: RunResult) -> Outcome:
    return Outcome(job.id, result)


def failed(job: BatchJob, run: Any, error: AgiError) -> Outcome:
    """A job that ended with an error: its exit code and message, and what it had done (the
    run's, or what the error says of a run that failed while opening)."""
    if run is None:
        return Outcome(job.id, RunResult.failed(error, error.result))
    result = run.result(error)
    return Outcome(job.id, dataclasses.replace(result, error=run.redact(str(result.error))))
