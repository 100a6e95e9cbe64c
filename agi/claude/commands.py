"""Claude Code slash commands: `/NAME args` or `/PLUGIN:NAME args` at the start of a prompt is
replaced by the command file's body (docs: permissions).

The body gets `$ARGUMENTS` and `$1`, `$2`, … from the rest of the first line (without
`$ARGUMENTS` in the body, the arguments are appended as `ARGUMENTS: …`, as Claude Code does);
a plugin's `${CLAUDE_PLUGIN_ROOT}` is replaced in body and front matter. Shell steps, inline
`` !`CMD` `` and fenced blocks opened with ```` ```! ````, run before the prompt is sent, with
`bash -c` in the working directory, subject to the permission rules plus the command's
`allowed-tools`; their output replaces them. Front matter: `description`, `argument-hint`,
`allowed-tools` (allow rules while the command runs), `model`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.claude.qualified import candidates, resolve
from agi.claude.skills import FrontMatterError, lenient_front_matter, split_front_matter
from agi.errors import UsageError
from agi.fileio import read_text
from agi.policy.bash.quote import as_judged, by_reference, step_environment
from agi.policy.environment import child_env
from agi.policy.guard import Guard
from agi.policy.permissions import Permissions, parse_rule, parse_rules
from agi.tools.shell import run_process

if TYPE_CHECKING:
    from agi.policy.permissions import Rule

FIRST_WORD = re.compile(r"/([A-Za-z0-9_.-]+(?::[A-Za-z0-9_.-]+)?)(?=\s|$)")
# one pattern for both kinds of shell step, so that one pass over the body finds them all and a
# step's output is never scanned for steps again: a fenced ```! block (group 1) or !`CMD` (group 2)
STEP = re.compile(r"```!\s*\n(.*?)\n?```|!`([^`\n]+)`", re.S)
TOOL_NAME = re.compile(r"[A-Za-z_]")  # a rule's tool name starts with a letter (`5` is no tool)
POSITIONAL = re.compile(r"\$(\d+)")
STEP_TIMEOUT = 120.0  # seconds, the Bash tool's default


@dataclass
class Command:
    """A command file, known by name at start-up and read only when used or listed."""

    name: str  # `PLUGIN:NAME` for a plugin's command
    path: Path
    plugin_root: str | None = None
    label: str = ""  # the sub-directory of `commands/` it is in (`git`), shown in listings

    def read(self) -> tuple[dict[str, Any], str]:
        """(front matter, body); a file without front matter is all body. Malformed front
        matter is a usage error naming the file."""
        try:
            text = read_text(self.path)  # bounded (docs: security)
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"command /{self.name} ({self.path}): cannot read it: {e}") from e
        if not text.lstrip("\ufeff").startswith("---"):
            meta: dict[str, Any] = {}
            body = text
        else:
            try:
                lines, body = split_front_matter(text)
                meta, problem = lenient_front_matter(lines)  # Claude Code's retry, not its drop
                if problem is not None:
                    raise FrontMatterError(problem)
            except FrontMatterError as e:
                raise UsageError(f"command /{self.name} ({self.path}): front matter: {e}") from e
        if self.plugin_root:
            meta = {k: _rooted(v, self.plugin_root) for k, v in meta.items()}
            body = _rooted_body(body, self.plugin_root)
        return meta, body

    def summary(self) -> str:
        """`description` and `argument-hint`, for listings (never fails); the sub-directory as
        a label, as Claude Code shows it (`(project:git)`: here `(git)`)."""
        try:
            meta, _ = self.read()
        except UsageError as e:
            return f"(unreadable: {e})"
        hint = meta.get("argument-hint")
        if isinstance(hint, list):  # `[name]` is YAML for a list; the writer meant the brackets
            hint = "[" + ", ".join(map(str, hint)) + "]"
        text = str(meta.get("description") or "").strip()
        if self.label:
            text = f"{text} ({self.label})".strip()
        return f"{hint} — {text}" if hint and text else str(hint or text)

    def model_may_run(self) -> bool:
        """Whether the SlashCommand tool offers it: front matter `disable-model-invocation`
        not true (an unreadable file is not offered). Unlike Claude Code, a command without a
        `description` is offered too (docs: claude-code), by its name."""
        try:
            meta, _ = self.read()
        except UsageError:
            return False
        return meta.get("disable-model-invocation") not in (True, "true", "True")


def _rooted_body(body: str, root: str) -> str:
    """The plugin root put into a body's text, but not into its shell steps: there it stays a
    reference the shell expands (agi.policy.bash.quote), so a directory named `a $(x) b`
    runs nothing."""
    out: list[str] = []
    at = 0
    for m in STEP.finditer(body):
        out += [body[at : m.start()].replace("${CLAUDE_PLUGIN_ROOT}", root), m.group(0)]
        at = m.end()
    return "".join(out) + body[at:].replace("${CLAUDE_PLUGIN_ROOT}", root)


def _rooted(value: Any, root: str) -> Any:
    if isinstance(value, str):
        return value.replace("${CLAUDE_PLUGIN_ROOT}", root)
    if isinstance(value, list):
        return [_rooted(v, root) for v in value]
    return value


def find_commands(
    places: list[Path],
    plugin: str | None = None,
    root: str | None = None,
    warnings: list[str] | None = None,
) -> list[Command]:
    """The command files (`*.md`) in directories, sub-directories included (or named as
    files), by file name as Claude Code names them: `commands/git/commit.md` is `commit`, with
    `git` as its label. Top-level files come first, so they win a clash of names."""
    found: list[Command] = []
    for place in places:
        if place.is_file():
            files = [place]
        elif place.is_dir():
            files = sorted(
                (p for p in place.rglob("*.md") if p.is_file()),
                key=lambda p: (len(p.relative_to(place).parts), str(p)),
            )
        else:
            if warnings is not None:
                warnings.append(f"commands {place}: no such file or directory; skipped")
            continue
        for file in files:
            name = f"{plugin}:{file.stem}" if plugin else file.stem
            label = "" if place.is_file() else "/".join(file.relative_to(place).parent.parts)
            first = next((c for c in found if c.name == name), None)
            if first is not None:  # skipped, warned or not
                if warnings is not None:
                    taken = f"has the name of {first.path}; skipped"
                    warnings.append(f"command /{name} ({file}) {taken}")
                continue
            found.append(Command(name, file, root, label))
    return found


def first_word(prompt: str) -> str | None:
    """The command a prompt names (`NAME` or `PLUGIN:NAME`), or None when it is a prompt."""
    m = FIRST_WORD.match(prompt)
    return m.group(1) if m else None


def lookup(name: str, commands: list[Command], builtins: tuple[str, ...] = ()) -> Command:
    """The command `name` stands for; unknown or ambiguous names are usage errors."""
    names = [c.name for c in commands]
    full = resolve(name, names)
    if full is not None:
        return next(c for c in commands if c.name == full)
    several = candidates(name, names)
    if len(several) > 1:
        raise UsageError(
            f"/{name} is in several plugins: use " + " or ".join(f"/{n}" for n in several)
        )
    known = ", ".join(f"/{n}" for n in [*builtins, *sorted(names)]) or "none"
    raise UsageError(f"unknown command /{name} (known: {known})")


@dataclass
class Expansion:
    """What a command makes of a prompt, before anything runs: the body as written, the
    arguments, the text after the first line, its allow rules and its model."""

    command: Command
    body: str
    arguments: str
    more: str = ""
    rules: list[Rule] = field(default_factory=list)
    model: str | None = None


def prepare(prompt: str, command: Command, cwd: str) -> Expansion:
    """Read the command a `/NAME args` prompt names; nothing is run here."""
    first, _, more = prompt.partition("\n")
    arguments = first.split(None, 1)[1].strip() if len(first.split(None, 1)) > 1 else ""
    meta, body = command.read()
    tools = _tools(meta.get("allowed-tools"), command, cwd)
    rules = parse_rules(tools, "allow", str(command.path), cwd)
    model = meta.get("model")
    return Expansion(
        command, body, arguments, more.strip(), rules, model if isinstance(model, str) else None
    )


def expand(expansion: Expansion, permissions: Permissions, where: Where) -> str:
    """The prompt a command stands for: its shell steps found in the body as written and run
    (the arguments go into a step as quoted data, never making steps of their own), the
    arguments substituted in the text around them."""
    body, arguments = expansion.body, expansion.arguments
    text = run_steps(body, arguments, expansion.command, permissions, where)
    if arguments and "$ARGUMENTS" not in body and not POSITIONAL.search(body):
        text = f"{text.rstrip()}\n\nARGUMENTS: {arguments}"
    if expansion.more:
        text = f"{text.rstrip()}\n\n{expansion.more}"
    return text.strip()


def _tools(value: Any, command: Command, cwd: str) -> list[str]:
    """`allowed-tools`: a list, or one string of rules separated by commas outside brackets.
    An entry that is not a rule (`Bash(git` with its `)` missing, `Bash(`, `5`) is a usage error
    naming the command file: read leniently, a typo would widen what the command allows."""
    if value is None:
        return []
    items = value if isinstance(value, list) else _split(value) if isinstance(value, str) else None
    if items is None:
        raise UsageError(
            f"command /{command.name} ({command.path}): allowed-tools must be a list or a "
            f"string of rules, not {value!r}"
        )
    texts = []
    for item in items:
        text = item.strip() if isinstance(item, str) else item
        if text == "":
            continue
        try:
            rule = parse_rule(text, "allow", str(command.path), cwd)
        except UsageError:
            rule = None
        if rule is None or not TOOL_NAME.match(rule.tool):
            raise UsageError(
                f"command /{command.name} ({command.path}): allowed-tools: bad rule {text!r} "
                "(expected Tool or Tool(specifier))"
            )
        texts.append(text)
    return texts


def _split(value: str) -> list[str]:
    """Split at the commas outside brackets; an unclosed `(` keeps the rest in its entry, so
    that the entry is seen to be malformed rather than read as other rules."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(value):
        if c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif c == "," and not depth:
            parts.append(value[start:i])
            start = i + 1
    return [*parts, value[start:]]


