"""`agi.run`, `agi.stream`, `agi.arun`, `agi.astream`: one run each, opened through the engine's
door (agi.engine.open) as `agi PROMPT` opens its own, sharing the process's connection pool and
its rate-limit backoff. A stream's run works on a thread of its own; leaving the stream early,
or cancelling the task that awaits it, cancels the run (its model connection closed, the
commands it started ended) and waits for it to end."""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from agi import engine
from agi.api.events import Event, ResultEvent, typed
from agi.api.options import Call, resolve
from agi.engine.result import RunResult
from agi.errors import AgiError, Cancelled, SchemaError
from agi.frontends.views.terminal import Silent, Terminal, colored
from agi.providers.pool import ClientPool

if TYPE_CHECKING:
    import asyncio

    from agi.engine.run import Run
    from agi.engine.seams import Event as RunEvent
    from agi.engine.seams import View

_POOL: Any = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> Any:
    """The process's pool (agi.providers.pool): HTTP clients kept between runs, one backoff per
    endpoint, so that a 429 one run gets pauses the others."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ClientPool()
        return _POOL


class Job:
    """A call's run from open to end, on whatever thread `execute` is called; `cancel` from
    any thread, at any time (before the run is open too)."""

    def __init__(self, call: Call):
        self.call = call
        self.lock = threading.Lock()
        self.cancelled = False
        self.run: Run | None = None

    def execute(self, view: View) -> RunResult:
        """The run to its result (the API key taken out); an error raises, carrying the run's
        `result` so far; a judge that gave no verdict is a SchemaError carrying the answer."""
        try:
            run = engine.open(self.call.spec(view, shared_pool()))
        except AgiError as e:
            tidy(e, self.call.redact)
            raise
        try:
            with self.lock:
                self.run, cancelled = run, self.cancelled
            if cancelled:
                raise Cancelled()
            result = run.ask(self.call.prompt).redacted(run.redact)
        except AgiError as e:
            tidy(e, run.redact)
            raise
        finally:
            end(run)
        if result.exit_code not in (0, 1):
            error = SchemaError(result.error or "the answer could not be judged")
            error.result = result
            raise error
        return result

    def cancel(self) -> None:
        with self.lock:
            self.cancelled = True
            run = self.run
        if run is not None:
            run.cancel()


def tidy(error: AgiError, redact: Callable[[str], str]) -> AgiError:
    """The error with the API key taken out of its message and of the result it carries."""
    error.args = tuple(redact(a) if isinstance(a, str) else a for a in error.args)
    if error.result is not None:
        error.result = error.result.redacted(redact)
    return error


def end(run: Run) -> None:
    """SessionEnd's hooks, then every connection and process of the run closed."""
    try:
        run.end_hooks("other")
    except AgiError as e:
        run.view.warn(run.redact(str(e)))
    finally:
        run.close()


def quiet_view(call: Call) -> Any:
    """No events shown; warnings on stderr as the command line writes them in a pipe; with
    `verbose=True` the run as the terminal view shows it, on stderr."""
    import sys

    if call.settings.verbose and not call.settings.quiet:
        tty = sys.stderr.isatty()
        return Terminal(color=colored(call.settings.color, tty), spinner=False, cursor=tty)
    return Silent()


class EventView:
    """A stream's view: every event, typed and without the API key, to `put`."""

    def __init__(self, put: Callable[[Any], None], call: Call):
        self.put, self.call = put, call
        self.inner = quiet_view(call)

    def handle(self, event: RunEvent) -> None:
        self.inner.handle(event)
        shown = typed(event, self.call.redact)
        if shown is not None:
            self.put(shown)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class Failed:
    """What a stream's thread hands over when the run raised."""

    def __init__(self, error: BaseException):
        self.error = error


END = object()  # a stream's thread is done


def run(prompt: str, **options: Any) -> RunResult:
    """Run `prompt` to its `agi.Result`, exactly as `agi PROMPT` would (options: docs/python.md).

    Errors raise `agi.Error` subclasses (UsageError, ProviderError, LimitReached, SchemaError,
    HookStopped, Cancelled); a run judged failed under `exit_code` returns a Result whose
    `exit_code` is 1."""
    call = resolve(prompt, dict(options), "agi.run()")
    return Job(call).execute(quiet_view(call))


