"""`agi --batch FILE|-` (docs: batch): many prompts in one process, one JSON line out per
job as it finishes, one budget and one backoff for all, resume from `--batch-out`, `--shard K/N`.

The input is read lazily, a line at a time as the workers take jobs, in bounded memory: a regular
file is checked whole before any job starts (exit 2 naming the line), a pipe as it comes (a bad
line ends the batch there, exit 2 naming it, after the running jobs end); a line is bounded by
`stdin_limit`, a wait for input by --timeout. `--batch-out` FILE is locked for the batch. Signals:
the first Ctrl-C stops starting jobs and lets the running ones finish (within --timeout); a
second one (or SIGTERM, SIGHUP) cuts them short. Either way what finished is written, a whole
line at a time, and the exit is 128 + the signal."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import AgiError, UsageError
from agi.frontends.batch import provider_batch
from agi.frontends.batch.jobs import (
    BatchJob,
    Waiting,
    done_keys,
    in_shard,
    iter_jobs,
    lock_out,
    mine,
    open_input,
    parse_shard,
    read_jobs,
    regular,
)
from agi.frontends.batch.runner import Feed, LocalRuns, Plan, Stop
from agi.frontends.batch.shared import Budget, Outcome, Progress, Writer
from agi.options.config import config_path, load_file, resolve_model
from agi.options.settings import Settings
from agi.options.values import env_layer, file_layer, overlay, resolve
from agi.policy.environment import withhold
from agi.policy.redaction import usable
from agi.process import arm_alarm, hide_keys
from agi.providers.cost import Meter
from agi.providers.endpoint import Unconfigured
from agi.providers.pool import ClientPool

if TYPE_CHECKING:
    import argparse
    from types import FrameType

    from agi.options.values import Layer

# options of a single run that a batch takes per job, or not at all
REFUSED = {
    "prompt": "give the prompts in the --batch file, one a line",
    "session": 'name a job\'s session in its line ({"session": DIR})',
    "cont": 'name a job\'s session in its line ({"session": DIR})',
    "fork": 'name a job\'s session in its line ({"session": DIR})',
    "repl": "a batch is not interactive",
    "compact": "compact a session with agi --compact -s DIR",
    "output": "a batch writes one JSON line per job",
    "list_extensions": "list them without --batch",
}


def check_args(args: argparse.Namespace) -> None:
    if args.batch is None:
        named = ("jobs", "batch_out", "shard", "batch_api")
        given = next(n for n in named if getattr(args, n, None))
        raise UsageError(f"--{given.replace('_', '-')} needs --batch FILE")
    for name, why in REFUSED.items():
        if getattr(args, name, None):
            flag = {"cont": "--continue", "prompt": "PROMPT words"}.get(name, "--" + name)
            raise UsageError(f"--batch takes no {flag.replace('_', '-')}: {why}")


class Tally:
    """What the jobs ended with: the exit status of the batch."""

    def __init__(self) -> None:
        self.done = self.failed = self.budget = 0
        self.lock = threading.Lock()

    def add(self, outcome: Outcome) -> None:
        with self.lock:
            self.done += 1
            self.failed += outcome.exit != 0
            self.budget += outcome.budget

    def code(self) -> int:
        return 4 if self.budget else 1 if self.failed else 0


def prepare(plan: Plan, jobs: list[BatchJob], budget: Budget) -> list[str]:
    """Every job's settings, loaded and checked before anything runs (a bad schema or an
    unreadable sys file is a usage error naming the line); the API keys they use."""
    keys: set[str | None] = {plan.base.model.api_key}
    base = plan.base.model
    Meter(plan.base.prices, budget.limit).require(base.label, base.model)  # the flags' model
    for job in jobs:
        keys.add(check_job(plan, job, budget))
    return usable([k for k in keys if k])


def check_job(plan: Plan, job: BatchJob, budget: Budget) -> str | None:
    """The job's settings loaded and checked (a UsageError naming its line); its API key."""
    try:
        settings = plan.settings(job)
        Meter(settings.prices, budget.limit or settings.max_cost).require(
            settings.model.label, settings.model.model
        )
    except Unconfigured:
        return None  # that job's line says so, with exit 2; the others run
    except UsageError as e:
        if job.source in str(e):
            raise
        raise UsageError(f"{job.source}: {e}") from None
    return settings.model.api_key


