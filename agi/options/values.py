"""The options layer (docs: configuration): typed options, one layer per source, one precedence.

Built-in defaults < the config file < the environment < the front end's own layer (the command
line's flags, Neovim's setup() options, an ACP session's mode and model, an MCP call's
arguments, a batch job's fields). Each source makes one `Layer`: an `Options` whose fields are
None where the source says nothing, and the name of the source, so that an error about a setting
names where it came from (`config.toml: sys`, `--sys`, `ACP session: model`). `resolve` lays
the layers over each other: a later layer replaces what an earlier one says about the same
option. The tool choice is one option (`ToolChoice`): `--no-tools` replaces the file's `tools`,
`--tools Read` replaces `no_tools = true`.

Nothing here reads a file other than the config, starts a process or builds a tool."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.options.table import KEYWORDS, OPTIONS


@dataclass(frozen=True)
class ToolChoice:
    """Which tools a run offers: `none` (`--no-tools`), else the built-in ones unless
    `builtin` is False (`--no-bash`), narrowed to `allow` when given (`--tools LIST`)."""

    allow: tuple[str, ...] | None = None
    builtin: bool = True
    none: bool = False

    @classmethod
    def of(cls, tools: Any = None, no_bash: Any = None, no_tools: Any = None) -> ToolChoice | None:
        """One source's choice from its three settings; None when it says nothing of tools.
        An allowlist given beside `no_tools` wins (`--tools Read` means those tools)."""
        if tools is None and not no_bash and not no_tools:
            return None
        allow = None if tools is None else tuple(_names(tools))
        if allow is not None and no_tools and not allow:
            allow = None
        return cls(allow=allow, builtin=not no_bash, none=bool(no_tools) and allow is None)


def _names(value: Any) -> list[str]:
    names = value.split(",") if isinstance(value, str) else list(value)
    return [n.strip() for n in names if isinstance(n, str) and n.strip()]


@dataclass(repr=False, eq=False)  # generating those for 45 fields costs ~1.4 ms at every start
class Options:
    """Every option a run can be given; None: this layer says nothing about it."""

    # the model and its endpoint
    model: str | None = None
    base_url: str | None = None
    provider: str | None = None
    api_key: str | None = None
    params: dict[str, Any] | None = None
    providers: dict[str, Any] | None = None
    idle_timeout: float | None = None
    max_tokens: int | None = None
    api: str | None = None  # "responses" or "chat" (docs: responses)
    service_tier: str | None = None
    # what the model is told and asked for, and the run's limits
    sys: list[str] | None = None
    schema: str | None = None
    exit_code: bool | str | None = None
    react: bool | None = None
    max_steps: int | None = None
    timeout: float | None = None
    max_cost: float | None = None
    prices: dict[str, Any] | None = None
    # tools, extensions, Claude Code's parts
    tools: ToolChoice | None = None
    tool: list[str] | None = None
    tools_dir: list[str] | None = None
    mcp: list[str] | None = None
    skills: list[str] | None = None
    hooks: list[str] | None = None
    agents: list[str] | None = None
    plugins: list[str] | None = None
    settings: list[str] | None = None
    allow: list[str] | None = None
    ask: list[str] | None = None
    deny: list[str] | None = None
    permission_mode: str | None = None
    # the sandbox
    sandbox: str | None = None
    allow_write: list[str] | None = None
    no_network: bool | None = None
    # long sessions
    compact: str | None = None  # "auto" or "off"
    compact_threshold: float | None = None
    context_window: int | None = None
    models: dict[str, Any] | None = None
    checkpoints: bool | None = None
    web_allow_private: bool | None = None  # WebFetch (docs: tools)
    webfetch_raw: bool | None = None
    ephemeral: bool | None = None
    keep_sessions: str | None = None  # an age: prune when a run ends (docs: volume)
    prompt_cache_key: bool | None = None
    rpm: float | None = None
    tpm: float | None = None
    # what stdin and stderr may carry
    stdin_limit: int | None = None
    attachments: list[str] | None = None  # -a FILE (docs: attachments)
    attach_limit: int | None = None
    output: str | None = None
    verbose: bool | None = None
    quiet: bool | None = None
    color: str | None = None  # "auto", "always" or "never" (NO_COLOR under auto)
    project: bool | None = None  # --project: the working directory's Claude Code files
    profiles: dict[str, Any] | None = None  # agi --serve's models (docs: serve)


NAMES = tuple(f.name for f in fields(Options))
LISTS = {f.name for f in fields(Options) if str(f.type).startswith("list[")}


@dataclass
class Layer:
    """One source's options and how to name them: `where("sys")` is `--sys` for the command
    line (names given in `spelled`), `config.toml: sys` for the file."""

    options: Options
    source: str
    spelled: dict[str, str] = field(default_factory=dict)  # option -> its name in this source
    separator: str = ": "
    path: str | None = None  # the file a file layer was read from

    def where(self, name: str) -> str:
        if name in self.spelled:
            return self.spelled[name]
        return f"{self.source}{self.separator}{name}"


def options_from(values: dict[str, Any]) -> Options:
    """A source's values by the table's names (config keys: `no_bash`, `tools = "Bash,Read"`)
    as `Options`: a string for a list option is a list of one, and the tool choice and
    `no_compact` fold into the one option they set."""
    given: dict[str, Any] = {}
    for name in NAMES:
        value = values.get(name)
        if value is not None and name != "tools":
            given[name] = [value] if name in LISTS and isinstance(value, str) else value
    given["tools"] = ToolChoice.of(
        values.get("tools"), values.get("no_bash"), values.get("no_tools")
    )
    if values.get("no_compact"):
        given["compact"] = "off"
    return Options(**given)


def layer_from_values(source: str, values: dict[str, Any], spelled: dict[str, str]) -> Layer:
    """A source's layer from its values by the table's names (None says nothing)."""
    return Layer(options_from(values), source, spelled)


def layer_from_kwargs(source: str, **kwargs: Any) -> Layer:
    """A front end's layer from keyword arguments: the Python API's `agi.run(prompt,
    model=..., max_steps=...)`, by the table's keywords (the config file's keys; `ask_rules`
    for `ask`). None says nothing; a path may be a `PathLike`, a list a tuple, `schema` a
    dict; each value is checked as the config file's is (UsageError `SOURCE: KEY must be ...`).
    An unknown keyword is a TypeError, as for any function."""
    values: dict[str, Any] = {}
    for key, value in kwargs.items():
        option = KEYWORDS.get(key)
        if option is None or option.check is None:
            raise TypeError(f"{source}: unknown option {key!r}")
        if value is None:
            continue
        value = _plain(key, value)
        valid, description = option.check
        if not valid(value):
            raise UsageError(f"{source}: {key} must be {description}, not {value!r}")
        values[option.name] = value
    spelled = {o.field: f"{source}: {k}" for k, o in KEYWORDS.items() if o.field and k != o.name}
    return layer_from_values(source, values, spelled)


def _plain(key: str, value: Any) -> Any:
    """A Python value as the config file would hold it: paths as text, tuples as lists, a
    JSON Schema as its JSON text."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
    if key == "schema" and isinstance(value, dict):
        import json

        return json.dumps(value)
    return value


