"""The Claude Agent SDKs' command line (docs: claude-agent-sdk): the flags they send, parsed with
their meaning and turned into agi's layer of options; what agi cannot honour is refused (exit
2, naming the flag). Flags the SDKs do not know (agi's own, through `extra_args`) go to agi's
own parser, so `extra_args={"base-url": URL}` works as on the command line."""

from __future__ import annotations

import argparse
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.frontends.cli.flags import Parser, build_parser, flags_layer, rewrite
from agi.options.values import Layer, ToolChoice, overlay
from agi.providers.anthropic import claude_model

SOURCE = "Claude Agent SDK"
STREAM = "stream-json"
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk", "auto")
SETTING_SOURCES = ("user", "project", "local")


def sdk_parser() -> Parser:
    """The flags the SDKs send (claude-agent-sdk's SubprocessCLITransport, the TypeScript
    SDK's ProcessTransport); each keeps the name it has there."""
    p = Parser(prog="agi", add_help=False, allow_abbrev=False)
    add = p.add_argument
    add("--output-format", choices=("text", "json", STREAM), default="text")
    add("--input-format", choices=("text", STREAM), default="text")
    add("-p", "--print", action="store_true")
    add("--verbose", action="store_true")
    add("--system-prompt")
    add("--system-prompt-file")
    add("--append-system-prompt")
    add("--tools")
    add("--allowedTools", "--allowed-tools", dest="allowed", action="append", default=[])
    add("--disallowedTools", "--disallowed-tools", dest="disallowed", action="append", default=[])
    add("--max-turns", type=_positive_int)
    add("--max-budget-usd", type=_positive_float)
    add("--model")
    add("--fallback-model")
    add("--permission-mode", choices=MODES)
    add("--permission-prompt-tool")
    add("--resume", "-r")
    add("--session-id")
    add("--fork-session", action="store_true")
    add("--continue", "-c", dest="cont", action="store_true")
    add("--mcp-config", action="append", default=[])
    add("--strict-mcp-config", action="store_true")
    add("--settings")
    add("--setting-sources")
    add("--json-schema")
    add("--include-partial-messages", action="store_true")
    add("--replay-user-messages", action="store_true")  # each user message echoed, its uuid
    add("--add-dir", action="append", default=[])
    add("--plugin-dir", action="append", default=[])
    add("--max-thinking-tokens", type=_positive_int)
    add("--thinking", choices=("adaptive", "enabled", "disabled"))
    return p


def is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError(text)
    return value


@dataclass
class SdkArgs:
    """The parsed command line: the SDK's flags, agi's own (`agi`), the prompt words."""

    sdk: argparse.Namespace
    agi: argparse.Namespace
    prompt: str
    temp: Path  # where the files made from inline values go (private to this process)
    made: list[Path] = field(default_factory=list)

    @property
    def streaming(self) -> bool:
        return bool(self.sdk.input_format == STREAM)

    @property
    def roots(self) -> tuple[str, ...]:
        """`--add-dir`: more directories where edits run as in the working directory."""
        return tuple(os.path.abspath(os.path.expanduser(d)) for d in self.sdk.add_dir)

    @property
    def ask_sdk(self) -> bool:
        """`--permission-prompt-tool stdio`: questions go to the SDK as can_use_tool."""
        return self.sdk.permission_prompt_tool == "stdio"


def parse(argv: list[str], temp: Path) -> SdkArgs:
    """Both parsers over `argv`; usage errors name the flag (exit 2)."""
    sdk, rest = sdk_parser().parse_known_args(rewrite(argv))
    agi = build_parser().parse_args(rest)
    if sdk.output_format != STREAM:
        raise UsageError(f"--output-format {sdk.output_format}: agi speaks only stream-json here")
    if sdk.input_format == STREAM and not sdk.verbose:
        raise UsageError("--input-format stream-json needs --verbose, as Claude Code's does")
    tool = sdk.permission_prompt_tool
    if tool is not None and tool != "stdio":
        raise UsageError(
            f"--permission-prompt-tool {tool}: agi asks only the SDK over stdio "
            "(--permission-prompt-tool stdio); an MCP permission tool is not supported"
        )
    if sdk.cont and sdk.resume:
        raise UsageError("--continue cannot be used with --resume")
    if sdk.session_id is not None and not is_uuid(sdk.session_id):
        raise UsageError(f"--session-id {sdk.session_id!r}: not a UUID")
    if sdk.session_id and (sdk.resume or sdk.cont) and not sdk.fork_session:
        raise UsageError(  # as the SDKs document it: the id names the copy
            "--session-id goes with --resume or --continue only with --fork-session"
        )
    if sdk.fork_session and not (sdk.resume or sdk.cont):
        raise UsageError("--fork-session goes with --resume or --continue")
    for d in sdk.add_dir:
        if not Path(d).expanduser().is_dir():
            raise UsageError(f"--add-dir {d}: not a directory")
    prompt = " ".join(agi.prompt).strip()
    if sdk.input_format == STREAM and prompt:
        raise UsageError("--input-format stream-json reads the prompts from stdin, not argv")
    return SdkArgs(sdk, agi, prompt, temp)