def operator_keys(plan: Plan) -> list[str]:
    """The key of every provider the operator configured: what a job's `model` may use, known
    before the input is read, so that every job's children have all of them withheld."""
    keys: set[str | None] = {plan.base.model.api_key}
    path = config_path()
    layers = [file_layer(load_file(path), path), env_layer(), plan.layer]
    for provider in sorted(plan.configured):
        try:
            given = overlay("batch", model=f"{provider}:any")
            keys.add(resolve_model(resolve([*layers, given]), path).api_key)
        except AgiError:
            continue
    return usable([k for k in keys if k])


def read_input(
    name: str, base: Any, check: Callable[[BatchJob], object] | None = None
) -> list[BatchJob]:
    """The jobs, read whole within --timeout and the bounds of `stdin_limit` (docs: batch);
    with `check`, each job is checked and none kept (a regular file's first reading)."""
    import time

    if base.timeout:
        arm_alarm(time.monotonic(), base.timeout)
    try:
        if check is None:
            return read_jobs(open_input(name, base.stdin_limit))
        waiting = Waiting(lambda: True, base.timeout)
        for job in iter_jobs(open_input(name, base.stdin_limit, waiting)):
            check(job)
        return []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def batch(args: argparse.Namespace, layer: Layer) -> int:
    """Read, check, run; the exit status (0 all done, 1 a job failed, 4 the budget stopped
    the batch, 130/143 interrupted)."""
    check_args(args)
    shard = parse_shard(args.shard)
    base = Settings.load(layer)
    if getattr(args, "batch_api", None):  # the provider's batches (docs: batch): read whole
        return provider(args, layer, base, in_shard(read_input(args.batch, base), shard))
    for warning in base.warnings:
        sys.stderr.write(f"agi: {warning}\n")
    plan, budget = Plan(base, layer), Budget(base.max_cost)
    Meter(base.prices, budget.limit).require(base.model.label, base.model.model)
    secrets = withheld_keys(plan, base)
    out = Path(args.batch_out).expanduser() if args.batch_out else None
    if out is not None:
        lock_out(out)  # held until the process ends: no second batch runs these jobs
    done, known = done_keys(out) if out is not None else set(), regular(args.batch)
    total = checked_whole(args.batch, base, plan, budget, shard, done) if known else 0
    writer, tally, tty = Writer(out, secrets), Tally(), sys.stderr.isatty()
    shown = (tty or base.verbose) and not base.quiet  # -v: progress where stderr is no terminal
    progress = Progress(total, budget, enabled=shown, redraw=tty)
    pool, stop = ClientPool(), Stop()  # the workers' HTTP clients, one backoff per endpoint
    runs = LocalRuns(plan, budget, args.jobs or 4, progress, pool)

    def admit(job: BatchJob) -> None:
        key = check_job(plan, job, budget)
        if key and key not in secrets and usable([key]):  # a key found only now
            withhold(key)
            secrets.append(key)

    def counted(taken: int, reading: bool) -> None:
        if not known:  # a pipe: the jobs so far, while it goes on
            progress.total, progress.reading = taken, reading

    lines = open_input(args.batch, base.stdin_limit, Waiting(stop.starting.is_set, base.timeout))
    feed = Feed(iter_jobs(lines), shard, done, admit, counted)

    def report(outcome: Outcome) -> None:
        writer.write(outcome)
        tally.add(outcome)
        if writer.failed is not None:  # --batch-out cannot take more: start nothing more
            stop.starting.clear()
        if out is None and getattr(sys.stdout, "reader_gone", False):
            stop.starting.clear()  # `agi --batch f | head -1`: nobody reads what would follow

    try:
        with signals(stop, [runs]):
            progress.start()
            runs.run(feed, report, stop)
    finally:
        progress.stop(eta=stop.signum is None)  # interrupted: no time left to promise
        if stop.hard.is_set():
            writer.lock.acquire(timeout=5)  # no line is begun after this, none is torn
        else:
            writer.close()
            pool.close()
    return finish(writer, feed, stop, tally, budget, out is not None)


