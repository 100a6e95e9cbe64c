"""The option table: every option and command-line flag once, with its name (the config file's
key and the Python API's keyword), flags, metavar, type, config-file check, environment
variable, default, help and documentation, and the front ends that take it.

From it come the parser (agi.frontends.cli.flags), the config file's checks
(agi.options.config), every source's layer (agi.options.values), the `Options` fields (a test
holds them to it) and the reference pages (agi.options.reference: docs/reference/options.md and
the man page agi.1). A row with a `check` is an option: a config key and a keyword of
`agi.run`; a row without one is a flag of the command line alone (`--session`, `--repl`, …).
Imported for `agi --help`, so it imports nothing heavy."""

from __future__ import annotations

from agi.options import checks as c

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: --version and --help import no typing
if TYPE_CHECKING:
    from typing import Any

SECTIONS = {  # in the order of --help and the reference pages
    "general": "General",
    "model": "The model and its endpoint",
    "session": "Sessions",
    "run": "What the model is told, and the run's limits",
    "tools": "Tools",
    "claude": "Claude Code's plugins, settings and permissions",
    "sandbox": "The sandbox",
    "io": "Input and output",
    "serve": "Serving many runs",
}
FRONTS = {"batch": "batch jobs", "mcp": "MCP calls", "nvim": "Neovim", "acp": "ACP sessions"}


class Option:
    """One row: `kind` is how the command line takes it (`value`, `list` for a repeatable
    flag, `switch`, `optional` for a flag whose value may be left out, `help`, `version`);
    `field` is the `Options` field it sets (`no_bash` sets `tools`), `given` the value a switch
    stands for (`--no-checkpoints` is `checkpoints = false`)."""

    __slots__ = (
        "name", "help", "section", "flags", "kind", "metavar", "type", "check", "env",
        "default", "doc", "fronts", "field", "given", "parse", "choices", "dest", "keyword",
        "spelling",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        help: str,
        section: str,
        flags: tuple[str, ...] = (),
        kind: str = "value",
        metavar: str | None = None,
        type: str | None = None,
        check: c.Check | None = None,
        env: str | None = None,
        default: Any = None,
        doc: str = "",
        fronts: tuple[str, ...] = (),
        field: str | None = None,
        given: Any = True,
        parse: Any = None,
        choices: tuple[str, ...] | None = None,
        dest: str | None = None,
        keyword: str | None = None,
        spelling: str | None = None,
    ) -> None:
        self.name, self.help, self.section, self.flags = name, help, section, flags
        self.kind, self.metavar, self.type, self.check = kind, metavar, type, check
        self.env, self.default, self.doc, self.fronts = env, default, doc or help, fronts
        self.field = field or (name if check is not None else None)
        self.given, self.parse, self.choices = given, parse, choices
        self.dest = dest or (flags[-1].lstrip("-").replace("-", "_") if flags else name)
        self.keyword = keyword or name  # the Python API's keyword (`ask_rules` for `ask`)
        self.spelling = spelling  # how --help and the pages show the flag, when not as usual

    @property
    def option(self) -> bool:
        """An option of every source (a config key, a keyword), not a command-line flag alone."""
        return self.check is not None

    def shown(self) -> str:
        """The flag as the pages show it: `-m, --model MODEL`, `--rewind [N]`."""
        if self.spelling:
            return self.spelling
        names = ", ".join(self.flags)
        if self.kind in ("value", "list") and self.choices and not self.metavar:
            return f"{names} {'|'.join(self.choices)}"
        if self.kind in ("value", "list"):
            return f"{names} {self.metavar}"
        return f"{names} [{self.metavar}]" if self.kind == "optional" else names


Opt = Option


def _age(value: object) -> bool:
    # lazy: agi.sessions.prune imports this module
    from agi.sessions.prune import parse_age

    return parse_age(value) is not None


_MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")
_REPEAT = "; repeatable"