def layers(args: SdkArgs, hooks: Path | None = None, mcp: Path | None = None) -> list[Layer]:
    """agi's own flags' layer, then the SDK's flags as options (files written for inline
    values: a system prompt, settings, MCP servers, the hooks of `initialize`)."""
    s = args.sdk
    given: dict[str, Any] = {}
    spelled: dict[str, str] = {}

    def put(name: str, value: Any, flag: str) -> None:
        given[name], spelled[name] = value, flag

    sys = system_files(args)
    if sys is not None:
        put("sys", sys, "--system-prompt")
    if s.tools is not None:
        put("tools", tool_choice(s.tools), "--tools")
    allowed = [r for text in s.allowed for r in split_rules(text)]
    if allowed:
        put("allow", allowed, "--allowedTools")
    denied = [r for text in s.disallowed for r in split_rules(text)]
    if denied:
        put("deny", denied, "--disallowedTools")
    if s.max_turns is not None:
        put("max_steps", s.max_turns, "--max-turns")
    if s.max_budget_usd is not None:
        put("max_cost", s.max_budget_usd, "--max-budget-usd")
    if s.model:
        put("model", model_name(s.model), "--model")
    if s.permission_mode is not None:
        put("permission_mode", mode_of(s.permission_mode), "--permission-mode")
    sources = ALL_SOURCES if s.setting_sources is None else s.setting_sources
    if "project" in source_names(sources):
        put("project", True, "--setting-sources")  # agi's --project: the .claude/ files
    settings = [*setting_files(sources, os.getcwd())]
    if s.settings:
        settings.append(str(inline_file(args, s.settings, "settings.json", "--settings")))
    if settings:
        put("settings", settings, "--settings")
    if mcp is not None:
        put("mcp", [str(mcp)], "--mcp-config")
    if hooks is not None:
        put("hooks", [str(hooks)], "initialize: hooks")
    if s.plugin_dir:
        put("plugins", list(s.plugin_dir), "--plugin-dir")
    if s.json_schema is not None:
        put("schema", s.json_schema, "--json-schema")
    thinking = thinking_params(s)
    if thinking is not None:
        put("params", thinking, "--max-thinking-tokens")
    return [flags_layer(args.agi), overlay(SOURCE, spelled, **given)]


def system_files(args: SdkArgs) -> list[str] | None:
    """`--system-prompt TEXT` (the SDKs send "" for none: agi's own prompt then),
    `--system-prompt-file`, `--append-system-prompt` (after agi's prompt, or the given one)."""
    s = args.sdk
    if s.system_prompt and s.system_prompt_file:
        raise UsageError("--system-prompt and --system-prompt-file cannot be used together")
    base: list[str] | None = None
    if s.system_prompt:
        base = [str(text_file(args, s.system_prompt, "system-prompt.md"))]
    elif s.system_prompt_file:
        base = [s.system_prompt_file]
    if s.append_system_prompt:
        more = str(text_file(args, s.append_system_prompt, "append-system-prompt.md"))
        return [*(base or ["default"]), more]
    return base


def tool_choice(text: str) -> ToolChoice:
    """`--tools`: `default` (every built-in tool), "" (none), or a comma list of names."""
    if text.strip() == "default":
        return ToolChoice()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    return ToolChoice(none=True) if not names else ToolChoice(allow=names)