class Stream:
    """`with agi.stream(prompt) as events: for event in events: …` — the run's events as typed
    objects, the last a `ResultEvent`; leaving the block early cancels the run."""

    def __init__(self, call: Call):
        self.job = Job(call)
        self.events: queue.Queue[Any] = queue.Queue()
        self.thread: threading.Thread | None = None
        self.done = False

    def __enter__(self) -> Stream:
        if self.thread is None:
            view = EventView(self.events.put, self.job.call)
            self.thread = threading.Thread(target=self._work, args=(view,), daemon=True)
            self.thread.name = "agi-stream"
            self.thread.start()
        return self

    def _work(self, view: View) -> None:
        try:
            self.events.put(ResultEvent(self.job.execute(view)))
        except BaseException as e:  # raised in the reader's thread
            self.events.put(Failed(e))
        finally:
            self.events.put(END)

    def __iter__(self) -> Iterator[Event]:
        self.__enter__()
        while not self.done:
            item = self.events.get()
            if item is END:
                self.done = True
            elif isinstance(item, Failed):
                self.done = True
                raise item.error
            else:
                yield item

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel the run unless it is over, and wait for it to end."""
        if self.thread is not None and self.thread.is_alive():
            self.job.cancel()
            self.thread.join()
        self.done = True


def stream(prompt: str, **options: Any) -> Stream:
    """The run's events as typed objects (`agi.StepEvent`, `agi.TextEvent`, …, one class per
    `type` of `--output jsonl`), the last an `agi.ResultEvent` whose `.result` is the
    `agi.Result`; use it in a `with` block: leaving it early cancels the run."""
    return Stream(resolve(prompt, dict(options), "agi.stream()"))


async def arun(prompt: str, **options: Any) -> RunResult:
    """`agi.run` for asyncio: the run works on a thread of its own; cancelling the task that
    awaits it cancels the run, and waits for it to end."""
    call = resolve(prompt, dict(options), "agi.arun()")
    job = Job(call)
    return await threaded(job, lambda: job.execute(quiet_view(call)))  # type: ignore[no-any-return]


async def threaded(job: Job, work: Callable[[], Any]) -> Any:
    """`work()` on a thread of its own, awaited; a cancel cancels `job` and waits for it."""
    import asyncio

    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def body() -> None:
        try:
            outcome: Any = work()
            failed = False
        except BaseException as e:
            outcome, failed = e, True
        try:
            loop.call_soon_threadsafe(settle, done, outcome, failed)
        except RuntimeError:  # the loop is gone
            pass

    threading.Thread(target=body, name="agi-run", daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        job.cancel()
        try:
            await asyncio.shield(done)
        except Exception:  # the run's own end (agi.Cancelled): the task's cancel stands
            pass
        raise


def settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class AsyncStream:
    """`async with agi.astream(prompt) as events: async for event in events: …` (or just
    `async for`); leaving the block early, or cancelling the task, cancels the run."""

    def __init__(self, call: Call):
        self.job = Job(call)
        self.events: asyncio.Queue[Any] | None = None
        self.finished: asyncio.Future[None] | None = None
        self.done = False

    def _start(self) -> asyncio.Queue[Any]:
        if self.events is not None:
            return self.events
        import asyncio

        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()
        finished: asyncio.Future[None] = loop.create_future()
        self.events, self.finished = events, finished

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # the loop is gone
                pass

        def body() -> None:
            try:
                put(ResultEvent(self.job.execute(EventView(put, self.job.call))))
            except BaseException as e:
                put(Failed(e))
            finally:
                put(END)
                try:
                    loop.call_soon_threadsafe(settle, finished, None, False)
                except RuntimeError:
                    pass

        threading.Thread(target=body, name="agi-astream", daemon=True).start()
        return events

    async def __aenter__(self) -> AsyncStream:
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        import asyncio

        events = self._start()
        if self.done:
            raise StopAsyncIteration
        try:
            item = await events.get()
        except asyncio.CancelledError:
            await self.aclose()
            raise
        if item is END:
            self.done = True
            raise StopAsyncIteration
        if isinstance(item, Failed):
            self.done = True
            raise item.error
        return item  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Cancel the run unless it is over, and wait for it to end."""
        self.done = True
        if self.finished is not None and not self.finished.done():
            import asyncio

            self.job.cancel()
            await asyncio.shield(self.finished)


def astream(prompt: str, **options: Any) -> AsyncStream:
    """`agi.stream` for asyncio: an async iterator of the run's typed events (also an async
    context manager: leaving it early cancels the run, as does cancelling the task)."""
    return AsyncStream(resolve(prompt, dict(options), "agi.astream()"))