# fmt: off
OPTIONS: tuple[Option, ...] = (
    # general
    Opt("help", "show this help message and exit", "general", ("-h", "--help"), "help"),
    Opt("version", "show program's version number and exit", "general", ("--version",), "version"),
    Opt("verbose", "show progress on stderr even when it is not a terminal", "general",
        ("-v", "--verbose"), "switch", type="bool", check=c.BOOL, default=False),
    Opt("quiet", "no progress, only errors", "general", ("-q", "--quiet"), "switch", type="bool",
        check=c.BOOL, default=False, doc="no progress on stderr, even in a terminal: only errors"),
    Opt("list_settings", "print the effective options and where each came from (keys redacted)",
        "general", ("--list-settings",), "switch",
        doc="print the effective options as config-file lines, each with its source (default, "
        "the config file, an environment variable, a flag), secrets redacted; then the model, "
        "endpoint and key variable a run would use; sends nothing"),
    Opt("completion", "print the shell completion script for SHELL: bash, zsh or fish", "general",
        ("--completion",), metavar="SHELL", choices=("bash", "zsh", "fish"),
        doc="print a completion script for bash, zsh or fish, made from this table: "
        "`agi --completion bash > ~/.local/share/bash-completion/completions/agi`, "
        "`agi --completion zsh > ~/.zfunc/_agi`, "
        "`agi --completion fish > ~/.config/fish/completions/agi.fish`"),
    Opt("color", "colour on stderr: auto (a terminal, unless NO_COLOR is set), always, never",
        "general", ("--color",), type="str", check=c.one_of("auto", "always", "never"),
        default="auto", choices=("auto", "always", "never"),
        doc="colour in what stderr shows: `auto` when stderr is a terminal and `NO_COLOR` is "
        "unset or empty (no-color.org), `always` (with `-v` in a pipe too), `never`"),
    # the model and its endpoint
    Opt("model", "PROVIDER:MODEL or a bare model name (env AGI_MODEL)", "model",
        ("-m", "--model"), metavar="MODEL", type="str", check=c.TEXT, env="AGI_MODEL",
        fronts=("batch", "mcp", "nvim", "acp"),
        doc="`provider:model` (`openai:gpt-4o-mini`, `deepseek:deepseek-chat`, `ollama:qwen3`, "
        "`openrouter:...`, `litellm:...`) or a bare model name for the default provider "
        "(openai, or `provider` in the config file)"),
    Opt("base_url", "OpenAI-compatible endpoint ending in /v1 (env AGI_BASE_URL)", "model",
        ("--base-url",), metavar="URL", type="str", check=c.TEXT, env="AGI_BASE_URL",
        fronts=("nvim",),
        doc="an OpenAI-compatible endpoint ending in `/v1` (vLLM, llama.cpp server, LM Studio "
        "...); before the provider's own table, its variable (`OPENAI_BASE_URL` for openai) and "
        "its preset"),
    Opt("provider", "the provider of a bare model name", "model", type="str", check=c.TEXT,
        default="openai"),
    Opt("api_key", "the API key", "model", type="str", check=c.TEXT, env="AGI_API_KEY",
        doc="the API key: `AGI_API_KEY`, else the provider's own variable (`OPENAI_API_KEY`, "
        "...), else `api_key` of its `[providers.NAME]` table, else this; none is needed for "
        "local servers"),
    Opt("providers", "providers of your own", "model", type="dict[str, Any]",
        check=c.table("a table of tables"),
        doc="`[providers.NAME]` tables: `base_url`, `api_key`, `api_key_env` (the variable "
        "holding the key), `params`, and the pacing `rpm`, `tpm` and `max_concurrent`, for a "
        "provider of your own or to change a preset's"),
    Opt("params", "extra request fields", "model", type="dict[str, Any]", check=c.table("a table"),
        doc="extra fields of every request (`params = { temperature = 0.2 }`)"),
    Opt("idle_timeout", "seconds a stream may stay silent", "model", type="float",
        check=c.POSITIVE, default=300,
        doc="seconds a stream may stay silent (or send only keep-alives) before it has failed"),
    Opt("max_tokens", "the reply's limit, sent to every provider", "model", type="int",
        check=c.COUNT),
    Opt("prompt_cache_key", "send OpenAI a prompt_cache_key", "model", type="bool",
        check=c.BOOL, default=True,
        doc="OpenAI requests carry a `prompt_cache_key` derived from the system prompt and the "
        "tools, so runs sharing them share the provider's cache; `false` leaves it out"),
    Opt("rpm", "requests a minute to the provider, at most", "model", ("--rpm",), metavar="N",
        type="float", check=c.POSITIVE, parse=c.positive(float),
        doc="requests a minute to the run's provider, held back before they are sent, for "
        "every run of the process (also `rpm` in `[providers.NAME]`, with `tpm` and "
        "`max_concurrent`)"),
    Opt("tpm", "tokens a minute to the provider, at most (estimated)", "model", ("--tpm",),
        metavar="N", type="float", check=c.POSITIVE, parse=c.positive(float),
        doc="tokens a minute to the run's provider (each request's estimated from its size), "
        "for every run of the process (also `tpm` in `[providers.NAME]`)"),
    Opt("api", "the wire protocol for OpenAI models: responses or chat", "model", ("--api",),
        type="str", check=c.one_of("responses", "chat", quoted=True),
        choices=("responses", "chat"),
        doc="`responses`: OpenAI's Responses API; `chat`: chat completions; unset: the "
        "Responses API for the `openai` provider's gpt-5 family and o-series, chat completions "
        "for the rest (also in `[providers.NAME]` and `[models.\"NAME\"]`)"),
    Opt("service_tier", "OpenAI's processing tier: auto, default, flex or priority", "model",
        ("--service-tier",), type="str",
        check=c.one_of("auto", "default", "flex", "priority", quoted=True),
        choices=("auto", "default", "flex", "priority"),
        doc="sent as `service_tier` to the providers that take it (OpenAI); under `flex` a "
        "request may wait up to 15 minutes for its first byte and a 429 \"resource "
        "unavailable\" is retried; cost uses the tier's prices where known"),
    # sessions
    Opt("session", "use DIR as the conversation", "session", ("-s", "--session"), metavar="DIR",
        fronts=("batch", "mcp"),
        doc="use DIR as the conversation: created if missing, continued if it is an agi "
        "session; a non-empty directory that is not one is refused with exit 2"),
    Opt("continue", "continue the most recently used session", "session", ("-c", "--continue"),
        "switch", dest="cont"),
    Opt("fork", "continue a copy of SESSION (the original is kept)", "session", ("--fork",),
        metavar="SESSION"),
    Opt("repl", "interactive loop over one session", "session", ("-i", "--repl"), "switch",
        doc="an interactive loop over one session (`--session`, or a new one): Ctrl-C cancels "
        "the answer, Ctrl-D leaves"),
    Opt("list_sessions", "list the sessions used, newest first", "session",
        ("--list-sessions",), "switch"),
    Opt("show", "print a readable transcript of SESSION", "session", ("--show",),
        metavar="SESSION"),
    Opt("compact_now",
        "compact the session (-s DIR or -c) now; PROMPT words say what the summary keeps",
        "session", ("--compact",), "switch", dest="compact",
        doc="with `-s DIR` or `-c`: compact the session now, the PROMPT words saying what the "
        "summary must keep; prints the summary"),
    Opt("no_compact", "never compact automatically (a request too long for the model then fails)",
        "session", ("--no-compact",), "switch", type="bool", check=c.BOOL, field="compact"),
    Opt("compact", "when to compact a long session", "session", type="str",
        check=c.one_of("auto", "off", quoted=True), default="auto",
        doc='`"auto"`: before a request passing `compact_threshold` of the context window; '
        '`"off"`: never (as `--no-compact`)'),
    Opt("compact_threshold", "the fraction of the context window that starts a compaction",
        "session", type="float", check=c.FRACTION, default=0.8),
    Opt("context_window", "the model's context window, in tokens", "session", type="int",
        check=c.TOKENS, doc="the model's context window in tokens, when agi cannot learn it"),
    Opt("models", "per-model settings", "session", type="dict[str, Any]",
        check=c.table('a table of [models."NAME"] tables'),
        doc='`[models."NAME"]` tables: a model\'s `context_window`'),
    Opt("rewind",
        "list the turns of the session (-s DIR or -c); with N: restore its files and "
        "conversation to before turn N", "session", ("--rewind",), "optional", metavar="N"),
    Opt("rewind_files", "restore only the files to before turn N", "session",
        ("--rewind-files",), metavar="N"),
    Opt("rewind_conversation", "rewind only the conversation to before turn N", "session",
        ("--rewind-conversation",), metavar="N"),
    Opt("dry_run", "with --rewind* or --prune: print what would change", "session",
        ("--dry-run",), "switch"),
    Opt("ephemeral", "write nothing: no session, trace, index entry, lock or checkpoint",
        "session", ("--ephemeral",), "switch", type="bool", check=c.BOOL, default=False,
        fronts=("batch", "mcp"),
        doc="the run writes nothing of its own, under `$AGI_HOME` or anywhere: no session "
        "directory, trace, index entry, lock or checkpoint (`--output json` says `\"session\": "
        "null`); not with `-s`, `-c`, `--fork`, `--rewind` or `-i`"),
    Opt("prune", "remove the sessions under AGI_HOME last used longer ago than AGE (30d, 12h, "
        "45m); with --dry-run: list them", "session", ("--prune",), metavar="AGE",
        doc="remove the sessions under `$AGI_HOME/sessions` last used longer ago than AGE "
        "(`30d`, `12h`, `45m`), their index entries and checkpoints, and checkpoint "
        "repositories no session uses; never a locked session; `--dry-run` lists them"),
    Opt("keep_sessions", "prune sessions older than this when a run ends (once a day)", "session",
        type="str", check=(_age, 'an age such as "30d", "12h" or "45m"'),
        doc='as `--prune AGE` when a run ends, at most once a day (`keep_sessions = "30d"`)'),
    Opt("checkpoints",
        "take no checkpoints of the working directory (config: checkpoints = false)", "session",
        ("--no-checkpoints",), "switch", type="bool", check=c.BOOL, default=True, given=False,
        doc="snapshots of the working directory before a turn's changes, for `--rewind`; "
        "`--no-checkpoints` takes none"),
    # what the model is told, and the run's limits
    Opt("sys", "system prompt file (repeatable; 'default' is the built-in one)", "run",
        ("--sys",), "list", metavar="FILE", type="list[str]", check=c.NAMES,
        fronts=("batch", "mcp", "nvim"),
        doc="the system prompt: the files concatenated in order with a blank line between, "
        "replacing the built-in prompt; `default` stands for the built-in one"),
    Opt("schema", "answer with JSON: a DSL, {JSON Schema} or @FILE", "run", ("--schema",),
        metavar="SPEC", type="str", check=c.TEXT, fronts=("batch", "mcp")),
    Opt("exit_code",
        "judge success: exit 0 or 1; criteria only with '=' (--exit-code='it compiles')", "run",
        ("--exit-code",), metavar="CRITERIA", type="bool | str", check=c.CRITERIA,
        fronts=("batch", "mcp"), spelling="--exit-code[=CRITERIA]",
        doc="judge success: exit 0 or 1; the criteria are taken only after `=` "
        "(`agi --exit-code \"prove P=NP\"` has none; config: true or the criteria)"),
    Opt("react", "text ReAct protocol, no native tools", "run", ("--react",), "switch",
        type="bool", check=c.BOOL, default=False, fronts=("nvim",),
        doc="the text ReAct protocol instead of native tool calls"),
    Opt("max_steps", "model calls per run (50)", "run", ("--max-steps",), metavar="N",
        type="int", check=c.COUNT, default=50, parse=c.positive(int), fronts=("batch", "mcp"),
        doc="model calls per run; exceeding it exits 4"),
    Opt("timeout", "wall-clock limit for the whole run", "run", ("--timeout",),
        metavar="SECONDS", type="float", check=c.POSITIVE, parse=c.positive(float),
        fronts=("batch", "mcp"),
        doc="wall-clock limit for the whole run (waiting for a session lock included); "
        "exceeding it exits 4"),
    Opt("max_cost", "stop before the next model call once the run has cost this much", "run",
        ("--max-cost",), metavar="USD", type="float", check=c.POSITIVE, parse=c.positive(float),
        fronts=("batch", "mcp"), doc="stop before the next model call once the run has cost "
        "this much: exit 4"),
    Opt("prices", "prices of models agi does not know", "run", type="dict[str, Any]",
        check=c.table('a table of [prices."MODEL"] tables'),
        doc='`[prices."MODEL"]` tables in USD per million tokens: `input` and `output`, '
        "`cached` and `cache_write` optional, `batch_input` and `batch_output` for `--batch-api` "
        "(else half the price)"),
    # tools
    Opt("tools", "comma-separated allowlist of tool names", "tools", ("--tools",),
        metavar="LIST", type="ToolChoice", check=c.NAMES, fronts=("nvim",),
        doc="the tools offered, by name (comma-separated, or a list in the config file); "
        "`--tools ''` offers none"),
    Opt("tool", "a user-defined tool (repeatable)", "tools", ("--tool",), "list", metavar="PATH",
        type="list[str]", check=c.NAMES, doc="a user-defined executable tool" + _REPEAT),
    Opt("tools_dir", "every executable in DIR is a tool", "tools", ("--tools-dir",), "list",
        metavar="DIR", type="list[str]", check=c.NAMES,
        doc="every executable in DIR is a tool" + _REPEAT),
    Opt("skills", "a directory of skills (repeatable)", "tools", ("--skills",), "list",
        metavar="DIR", type="list[str]", check=c.NAMES,
        doc="a directory of skills (`NAME/SKILL.md`)" + _REPEAT),
    Opt("hooks", "hooks settings file (repeatable)", "tools", ("--hooks",), "list",
        metavar="FILE", type="list[str]", check=c.NAMES),
    Opt("agents", "subagent definitions (repeatable)", "tools", ("--agents",), "list",
        metavar="DIR", type="list[str]", check=c.NAMES,
        doc="a directory of subagent definitions (`NAME.md`)" + _REPEAT),
    Opt("mcp", "MCP servers in Claude Code's mcpServers format (repeatable)", "tools", ("--mcp",),
        "list", metavar="FILE", type="list[str]", check=c.NAMES,
        doc="MCP servers in Claude Code's `mcpServers` format; their tools are "
        "`mcp__SERVER__TOOL`" + _REPEAT),
    Opt("web_allow_private", "WebFetch may fetch loopback, link-local and private addresses",
        "tools", type="bool", check=c.BOOL, default=False,
        doc="let WebFetch fetch loopback, link-local and private addresses (refused by default)"),
    Opt("webfetch_raw", "WebFetch returns the page as Markdown, with no request about it",
        "tools", type="bool", check=c.BOOL, default=False,
        doc="WebFetch returns the page as Markdown instead of the model's answer to its prompt"),
    Opt("no_tools", "offer no tools", "tools", ("--no-tools",), "switch", type="bool",
        check=c.BOOL, field="tools"),
    Opt("no_bash", "no Bash, nor any other built-in tool: only your own tools, skills and MCP "
        "tools", "tools", ("--no-bash",), "switch", type="bool", check=c.BOOL, field="tools"),
    # Claude Code's plugins, settings and permissions
    Opt("plugins", "load a Claude Code plugin: hooks, agents, skills, commands, MCP (repeatable)",
        "claude", ("--plugin-dir",), "list", metavar="DIR", type="list[str]", check=c.NAMES,
        dest="plugins"),
    Opt("settings", "a Claude Code settings.json: its hooks, permissions and env (repeatable)",
        "claude", ("--settings",), "list", metavar="FILE", type="list[str]", check=c.NAMES),
    Opt("allow", "a permission rule that allows matching calls, e.g. 'Bash(git diff:*)'",
        "claude", ("--allow",), "list", metavar="RULE", type="list[str]", check=c.NAMES,
        doc="a permission rule in Claude Code's syntax that allows matching calls" + _REPEAT),
    Opt("ask", "a permission rule that asks for matching calls, e.g. 'Bash(git diff:*)'",
        "claude", ("--ask",), "list", metavar="RULE", type="list[str]", check=c.NAMES,
        keyword="ask_rules",
        doc="a permission rule in Claude Code's syntax that asks for matching calls" + _REPEAT),
    Opt("deny", "a permission rule that denies matching calls, e.g. 'Bash(git diff:*)'",
        "claude", ("--deny",), "list", metavar="RULE", type="list[str]", check=c.NAMES,
        doc="a permission rule in Claude Code's syntax that denies matching calls" + _REPEAT),
    Opt("permission_mode",
        "for calls no rule decides (README: Permission modes); default: run them", "claude",
        ("--permission-mode",), type="str", check=c.one_of(*_MODES, quoted=True),
        default="default", choices=_MODES, fronts=("acp",),
        doc="what a call no rule decides does: `default` (it runs), `dontAsk` (denied), "
        "`acceptEdits`, `plan`, `bypassPermissions` (as in Claude Code)"),
    Opt("project", "use the working directory's Claude Code project: .claude/ settings, commands, "
        "agents, skills; CLAUDE.md, AGENTS.md", "claude", ("--project",), "switch", type="bool",
        check=c.BOOL, default=False,
        doc="use the working directory's Claude Code project as Claude Code would: "
        "`.claude/settings.json` and `.claude/settings.local.json` (hooks, permissions, env; "
        "before `--settings` files), `.claude/commands/`, `.claude/agents/`, `.claude/skills/`, "
        "and `CLAUDE.md` and `AGENTS.md` as system-prompt files after `--sys` (after the "
        "built-in prompt without it); `--list-extensions` lists them; off by default"),
    Opt("list_extensions",
        "list the plugins, commands, skills, agents and hooks agi sees, and their files",
        "claude", ("--list-extensions",), "switch"),
    # the sandbox
    Opt("sandbox", "run Bash, user tools and terminals inside bubblewrap (default off)",
        "sandbox", ("--sandbox",), type="str", check=c.one_of("off", "read-only", "workspace"),
        default="off", choices=("off", "read-only", "workspace"),
        doc="run Bash, your tools and terminals inside bubblewrap; `read-only` or `workspace` "
        "(`--allow-write` directories writable)"),
    Opt("allow_write", "with --sandbox workspace: a writable directory (repeatable; default: the "
        "working directory)", "sandbox", ("--allow-write",), "list", metavar="DIR",
        type="list[str]", check=c.NAMES),
    Opt("no_network", "with --sandbox: no network inside the sandbox", "sandbox",
        ("--no-network",), "switch", type="bool", check=c.BOOL, default=False),
    # input and output
    Opt("attachments", "attach an image or PDF to the prompt (repeatable)", "io",
        ("-a", "--attach"), "list", metavar="FILE", type="list[str]", check=c.NAMES,
        fronts=("batch", "mcp"),
        doc="an image (PNG, JPEG, GIF, WebP) or a PDF sent with the prompt, kept once in the "
        "session as `attachments/SHA256.EXT`" + _REPEAT),
    Opt("attach_limit", "bytes an attached file may have at most", "io", type="int",
        check=c.BYTES, default=20 << 20, doc="bytes an attached file may have; more is exit 2"),
    Opt("no_stdin", "do not read standard input", "io", ("--no-stdin",), "switch",
        doc="never read stdin (for supervisors that leave it open)"),
    Opt("stdin_limit", "bytes of stdin read at most", "io", type="int", check=c.BYTES,
        default=10 << 20, doc="bytes of stdin a run reads at most; more is exit 2"),
    Opt("output", "output format (text)", "io", ("--output",), type="str",
        check=c.one_of("text", "json", "jsonl"), default="text", choices=("text", "json", "jsonl"),
        doc="`json`: one result object; `jsonl`: one event object per line, the last the result"),
    # serving many runs
    Opt("acp", "serve editors: an Agent Client Protocol agent on stdio", "serve", ("--acp",),
        "switch"),
    Opt("mcp_serve", "serve other agents: MCP on stdio", "serve", ("--mcp-serve",), "switch",
        doc="serve other agents as the MCP tool `agi` on stdio"),
    Opt("batch", "run every JSON line of FILE ('-': stdin) as a job; one JSON line out per job",
        "serve", ("--batch",), metavar="FILE"),
    Opt("jobs", "with --batch: jobs run at once (4); with --serve: requests (8)", "serve",
        ("--jobs",), metavar="N",
        default=4, parse=c.whole(1, 1024)),
    Opt("batch_out", "with --batch: append the output lines to FILE too, and skip the jobs it "
        "holds with exit 0 (resume)", "serve", ("--batch-out",), metavar="FILE"),
    Opt("shard", "with --batch: run only the jobs whose index modulo N is K (0-based)", "serve",
        ("--shard",), metavar="K/N"),
    Opt("batch_api", "with --batch: send the jobs as the provider's batches, at its batch "
        "price", "serve", ("--batch-api",), choices=("openai", "anthropic"),
        doc="with `--batch`: send the jobs as OpenAI's or Anthropic's batches (one call a job, "
        "no tools; about half the price, answered within 24 hours) instead of running them "
        "here; with `--batch-out OUT`, `OUT.batches.json` keeps the batches for a rerun"),
    Opt("serve", "serve HTTP: agi's runs API and an OpenAI-compatible front (127.0.0.1:8765)",
        "serve", ("--serve",), "optional", metavar="[HOST:]PORT",
        doc="serve HTTP until SIGINT/SIGTERM: `/v1/runs`, OpenAI's `/v1/chat/completions` and "
        "`/v1/responses`, `/v1/models`, `/healthz`, `/metrics` (docs: serve; extra "
        "`agi-cli[serve]`); the other options are every request's defaults and limits"),
    Opt("serve_token", "with --serve: require `Authorization: Bearer TOKEN` (also "
        "AGI_SERVE_TOKEN)", "serve", ("--serve-token",), metavar="TOKEN",
        doc="with `--serve`: requests need `Authorization: Bearer TOKEN` (else 401); also "
        "`AGI_SERVE_TOKEN`; required to bind anything but loopback"),
    Opt("budget", "with --serve: USD the whole server may spend", "serve", ("--budget",),
        metavar="USD", parse=c.positive(float),
        doc="with `--serve`: USD every request together may spend (`--max-cost` is each "
        "request's ceiling); once spent, runs end with exit 4"),
    Opt("queue", "with --serve: requests that may wait for a free job (64); more get 429",
        "serve", ("--queue",), metavar="N", parse=c.whole(0, 1 << 20),
        doc="with `--serve`: requests that may wait for one of the `--jobs`; past that, 429 "
        "with `retry-after`"),
    Opt("profiles", "models `agi --serve` offers", "serve", type="dict[str, Any]",
        check=c.table("a table of tables"),
        doc="`[profiles.NAME]` tables: `model`, `sys`, `tools`, `permission_mode`, `max_steps`, "
        "`timeout`, `max_cost`, `schema`; `agi --serve` offers each as the OpenAI `model` NAME"),
)
# fmt: on

BY_NAME = {o.name: o for o in OPTIONS}
KEYWORDS = {o.keyword: o for o in OPTIONS if o.option}  # the Python API's keywords


def file_checks() -> dict[str, c.Check]:
    """What each config-file key may hold: the options' checks, by key."""
    return {o.name: o.check for o in OPTIONS if o.check is not None}


def ordered() -> list[Option]:
    """The rows by section, in table order within each: --help's order and the pages'."""
    rank = list(SECTIONS)
    return sorted(OPTIONS, key=lambda o: rank.index(o.section))