def split_rules(text: str) -> list[str]:
    """A comma (or space) list of permission rules, as Claude Code splits it: never inside
    parentheses (`Bash(git log:*),Read` is two rules)."""
    rules, depth, word = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        if depth == 0 and (ch == "," or ch.isspace()):
            if word.strip():
                rules.append(word.strip())
            word = ""
            continue
        word += ch
    if word.strip():
        rules.append(word.strip())
    return rules


def model_name(name: str) -> str:
    """Claude's aliases (`sonnet`, `opus`, `haiku`) and model names (`claude-…`) are
    Anthropic's; anything else is taken as agi's `-m` takes it."""
    alias = claude_model(name)
    if alias is not None:
        return f"anthropic:{alias}"
    if name.startswith("claude-"):
        return f"anthropic:{name}"
    return name


def mode_of(mode: str) -> str:
    """Claude Code's `auto` is the default mode's judgement: `default` here. A mode agi does
    not know is refused (kept, it had let every call run: it is none of those that ask)."""
    mode = "default" if mode == "auto" else mode
    if mode not in MODES:
        raise UsageError(f"unknown permission mode {mode!r} (one of {', '.join(MODES)})")
    return mode


def thinking_params(s: argparse.Namespace) -> dict[str, Any] | None:
    """A thinking budget as the Messages API takes it (providers without one ignore it)."""
    if s.max_thinking_tokens is not None:
        return {"thinking": {"type": "enabled", "budget_tokens": s.max_thinking_tokens}}
    if s.thinking == "disabled":
        return {"thinking": {"type": "disabled"}}
    return None


# the sources read when the SDK names none, as Claude Code does (the SDKs: "When omitted, all
# sources are loaded (matches CLI defaults)"); `setting_sources=[]` reads none
ALL_SOURCES = "user,project,local"


def source_names(sources: str | None) -> list[str]:
    names = [n.strip() for n in (sources or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in SETTING_SOURCES]
    if unknown:
        raise UsageError(f"--setting-sources: unknown source {unknown[0]!r} (user, project, local)")
    return names


def setting_files(sources: str | None, cwd: str) -> list[str]:
    """`--setting-sources user,project,local`: Claude Code's settings files of those scopes
    that exist, read as agi's --settings reads them. `project` is agi's `--project` (the
    working directory's `.claude/` settings, agents, skills and commands, its CLAUDE.md and
    AGENTS.md), which reads `.claude/settings.local.json` too: `project` without `local` where
    that file exists is refused (its rules were not asked for)."""
    names = source_names(sources)
    home = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    where = {
        "user": home / "settings.json",
        "project": Path(cwd) / ".claude" / "settings.json",
        "local": Path(cwd) / ".claude" / "settings.local.json",
    }
    if "project" in names:
        if "local" not in names and where["local"].is_file():
            raise UsageError(
                f"--setting-sources {sources}: agi reads the project's {where['local']} with its "
                "settings.json: add local to the sources, or leave project out"
            )
        names = [n for n in names if n == "user"]  # the project's files: --project's
    return [str(where[n]) for n in names if where[n].is_file()]


def text_file(args: SdkArgs, text: str, name: str) -> Path:
    path = args.temp / name
    path.write_text(text, encoding="utf-8")
    args.made.append(path)
    return path


def inline_file(args: SdkArgs, value: str, name: str, flag: str) -> Path:
    """A flag's value that is JSON or the path of a JSON file: the file, written if inline."""
    if not value.strip().startswith("{"):
        return Path(value)
    try:
        json.loads(value)
    except ValueError as e:
        raise UsageError(f"{flag}: not valid JSON: {e}") from None
    return text_file(args, value, name)


def mcp_servers(values: list[str]) -> dict[str, Any]:
    """Every `--mcp-config` (JSON or a file) as one `mcpServers` table."""
    servers: dict[str, Any] = {}
    for value in values:
        try:
            text = value if value.strip().startswith("{") else Path(value).read_text("utf-8")
            data = json.loads(text)
        except OSError as e:
            raise UsageError(f"--mcp-config: cannot read {value}: {e.strerror}") from None
        except ValueError as e:
            raise UsageError(f"--mcp-config: not valid JSON: {e}") from None
        table = data.get("mcpServers", data) if isinstance(data, dict) else None
        if not isinstance(table, dict):
            raise UsageError('--mcp-config: expected {"mcpServers": {NAME: SERVER, …}}')
        servers.update(table)
    return servers
