"""`agi --batch FILE --batch-api openai|anthropic` (docs: batch): the jobs sent as a
provider's batches, at the provider's batch price, instead of run here.

Every job must be answerable in one call: no tools, no session to continue, no judgement (a
second call); nothing is written under $AGI_HOME (ephemeral). What cannot go is a usage error
naming its line before anything is sent. The jobs are split at the provider's limits (requests
and bytes a batch), the batches created one by one, then polled until each has ended; the
results of a batch are written as section 19's lines as soon as it has, `--schema` answers
validated on arrival (exit 5 for an invalid one), `usage.cost` at the batch price.

With `--batch-out OUT`, every batch is recorded in `OUT.batches.json` before it is sent (which
job each request is, where OUT stood, a token) and again with its id once created, so a rerun
after Ctrl-C, a crash or a kill polls the same batches and submits none of their jobs again
(one killed while being sent is looked for among the provider's first); a batch's entry goes
once its results are written. Ctrl-C stops waiting (exit 130) and says how to resume; a second
Ctrl-C within 2 s cancels the provider batches first."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.engine.result import RunResult
from agi.errors import AgiError, ProviderError, UsageError
from agi.frontends.batch.anthropic_batch import AnthropicBatches
from agi.frontends.batch.batch_http import Answer, BatchApi, Polled, Spool
from agi.frontends.batch.batch_progress import BatchProgress, Interrupts
from agi.frontends.batch.batch_record import Sent, State, written_after
from agi.frontends.batch.jobs import BatchJob, done_keys
from agi.frontends.batch.openai_batch import OpenAIBatches
from agi.frontends.batch.shared import Outcome, Writer
from agi.messages import Usage
from agi.policy.redaction import redact
from agi.providers.cost import batch_price
from agi.providers.endpoint import require_key
from agi.providers.protocols import NAMES, protocol
from agi.structured.schema import SchemaInvalid, build_validator

if TYPE_CHECKING:
    import argparse

    from agi.frontends.batch.runner import Plan
    from agi.options.settings import Settings

APIS = ("openai", "anthropic")
PROTOCOL = {"openai": "chat", "anthropic": "messages"}  # agi.providers.protocols.protocol
POLL_ENV = "AGI_BATCH_POLL"  # seconds between polls (default 30)
SIZE_ENV = "AGI_BATCH_SIZE"  # requests a batch at most, below the provider's limit
BYTES_ENV = "AGI_BATCH_BYTES"  # bytes a batch at most, below the provider's limit
GRACE = 2.0  # seconds after the first Ctrl-C in which a second one cancels the batches
FAILED_POLLS = 5  # polls in a row that fail before the batch gives up waiting (exit 3)

# command-line options a provider batch cannot carry out, and why
REFUSED = {
    "tool": "no tools are offered",
    "tools_dir": "no tools are offered",
    "mcp": "no tools are offered",
    "hooks": "no hooks run",
    "react": "no tools are offered",
    "exit_code": "judging an answer is a second model call",
    "max_cost": "a provider batch's cost is known only when its results arrive",
}


def check_flags(args: argparse.Namespace) -> str:
    """The API asked for, and the flags that cannot go with it (a UsageError)."""
    api = str(args.batch_api)
    if api not in APIS:
        raise UsageError(f"--batch-api must be openai or anthropic, not {api!r}")
    for name, why in REFUSED.items():
        value = getattr(args, name, None)
        if value not in (None, False, [], ()):
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"--batch-api takes no {flag}: each job is one request ({why})")
    tools = getattr(args, "tools", None)
    if isinstance(tools, str) and tools.strip(" ,"):
        raise UsageError("--batch-api takes no --tools: each job is one request (no tools)")
    return api


def env_number(name: str, default: float, integer: bool = False) -> float:
    """A positive number from the environment (a usage error when it is not one)."""
    text = os.environ.get(name)
    if text is None or not text.strip():
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise UsageError(f"{name} must be a positive {'integer' if integer else 'number'}")
    return value


def api_for(api: str, settings: Settings) -> BatchApi:
    if api == "openai":
        return OpenAIBatches(settings.model)
    return AnthropicBatches(settings.model)


def one_call(api: str, job: BatchJob, settings: Settings) -> None:
    """A job a provider batch can answer in one call; else a usage error naming its line."""
    where = job.source
    if "session" in job.options:
        raise UsageError(f"{where}: --batch-api answers in one call: no session to continue")
    if "exit_code" in job.options and job.options["exit_code"] is not False:
        raise UsageError(f"{where}: --batch-api answers in one call: exit_code needs a second")
    if "max_cost" in job.options:
        raise UsageError(f"{where}: --batch-api: a job's cost is known only when its result comes")
    if settings.judge is not None:
        raise UsageError(f"{where}: --batch-api answers in one call: --exit-code needs a second")
    kind = protocol(settings.model.provider)
    if kind != PROTOCOL[api]:
        raise UsageError(
            f"{where}: --batch-api {api} sends {NAMES[PROTOCOL[api]]} requests; "
            f"{settings.model.label} speaks the {NAMES[kind]}"
        )
    require_key(settings.model)


# ---- the batch ----


@dataclass
class Chunk:
    """Requests bound for one batch: one endpoint, key and model, within the limits."""

    settings: Settings
    requests: Spool = field(default_factory=Spool)  # on disk until sent, not in memory
    jobs: dict[str, str] = field(default_factory=dict)


class ProviderBatches:
    """The jobs of one `agi --batch --batch-api` run, from their requests to their lines."""

    def __init__(
        self,
        api: str,
        plan: Plan,
        jobs: list[BatchJob],
        out: Path | None,
        progress: BatchProgress,
    ):
        self.api, self.plan, self.out = api, plan, out
        self.writer = Writer(None, [])  # the real one once every job is checked (batch())
        self.progress = progress
        self.by_key = {job.key: job for job in jobs}
        self.clients: dict[tuple[str, str, str], BatchApi] = {}
        self.state = State(Path(str(out) + ".batches.json") if out else None, api)
        self.poll = env_number(POLL_ENV, 30.0)
        self.failed = 0

    def client(self, settings: Settings) -> BatchApi:
        model = settings.model
        key = (model.base_url, model.api_key or "", model.model)
        if key not in self.clients:
            self.clients[key] = api_for(self.api, settings)
        return self.clients[key]

    def chunks(self, todo: list[BatchJob]) -> list[Chunk]:
        """The requests of the jobs no recorded batch holds, split at the limits; every job
        checked first (nothing is sent when one cannot go)."""
        pending = self.state.pending_keys()
        chunks: dict[tuple[str, str, str], list[Chunk]] = {}
        order: list[Chunk] = []
        for job in todo:
            settings = self.plan.settings(job)
            one_call(self.api, job, settings)
            if job.key in pending:
                continue
            client = self.client(settings)
            limit = int(min(client.max_requests, env_number(SIZE_ENV, client.max_requests, True)))
            max_bytes = int(min(client.max_bytes, env_number(BYTES_ENV, client.max_bytes, True)))
            custom_id = f"agi-{job.index}"
            item = client.item(custom_id, settings, job.prompt)
            size = len(item)
            if size > max_bytes:
                raise UsageError(
                    f"{job.source}: its request is {size} bytes, more than a {self.api} batch "
                    f"takes ({max_bytes})"
                )
            model = settings.model
            group = chunks.setdefault((model.base_url, model.api_key or "", model.model), [])
            last = group[-1].requests if group else None
            if last is None or last.count >= limit or last.size + size > max_bytes:
                group.append(Chunk(settings))
                order.append(group[-1])
            chunk = group[-1]
            chunk.requests.add(item)
            chunk.jobs[custom_id] = job.key
        return order

    def submit(self, chunks: list[Chunk], stop: Interrupts) -> None:
        """Create the batches one by one, each recorded before the next is sent."""
        for chunk in chunks:
            if stop.stopped.is_set():
                return
            client = self.client(chunk.settings)
            out_from = self.out.stat().st_size if self.out is not None and self.out.exists() else 0
            model = chunk.settings.model
            token = uuid.uuid4().hex
            sent = Sent(self.api, "", model.base_url, model.model, chunk.jobs, out_from, token)
            sent.at, sent.status = time.time(), "sending"
            self.state.sent.append(sent)
            self.state.save()  # before it is sent: a kill now never sends these jobs twice
            try:
                sent.id = client.submit(chunk.requests, token)
            except ProviderError as e:
                if e.status is None or e.status >= 500:  # it may have been created after all
                    raise
                self.state.sent.remove(sent)  # refused: nothing of it is at the provider
                self.state.save()
                raise
            count = chunk.requests.count
            chunk.requests.close()  # sent: its requests are not needed
            sent.status = "submitted"
            self.state.save()
            self.progress.update(
                batches=self.progress.batches + 1,
                submitted=self.progress.submitted + count,
            )

    def reconcile(self) -> bool:
        """The batches a killed run was sending when it stopped (recorded, no id): found among
        the provider's (OpenAI by the token in their metadata, Anthropic by time and size)
        and recorded, or, when the provider has none, dropped from the record so that their
        jobs go again. Whether any was dropped."""
        dropped = False
        known = {sent.id for sent in self.state.sent if sent.id}
        for sent in [s for s in self.state.sent if not s.id]:
            client = self.client(self.settings_of(sent))
            found = [i for i in client.find(sent.token, len(sent.jobs), sent.at) if i not in known]
            if len(found) > 1:
                raise ProviderError(
                    f"{self.api} batch: {len(found)} batches that may be the one agi was sending "
                    f"when it was stopped ({', '.join(found[:3])}); agi cannot tell which and "
                    f"sends nothing: cancel the others, or move {self.state.path} away"
                )
            if found:
                sent.id = found[0]
                known.add(sent.id)
            else:
                self.state.sent.remove(sent)
                dropped = True
            self.state.save()
        return dropped

    def settings_of(self, sent: Sent) -> Settings:
        """The settings a recorded batch's requests were made with (a job of it in the input,
        else the command line's)."""
        for key in sent.jobs.values():
            job = self.by_key.get(key)
            if job is not None:
                return self.plan.settings(job)
        return self.plan.base

    def wait(self, stop: Interrupts) -> None:
        """Poll every recorded batch until each has ended and its lines are written."""
        failures = 0
        while self.state.sent and not stop.stopped.is_set():
            for sent in list(self.state.sent):
                if stop.stopped.is_set():
                    return
                try:
                    polled = self.client(self.settings_of(sent)).poll(sent.id)
                    failures = 0
                except ProviderError:
                    failures += 1
                    if failures >= FAILED_POLLS * max(1, len(self.state.sent)):
                        raise
                    continue
                sent.status, sent.counts = polled.status, polled.counts
                self.progress.update(status=self.statuses())
                if polled.ended:
                    self.collect(sent, polled)
            if self.state.sent:
                stop.stopped.wait(self.poll)
        self.progress.update(status="ended")

    def statuses(self) -> str:
        seen: list[str] = []
        for sent in self.state.sent:
            if sent.status not in seen:
                seen.append(sent.status)
        return "/".join(seen) or "ended"

    def collect(self, sent: Sent, polled: Polled) -> None:
        """An ended batch's lines (those not written before a crash), then its entry goes."""
        client = self.client(self.settings_of(sent))
        already = written_after(self.out, sent.out_from)
        seen: set[str] = set()
        for custom_id, answer in client.results(polled):  # each written as it is read
            key = sent.jobs.get(custom_id)
            if key is None or custom_id in seen:
                continue
            seen.add(custom_id)
            if key not in already:
                self.write(key, answer)
        for custom_id, key in sent.jobs.items():
            if custom_id not in seen and key not in already:
                why = polled.problem or f"the batch ended ({polled.status}) with no result for it"
                self.write(key, Answer(error=f"{self.api} batch {sent.id}: {why}", code=3))
        self.state.sent.remove(sent)
        self.state.save()

    def write(self, key: str, answer: Answer) -> None:
        outcome = self.outcome(key, answer)
        self.writer.write(outcome)
        self.progress.ended(outcome.exit)
        self.failed += outcome.exit != 0

    def outcome(self, key: str, answer: Answer) -> Outcome:
        """A job's line: its answer (validated under --schema), its usage at the batch price."""
        job = self.by_key.get(key)
        job_id = job.id if job is not None else json.loads(key)
        settings = self.plan.settings(job) if job is not None else self.plan.base
        usage = answer.usage
        if usage is not None:
            usage.calls = max(usage.calls, 1)
            if usage.cost is None:
                model = settings.model
                price = batch_price(model.label, model.model, settings.prices)
                usage.cost = None if price is None else price.cost(usage)
        total = usage if usage is not None else Usage(calls=1 if answer.text is not None else 0)
        steps = 1 if answer.text is not None or usage is not None else 0
        if answer.error is not None:
            base = RunResult(steps=steps, usage=total)
            return Outcome(job_id, RunResult.failed(Coded(answer.error, answer.code), base))
        value: Any = answer.text
        if settings.schema is not None:
            try:
                value = build_validator(settings.schema).validate(answer.text or "")
            except SchemaInvalid as e:
                problem = str(e) if len(str(e)) <= 300 else str(e)[:297] + "..."
                error = Coded(f"no valid JSON in the batch's answer: {problem}", 5)
                return Outcome(job_id, RunResult.failed(error, RunResult(steps=1, usage=total)))
        return Outcome(job_id, RunResult(answer=value, steps=steps, usage=total))

    def cancel(self) -> list[str]:
        """Ask the provider to cancel every batch still recorded; the ids it was asked for."""
        asked = []
        for sent in [s for s in self.state.sent if s.id]:
            try:
                self.client(self.settings_of(sent)).cancel(sent.id)
                asked.append(sent.id)
            except ProviderError as e:
                sys.stderr.write(f"agi: cannot cancel {sent.id}: {e}\n")
        return asked

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


