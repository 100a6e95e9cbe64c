"""One Neovim request, run on a worker thread: settings, a session under `$AGI_HOME/nvim`, the
agent (a single model call unless tools are on), and the lines that replace the range."""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from typing import Any, Protocol

from agi import __version__
from agi.config import agi_home
from agi.errors import AgiError
from agi.messages import Reply
from agi.nvim.edit import fence_for, result_lines
from agi.prompts import HERE as PROMPTS
from agi.session import Session, new_session_id


class Job(Protocol):
    """What the engine needs of the request it serves (agi.nvim.plugin.Job)."""

    request: dict[str, Any]

    def started(self, log: str) -> None: ...
    def attach(self, transport: Any) -> None: ...
    def check(self) -> None: ...
    def progress(self, event: Any) -> None: ...
    def notice(self, text: str) -> None: ...


def flags(options: dict[str, Any]) -> dict[str, Any]:
    """setup() options as the command line's flags: they win over the config file and env."""
    out: dict[str, Any] = {}
    for key in ("model", "base_url"):
        if options.get(key):
            out[key] = options[key]
    if options.get("sys"):
        out["sys"] = list(options["sys"])
    tools = options.get("tools")
    if tools is False or tools is None:
        out["no_tools"] = True
    elif isinstance(tools, list):
        out["tools"] = tools
    return out


def render_prompt(request: dict[str, Any]) -> str:
    """refactor.md or implement.md, filled with the file's name, type, range and context."""
    kind = "implement" if request.get("kind") == "implement" else "refactor"
    template = (PROMPTS / f"{kind}.md").read_text(encoding="utf-8")
    before = "\n".join(request.get("before") or [])
    selection = "\n".join(request.get("lines") or [])
    after = "\n".join(request.get("after") or [])
    instruction = str(request.get("instruction") or "").strip()
    if kind == "implement" and instruction:
        instruction = f"\n\nAlso: {instruction}"
    first = int(request.get("first") or 1)
    return template.format(
        filetype=request.get("filetype") or "text",
        filename=request.get("filename") or "[No Name]",
        first=first,
        last=first + max(0, len(request.get("lines") or []) - 1),
        instruction=instruction,
        fence=fence_for("\n".join((before, selection, after))),
        before=before,
        selection=selection,
        after=after,
    ).strip()


def run_request(job: Job) -> list[str]:
    """Run the request to the lines that replace its range; its session keeps the trace."""
    session = Session.open(agi_home() / "nvim" / new_session_id())
    job.started(str(session.trace_file))
    session.lock()
    try:
        return _run(job, session)
    except BaseException as e:
        record = {"type": "error", "exit_code": getattr(e, "exit_code", 1)}
        record["error"] = str(e) or type(e).__name__
        if not isinstance(e, AgiError):
            import traceback

            record["traceback"] = traceback.format_exc()
        session.trace(record)
        raise
    finally:
        session.write_meta()
        session.unlock()


def _run(job: Job, session: Session) -> list[str]:
    from agi.run import Settings

    request = job.request
    settings = Settings.load(flags(request.get("options") or {}))
    if settings.model.api_key:
        session.secrets = [s for s in [settings.model.api_key] if len(s) >= 4]
    described = {
        k: request.get(k) for k in ("kind", "filename", "filetype", "first", "instruction")
    }
    session.trace(
        {
            "type": "run",
            "agi": __version__,
            "model": settings.model.label,
            "base_url": settings.model.base_url,
            "cwd": request.get("cwd") or os.getcwd(),
            "pid": os.getpid(),
            "system": settings.system,
            "tools": [t.name for t in settings.tools],
            "nvim": described,
        }
    )
    session.write_meta(model=settings.model.label, nvim=described)
    for warning in settings.warnings:
        job.notice(warning)
    reply = _ask(job, session, settings, render_prompt(request))
    lines = result_lines(request, reply.text)
    session.trace({"type": "nvim_result", "lines": lines})
    return lines


def _ask(job: Job, session: Session, settings: Any, prompt: str) -> Reply:
    """One agent run: with no tools it is a single model call."""
    from agi.agent import Agent
    from agi.tools import Toolbox, ToolContext
    from agi.transport import Transport

    deadline = time.monotonic() + settings.timeout if settings.timeout else None
    transport = Transport(
        settings.model, trace=session.trace, deadline=deadline, timeout=settings.timeout
    )
    job.attach(transport)
    lifecycle = None
    if settings.hooks:  # the user's guards (PreToolUse, Stop, ...) hold in Neovim too
        from agi.lifecycle import Lifecycle

        lifecycle = Lifecycle(settings.hooks, session, job.notice)
        context = lifecycle.session_start("startup", settings.model.label)
        prompt = f"{prompt}\n\n{context}" if context else prompt
    ctx = ToolContext(
        cwd=job.request.get("cwd") or os.getcwd(), deadline=deadline, sandbox=settings.sandbox
    )
    agent = Agent(
        transport,
        Toolbox(settings.tools, ctx, lifecycle),
        session,
        settings.system,
        settings.max_steps,
        lifecycle,
    )
    events = agent.run(prompt)
    try:
        return _drive(job, events)
    except BaseException:
        agent.salvage()
        raise
    finally:
        events.close()
        transport.close()
        if lifecycle is not None:
            try:
                lifecycle.session_end("other")
            except AgiError as e:
                job.notice(str(e))


def _drive(job: Job, events: Generator[Any, None, Reply]) -> Reply:
    while True:
        job.check()
        try:
            event = next(events)
        except StopIteration as done:
            return done.value
        job.progress(event)
