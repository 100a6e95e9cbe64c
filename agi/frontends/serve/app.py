"""`agi --serve`'s ASGI application (Starlette): the routes, bearer auth, the gate of `--jobs`
and `--queue`, one lock per session, SSE, and a disconnect cancelling its run (docs: serve)."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from agi.api.events import Event
from agi.engine.result import RunResult
from agi.errors import AgiError
from agi.frontends.serve.early import authorised, failure
from agi.frontends.serve.requests import Refused, RunRequest, parse_run
from agi.frontends.serve.runner import Job, Shared, refused

KEPT_FINISHED = 1000  # background runs whose answer is kept once they end (the oldest forgotten)
DEFAULT_BODY_LIMIT = 10 << 20  # stdin_limit's default: bytes of a request body read at most

END = object()  # a run's thread is done


def error(e: Refused) -> JSONResponse:
    """OpenAI's error shape, with agi's one line."""
    body = failure(str(e), e.status, e.code)
    headers = {"retry-after": "1"} if e.status == 429 else None
    return JSONResponse(body, status_code=e.status, headers=headers)


class Gate:
    """At most `jobs` runs at once; at most `queue` more wait, the rest are refused (429)."""

    def __init__(self, jobs: int, queue: int):
        self.jobs, self.queue = jobs, queue
        self.waiting = 0
        self.slots: asyncio.Semaphore | None = None

    async def enter(self) -> None:
        if self.slots is None:
            self.slots = asyncio.Semaphore(self.jobs)
        if self.slots.locked() and self.waiting >= self.queue:
            raise Refused(
                f"the server is busy: {self.jobs} runs and {self.waiting} waiting (--jobs, "
                "--queue); retry later",
                status=429,
                code="rate_limit_exceeded",
            )
        self.waiting += 1
        try:
            await self.slots.acquire()
        finally:
            self.waiting -= 1

    def leave(self) -> None:
        assert self.slots is not None
        self.slots.release()


class Background:
    """A run started with `"background": true`."""

    def __init__(self, job: Job):
        self.id = f"run_{uuid.uuid4().hex}"
        self.job = job
        self.status = "running"
        self.result: RunResult | None = None
        self.task: asyncio.Task[Any] | None = None

    def view(self) -> dict[str, Any]:
        result = None if self.result is None else self.result.to_json()
        return {"id": self.id, "status": self.status, "result": result}


class Server:
    """The application's state: what every request shares, the gate, the session locks, the
    background runs; `ready` is set once the options are loaded."""

    def __init__(self, shared: Shared, token: str | None, jobs: int, queue: int):
        self.shared, self.token = shared, token
        self.gate = Gate(jobs, queue)
        self.sessions: dict[str, asyncio.Lock] = {}
        self.background: dict[str, Background] = {}
        self.finished: dict[str, None] = {}  # ended background runs, oldest first
        self.ready = threading.Event()

    def authorised(self, request: Request) -> bool:
        return authorised(self.token, request.headers.get("authorization", ""))

    def ended(self, entry: Background) -> None:
        """`entry` has ended: its answer is kept among the last KEPT_FINISHED ended ones."""
        self.finished[entry.id] = None
        while len(self.finished) > KEPT_FINISHED:
            forgotten = next(iter(self.finished))
            del self.finished[forgotten], self.background[forgotten]

    async def loaded(self) -> Any:
        if not self.ready.is_set():
            await asyncio.get_running_loop().run_in_executor(None, self.ready.wait)
        if self.shared.loaded is None:
            raise Refused("the server's options could not be loaded", 503, "unavailable")
        return self.shared.loaded

    async def body(self, request: Request) -> Any:
        """The request's JSON, read up to the server's stdin_limit (413 past it)."""
        limit = (await self.loaded()).kept.stdin_limit or DEFAULT_BODY_LIMIT
        over = Refused(
            f"the request body is over {limit} bytes (the server's stdin_limit)",
            status=413,
            code="request_too_large",
        )
        size = request.headers.get("content-length", "")
        if size.isdigit() and int(size) > limit:
            raise over
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > limit:
                raise over
        try:
            return json.loads(bytes(data) or b"null")
        except (ValueError, RecursionError) as e:
            raise Refused(f"the request body is not JSON: {e}") from None

    async def request_of(self, fields: Any) -> RunRequest:
        loaded = await self.loaded()
        return parse_run(fields, loaded.limits)

    async def hold(self, stack: AsyncExitStack, request: RunRequest) -> None:
        """A place among the jobs, and the session's turn (requests on one session in turn)."""
        if request.session is not None:
            lock = self.sessions.setdefault(str(request.session), asyncio.Lock())
            await stack.enter_async_context(lock)
        await self.gate.enter()
        stack.callback(self.gate.leave)

    async def opened(self, request: RunRequest, put: Callable[[Any], None]) -> tuple[Job, Any]:
        """The request's run opened on a thread (a bad request: Refused, nothing written)."""
        job = Job(request, self.shared, put)
        try:
            run = await threaded(job, job.open)
        except AgiError as e:
            raise refused(e) from None
        return job, run

    async def until_result(self, job: Job, run: Any, request: Request | None) -> RunResult:
        """The run's result; a client that disconnects first cancels the run."""
        work = asyncio.ensure_future(threaded(job, lambda: job.execute(run)))
        if request is None:
            return await work  # type: ignore[no-any-return]
        gone = asyncio.ensure_future(disconnected(request))
        try:
            await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not work.done():
                work.cancel()
            return await work  # type: ignore[no-any-return]
        finally:
            gone.cancel()

    async def run_whole(self, request: RunRequest, http: Request | None) -> RunResult:
        async with AsyncExitStack() as stack:
            await self.hold(stack, request)
            job, run = await self.opened(request, lambda event: None)
            return await self.until_result(job, run, http)

    async def run_stream(self, request: RunRequest) -> AsyncIterator[Event | RunResult]:
        """The run's events as they come, then its result; started before the response is (a
        bad request is a 4xx), ended by the client's disconnect (the generator closed)."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # the loop is gone
                pass

        stack = AsyncExitStack()
        try:
            await self.hold(stack, request)
            job, run = await self.opened(request, put)
        except BaseException:
            await stack.aclose()
            raise
        return self._events(stack, job, run, events)

    async def _events(
        self, stack: AsyncExitStack, job: Job, run: Any, events: asyncio.Queue[Any]
    ) -> AsyncIterator[Event | RunResult]:
        async with stack:
            work = asyncio.ensure_future(threaded(job, lambda: job.execute(run)))
            work.add_done_callback(lambda _: events.put_nowait(END))
            try:
                while True:
                    item = await events.get()
                    if item is END:
                        break
                    yield item
                yield await work
            finally:
                if not work.done():
                    work.cancel()  # the client is gone: the run cancelled, waited for
                    try:
                        await work
                    except BaseException:
                        pass


async def threaded(job: Job, work: Callable[[], Any]) -> Any:
    """`work()` on a thread of its own (not the loop's executor: `--jobs` may be more than its
    threads), awaited; cancelling the awaiting task cancels `job` and waits for it to end."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    done.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, even if left

    def settle(outcome: Any, failed: bool) -> None:
        if not done.done():
            done.set_exception(outcome) if failed else done.set_result(outcome)

    def body() -> None:
        try:
            outcome, failed = work(), False
        except BaseException as e:
            outcome, failed = e, True
        try:
            loop.call_soon_threadsafe(settle, outcome, failed)
        except RuntimeError:  # the loop is gone
            pass

    threading.Thread(target=body, name="agi-serve-run", daemon=True).start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        # ending its commands waits for them (kill_group): not on the event loop's thread
        threading.Thread(target=job.cancel, name="agi-serve-cancel", daemon=True).start()
        try:
            await asyncio.shield(done)
        except BaseException:  # the run's own end (agi.Cancelled): the task's cancel stands
            pass
        raise


async def disconnected(request: Request) -> None:
    """Returns once the client has gone (its body already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def sse(kind: str | None, data: Any) -> bytes:
    head = f"event: {kind}\n" if kind else ""
    return f"{head}data: {json.dumps(data)}\n\n".encode()