class Coded(AgiError):
    """An error with the exit code a job's line gets for it."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.exit_code = code


def batch(
    args: argparse.Namespace,
    plan: Plan,
    jobs: list[BatchJob],
    out: Path | None,
    secrets: list[str],
    tty: bool,
) -> int:
    """Check, submit, wait, write; the exit status (0 every job answered, 1 one failed, 130
    or 143 interrupted)."""
    api = check_flags(args)
    done = done_keys(out) if out is not None else set()
    todo = [job for job in jobs if job.key not in done]
    progress = BatchProgress(tty)
    runner = ProviderBatches(api, plan, jobs, out, progress)
    chunks = runner.chunks(todo)  # every usage error before anything is sent or opened
    writer = runner.writer = Writer(out, secrets)
    progress.update(
        batches=len(runner.state.sent), submitted=sum(len(s.jobs) for s in runner.state.sent)
    )
    stop = Interrupts()
    try:
        with stop.held():
            progress.start()
            try:
                if runner.reconcile():  # a killed run's batch that was never created
                    chunks = runner.chunks(todo)  # its jobs go now
                runner.submit(chunks, stop)
                runner.wait(stop)
            except ProviderError as e:
                progress.stop()
                kept = "rerun the same command to collect them" if out else "they are not kept"
                left = f"; {len(runner.state.sent)} batches are still at the provider ({kept})"
                sys.stderr.write(
                    f"agi: {redact(str(e), secrets)}{left if runner.state.sent else ''}\n"
                )
                return 3
            finally:
                progress.stop()
            if stop.signum is not None:
                return interrupted(runner, stop, out)
    finally:
        writer.close()
        runner.close()
    if runner.failed:
        sys.stderr.write(f"agi: {runner.failed} of {len(todo)} jobs failed\n")
        return 1
    return 0


def interrupted(runner: ProviderBatches, stop: Interrupts, out: Path | None) -> int:
    """After the first signal: say how to resume; a second Ctrl-C within GRACE seconds of the
    first cancels the batches still recorded before agi exits."""
    assert stop.signum is not None
    name = signal.Signals(stop.signum).name
    ids = [sent.id for sent in runner.state.sent]
    if not ids:
        sys.stderr.write(f"agi: interrupted by {name}: every batch submitted was collected\n")
        return 128 + stop.signum
    how = (
        "rerun the same command to go on waiting and collect them"
        if out is not None
        else "without --batch-out no rerun can collect them"
    )
    sys.stderr.write(
        f"agi: interrupted by {name}: stopped waiting for {len(ids)} {runner.api} batches, which "
        f"go on at the provider ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''}); {how}\n"
    )
    if stop.signum == signal.SIGINT:
        sys.stderr.write(f"agi: Ctrl-C again within {GRACE:.0f} s cancels them\n")
        sys.stderr.flush()
        if stop.again.wait(GRACE):
            asked = runner.cancel()
            if asked:
                sys.stderr.write(
                    f"agi: asked {runner.api} to cancel {len(asked)} batches; what they had "
                    f"answered stays to collect ({'a rerun writes it' if out else 'not kept'})\n"
                )
    return 128 + stop.signum