def withheld_keys(plan: Plan, base: Settings) -> list[str]:
    """Every key the operator configured, withheld from every job's children from the start: no
    job's tools see another job's key (docs: security)."""
    secrets = operator_keys(plan)
    for key in secrets:
        withhold(key)
    hide_keys(base.model.api_key, keep=True)  # the tools' environment, as for one run
    return secrets


def finish(writer: Writer, feed: Feed, stop: Stop, tally: Tally, budget: Budget, kept: bool) -> int:
    """The exit status after the run, and its one `agi:` line."""
    if writer.failed is not None and stop.signum is None:
        sys.stderr.write(f"agi: {writer.failed}; a rerun runs the jobs it does not hold\n")
        return 1
    if feed.error is not None and stop.signum is None:  # a bad line, a wait past --timeout
        jobs = "job" if tally.done == 1 else "jobs"
        written = f" ({tally.done} {jobs} before it written)" if tally.done else ""
        sys.stderr.write(f"agi: {feed.error}{written}\n")
        return feed.error.exit_code
    return ending(stop, tally, feed.taken, budget, kept)


def checked_whole(
    name: str,
    base: Settings,
    plan: Plan,
    budget: Budget,
    shard: tuple[int, int] | None,
    done: set[str],
) -> int:
    """A regular file's first reading: every job checked before any runs (a bad line anywhere
    runs nothing); the number of jobs this run will take."""
    total = 0

    def check(job: BatchJob) -> None:
        nonlocal total
        check_job(plan, job, budget)
        total += mine(job, shard) and job.key not in done

    read_input(name, base, check)
    return total


def provider(args: argparse.Namespace, layer: Layer, base: Settings, jobs: list[BatchJob]) -> int:
    """`--batch-api`: the jobs, read and checked whole, to the provider's batches."""
    for warning in base.warnings:
        sys.stderr.write(f"agi: {warning}\n")
    plan, budget = Plan(base, layer), Budget(base.max_cost)
    secrets = prepare(plan, jobs, budget)
    for key in secrets:  # every job's children: no job's tools see another job's key
        withhold(key)
    hide_keys(base.model.api_key)  # the tools' environment, as for one run
    out = Path(args.batch_out).expanduser() if args.batch_out else None
    made = out is not None and not out.exists()
    if out is not None:
        lock_out(out)  # held until the process ends: no second batch runs these jobs
    tty = sys.stderr.isatty() and not base.quiet
    try:
        return provider_batch.batch(args, plan, jobs, out, secrets, tty)
    except UsageError:  # refused before anything was sent: no file of this batch's
        if made and out is not None and out.stat().st_size == 0:
            out.unlink(missing_ok=True)
        raise


def ending(stop: Stop, tally: Tally, total: int, budget: Budget, resumable: bool) -> int:
    """The exit status, and its one `agi:` line."""
    if stop.signum is not None:
        name = signal.Signals(stop.signum).name
        left = total - tally.done
        how = "rerun the same command to run them" if resumable else "--batch-out FILE resumes"
        sys.stderr.write(
            f"agi: interrupted by {name}: {tally.done} of {total} jobs written, {left} not "
            f"({how})\n"
        )
        return 128 + stop.signum
    code = tally.code()
    if code == 4:
        error = budget.reached()
        sys.stderr.write(f"agi: {error}: {tally.budget} of {total} jobs stopped or not run\n")
    elif code:
        sys.stderr.write(f"agi: {tally.failed} of {total} jobs failed\n")
    return code


@contextmanager
def signals(stop: Stop, backends: list[Any]) -> Iterator[None]:
    """Ctrl-C once: no job starts; twice (or SIGTERM, SIGHUP): the running ones are cut
    short. The handlers only set flags and cancel; the main thread is waiting meanwhile."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and stop.starting.is_set():
            stop.signum = signum
            stop.starting.clear()
            sys.stderr.write(
                "\nagi: interrupted: no further job starts, the running ones finish "
                "(Ctrl-C again to stop them now)\n"
            )
            return
        stop.signum = stop.signum or signum
        stop.starting.clear()
        stop.hard.set()
        for backend in backends:
            backend.cancel()

    held = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    old = {signum: signal.signal(signum, handle) for signum in held}
    try:
        yield
    finally:
        for signum, handler in old.items():
            signal.signal(signum, handler)
