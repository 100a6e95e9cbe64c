"""`agi --serve`'s ASGI application (Starlette): the routes, bearer auth, the gate of `--jobs`
and `--queue`, one lock per session, SSE, and a disconnect cancelling its run (docs: serve)."""

from __future__ import annotations

import asyncio
import hmac
import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from agi.api.events import Event, TextEvent
from agi.engine.result import RunResult
from agi.errors import AgiError
from agi.frontends.serve import openai
from agi.frontends.serve.requests import Refused, RunRequest, parse_run
from agi.frontends.serve.runner import Job, Shared, refused

END = object()  # a run's thread is done


def error(e: Refused) -> JSONResponse:
    """OpenAI's error shape, with agi's one line."""
    body = {"error": {"message": f"agi: {e}", "type": e.kind, "code": e.code, "param": None}}
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
        self.ready = threading.Event()

    def authorised(self, request: Request) -> bool:
        if self.token is None:
            return True
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        expected = self.token.encode()
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), expected)

    async def loaded(self) -> Any:
        if not self.ready.is_set():
            await asyncio.get_running_loop().run_in_executor(None, self.ready.wait)
        if self.shared.loaded is None:
            raise Refused("the server's options could not be loaded", 503, "unavailable")
        return self.shared.loaded

    async def body(self, request: Request) -> Any:
        try:
            return json.loads(await request.body() or b"null")
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
        job.cancel()
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


def build(server: Server) -> Starlette:
    """The application serving `server`'s routes."""

    def endpoint(
        handler: Callable[[Request], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            if not server.authorised(request):
                return error(
                    Refused(
                        "a bearer token is required (Authorization: Bearer TOKEN)",
                        status=401,
                        code="invalid_api_key",
                    )
                )
            try:
                return await handler(request)
            except Refused as e:
                return error(e)
            except AgiError as e:
                return error(refused(e))

        return guarded

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok" if server.ready.is_set() else "starting"})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(
            server.shared.metrics.text(), media_type="text/plain; version=0.0.4"
        )

    async def models(request: Request) -> Response:
        loaded = await server.loaded()
        return JSONResponse(openai.models(loaded.profiles))

    async def runs(request: Request) -> Response:
        run = await server.request_of(await server.body(request))
        if run.background:
            return JSONResponse(await start_background(run))
        if not run.stream:
            result = await server.run_whole(run, request)
            return JSONResponse(result.to_json())
        items = await server.run_stream(run)

        async def frames() -> AsyncIterator[bytes]:
            async for item in items:
                if isinstance(item, RunResult):
                    yield sse("result", {"type": "result", **item.to_json()})
                else:
                    yield sse(item.type, item.to_json())

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def start_background(run: RunRequest) -> dict[str, Any]:
        async def body() -> None:
            try:
                async with AsyncExitStack() as stack:
                    await server.hold(stack, run)
                    job, opened = await server.opened(run, lambda event: None)
                    entry.job = job
                    entry.result = await server.until_result(job, opened, None)
                    entry.status = "done"
            except asyncio.CancelledError:
                entry.status = "cancelled"
            except Refused as e:
                entry.result = RunResult.failed(e)
                entry.status = "done"

        entry = Background(Job(run, server.shared, lambda event: None))
        server.background[entry.id] = entry
        entry.task = asyncio.ensure_future(body())
        return {"id": entry.id, "status": entry.status}

    async def run_state(request: Request) -> Response:
        entry = server.background.get(request.path_params["id"])
        if entry is None:
            raise Refused(f"no run {request.path_params['id']!r}", status=404, code="not_found")
        if request.method == "DELETE" and entry.status == "running":
            assert entry.task is not None
            entry.task.cancel()
            try:
                await entry.task
            except asyncio.CancelledError:
                pass
            entry.status = "cancelled"
            return JSONResponse({"id": entry.id, "status": entry.status})
        return JSONResponse(entry.view())

    async def fields_of(request: Request, shape: Callable[..., dict[str, Any]]) -> tuple[Any, Any]:
        body = await server.body(request)
        if not isinstance(body, dict):
            raise Refused("the request body must be a JSON object")
        loaded = await server.loaded()
        fields = shape(body, loaded.profiles)
        return body, await server.request_of(fields)

    async def chat(request: Request) -> Response:
        body, run = await fields_of(request, openai.chat_request)
        reply = openai.Chat(str(body.get("model") or openai.DEFAULT_MODEL))
        if not run.stream:
            return JSONResponse(reply.whole(await server.run_whole(run, request)))
        items = await server.run_stream(run)
        options = body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))

        async def frames() -> AsyncIterator[bytes]:
            yield sse(None, reply.chunk({"role": "assistant", "content": ""}))
            async for item in items:
                if isinstance(item, TextEvent) and item.text:
                    yield sse(None, reply.chunk({"content": item.text}))
                elif isinstance(item, RunResult):
                    if item.answer is not None and not isinstance(item.answer, str):
                        yield sse(None, reply.chunk({"content": openai.answer_text(item)}))
                    yield sse(None, reply.chunk({}, openai.finish(item)))
                    if usage:
                        yield sse(None, reply.usage_chunk(item))
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def responses(request: Request) -> Response:
        body, run = await fields_of(request, openai.responses_request)
        reply = openai.Response(str(body.get("model") or openai.DEFAULT_MODEL))
        if not run.stream:
            return JSONResponse(reply.whole(await server.run_whole(run, request)))
        items = await server.run_stream(run)

        async def frames() -> AsyncIterator[bytes]:
            for kind, data in reply.opening():
                yield sse(kind, data)
            async for item in items:
                if isinstance(item, TextEvent) and item.text:
                    yield sse(*reply.delta(item.text))
                elif isinstance(item, RunResult):
                    for kind, data in reply.closing(item):
                        yield sse(kind, data)

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def unknown(request: Request) -> Response:
        raise Refused(f"no route {request.method} {request.url.path}", status=404, code="not_found")

    routes = [
        Route("/healthz", endpoint(healthz), methods=["GET"]),
        Route("/metrics", endpoint(metrics), methods=["GET"]),
        Route("/v1/models", endpoint(models), methods=["GET"]),
        Route("/v1/runs", endpoint(runs), methods=["POST"]),
        Route("/v1/runs/{id}", endpoint(run_state), methods=["GET", "DELETE"]),
        Route("/v1/chat/completions", endpoint(chat), methods=["POST"]),
        Route("/v1/responses", endpoint(responses), methods=["POST"]),
        Route("/{rest:path}", endpoint(unknown), methods=["GET", "POST", "DELETE", "PUT"]),
    ]
    return Starlette(routes=routes)
