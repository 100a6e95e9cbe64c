"""Claude Code's permission rules: `Tool`, `Tool(specifier)`, `mcp__SERVER[__TOOL]`, `Task(AGENT)`,
`Skill(NAME)`, judged deny, then ask, then allow; the first match wins (docs: permissions).

Bash specifiers are the exact command, `PREFIX:*` (a word-boundary prefix) or a pattern where
`*` is any text; a compound line is split by a shell parser (agi.policy.bash.parse) and every part
must
be allowed, while a part matching a deny rule denies the whole. Read/Write/Edit specifiers are
gitignore-style path patterns (pathspec): `//abs`, `~/home`, `/relative-to-the-settings-file`,
`relative-to-cwd`. A call no rule decides is left to the mode (agi.policy.guard).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from agi.errors import UsageError
from agi.policy.bash.opaque import vouches
from agi.policy.bash.parse import Part, split
from agi.policy.web_rules import domain_matches
from agi.tools.line_edit import MARK, LineEditor

KINDS = ("deny", "ask", "allow")  # the order rules are judged in
MODES = ("default", "acceptEdits", "plan", "bypassPermissions", "dontAsk")  # agi.policy.guard
COMMAND_LINE = "command line"
RULE = re.compile(r"^\s*([A-Za-z0-9_*.-]+)\s*(?:\((.*)\))?\s*$", re.S)
PATH_TOOLS = {
    "Read": {"Read", "Glob", "Grep"},
    "Edit": {"Edit", "Write"},
    "Write": {"Edit", "Write"},
}
SEARCHES = frozenset({"Glob", "Grep"})  # judged by the directory (or file) they search
PROBE = "\x01"  # a name in a searched directory: a rule covering it covers the directory
NAMED_INPUT = {"Task": "subagent_type", "Skill": "skill", "SlashCommand": "command"}
OLD_SLASH = re.compile(r"^\s*SlashCommand:(/\S.*?)\s*$", re.S)  # `SlashCommand:/commit`
PLAIN = frozenset({"Terminal", "TempDir", "calculate", "BashOutput", "KillShell"})  # no specifiers


@dataclass(frozen=True)
class Rule:
    """One rule as written, where it came from, and the directory its `/path` patterns start in."""

    kind: str  # deny | ask | allow
    text: str
    tool: str
    specifier: str | None
    source: str  # a settings file, the config file, `command line`, or `/COMMAND allowed-tools`
    base: str  # `/relative` path patterns are relative to this directory

    @property
    def where(self) -> str:
        return f'"{self.text}" ({self.source})'


@dataclass
class Permissions:
    """The rules of a run and its mode; plain data, judged by `decide`."""

    rules: list[Rule] = field(default_factory=list)
    mode: str = "default"

    def __post_init__(self) -> None:
        # a mode the judge does not know would allow every call (it is none of those that
        # deny or ask): refused wherever it comes from (a flag, a control request, a session)
        if self.mode not in MODES:
            raise ValueError(f"unknown permission mode {self.mode!r} (one of {', '.join(MODES)})")

    def __bool__(self) -> bool:
        return bool(self.rules) or self.mode != "default"

    def with_rules(self, rules: list[Rule]) -> Permissions:
        return replace(self, rules=[*self.rules, *rules])


def parse_rule(text: Any, kind: str, source: str, base: str | Path) -> Rule:
    """`Tool` or `Tool(specifier)`; anything else is a usage error naming its source."""
    m = RULE.match(text) if isinstance(text, str) else None
    old = OLD_SLASH.match(text) if isinstance(text, str) and m is None else None
    if old is not None:  # Claude Code's first spelling of SlashCommand rules
        return Rule(kind, text.strip(), "SlashCommand", old.group(1), source, str(base))
    if m is None:
        raise UsageError(
            f"{source}: bad permission rule {text!r} (expected Tool or Tool(specifier))"
        )
    tool, specifier = m.group(1), m.group(2)
    if specifier is not None:
        specifier = specifier.strip()
    if specifier in ("", "*"):
        specifier = None  # `Bash()` and `Bash(*)` mean every call, as `Bash` does
    return Rule(kind, text.strip(), tool, specifier, source, str(base))


def parse_rules(texts: Any, kind: str, source: str, base: str | Path) -> list[Rule]:
    return [parse_rule(t, kind, source, base) for t in texts or []]


def notes(permissions: Permissions) -> list[str]:
    """Warnings for rules agi cannot apply as written."""
    return [
        f"permission rule {rule.where}: {rule.tool} takes no specifier; the rule never matches"
        for rule in permissions.rules
        if rule.tool in PLAIN and rule.specifier is not None
    ]


# tools a rule may name without this run offering them: agi's own and Claude Code's (a
# settings file written for Claude Code names them)
KNOWN_TOOLS = frozenset(
    {"Bash", "Read", "Write", "Edit", "TempDir", "Terminal", "calculate", "Task", "Skill"}
    | {"SlashCommand", "Glob", "Grep", "WebFetch", "WebSearch", "BashOutput", "KillShell"}
    | {"KillBash", "LS", "MultiEdit", "NotebookEdit", "NotebookRead", "TodoWrite", "TodoRead"}
    | {"ExitPlanMode", "Agent", "ListMcpResourcesTool", "ReadMcpResourceTool"}
)


def check_tools(
    rules: list[Rule],
    tools: set[str] | frozenset[str] = frozenset(),
    servers: dict[str, set[str]] | None = None,
) -> list[str]:
    """Rules name real tools (docs: permissions): a tool name agi does not know (`bash(rm:*)`,
    `Bsh(rm:*)`) is a usage error naming the rule, where it came from and the closest known
    name. `tools`: more names this run offers (users' tools); `servers`: the MCP servers
    whose tools are known, by name. An `mcp__` rule on a server whose tools are not known is
    kept, with a warning (returned)."""
    import difflib

    known = KNOWN_TOOLS | set(tools)
    warnings = []
    for rule in rules:
        tool = rule.tool
        where = f"--{rule.kind}" if rule.source == COMMAND_LINE else rule.source
        if tool.startswith("mcp__"):
            server, _, name = tool[5:].partition("__")
            listed = (servers or {}).get(server)
            if "*" in tool or listed is not None and (not name or name in listed):
                continue
            if listed is not None:
                close = difflib.get_close_matches(name, sorted(listed), 1, 0.5)
                hint = f"; did you mean mcp__{server}__{close[0]}?" if close else ""
                raise UsageError(
                    f"permission rule {rule.text!r} ({where}): MCP server {server!r} has no "
                    f"tool {name!r}{hint}"
                )
            warnings.append(
                f"permission rule {rule.text!r} ({where}): the tools of MCP server {server!r} "
                "are not known; the rule is kept as written"
            )
            continue
        if tool in known:
            continue
        by_case = [k for k in sorted(known) if k.lower() == tool.lower()]
        close = by_case or difflib.get_close_matches(tool, sorted(known), 1, 0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UsageError(
            f"permission rule {rule.text!r} ({where}) names no tool agi knows: {tool!r}{hint}"
        )
    return warnings


def check_run(rules: list[Rule], tools: list[Any], agents: list[Any] = ()) -> list[str]:  # type: ignore[assignment]
    """check_tools for a run: `tools` the run's tool objects (users' tools and MCP servers'
    ones named), `agents` its subagent files, whose `tools` and `disallowedTools` name tools
    as rules do. Returns the warnings."""
    names = {str(t.name) for t in tools}
    servers: dict[str, set[str]] = {}
    for t in tools:
        if str(t.name).startswith("mcp__"):
            server, _, name = str(t.name)[5:].partition("__")
            servers.setdefault(server, set()).add(name)
    listed = list(rules)
    for agent in agents:
        for text in [*(agent.tools or []), *(agent.disallowed or [])]:
            if text.strip() == "*":
                continue
            listed.append(parse_rule(text, "allow", f"agent file {agent.path or agent.name}", "."))
    return check_tools(listed, names | {"Task"}, servers)


def check_at_start(rules: list[Rule], user_tools: bool) -> list[str]:
    """check_tools for a server's own options, before it serves (docs: permissions): the
    built-in names only, so a misspelled rule fails the start, not the first session or call.
    With users' tools configured (their names are known once a run loads them) only `mcp__`
    rules are looked at here; each run checks the rest."""
    listed = rules if not user_tools else [r for r in rules if r.tool.startswith("mcp__")]
    return check_tools(listed, {"Task"})


# --- matching ----------------------------------------------------------------------------------


@lru_cache(maxsize=512)
def _pattern(specifier: str) -> re.Pattern[str]:
    """`PREFIX:*` and `PREFIX *`: the prefix alone or followed by white space and anything;
    elsewhere `*` is any text; the rest is literal."""
    tail = ""
    if specifier.endswith(":*") or specifier.endswith(" *"):
        specifier, tail = specifier[:-2].rstrip(), r"(?:\s.*)?"
    body = ".*".join(re.escape(piece) for piece in specifier.split("*"))
    return re.compile(body + tail, re.S)


def text_matches(specifier: str, texts: set[str]) -> bool:
    pattern = _pattern(specifier)
    return any(pattern.fullmatch(t.strip()) for t in texts)


@lru_cache(maxsize=256)
def _gitignore(pattern: str) -> Any:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines([pattern])


def path_matches(rule: Rule, file_path: str, cwd: str) -> bool:
    """A gitignore-style pattern against a path; a path outside the pattern's root never matches."""
    spec = rule.specifier or ""
    if spec.startswith("//"):
        root, pattern = "/", spec[1:]
    elif spec == "~" or spec.startswith("~/"):
        root, pattern = os.path.expanduser("~"), spec[1:] or "/**"
    elif spec.startswith("/"):
        root, pattern = rule.base, spec
    else:
        root, pattern = cwd, spec[2:] if spec.startswith("./") else spec
    if "\0" in file_path:  # no file has such a name: nothing to match (the tool says why)
        return False
    joined = os.path.join(cwd, os.path.expanduser(file_path))
    # the path as written, and the real path the call touches: links resolved first and `..`
    # applied after them, as the kernel does (`/proc/self/cwd/..`, `link/..`)
    forms = {os.path.abspath(joined), os.path.realpath(joined)}
    roots = {os.path.abspath(root), os.path.realpath(root)}  # a root reached through a link
    found = []
    for path in forms:
        inside_any = False
        for base in roots:
            rel = os.path.relpath(path, base)
            inside = rel != ".." and not rel.startswith("../") and rel != "."
            inside_any = inside_any or (inside and bool(_gitignore(pattern).match_file(rel)))
        found.append(inside_any)
    # allow rules must hold for the path and for where it leads; deny/ask for either
    return all(found) if rule.kind == "allow" else any(found)


