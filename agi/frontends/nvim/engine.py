"""One Neovim request, run on a worker thread: settings, a session under `$AGI_HOME/nvim` (a new
one, or for :AgiRefine the one of the buffer's last request), a run opened through the engine's
door in that session (a single model call unless tools are on), and the lines that replace the
range."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agi import engine
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import AgiError
from agi.frontends.nvim.edit import fence_for, result_lines
from agi.options.config import agi_home
from agi.options.settings import Settings
from agi.options.values import ToolChoice, overlay
from agi.prompts import HERE as PROMPTS
from agi.providers.cost import Meter
from agi.sessions.session import Session, new_session_id

if TYPE_CHECKING:
    from agi.engine.seams import Event
    from agi.options.values import Layer


class Request(Protocol):
    """What the engine needs of the request it serves (agi.frontends.nvim.plugin.EditorRequest):
    its fields, where its meter and its run go (the run is what a cancel stops), its events."""

    request: dict[str, Any]
    meter: Any

    def started(self, log: str, session: str = "") -> None: ...
    def attach(self, run: Any) -> None: ...
    def check(self) -> None: ...
    def progress(self, event: Event) -> None: ...
    def notice(self, text: str) -> None: ...


def nvim_layer(options: dict[str, Any]) -> Layer:
    """setup() options as Neovim's layer: they win over the config file and the environment.
    `tools = false` (the plugin's default) offers none, whatever the config file's `tools`."""
    tools = options.get("tools")
    return overlay(
        "Neovim setup()",
        model=options.get("model") or None,
        base_url=options.get("base_url") or None,
        sys=list(options["sys"]) if options.get("sys") else None,
        react=True if options.get("react") else None,
        tools=ToolChoice(allow=tuple(tools)) if isinstance(tools, list) else
        ToolChoice(none=True) if tools is False or tools is None else None,
    )  # fmt: skip


def render_prompt(request: dict[str, Any]) -> str:
    """refactor.md or implement.md, filled with the file's name, type, range and context."""
    kind = request.get("kind") if request.get("kind") in ("implement", "fix") else "refactor"
    template = (PROMPTS / f"{kind}.md").read_text(encoding="utf-8")
    before = "\n".join(request.get("before") or [])
    selection = "\n".join(request.get("lines") or [])
    after = "\n".join(request.get("after") or [])
    instruction = str(request.get("instruction") or "").strip()
    if kind in ("implement", "fix") and instruction:
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
        diagnostics=diagnostics_text(request.get("diagnostics"), kind == "fix"),
    ).strip()


def diagnostics_text(found: Any, fixing: bool) -> str:
    """The diagnostics Neovim sent (`{severity, line, message, source}`), one a line, between
    blank lines; nothing when there are none (except for :AgiFix, which says so)."""
    lines = []
    for d in found if isinstance(found, list) else []:
        if isinstance(d, dict) and d.get("message"):
            source = f" ({d['source']})" if d.get("source") else ""
            text = " ".join(str(d["message"]).split())
            lines.append(f"- line {d.get('line')}: {d.get('severity') or 'ERROR'}: {text}{source}")
    if not lines:
        return "\nThe editor reports no diagnostics there.\n" if fixing else ""
    head = "to fix" if fixing else "in and near those lines"
    return f"\nDiagnostics the editor reports {head}:\n\n" + "\n".join(lines) + "\n"


REFINED = {
    "shown": "Your proposal has not been applied: the lines still read as before.",
    "partly": "Some of the changes you proposed were applied, the others were not.",
    "applied": "Your proposal was applied (and may have been edited since).",
    "dropped": "Your proposal was not applied.",
}


