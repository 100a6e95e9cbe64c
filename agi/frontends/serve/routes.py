"""`agi --serve`'s routes (docs: serve): each behind the bearer check, every refusal in OpenAI's
error shape; the runs API, background runs, and the OpenAI-compatible front."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from agi.api.events import TextEvent
from agi.engine.result import RunResult
from agi.errors import AgiError
from agi.frontends.serve import openai
from agi.frontends.serve.app import Background, Server, error, sse
from agi.frontends.serve.early import NO_TOKEN
from agi.frontends.serve.requests import Refused, RunRequest, confined
from agi.frontends.serve.runner import Job, refused

Handler = Callable[[Request], Awaitable[Response]]


def build(server: Server) -> Starlette:
    """The application serving `server`'s routes."""
    r = Routes(server)
    routes = [
        Route("/healthz", r.guard(r.healthz), methods=["GET"]),
        Route("/metrics", r.guard(r.metrics), methods=["GET"]),
        Route("/v1/models", r.guard(r.models), methods=["GET"]),
        Route("/v1/runs", r.guard(r.runs), methods=["POST"]),
        Route("/v1/runs/{id}", r.guard(r.run_state), methods=["GET", "DELETE"]),
        Route("/v1/chat/completions", r.guard(r.chat), methods=["POST"]),
        Route("/v1/responses", r.guard(r.responses), methods=["POST"]),
        Route("/{rest:path}", r.guard(r.unknown), methods=["GET", "POST", "DELETE", "PUT"]),
    ]
    return Starlette(routes=routes)


class Routes:
    def __init__(self, server: Server):
        self.server = server

    def guard(self, handler: Handler) -> Handler:
        """`handler` behind the token; a refusal (agi's one line) as OpenAI's error."""

        async def guarded(request: Request) -> Response:
            if not self.server.authorised(request):
                return error(Refused(NO_TOKEN, status=401, code="invalid_api_key"))
            try:
                return await handler(request)
            except Refused as e:
                return error(e)
            except AgiError as e:
                return error(refused(e))

        return guarded

    async def healthz(self, request: Request) -> Response:
        return JSONResponse({"status": "ok" if self.server.ready.is_set() else "starting"})

    async def metrics(self, request: Request) -> Response:
        text = self.server.shared.metrics.text()
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def models(self, request: Request) -> Response:
        loaded = await self.server.loaded()
        return JSONResponse(openai.models(loaded.profiles))

    async def unknown(self, request: Request) -> Response:
        raise Refused(f"no route {request.method} {request.url.path}", status=404, code="not_found")

    async def runs(self, request: Request) -> Response:
        """`POST /v1/runs`: the RunResult, its events as SSE, or a background run's id."""
        run = await self.server.request_of(await self.server.body(request))
        confined(run)  # a client's file fields; a profile's are the operator's
        if run.background:
            return JSONResponse(self.background(run))
        if not run.stream:
            return JSONResponse((await self.server.run_whole(run, request)).to_json())
        items = await self.server.run_stream(run)

        async def frames() -> AsyncIterator[bytes]:
            async for item in items:
                if isinstance(item, RunResult):
                    yield sse("result", {"type": "result", **item.to_json()})
                else:
                    yield sse(item.type, item.to_json())

        return StreamingResponse(frames(), media_type="text/event-stream")

    def background(self, run: RunRequest) -> dict[str, Any]:
        """A run started now, its answer asked for later (`GET /v1/runs/ID`)."""
        server = self.server
        entry = Background(Job(run, server.shared, lambda event: None))

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
            finally:
                server.ended(entry)

        server.background[entry.id] = entry
        entry.task = asyncio.ensure_future(body())
        return {"id": entry.id, "status": entry.status}

    async def run_state(self, request: Request) -> Response:
        """`GET /v1/runs/ID` (its state and result) and `DELETE /v1/runs/ID` (cancel it)."""
        entry = self.server.background.get(request.path_params["id"])
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

    async def fields_of(self, request: Request, shape: Callable[..., Any]) -> tuple[Any, Any]:
        body = await self.server.body(request)
        if not isinstance(body, dict):
            raise Refused("the request body must be a JSON object")
        loaded = await self.server.loaded()
        return body, await self.server.request_of(shape(body, loaded.profiles))

    async def chat(self, request: Request) -> Response:
        """`POST /v1/chat/completions`, as OpenAI answers it (chunks when streaming)."""
        body, run = await self.fields_of(request, openai.chat_request)
        reply = openai.Chat(str(body.get("model") or openai.DEFAULT_MODEL))
        if not run.stream:
            return JSONResponse(reply.whole(await self.server.run_whole(run, request)))
        items = await self.server.run_stream(run)
        options = body.get("stream_options")
        usage = isinstance(options, dict) and bool(options.get("include_usage"))

        async def frames() -> AsyncIterator[bytes]:
            yield sse(None, reply.chunk({"role": "assistant", "content": ""}))
            async for item in items:
                if isinstance(item, TextEvent) and item.text and run.schema is None:
                    yield sse(None, reply.chunk({"content": item.text}))
                elif isinstance(item, RunResult):
                    if run.schema is not None:  # the answer checked, in one piece
                        yield sse(None, reply.chunk({"content": openai.answer_text(item)}))
                    yield sse(None, reply.chunk({}, openai.finish(item)))
                    if usage:
                        yield sse(None, reply.usage_chunk(item))
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def responses(self, request: Request) -> Response:
        """`POST /v1/responses`, as OpenAI answers it (its stream's events when streaming)."""
        body, run = await self.fields_of(request, openai.responses_request)
        reply = openai.Response(str(body.get("model") or openai.DEFAULT_MODEL))
        if not run.stream:
            return JSONResponse(reply.whole(await self.server.run_whole(run, request)))
        items = await self.server.run_stream(run)

        async def frames() -> AsyncIterator[bytes]:
            for kind, data in reply.opening():
                yield sse(kind, data)
            async for item in items:
                if isinstance(item, TextEvent) and item.text and run.schema is None:
                    yield sse(*reply.delta(item.text))
                elif isinstance(item, RunResult):
                    if run.schema is not None:  # the answer checked, in one piece
                        yield sse(*reply.delta(openai.answer_text(item)))
                    for kind, data in reply.closing(item):
                        yield sse(kind, data)

        return StreamingResponse(frames(), media_type="text/event-stream")