def substitute(body: str, arguments: str, quoted: bool = False) -> str:
    """`$ARGUMENTS`, then `$1`, `$2`, … (shell-style words of the arguments); `quoted`: for a
    shell step, every word quoted."""
    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    if not quoted:
        text = body.replace("$ARGUMENTS", arguments)
        return POSITIONAL.sub(lambda m: _word(words, int(m.group(1))), text)
    # in a shell step the arguments are never text: `$ARGUMENTS` becomes "$@" (each word one
    # argument, as Claude Code's plugins expect), `$N` "${N}", expanded by the shell from the
    # step's positional parameters and environment (agi.policy.bash.quote.step_environment)
    return by_reference(body)


def _word(words: list[str], n: int) -> str:
    return words[n - 1] if 0 < n <= len(words) else ""


@dataclass
class Where:
    """Where shell steps run: directory, extra environment, warnings, the --sandbox policy,
    and the session's trace (each step is recorded there, like a Bash call)."""

    cwd: str
    env: dict[str, str]
    warn: Any = None
    sandbox: Any = None
    trace: Any = None


def run_steps(
    body: str, arguments: str, command: Command, permissions: Permissions, where: Where
) -> str:
    """Run the body's shell steps, fenced ```! blocks and inline !`CMD`, in one pass over the
    body as written: neither the arguments nor a step's output is scanned for steps."""
    # the user typed the command: its steps are judged by the rules (and dontAsk), not by the
    # modes that ask about the model's calls
    mode = "dontAsk" if permissions.mode == "dontAsk" else "default"
    guard = Guard(Permissions(permissions.rules, mode))
    out: list[str] = []
    at = 0
    for m in STEP.finditer(body):
        out.append(substitute(body[at : m.start()], arguments))
        at = m.end()
        written = m.group(1) if m.group(1) is not None else m.group(2)
        step = substitute(written, arguments, quoted=True).strip()
        judged = as_judged(step, arguments, command.plugin_root)  # the words the step gets
        denial = guard.check("", "Bash", {"command": judged}, where.cwd)
        if denial is not None:
            _record(where, command, judged, None, denial)
            raise UsageError(
                f"/{command.name}: its shell step `{_short(judged)}` was not run: "
                + denial.removeprefix("Error: ")
            )
        out.append(_run(step, command, where, arguments))
    out.append(substitute(body[at:], arguments))
    return "".join(out)