def file_layer(data: dict[str, Any], path: Path) -> Layer:
    """The config file's settings (already checked by agi.options.config.load_file) as a layer."""
    return Layer(options_from(data), path.name, path=str(path))


def env_layer(environ: Any = None) -> Layer:
    """The environment's options: the table's variables (AGI_MODEL, AGI_BASE_URL, AGI_API_KEY)."""
    env = os.environ if environ is None else environ
    named = {o.env: o for o in OPTIONS if o.env and o.field}
    values = {o.name: env.get(var) or None for var, o in named.items()}
    spelled = {o.field: var for var, o in named.items() if o.field}
    return layer_from_values("environment", values, spelled)


@dataclass
class Resolved:
    """The options after every layer, and which layer gave each one (for error messages)."""

    options: Options
    layers: list[Layer]
    given_by: dict[str, Layer] = field(default_factory=dict)

    def where(self, name: str) -> str:
        layer = self.given_by.get(name)
        return layer.where(name) if layer is not None else name

    def layer_of(self, name: str) -> Layer | None:
        return self.given_by.get(name)


def resolve(layers: list[Layer]) -> Resolved:
    """Lay the layers over each other in order: a later one replaces what an earlier one says."""
    values: dict[str, Any] = {}
    given_by: dict[str, Layer] = {}
    for layer in layers:
        for name in NAMES:
            value = getattr(layer.options, name)
            if value is not None:
                values[name] = value
                given_by[name] = layer
    return Resolved(Options(**values), layers, given_by)


def overlay(source: str, spelled: dict[str, str] | None = None, **given: Any) -> Layer:
    """A front end's layer from keyword options (None values say nothing)."""
    unknown = [k for k in given if k not in NAMES]
    if unknown:
        raise TypeError(f"unknown options: {', '.join(unknown)}")
    return Layer(Options(**given), source, dict(spelled or {}))


# the options one run may change alone, as a request gives them: a batch line's fields (docs:
# batch), which the MCP server's calls and `agi --serve`'s requests take too
RUN_FIELDS: tuple[str, ...] = ("model", "schema", "exit_code", "sys", "attachments", "ephemeral")
RUN_FIELDS += ("max_steps", "timeout", "max_cost")


def request_layer(source: str, request: object) -> Layer:
    """The last layer of a request's run: its attributes named in RUN_FIELDS (None says
    nothing), errors naming the request's fields as it spells them."""
    given = {name: getattr(request, name) for name in RUN_FIELDS}
    return overlay(source, {"model": "model", "schema": "schema"}, **given)