def tool_matches(rule: Rule, name: str) -> bool:
    if rule.tool == name or name in PATH_TOOLS.get(rule.tool, ()):
        return True
    if rule.tool.startswith("mcp__"):
        if "*" in rule.tool:
            return _pattern(rule.tool).fullmatch(name) is not None
        return name.startswith(rule.tool + "__")  # `mcp__SERVER`: every tool of the server
    return False


def rule_matches(rule: Rule, call: Call, strict: bool) -> bool:
    """Whether the rule covers the call (for Bash: one part of it, given as `call.parts`)."""
    if not tool_matches(rule, call.name):
        return False
    if rule.specifier is None:
        return True
    if call.name == "Bash":
        return call.part is not None and text_matches(rule.specifier, call.part.forms(strict))
    if rule.tool in PATH_TOOLS and call.name in SEARCHES:
        return search_matches(rule, call.input.get("path"), call.cwd)
    if rule.tool in PATH_TOOLS and call.name in PATH_TOOLS:
        path = call.input.get("file_path")
        return isinstance(path, str) and bool(path) and path_matches(rule, path, call.cwd)
    if call.name == "WebFetch" and rule.tool == "WebFetch":
        return domain_matches(rule.specifier, call.input.get("url"))
    if call.name in NAMED_INPUT and rule.tool == call.name:
        return text_matches(rule.specifier, call.names)
    return False


