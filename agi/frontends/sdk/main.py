"""`agi --output-format stream-json --input-format stream-json --verbose`: the CLI protocol of
the Claude Agent SDKs (docs: claude-agent-sdk). stdin: `initialize` and the other control
requests, user messages; stdout: system/init, assistant and user messages, `result`. One run on
one session (a UUID under $AGI_HOME/sessions) over the process's life; end of input exits 0."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from agi import engine
from agi.claude.transcript import Transcript
from agi.engine.spec import RunSpec, SessionChoice
from agi.errors import AgiError, Cancelled, CostLimit, StepLimit, UsageError
from agi.frontends.sdk import flags, handshake
from agi.frontends.sdk.agents import sdk_agents
from agi.frontends.sdk.asking import SdkAsk
from agi.frontends.sdk.channel import Channel, Relay
from agi.frontends.sdk.content import prompt_of, replayed
from agi.frontends.sdk.rewinding import Rewinds
from agi.frontends.sdk.stream import SdkView, anthropic_usage, model_usage
from agi.frontends.sdk.transcripts import claude_transcript
from agi.messages import Usage
from agi.options.settings import Settings
from agi.options.values import overlay, resolve
from agi.sessions.session import SessionIndex

NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
LINE_LIMIT = 64 << 20  # bytes of one stdin line at most


class Server:
    """The protocol's state: the parsed flags, stdout, the run once opened, the inbox."""

    def __init__(self, args: flags.SdkArgs, channel: Channel, relay: Relay):
        self.args, self.channel, self.relay = args, channel, relay
        self.inbox: queue.Queue[tuple[str, Any] | None] = queue.Queue()
        self.run: Any = None
        self.view: Any = None  # SdkView once the run is open
        self.settings: Any = None  # Settings once loaded
        self.session_id = ""
        self.reads_state = os.environ.get("CLAUDE_CODE_SDK_READS_SESSION_STATE") == "1"
        self.mcp = self.mcp_file()
        self.hooks: Path | None = None
        self.agents: list[Any] = []  # initialize's agents (AgentFile)
        self.mode = flags.mode_of(args.sdk.permission_mode or "default")
        self.turn_running = threading.Event()
        self.transcript: Transcript | None = None
        self.spent = Usage()  # the session's model calls before this process (meta.json)
        self.rewinds: Rewinds | None = None  # once the run is open

    # opening

    def mcp_file(self) -> Path | None:
        """--mcp-config's servers, the SDK's in-process ones (`"type": "sdk"`) as relays."""
        servers = flags.mcp_servers(self.args.sdk.mcp_config)
        if not servers:
            return None
        for name, server in list(servers.items()):
            if isinstance(server, dict) and server.get("type") == "sdk":
                command = self.relay.command("mcp", name)
                servers[name] = {"command": command[0], "args": command[1:]}
        path = self.args.temp / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
        return path

    def hooks_file(self, config: Any) -> Path | None:
        """The hooks `initialize` names, as command hooks that relay to the SDK's callbacks;
        an event agi does not run is refused (never a hook silently left out)."""
        # lazy: only a run with hooks loads them (docs: development)
        from agi.claude.hooks.settings import EVENTS

        if not isinstance(config, dict) or not config:
            return None
        table: dict[str, list[dict[str, Any]]] = {}
        for event, matchers in config.items():
            if event not in EVENTS:
                raise UsageError(f"initialize: agi does not run {event} hooks")
            for m in matchers or []:
                timeout = m.get("timeout") or 60
                entries = [
                    {
                        "type": "command",
                        "command": shlex.join(self.relay.command("hook", cid)),
                        "timeout": timeout,
                    }  # fmt: skip
                    for cid in m.get("hookCallbackIds") or []
                ]
                group: dict[str, Any] = {"hooks": entries}
                if m.get("matcher"):
                    group["matcher"] = m["matcher"]
                table.setdefault(event, []).append(group)
        path = self.args.temp / "hooks.json"
        path.write_text(json.dumps({"hooks": table}), encoding="utf-8")
        return path

    def load(self) -> Settings:
        """The settings; under --strict-mcp-config no MCP server but --mcp-config's (none of
        agi's mcp.json, plugins or settings files)."""
        mcp = None if self.strict else self.mcp  # strict: RunSpec's mcp instead (`added`)
        settings = Settings.load(*flags.layers(self.args, self.hooks, mcp))
        return settings.with_agents(self.agents)

    @property
    def strict(self) -> bool:
        return bool(self.args.sdk.strict_mcp_config)

    def added_mcp(self) -> tuple[Path, ...]:
        return (self.mcp,) if self.strict and self.mcp is not None else ()

    def session_choice(self, home: Path) -> Any:
        """The session: --resume ID, --session-id ID, --continue, --fork-session; a new UUID."""
        s = self.args.sdk
        sessions = home / "sessions"
        for flag, value in (("--resume", s.resume), ("--session-id", s.session_id)):
            if value is not None and not NAME.match(value):
                raise UsageError(f"{flag} {value!r}: not a session id")
        old: Path | None = None
        if s.resume:
            old = sessions / s.resume
            if not (old / "messages.jsonl").is_file():
                raise UsageError(f"--resume {s.resume}: no conversation found with that id")
        elif s.cont:
            old = SessionIndex(home).latest()
            if old is None:
                raise UsageError("--continue: no session to continue: none has been used yet")
        if old is not None and not s.fork_session:
            return SessionChoice(path=old)
        new = s.session_id or str(uuid.uuid4())
        if (sessions / new / "messages.jsonl").is_file():
            raise UsageError(f"--session-id {new}: that session is already in use")
        return SessionChoice(path=sessions / new, fork=old)

    def fallback(self, settings: Settings, given: bool = True) -> Any:
        """--fallback-model's model (agi.providers.transport.Fallback), None without it or when
        set_model chose it (`given` False: not an error then)."""
        name = self.args.sdk.fallback_model
        if not name:
            return None
        layer = overlay(flags.SOURCE, {"model": "--fallback-model"}, model=flags.model_name(name))
        model = settings.over(layer).model
        if model.label == settings.model.label:
            if not given:
                return None
            raise UsageError(f"--fallback-model {name}: the same as the main model")
        return model

    def open(self) -> None:
        settings = self.settings = self.load()
        choice = self.session_choice(settings.home)
        if choice.path is not None:
            choice.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        sid = choice.path.name if choice.path is not None else ""
        self.view = SdkView(
            self.channel, sid, settings.model.label, self.args.sdk.include_partial_messages
        )
        spec = RunSpec(
            settings,
            view=self.view,
            ask=SdkAsk(self),
            mode=self.mode,
            default_asks=True,  # Claude Code's default mode: changes are put to the SDK
            interactive=True,
            roots=self.args.roots,
            fallback=self.fallback(settings),
            strict_mcp=self.strict,
            mcp=self.added_mcp(),
            session=choice,
            record={"front_end": "claude-agent-sdk"},
        )
        self.run = engine.open(spec)
        self.session_id = self.run.session.path.name
        self.spent = Usage.from_dict(self.run.session.meta.get("usage"))  # before this process
        self.rewinds = Rewinds(self.run.session, settings.home)
        self.view.session_id = self.session_id
        if not settings.ephemeral:  # where the SDKs' list_sessions() reads (docs)
            self.transcript = claude_transcript(self.run.session, os.getcwd())

    # the protocol

    def state(self, state: str) -> None:
        if self.reads_state:
            self.channel.send({"type": "system", "subtype": "session_state_changed",
                               "state": state, "session_id": self.session_id,
                               "uuid": str(uuid.uuid4()), "sdk_host_only": True})  # fmt: skip

    def initialized(self) -> dict[str, Any]:
        return handshake.initialized(self.settings, self.mode)

    def init_message(self) -> dict[str, Any]:
        servers = json.loads(self.mcp.read_text()).get("mcpServers", {}) if self.mcp else {}
        tools = list(self.run.agent.toolbox.tools)
        return handshake.init_message(self.settings, self.mode, self.session_id, tools, [*servers])

    def control(self, message: dict[str, Any]) -> None:
        """A control request from the SDK, answered at once (from the reader's thread), but
        `initialize`, `set_model` and `rewind_files`, which the main thread takes in order."""
        request_id = str(message.get("request_id"))
        body = message.get("request") or {}
        subtype = body.get("subtype")
        if subtype in ("initialize", "set_model", "rewind_files"):
            self.inbox.put((subtype, message))
            return
        try:
            if subtype == "interrupt":
                if self.run is not None and self.turn_running.is_set():
                    self.run.interrupt()
                self.channel.answer(request_id, {})
            elif subtype == "set_permission_mode":
                mode = flags.mode_of(str(body.get("mode")))
                if self.run is not None:
                    self.run.set_mode(mode)
                self.mode = mode
                self.channel.answer(request_id, {"mode": mode})
            elif subtype == "mcp_status":
                servers = json.loads(self.mcp.read_text()).get("mcpServers", {}) if self.mcp else {}
                status = [{"name": n, "status": "connected"} for n in servers]
                self.channel.answer(request_id, {"mcpServers": status})
            elif subtype == "get_context_usage":
                usage = self.run.meter.total if self.run is not None else None
                self.channel.answer(request_id, {"usage": anthropic_usage(usage)})
            else:
                self.channel.answer(request_id, None, f"agi does not support {subtype!r}")
        except (AgiError, ValueError) as e:
            self.channel.answer(request_id, None, str(e))

    def read(self) -> None:
        """stdin, line by line, on its own thread; its end is queued as None."""
        stdin = sys.stdin.buffer
        try:
            while True:
                line = stdin.readline(LINE_LIMIT)
                if not line:
                    break
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    sys.stderr.write("agi: stdin: a line that is not JSON was skipped\n")
                    continue
                kind = message.get("type") if isinstance(message, dict) else None
                if kind == "control_response":
                    self.channel.resolve(message.get("response") or {})
                elif kind == "control_request":
                    self.control(message)
                elif kind == "user":
                    self.inbox.put(("user", message))
        finally:
            self.channel.close()
            self.inbox.put(None)

    def serve(self) -> int:
        threading.Thread(target=self.read, name="agi-sdk-stdin", daemon=True).start()
        try:
            while True:
                item = self.inbox.get()
                if item is None:
                    return 0
                kind, message = item
                if kind == "initialize":
                    self.initialize(message)
                elif kind == "set_model":
                    self.set_model(message)
                elif kind == "rewind_files":
                    if self.run is None:
                        self.open()
                    assert self.rewinds is not None
                    self.rewinds.answer(self.channel, message)
                else:
                    if self.run is None:
                        self.open()
                    self.turn(message)
        finally:
            if self.run is not None:
                try:
                    self.run.end_hooks("other")
                finally:
                    self.run.close()

    def initialize(self, message: dict[str, Any]) -> None:
        request_id = str(message.get("request_id"))
        try:
            if self.run is None:
                request = message.get("request") or {}
                self.hooks = self.hooks_file(request.get("hooks"))
                self.agents = sdk_agents(request.get("agents"))
                self.open()
            self.channel.answer(request_id, self.initialized())
        except AgiError as e:
            self.channel.answer(request_id, None, str(e))
            raise

    def set_model(self, message: dict[str, Any]) -> None:
        request_id = str(message.get("request_id"))
        model = (message.get("request") or {}).get("model")
        try:
            if self.run is None:
                self.open()
            if model:
                layer = overlay(flags.SOURCE, {"model": "set_model"}, model=flags.model_name(model))
                self.reopen(self.settings.over(layer))
            self.channel.answer(request_id, {})
        except AgiError as e:
            self.channel.answer(request_id, None, str(e))

    def reopen(self, settings: Settings) -> None:
        """The run again on the same session with other settings (set_model)."""
        old = self.run
        old.close()
        self.settings = settings
        self.view.model = settings.model.label
        choice = SessionChoice(path=old.session.path)
        spec = RunSpec(settings, view=self.view, ask=SdkAsk(self), mode=self.mode,
                       default_asks=True, interactive=True, meter=old.meter, saved=old.metered,
                       roots=tuple(old.ctx.roots), fallback=self.fallback(settings, False),
                       strict_mcp=self.strict, mcp=self.added_mcp(),
                       session=choice, session_start=False)  # fmt: skip
        self.run = engine.open(spec)

    def take(self, message: dict[str, Any], rewinds: Rewinds) -> str | None:
        """The user message's uuid, the SDK's (returned) or one made here: what rewind_files
        names it by, echoed with it under --replay-user-messages (docs)."""
        given = message.get("uuid") if isinstance(message.get("uuid"), str) else None
        uid = given or str(uuid.uuid4())
        if self.args.sdk.replay_user_messages:
            self.channel.send(replayed(message, uid, self.session_id))
        rewinds.start(uid)
        return given

    def turn(self, message: dict[str, Any]) -> None:
        view, run, rewinds = self.view, self.run, self.rewinds
        assert view is not None and rewinds is not None
        self.channel.send(self.init_message())
        given = self.take(message, rewinds)
        self.state("running")
        view.begin_turn()
        started = time.monotonic()
        subtype, error, structured = "success", "", None
        self.turn_running.set()
        try:
            limit = resolve(list(self.settings.layers)).options.attach_limit
            prompt = prompt_of(message.get("message") or {}, limit)  # images: attachments
            if self.settings.schema is not None:
                structured = run.ask(prompt).answer
            else:
                run.turn(prompt)
        except StepLimit as e:
            subtype, error = "error_max_turns", str(e)
        except CostLimit as e:
            subtype, error = "error_max_budget_usd", str(e)
        except Cancelled:
            subtype, error = "error_during_execution", "interrupted"
        except AgiError as e:
            subtype, error = "error_during_execution", str(e)
        finally:
            self.turn_running.clear()
            view.end_reply()
            run.resume()
            rewinds.end()
        total = self.spent + run.meter.total  # the session's, as Claude Code counts it (docs)
        if self.transcript is not None:
            try:
                self.transcript.update()
            except OSError as e:
                view.warn(f"the Claude-format transcript: {e.strerror or e}")
        result: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "duration_ms": int((time.monotonic() - started) * 1000),
            "duration_api_ms": int(view.api_seconds * 1000),
            "is_error": subtype != "success",
            "num_turns": view.steps,
            "session_id": self.session_id,
            "result": error or view.last_text,
            "stop_reason": "end_turn" if not error else None,
            "total_cost_usd": total.cost or 0.0,
            "usage": anthropic_usage(view.usage),  # this turn's
            "modelUsage": model_usage(run.meter.by_model, run.settings),  # this process's
            "permission_denials": [],
            "uuid": str(uuid.uuid4()),
        }
        if error:
            result["errors"] = [error]
        if structured is not None:
            result["structured_output"] = structured
        if given:
            result["user_message_uuid"] = given
        self.channel.send(result)
        self.state("idle")


def serve(argv: list[str]) -> int:
    """The protocol until stdin ends (exit 0); bad flags are exit 2 before anything is read."""
    with tempfile.TemporaryDirectory(prefix="agi-sdk-") as temp:
        os.chmod(temp, 0o700)
        args = flags.parse(argv, Path(temp))
        channel = Channel()
        relay = Relay(channel, Path(temp))
        try:
            server = Server(args, channel, relay)
            server.fallback(server.load())  # bad options: exit 2 now
            if not args.streaming:
                server.open()
                server.turn({"message": {"role": "user", "content": args.prompt}})
                return 0
            return server.serve()
        finally:
            relay.close()
