"""The permission check at the toolbox: rules, then the permission mode, then a person.

Rules (agi.policy.permissions) decide first: deny, ask, allow, in every mode (an ask rule asks
even in bypassPermissions, as in Claude Code). A call no rule decides is left to the mode
(docs: acp, claude-code):

- `default`: it runs. A front end that sets `default_asks` (ACP) asks instead for calls that
  can change something.
- `acceptEdits`: calls that change nothing run; Write and Edit run inside the working
  directory (and `roots`); anything else that can change something asks.
- `plan`: only tools that change nothing are offered, and only they run.
- `bypassPermissions`: it runs. `dontAsk`: it is denied.

"Asks" means: PermissionRequest hooks may answer; otherwise the Notification hooks fire and the
front end's `ask` callback (agi.policy.asking) puts the question; None (no one to ask) denies.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agi.errors import UsageError
from agi.policy.asking import AskRequest, TerminalAsk, terminal_ask
from agi.policy.bash.parse import simple_commands
from agi.policy.permissions import (
    MODES,
    Permissions,
    Rule,
    bash_writes,
    check_tools,
    decide,
    parse_rule,
    path_matches,
    terminal_lines,
)

if TYPE_CHECKING:
    from agi.engine.seams import Ask, HookEvents, Tool
    from agi.policy.permissions import Decision

READ_ONLY = frozenset(  # they change nothing
    {"Read", "TempDir", "calculate", "Skill", "Task", "Glob", "Grep", "BashOutput"}
)
EDITS = frozenset({"Write", "Edit"})
PROTECTED = frozenset({".git", ".claude", ".vscode", ".idea", ".husky"})  # acceptEdits asks
# commands whose second word names what they do: `git commit`, `npm run`, `docker build`
SUBCOMMANDS = frozenset(
    {"apt", "apt-get", "brew", "bun", "cargo", "conda", "deno", "docker", "dotnet", "gh", "git"}
    | {"go", "helm", "kubectl", "npm", "pip", "pip3", "pnpm", "poetry", "podman", "systemctl"}
    | {"terraform", "uv", "yarn"}
)
LEARNED = "this session"
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")  # a command name a rule may carry
SUBCOMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
# options before the subcommand that take a value (`git -C DIR log`, `kubectl -n NS get`)
GLOBAL_VALUED: dict[str, frozenset[str]] = {
    name: frozenset(options.split())
    for name, options in (
        ("git", "-c -C --git-dir --work-tree --namespace --super-prefix --config-env --exec-path"),
        ("docker", "-H --host -c --context --config -l --log-level --tlscacert --tlscert --tlskey"),
        ("podman", "-c --connection --url --root --runroot --storage-driver --log-level"),
        ("kubectl", "-n --namespace --context --kubeconfig -s --server --cluster --user --token "
         "--as -v"),
        ("helm", "-n --namespace --kube-context --kubeconfig"),
        ("cargo", "-C --config -Z --color"),
        ("npm", "--prefix -w --workspace"),
        ("pnpm", "-C --dir --filter -F"),
        ("yarn", "--cwd"),
        ("systemctl", "-H --host -M --machine -t --type -p --property --state -n --lines -o "
         "--output"),
        ("go", "-C"),
        ("apt", "-o -c -t"),
        ("apt-get", "-o -c -t"),
        ("pip", "--python --log --proxy --cache-dir"),
        ("pip3", "--python --log --proxy --cache-dir"),
        ("conda", "-n --name -p --prefix"),
        ("gh", "-R --repo"),
        ("uv", "--directory --project --python --cache-dir --config-file"),
        ("bun", "--cwd"),
        ("poetry", "-C --directory -P --project"),
    )
}  # fmt: skip


def suggest_rules(tool: str, input: dict[str, Any]) -> list[str]:
    """The rules an "always" answer adds, as Claude Code writes them (docs: acp): for Bash one
    `Bash(NAME:*)` per command of the line, with the subcommand for commands that have one
    (`Bash(git commit:*)`, global options before it skipped: `git -C d log` gives `Bash(git
    log:*)`); the tool's name for other tools. None (no "always" choice) when a command's name
    is not a plain word, the line is more than simple commands (`(echo one)`, `[ -d . ]`, loops,
    substitutions), or a subcommand cannot be told: never the bare `Bash`. For a Terminal the
    rules of the line it makes a shell run (none when it completes no line): never `Terminal`."""
    if tool == "Terminal":  # the line it makes a shell run, as for Bash: never bare `Terminal`
        typed = terminal_lines(input)
        return suggest_rules("Bash", {"command": typed}) if typed is not None else []
    if tool != "Bash":
        return [tool]
    commands = simple_commands(input.get("command"))
    if not commands:
        return []
    rules: list[str] = []
    for words in commands:
        name = words[0]
        if not PLAIN_NAME.fullmatch(name):
            return []
        rule = f"Bash({name}:*)"
        if name in SUBCOMMANDS:
            sub = _subcommand(name, list(words[1:]))
            if sub is None:
                return []
            rule = f"Bash({name} {sub}:*)"
        if rule not in rules:
            rules.append(rule)
    return rules


def suggest_rule(tool: str, input: dict[str, Any]) -> str:
    """The first rule an "always" answer adds ("" when it adds none)."""
    rules = suggest_rules(tool, input)
    return rules[0] if rules else ""


def _subcommand(name: str, words: list[str]) -> str | None:
    valued = GLOBAL_VALUED.get(name, frozenset())
    at = 0
    while at < len(words) and words[at].startswith(("-", "+")):
        at += 2 if words[at] in valued else 1
    if at < len(words) and SUBCOMMAND.fullmatch(words[at]):
        return words[at]
    return None


class Guard:
    """Checks each tool call: a denial text (the tool's result), or None to run it.

    `ask`: the front end's question (agi.policy.asking); `hooks`: an object with
    `permission_request(request) -> (verdict | None, message, input | None)` and
    `notification(message, kind)` (agi.claude.hooks.lifecycle.Lifecycle); `read_only`: more tool
    names that change nothing;
    `on_learn(rule)`: told of every rule an "always" answer adds; `on_allowed(call_id)`: of
    every call let run. Every decision goes to
    `trace` with the rule and the file that made it."""

    def __init__(
        self,
        permissions: Permissions,
        trace: Callable[[dict[str, Any]], None] | None = None,
        ask: Ask | None = None,
        *,
        hooks: HookEvents | None = None,
        read_only: frozenset[str] | set[str] = frozenset(),
        default_asks: bool = False,
        person: Callable[[], bool] | None = None,
        on_learn: Callable[[Rule], None] | None = None,
        on_allowed: Callable[[str], None] | None = None,
        learned: list[Rule] | None = None,
        roots: list[str] | None = None,
    ):
        self.permissions, self.trace, self.hooks = permissions, trace, hooks
        self.on_allowed = on_allowed  # told the id of every call let run (ACP's in_progress)
        self.ask = ask if ask is not None else TerminalAsk(person) if person else terminal_ask
        self.read_only = READ_ONLY | set(read_only)
        self.default_asks, self.on_learn = default_asks, on_learn
        self.extra: list[Rule] = []  # a command's allowed-tools, while it runs
        self.learned: list[Rule] = [] if learned is None else learned  # "always" answers, for
        # the rest of the session (`learned`: a list the run's guards share)
        self.roots: list[str] = [] if roots is None else roots  # acceptEdits: more dirs (shared)
        self._lock = threading.Lock()

    @property
    def mode(self) -> str:
        return self.permissions.mode

    def set_mode(self, mode: str) -> None:
        """Change the mode for the calls that follow (ACP's session/set_mode)."""
        if mode not in MODES:
            raise ValueError(f"unknown permission mode {mode!r} (one of {', '.join(MODES)})")
        self.permissions = Permissions(self.permissions.rules, mode)

    def changes(self, name: str) -> bool:
        """Whether a tool can change something (what `plan` leaves out, and modes ask about)."""
        return name not in self.read_only

    def offers(self, name: str) -> bool:
        """Whether the tool is offered to the model in the current mode."""
        return self.mode != "plan" or not self.changes(name)

    def hiding(self, cwd: str) -> Callable[[str], bool] | None:
        """Which files Glob and Grep leave out: those a `Read` deny or ask rule covers."""
        with self._lock:
            rules = [*self.learned, *self.permissions.rules, *self.extra]
        covering = [r for r in rules if r.tool == "Read" and r.kind != "allow" and r.specifier]
        if not covering:
            return None
        # a search cannot ask about each file: what a deny or ask rule covers is left out

        def hidden(path: str) -> bool:
            return any(path_matches(r, path, cwd) for r in covering)

        return hidden

    def check(
        self,
        call_id: str,
        name: str,
        input: dict[str, Any],
        cwd: str,
        names: set[str] | None = None,
        approved: bool | str = False,
        *,
        tool: Tool | None = None,
    ) -> str | None:
        """`approved`: True when a PreToolUse hook allowed the call (deny rules still hold, ask
        rules and the mode do not); a string when a hook asks (the question's reason). `names`:
        what rules may match besides `name`; without them, the `tool`'s `canonical(input)`."""
        if names is None and tool is not None and hasattr(tool, "canonical"):
            names = tool.canonical(input)  # a Terminal's line, a Task's agent, a Skill's name
        with self._lock:
            rules = [*self.learned, *self.permissions.rules, *self.extra]
        permissions = Permissions(rules, self.mode)
        decision = decide(permissions, name, input, cwd, names)
        denial = self._verdict(decision, call_id, name, input, cwd, approved)
        if denial is None and name in ("Bash", "Terminal"):
            denial = self._writes(decision, call_id, name, input, cwd, names, approved, rules)
        if self.trace is not None and (decision.rule is not None or denial is not None):
            record: dict[str, Any] = {"type": "permission", "id": call_id, "tool": name}
            record.update(decision=decision.verdict, mode=self.mode, denied=denial is not None)
            if decision.rule is not None:
                record.update(rule=decision.rule.text, source=decision.rule.source)
            if approved:
                record["hook"] = "allow" if approved is True else "ask"
            self.trace(record)
        if denial is None and self.on_allowed is not None:
            self.on_allowed(call_id)
        return denial

    def _verdict(
        self,
        decision: Decision,
        call_id: str,
        name: str,
        input: dict[str, Any],
        cwd: str,
        hook: bool | str,
    ) -> str | None:
        rule = decision.rule
        if self.mode == "plan" and self.changes(name):
            return (
                "Error: denied: permission mode plan offers only tools that change nothing; "
                f"{name} can change something"
            )
        if decision.verdict == "deny" and rule is not None:
            return f"Error: denied by permission rule {rule.where}"
        if isinstance(hook, str):
            why = (
                f"a PreToolUse hook asks for approval ({hook})"
                if hook
                else "a PreToolUse hook asks for approval"
            )
            return self._ask(call_id, name, input, why, cwd)
        if hook is True or decision.verdict == "allow":
            return None
        if decision.verdict == "ask" and rule is not None:
            return self._ask(call_id, name, input, f"rule {rule.where} asks for approval", cwd)
        if self._mode_asks(name, input, cwd):
            why = f"permission mode {self.mode} asks for approval"
            return self._ask(call_id, name, input, why, cwd)
        if self.mode == "dontAsk":
            return "Error: denied: no permission rule allows this call (permission mode dontAsk)"
        return None

    def _writes(
        self,
        decision: Decision,
        call_id: str,
        name: str,
        input: dict[str, Any],
        cwd: str,
        names: set[str] | None,
        hook: bool | str,
        rules: list[Rule],
    ) -> str | None:
        """The files a command writes (redirections, writing options) judged as writes
        (docs: permissions): Write/Edit deny and ask rules hold; what no rule decides is left
        to the mode: dontAsk denies it, acceptEdits asks outside the working directory. A call
        a person or a hook approved, or one the bare `Bash` rule allows, is not asked again."""
        if name == "Bash":
            line, stateful = input.get("command"), False
        else:
            line, stateful = terminal_lines(input, names), input.get("action") == "send"
        targets = bash_writes(line, stateful)
        if not targets:
            return None
        rule = decision.rule
        bare = decision.verdict == "allow" and rule is not None and rule.specifier is None
        asked = isinstance(hook, str) or (
            hook is not True
            and decision.verdict != "allow"
            and (decision.verdict == "ask" or self._mode_asks(name, input, cwd))
        )
        settled = bare or asked or hook is True  # nothing more to ask about
        writing = Permissions([r for r in rules if r.tool in ("Write", "Edit")], self.mode)
        for target in targets:
            shown = target if target is not None else "a file whose name agi cannot know"
            if target is None:
                found = next((r for r in writing.rules if r.kind in ("deny", "ask")), None)
                verdict = found.kind if found is not None else "none"
            else:
                judged = decide(writing, "Write", {"file_path": target}, cwd)
                verdict, found = judged.verdict, judged.rule
            if verdict == "deny" and found is not None:
                return (
                    f"Error: denied by permission rule {found.where} (the command writes {shown})"
                )
            if verdict == "allow" or settled and verdict != "ask" or hook is True:
                continue
            if verdict == "ask" and found is not None:
                why = f"rule {found.where} asks for approval of writing {shown}"
            elif self.mode == "dontAsk":
                return (
                    f"Error: denied: no permission rule allows writing {shown} "
                    "(permission mode dontAsk)"
                )
            elif not self._write_asks(target, cwd):
                continue
            else:
                why = f"permission mode {self.mode} asks for approval of writing {shown}"
            denial = self._ask(call_id, name, input, why, cwd, suggestions=[])
            if denial is not None:
                return denial
        return None

    def _write_asks(self, target: str | None, cwd: str) -> bool:
        """Whether the mode asks about a write no rule decided (None: a file not known)."""
        if target is None:
            return self.mode == "acceptEdits" or self.mode == "default" and self.default_asks
        return self._mode_asks("Write", {"file_path": target}, cwd)

    def _mode_asks(self, name: str, input: dict[str, Any], cwd: str) -> bool:
        """Whether the mode asks about a call no rule decided."""
        if self.mode in ("bypassPermissions", "dontAsk", "plan") or not self.changes(name):
            return False
        if self.mode == "default":
            return self.default_asks
        if name in EDITS:  # acceptEdits: edits inside the working directory run
            path = input.get("file_path")
            return not (isinstance(path, str) and path and self._inside(path, cwd))
        return True

    def _inside(self, path: str, cwd: str) -> bool:
        """Inside the working directory (or `roots`), and not in a protected directory there
        (`.git`, `.claude`, ...: an edit there can run code or change agi's own settings; as in
        Claude Code, acceptEdits asks about them)."""
        target = os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))
        for root in [cwd, *self.roots]:
            base = os.path.realpath(root)
            if target == base or target.startswith(base.rstrip("/") + "/"):
                inner = os.path.relpath(target, base).split(os.sep)
                return not PROTECTED.intersection(inner[:-1])
        return False

    def _ask(
        self,
        call_id: str,
        name: str,
        input: dict[str, Any],
        why: str,
        cwd: str,
        suggestions: list[str] | None = None,
    ) -> str | None:
        """Put the question: PermissionRequest hooks, then a person through `ask`. A hook's
        allow may rewrite the call (`updatedInput`): `input` is changed in place, so the call
        runs with it, and deny rules are judged again on it. `suggestions`: the rules an
        "always" answer adds (by default suggest_rules'; none: no "always" choice)."""
        rules = suggest_rules(name, input) if suggestions is None else suggestions
        request = AskRequest(call_id, name, input, why, rules[0] if rules else "", list(rules))
        if self.hooks is not None:
            verdict, message, new_input = self.hooks.permission_request(request)
            if verdict == "deny":
                return f"Error: denied by a PermissionRequest hook: {message or 'no reason given'}"
            if verdict == "allow":
                return self._rewrite(input, new_input, name, cwd)
        present = getattr(self.ask, "present", None)
        if self.hooks is not None and (present is None or present()):
            self.hooks.notification(f"agi needs your permission to use {name}", "permission_prompt")
        answer = self.ask(request)
        if answer is None:
            return f"Error: denied: {why} and no one is at the terminal"
        if answer in ("allow_always", "reject_always"):
            kind = "allow" if answer == "allow_always" else "deny"
            for text in request.suggestions:  # none: the answer holds for this call only
                self.learn(parse_rule(text, kind, LEARNED, os.getcwd()))
        if answer in ("allow_once", "allow_always"):  # an SDK's allow may rewrite the call
            return self._rewrite(input, request.extra.get("updated_input"), name, cwd)
        said = request.extra.get("message")  # an SDK's deny: its message is the model's
        return f"Error: denied: {said}" if said else f"Error: denied: {why} and the user said no"

    def _rewrite(
        self, input: dict[str, Any], new: dict[str, Any] | None, name: str, cwd: str
    ) -> str | None:
        """Run with a PermissionRequest hook's input, unless a deny rule covers it."""
        if new is None:
            return None
        with self._lock:
            rules = [*self.learned, *self.permissions.rules, *self.extra]
        decision = decide(Permissions([r for r in rules if r.kind == "deny"]), name, new, cwd)
        if decision.rule is not None:
            return f"Error: denied by permission rule {decision.rule.where}"
        input.clear()
        input.update(new)
        return None

    def update(self, entries: list[dict[str, Any]], source: str) -> list[str]:
        """Apply Claude Code's permission updates (a PermissionRequest hook's
        `updatedPermissions`) for the rest of the session: `addRules`, `setMode` and
        `addDirectories`, whatever their `destination` (agi writes no settings file). Returns
        notes on what it could not apply."""
        notes = []
        for entry in entries:
            kind = entry.get("type")
            try:
                if kind == "addRules" and entry.get("behavior") in ("allow", "deny", "ask"):
                    for r in entry.get("rules") or []:
                        tool, content = r.get("toolName"), r.get("ruleContent")
                        if not isinstance(tool, str) or not tool:
                            raise ValueError("a rule needs a toolName")
                        text = f"{tool}({content})" if content else tool
                        rule = parse_rule(text, entry["behavior"], source, os.getcwd())
                        notes += check_tools([rule])  # a tool agi does not know: not learnt
                        self.learn(rule)
                elif kind == "setMode":
                    self.set_mode(entry.get("mode"))  # type: ignore[arg-type]
                elif kind == "addDirectories":
                    self.roots += [str(d) for d in entry.get("directories") or []]
                else:
                    notes.append(f"{source}: permission update {kind!r} is not applied by agi")
            except (UsageError, ValueError, AttributeError, TypeError) as e:
                notes.append(f"{source}: bad permission update {entry!r}: {e}")
        return notes

    def learn(self, rule: Rule) -> None:
        """Add a rule for the rest of the session (an "always" answer)."""
        with self._lock:
            self.learned.append(rule)
        if self.on_learn is not None:
            self.on_learn(rule)