def search_matches(rule: Rule, path: object, cwd: str) -> bool:
    """A Glob's or Grep's root (its `path`, else the working directory) against a Read rule:
    the rule matches the root, or everything in it when the root is a directory (a rule on
    a directory covers a search rooted in it; files a deny rule covers deeper down are left
    out of the results instead: hides)."""
    root = path if isinstance(path, str) and path else "."
    if "\0" in root:
        return False
    full = os.path.join(cwd, os.path.expanduser(root))
    if path_matches(rule, root, cwd):
        return True
    return os.path.isdir(full) and path_matches(rule, os.path.join(root, PROBE), cwd)


@dataclass
class Call:
    """What rules are judged against: the tool, its input, and for Bash the part at hand."""

    name: str
    input: dict[str, Any]
    cwd: str
    names: set[str] = field(default_factory=set)  # Task / Skill: the names the input stands for
    part: Any = None
    stateful: bool = False  # a line typed into a terminal's running shell


@dataclass(frozen=True)
class Decision:
    """`deny`, `ask`, `allow`, or `none` (no rule matched), and the rule that decided."""

    verdict: str
    rule: Rule | None = None


def decide(
    permissions: Permissions,
    name: str,
    input: dict[str, Any],
    cwd: str,
    names: set[str] | None = None,
    stateful: bool = False,
) -> Decision:
    """Judge a call: deny, then ask, then allow; a Bash line part by part. A terminal's
    command and the lines typed into it are judged as Bash lines too: the Bash rules that allow
    such a line allow the call."""
    if name == "Terminal":
        typed = terminal_lines(input, names)
        if typed is not None:
            send = input.get("action") == "send"  # into a shell that ran earlier lines
            as_bash = decide(permissions, "Bash", {"command": typed}, cwd, stateful=send)
            if as_bash.verdict in ("deny", "ask"):
                return as_bash
            if as_bash.verdict == "allow":  # the Bash rules that allow the line a shell runs
                return as_bash
    call = Call(name, input, cwd, set(names or ()) if name != "Terminal" else set())
    call.stateful = stateful
    if name in NAMED_INPUT:
        given = input.get(NAMED_INPUT[name]) or ("general-purpose" if name == "Task" else "")
        if isinstance(given, str) and given:
            call.names |= _named(name, given)
    rules = [r for r in permissions.rules if tool_matches(r, name)]
    if not rules:
        return Decision("none")
    if name != "Bash" or all(r.specifier is None for r in rules):
        for kind in KINDS:
            for rule in rules:
                if rule.kind == kind and rule_matches(rule, call, kind == "allow"):
                    return Decision(kind, rule)
        return Decision("none")
    return _decide_bash(rules, call)


