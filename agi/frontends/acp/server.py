"""The ACP agent: the protocol's methods over agi's sessions (docs: acp). The
`acp` library carries the JSON-RPC; a failure is a JSON-RPC error whose message is agi's one
line, and the session stays usable."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any, cast

from agi import __version__
from agi.errors import AgiError, UsageError
from agi.frontends.acp import text as front
from agi.frontends.acp.permissions import MODES, bound_mode, listed, modes_state, reported
from agi.frontends.acp.replay import replay
from agi.frontends.acp.turn import open_run
from agi.options.config import NoModel, config_path, load_file
from agi.options.settings import Settings
from agi.options.values import Options, env_layer, file_layer, overlay, resolve
from agi.providers.endpoint import configured_providers, require_configured
from agi.sessions.session import SessionIndex
from agi.tools.mcp_config import McpSource

SOURCE = "ACP session"  # the layer of a session's own options
NOT_FOUND = -32002  # ACP's "resource not found": an unknown session
INVALID = -32602
NONE = Options(model="openai:none")  # the settings' model while none is configured
FAILED = -32603  # agi's own failures (exit 3-6): the message is agi's one line


def error(code: int, message: str) -> Exception:
    from acp import RequestError

    return RequestError(code, message)


class Server:
    """Everything `agi --acp` serves: the options of the command line, the client's
    capabilities, and the sessions by id."""

    def __init__(self, args: argparse.Namespace, flags: Any):
        self.args, self.flags = args, flags
        self.verbose = bool(args.verbose)
        self.sessions: dict[str, Any] = {}
        self.loop: Any = None
        self.conn: Any = None
        self.fs = (False, False)  # the client reads / writes text files for us
        self.mode = "default"
        self.home = Path()
        self.operator: Any = None  # the model of the server's own options (check)
        self.configured: set[str] = set()  # the providers they configure
        self.missing = ""  # no model configured: the one line each new session answers
        self.attach_limit: int | None = None  # bytes of a prompt's file (docs: attachments)

    # --- settings and runs -------------------------------------------------------------------

    def check(self) -> None:
        try:
            settings = self.settings_for(None)
        except NoModel as e:  # served all the same: each session/new says so (docs: acp)
            self.missing = str(e)
            settings = Settings.load(self.flags, defaults=NONE, anchor=os.getcwd())
        for warning in settings.check_rules():  # a misspelled rule: exit 2 now (docs: permissions)
            sys.stderr.write(f"agi: {warning}\n")
        self.home = settings.home
        self.attach_limit = resolve(list(settings.layers)).options.attach_limit
        self.operator = settings.model  # a session's model: on a provider the operator configured
        self.configured = configured_providers(self.flags)
        mode = settings.permissions.mode if settings.permissions is not None else "default"
        self.mode = mode  # dontAsk too: kept, shown as the nearest ACP mode (docs: acp)

    def settings_for(self, model: str | None, cwd: str | None = None) -> Any:
        """A session's settings: the command line's layer, then the session's own (its model;
        the sandbox's workspace, its directory, when no directory is named)."""
        layers = [self.flags]
        if model:
            layers.append(overlay(SOURCE, {"model": f"{SOURCE}: model"}, model=model))
        if cwd is not None and self.workspace_unnamed():
            layers.append(overlay(SOURCE, allow_write=[cwd]))
        settings = Settings.load(*layers, anchor=os.getcwd())  # rules where given (docs: security)
        if model:  # never a provider the operator did not configure (docs: security)
            require_configured(settings.model, self.operator, self.configured, f"{SOURCE}: model")
        return settings

    def workspace_unnamed(self) -> bool:
        """Whether the sandbox is `workspace` with no --allow-write (nor the config file's or
        the environment's) naming its directories."""
        path = config_path()
        layers = [file_layer(load_file(path), path), env_layer(), self.flags]
        options = resolve(layers).options
        return options.sandbox == "workspace" and options.allow_write is None

    def make_run(
        self, settings: Any, view: Any, session: Any, meter: Any = None, saved: int = 0
    ) -> Any:
        return open_run(settings, view, editor=session, meter=meter, saved=saved)

    def models(self, current: str) -> list[dict[str, str]]:
        """The model select: the session's model and every model the config file names."""
        try:
            data = load_file(config_path())
        except AgiError:
            data = {}
        names = [current]
        for table in ("models", "prices"):
            for name in data.get(table) or {}:
                label = name if ":" in name else f"{current.partition(':')[0]}:{name}"
                if label not in names:
                    names.append(label)
        return [{"value": n, "name": n} for n in names]

    def config_options(self, session: Any) -> list[dict[str, Any]]:
        current = session.model or session.label
        return [
            {
                "id": "model",
                "name": "Model",
                "category": "model",
                "type": "select",
                "currentValue": current,
                "options": self.models(current),
            },
            {
                "id": "mode",
                "name": "Permission mode",
                "category": "mode",
                "type": "select",
                "currentValue": reported(session.mode),
                "options": [
                    {"value": m, "name": n, "description": d} for m, n, d in listed(session.mode)
                ],
            },
        ]

    def commands(self, settings: Any) -> list[dict[str, Any]]:
        out = [
            {
                "name": "compact",
                "description": "compact the conversation now (words after it: what to keep)",
                "input": {"hint": "what the summary keeps"},
            }
        ]
        for command in sorted(settings.commands, key=lambda c: c.name):
            entry: dict[str, Any] = {"name": command.name, "description": command.summary() or "-"}
            out.append(entry)
        return out

    # --- the protocol ------------------------------------------------------------------------

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        for session in self.sessions.values():  # answered before the library served
            session.bridge.attach(self.loop, conn)
            self.loop.call_soon(self._later, self._send_commands(session))

    def new_session_now(self, number: Any, params: Any) -> dict[str, Any] | None:
        """`session/new` answered before the library is loaded (stdio.answer_early): the
        reply the library would write, or None for a request it should answer (anything but
        a directory and no MCP servers, or no model configured)."""
        if not isinstance(params, dict) or set(params) != {"cwd", "mcpServers"}:
            return None
        cwd = params["cwd"]
        if params["mcpServers"] != [] or self.missing or not isinstance(cwd, str):
            return None
        if not os.path.isabs(cwd) or not os.path.isdir(cwd):
            return None
        # lazy: agi.frontends.acp.session loads asyncio
        from agi.frontends.acp.session import EditorSession

        path = SessionIndex(self.home).default_path().resolve()
        session = EditorSession(self, path, cwd, [], loaded=False)
        try:
            session.build()
        except AgiError as e:  # the library's RequestError, as it writes it
            failed = {"code": FAILED, "message": str(e), "data": None}
            return {"jsonrpc": "2.0", "id": number, "error": failed}
        self.sessions[session.id] = session
        front.log(self.verbose, f"session {session.id} in {cwd} (before the library loaded)")
        return {"jsonrpc": "2.0", "id": number, "result": self.new_result(session)}

    def new_result(self, session: Any) -> dict[str, Any]:
        """session/new's result (JSON) for `session`."""
        response = {"sessionId": session.id, "modes": modes_state(session.mode)}
        response["configOptions"] = self.config_options(session)
        return response

    def initialized(self, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to `initialize` (JSON): agi's capabilities; the client's are kept."""
        fs = (params.get("clientCapabilities") or {}).get("fs") or {}
        self.fs = (fs.get("readTextFile") is True, fs.get("writeTextFile") is True)
        return {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"embeddedContext": True, "image": True},
                "mcpCapabilities": {"http": True, "sse": True},
                "sessionCapabilities": {"list": {}},
            },
            "agentInfo": {"name": "agi", "title": "agi", "version": __version__},
            "authMethods": [],
        }

    async def initialize(self, protocol_version: int, **params: Any) -> Any:
        from acp.schema import InitializeResponse

        caps = params.get("client_capabilities")
        given = {"clientCapabilities": caps.model_dump(by_alias=True) if caps else {}}
        return InitializeResponse.model_validate(self.initialized(given))

    async def authenticate(self, method_id: str, **_: Any) -> Any:
        return None

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any) -> Any:
        from acp.schema import NewSessionResponse

        cwd = self._cwd(cwd)
        if self.missing:
            raise error(FAILED, self.missing)
        path = SessionIndex(self.home).default_path().resolve()
        session = await self._open(path, cwd, mcp_servers, loaded=False)
        asyncio.get_running_loop().call_soon(self._later, self._send_commands(session))
        return NewSessionResponse.model_validate(self.new_result(session))

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any
    ) -> Any:
        from acp.schema import LoadSessionResponse

        try:
            path = front.known_session(session_id)
        except UsageError as e:
            raise error(NOT_FOUND, str(e)) from None
        old = self.sessions.get(str(path))
        if old is not None and old.busy:
            raise error(INVALID, f"session {session_id} is busy: its turn is still running")
        if self.missing:
            raise error(FAILED, self.missing)
        session = await self._open(path, self._cwd(cwd), mcp_servers, loaded=True)
        for update in replay(session.run.session, session.cwd):
            await self.conn.session_update(session_id=session.id, update=update)
        asyncio.get_running_loop().call_soon(self._later, self._send_commands(session))
        response = {
            "modes": modes_state(session.mode),
            "configOptions": self.config_options(session),
        }
        return LoadSessionResponse.model_validate(response)

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> Any:
        from acp.schema import ListSessionsResponse

        found = await asyncio.to_thread(front.list_sessions, self.home, cwd)
        return ListSessionsResponse.model_validate({"sessions": found})

    async def set_session_mode(self, mode_id: str, session_id: str, **_: Any) -> Any:
        session = self._session(session_id)
        if mode_id not in MODES:
            raise error(INVALID, f"unknown mode {mode_id!r} (one of {', '.join(MODES)})")
        try:
            session.set_mode(bound_mode(self.mode, mode_id))  # the server's option binds
        except UsageError as e:
            raise error(INVALID, str(e)) from None
        await self.conn.session_update(
            session_id=session.id,
            update={"sessionUpdate": "current_mode_update", "currentModeId": mode_id},
        )
        return None

    async def set_config_option(self, config_id: str, session_id: str, value: Any, **_: Any) -> Any:
        from acp.schema import SetSessionConfigOptionResponse

        session = self._session(session_id)
        if config_id == "mode":
            await self.set_session_mode(str(value), session_id)
        elif config_id == "model":
            known = [m["value"] for m in self.models(session.model or session.label)]
            if not isinstance(value, str) or not value.strip():
                raise error(INVALID, f"bad model {value!r}")
            if value not in known and ":" not in value:
                raise error(INVALID, f"unknown model {value!r} (one of {', '.join(known)})")
            try:
                await asyncio.to_thread(self.settings_for, value)  # resolves, or says why
            except AgiError as e:
                raise error(INVALID, str(e)) from None
            session.set_model(value)
        else:
            raise error(INVALID, f"unknown config option {config_id!r} (model, mode)")
        return SetSessionConfigOptionResponse.model_validate(
            {"configOptions": self.config_options(session)}
        )

    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> Any:
        from acp.schema import PromptResponse

        # lazy: agi.frontends.acp.session loads asyncio
        from agi.frontends.acp.session import Failed

        session = self._session(session_id)
        if session.busy:
            raise error(INVALID, f"session {session_id} is busy: its turn is still running")
        try:
            text = front.prompt_text(prompt, self.attach_limit)
        except AgiError as e:  # a file agi cannot send (docs: attachments)
            raise error(INVALID, str(e)) from None
        if not text.strip():
            raise error(INVALID, "empty prompt: send a text block")
        try:
            stop = await session.prompt(text)
        except Failed as e:
            raise error(FAILED, str(e)) from None
        return PromptResponse.model_validate({"stopReason": stop})

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise error(-32601, f"method not found: _{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # --- helpers -----------------------------------------------------------------------------

    def _cwd(self, cwd: str) -> str:
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
            raise error(INVALID, f"cwd must be an absolute path of a directory, not {cwd!r}")
        return cwd

    def _session(self, session_id: str) -> Any:
        session = self.sessions.get(session_id)
        if session is None:
            raise error(NOT_FOUND, f"unknown session {session_id!r}: create or load it first")
        return session

    async def _open(self, path: Path, cwd: str, mcp_servers: Any, loaded: bool) -> Any:
        # lazy: agi.frontends.acp.session loads asyncio
        from agi.frontends.acp.session import EditorSession

        old = self.sessions.get(str(path))
        carried = old.run if old is not None else None  # its budget goes on
        session = EditorSession(self, path, cwd, mcp_sources(mcp_servers), loaded, carried)
        try:
            await asyncio.to_thread(session.build)
        except AgiError as e:
            raise error(FAILED, str(e)) from None
        if old is not None:
            await asyncio.to_thread(old.finish)
        self.sessions[session.id] = session
        front.log(self.verbose, f"session {session.id} in {cwd}")
        return session

    def _later(self, coroutine: Any) -> None:
        asyncio.ensure_future(coroutine)

    async def _send_commands(self, session: Any) -> None:
        update: dict[str, Any] = {"sessionUpdate": "available_commands_update"}
        update["availableCommands"] = self.commands(session.run.settings)
        try:
            await self.conn.session_update(session_id=session.id, update=update)
        except Exception:
            pass

    async def main(self, unread: bytes = b"") -> None:
        from acp import run_agent

        # lazy: agi.frontends.acp.stdio loads asyncio
        from agi.frontends.acp.stdio import streams

        if not self.verbose:  # the library logs failures (tracebacks) to stderr: -v shows them
            import logging

            logging.getLogger().addHandler(logging.NullHandler())
        self.loop = asyncio.get_running_loop()
        reader, writer = await streams(unread)
        try:
            # the library calls the methods of its Agent protocol by name; this server answers
            # those ACP clients use (others are "method not found"), not the whole protocol
            await run_agent(cast(Any, self), writer, reader)
        finally:
            for session in list(self.sessions.values()):
                session.close()  # the client is gone: stop every turn, drop every question

    def shutdown(self) -> None:
        """After the connection: wait briefly for the turns to end, then end what they ran."""
        deadline = time.monotonic() + 2
        for session in list(self.sessions.values()):
            if session.worker is not None:
                session.worker.join(max(0.0, deadline - time.monotonic()))
            session.finish()
        sys.stdout.flush()


def mcp_sources(servers: Any) -> list[Any]:
    """session/new's `mcpServers` as agi's MCP sources (stdio, http, sse)."""
    table: dict[str, Any] = {}
    for server in servers or []:
        data = (
            server.model_dump(by_alias=True, exclude_none=True)
            if hasattr(server, "model_dump")
            else dict(server)
        )
        name = str(data.get("name") or "")
        if "command" in data:
            env = {e["name"]: e["value"] for e in data.get("env") or []}
            table[name] = {"command": data["command"], "args": data.get("args") or [], "env": env}
        elif "url" in data:
            headers = {h["name"]: h["value"] for h in data.get("headers") or []}
            table[name] = {
                "type": data.get("type") or "http",
                "url": data["url"],
                "headers": headers,
            }
    return [McpSource(data=table)] if table else []