def _record(where: Where, command: Command, step: str, code: int | None, denied: str) -> None:
    if where.trace is not None:
        record = {"type": "step", "command": f"/{command.name}", "step": step, "exit_code": code}
        where.trace({**record, **({"denied": denied} if denied else {})})


def _run(step: str, command: Command, where: Where, arguments: str = "") -> str:
    values, words = step_environment(arguments)
    environ = child_env({**where.env, **values})
    if command.plugin_root:
        environ["CLAUDE_PLUGIN_ROOT"] = command.plugin_root
    argv = ["bash", "-c", step, "bash", *words]
    try:
        output, code, timed_out = run_process(
            argv, where.cwd, STEP_TIMEOUT, environ, sandbox=where.sandbox
        )
    except OSError as e:
        raise UsageError(f"/{command.name}: cannot run its shell step: {e}") from e
    text = output.text().rstrip("\n")
    _record(where, command, step, code, "")
    if timed_out:
        text += f"\nCommand timed out after {STEP_TIMEOUT:g} s and was killed"
    elif code:
        text += f"\nexit code {code}"
    if (timed_out or code) and where.warn is not None:
        where.warn(f"/{command.name}: shell step `{_short(step)}` failed (exit code {code})")
    return text


def _short(step: str) -> str:
    one = " ".join(step.split())
    return one if len(one) <= 60 else one[:57] + "..."


def listing(commands: list[Command]) -> list[tuple[str, str, str]]:
    """(name, summary, file) of each command, for `--list-extensions` and the REPL's /help."""
    rows = []
    for c in sorted(commands, key=lambda c: c.name):
        summary = c.summary() + ("" if c.model_may_run() else " [the model cannot run it]")
        rows.append((f"/{c.name}", summary.strip(), str(c.path)))
    return rows