def render_refine(request: dict[str, Any]) -> str:
    """refine.md: the user's instruction about the last answer, and the lines as they are now."""
    template = (PROMPTS / "refine.md").read_text(encoding="utf-8")
    selection = "\n".join(request.get("lines") or [])
    first = int(request.get("first") or 1)
    return template.format(
        instruction=str(request.get("instruction") or "").strip(),
        state=REFINED.get(str(request.get("refine")), REFINED["dropped"]),
        filetype=request.get("filetype") or "text",
        filename=request.get("filename") or "[No Name]",
        first=first,
        last=first + max(0, len(request.get("lines") or []) - 1),
        fence=fence_for(selection),
        selection=selection,
    ).strip()


def open_session(request: dict[str, Any], secrets: list[str]) -> Session:
    """A new session under `$AGI_HOME/nvim`, or the one named by the request (:AgiRefine),
    which must be one of those; `secrets` are kept out of its files."""
    home = agi_home() / "nvim"
    given = request.get("session")
    if not given:
        return Session.open(home / new_session_id(), secrets)
    path = Path(str(given)).expanduser().resolve()
    if path.parent != home.resolve() or not (path / "meta.json").is_file():
        raise AgiError(f"cannot continue {given}: it is not a session of agi's Neovim requests")
    return Session.open(path, secrets)


def load_settings(request: dict[str, Any]) -> tuple[Settings | None, AgiError | None]:
    """The request's settings, or why there are none (the session's trace says it too)."""
    try:
        return Settings.load(nvim_layer(request.get("options") or {})), None
    except AgiError as e:
        return None, e


def run_request(job: Request) -> list[str]:
    """Run the request to the lines that replace its range; its session keeps the trace."""
    settings, failed = load_settings(job.request)
    key = settings.model.api_key if settings is not None else None
    session = open_session(job.request, [key] if key else [])
    job.started(str(session.trace_file), str(session.path))
    with session.locked():
        try:
            if settings is None:
                raise failed or AgiError("no settings")
            return _run(job, session, settings)
        except BaseException as e:
            record = {"type": "error", "exit_code": getattr(e, "exit_code", 1)}
            record["error"] = str(e) or type(e).__name__
            if not isinstance(e, AgiError):
                import traceback

                record["traceback"] = traceback.format_exc()
            session.trace(record)
            raise
        finally:
            if job.meter is not None:
                session.add_usage(job.meter.total)
            session.write_meta()


class RequestView:
    """A run's view for a Neovim request: progress to Lua, warnings as notices, and a check
    for cancellation at every event."""

    def __init__(self, job: Request):
        self.job = job

    def handle(self, event: Event) -> None:
        _progress(self.job, event)

    def warn(self, text: str) -> None:
        self.job.notice(text)

    def __getattr__(self, name: str) -> Any:  # the terminal view's other calls: nothing to show
        return lambda *args, **kwargs: None


def _run(job: Request, session: Session, settings: Settings) -> list[str]:
    """The request as a run of its own (the same settings, price checks, assembly and hooks as
    the command line's), in the session the caller holds; a cancel stops the run."""
    request = job.request
    keys = ("kind", "filename", "filetype", "first", "instruction", "refine")
    described = {k: request.get(k) for k in keys if request.get(k) is not None}
    job.meter = Meter(settings.prices, settings.max_cost)  # subagents included
    spec = RunSpec(
        settings,
        cwd=request.get("cwd") or os.getcwd(),
        view=RequestView(job),
        meter=job.meter,
        session=SessionChoice(held=session),
        record={"nvim": described},  # in the trace's run record
    )
    run = engine.open(spec)
    job.attach(run)  # a cancel that came first takes effect now
    try:
        refine = bool(request.get("refine"))
        prompt = render_refine(request) if refine else render_prompt(request)
        session.write_meta(model=settings.model.label, nvim=described)
        reply = run.turn(prompt)
    finally:
        try:
            run.end_hooks("other")
        except AgiError as e:
            job.notice(str(e))
        finally:
            run.close()
    lines = result_lines(request, reply.text)
    session.trace({"type": "nvim_result", "lines": lines})
    return lines


def _progress(job: Request, event: Event) -> None:
    job.check()
    job.progress(event)