def _named(tool: str, given: str) -> set[str]:
    """The names a Task/Skill input stands for (`PLUGIN:NAME` and `NAME`); for SlashCommand
    the command line as given and with the command's bare name (`/sec src/`)."""
    if tool != "SlashCommand":
        return {given, given.rpartition(":")[2]}
    line = given.strip()
    line = line if line.startswith("/") else "/" + line
    word, _, rest = line.partition(" ")
    return {line, f"/{word[1:].rpartition(':')[2]} {rest}".strip()}


def terminal_lines(input: dict[str, Any], names: set[str] | None = None) -> str | None:
    """What a Terminal call would run in a shell: its `start` command, or the lines its `send`
    completes (given by the tool, which knows what was typed before; else the keys alone);
    None when it completes no line."""
    if input.get("action") == "start":
        command = input.get("command")
        return command if isinstance(command, str) and command.strip() else None
    keys = input.get("keys")
    if input.get("action") != "send" or not isinstance(keys, str):
        return None
    given = [n[len(MARK) :] for n in names or () if n.startswith(MARK)]
    text = given[0] if given else "\n".join(LineEditor().feed(keys))
    return text if text.strip() else None


def _decide_bash(rules: list[Rule], call: Call) -> Decision:
    """Any part denied (or asked) decides for the whole line; allowed only if every part is."""
    command = call.input.get("command")
    command = command if isinstance(command, str) else ""
    parts = split(command, call.stateful)
    whole = Part(command.strip(), command.strip())
    candidates = [whole] if parts is None else [whole, *parts]
    for kind in ("deny", "ask"):
        for part in candidates:
            for rule in rules:
                if rule.kind == kind and rule_matches(rule, replace(call, part=part), False):
                    return Decision(kind, rule)
    allows = [r for r in rules if r.kind == "allow"]
    dark = [] if parts is None else [p for p in parts if p.opaque and not _vouched(p, allows, call)]
    if parts is None or dark:  # what the parser cannot read, or a program that runs code no
        # rule sees (docs: permissions), matches no allow rule, and no deny rule can be shown
        # to stay clear of it: the strictest decides
        for kind in ("deny", "ask"):
            strict = next((r for r in rules if r.kind == kind and r.specifier is not None), None)
            if strict is not None:
                return Decision(kind, strict)
        return Decision("none")
    first: Rule | None = None
    # `time CMD`: CMD is judged on its own; a line of redirections alone (`> F`): as written
    for part in [p for p in parts if not p.transparent] or [whole]:
        found = next(
            (
                r
                for r in allows
                if rule_matches(r, replace(call, part=part), True)
                and (part.opaque is None or _vouched(part, [r], call))
            ),
            None,
        )
        if found is None:
            return Decision("none")
        first = first or found
    return Decision("allow", first)


def _vouched(part: Any, allows: list[Rule], call: Call) -> bool:
    """Whether an allow rule names an opaque command's program with the option that makes it
    opaque (`Bash(python3 -c:*)`), or is the exact command (code inside a script)."""
    return any(
        r.specifier is not None
        and vouches(r.specifier, part.opaque)
        and rule_matches(r, replace(call, part=part), True)
        for r in allows
    )


MOVES = frozenset({"cd", "pushd", "popd"})  # after them a relative path is not the call's


def bash_writes(command: Any, stateful: bool = False) -> list[str | None]:
    """The files a Bash line writes through redirections and writing options (`> F`,
    `git log --output=F`), as absolute-or-relative paths; None for one agi cannot know (a
    name of unknown value, a relative name after `cd`, or in a terminal's running shell)."""
    if not isinstance(command, str):
        return []
    parts = split(command, stateful) or []
    moved = stateful or any(p.words and p.words[0] in MOVES for p in parts)
    found: list[str | None] = []
    for part in parts:
        for target in part.writes:
            if target is not None and moved and not target.startswith(("/", "~")):
                target = None
            if target not in found:
                found.append(target)
    return found


# The check at the toolbox (modes, asking a person) is agi.policy.guard.
