"""Values put into shell text by reference, never as text (docs: security).

A command's `$ARGUMENTS` and `$1`, `$2`, … and a plugin's `${CLAUDE_PLUGIN_ROOT}` in a shell
step or a hook command become references the shell expands from its environment and positional
parameters: `"$@"`, `"${1}"`, `"${CLAUDE_PLUGIN_ROOT}"` where they stand unquoted,
`${AGI_ARGUMENTS}` inside double quotes, and the same closed and reopened around single quotes.
An expansion's result is never parsed as shell syntax, so no value (a plugin directory named
`a $(x) b`, arguments `;touch${IFS}x`) can add a command, whatever quoting the author used. A
misjudged quoting context can only leave a reference unexpanded, never run anything.
"""

from __future__ import annotations

import re

ARGUMENTS_VAR = "AGI_ARGUMENTS"  # the arguments as typed, for `"$ARGUMENTS"` in double quotes
ROOT = "${CLAUDE_PLUGIN_ROOT}"
# what is replaced: the plugin root, $ARGUMENTS, $N (not $10 glued to text: $1 then 0, as bash)
REFERENCE = re.compile(r"\$\{CLAUDE_PLUGIN_ROOT\}|\$ARGUMENTS\b|\$([1-9])")


def _forms(found: re.Match[str], arguments: bool) -> tuple[str, str] | None:
    """(unquoted form, double-quoted form) of a reference, or None to leave it as written."""
    text = found.group(0)
    if text == ROOT:
        return '"${CLAUDE_PLUGIN_ROOT}"', "${CLAUDE_PLUGIN_ROOT}"
    if not arguments:
        return None
    if text == "$ARGUMENTS":
        return '"$@"', "${" + ARGUMENTS_VAR + "}"
    n = found.group(1)
    return '"${' + n + '}"', "${" + n + "}"


def by_reference(text: str, arguments: bool = True) -> str:
    """`text` (a shell command) with its references made safe; `arguments`: also `$ARGUMENTS`
    and `$N` (a command's shell step; a hook has only the plugin root)."""
    out: list[str] = []
    quote = ""  # "'" inside single quotes, '"' inside double quotes
    at = 0
    while at < len(text):
        found = REFERENCE.match(text, at)
        forms = _forms(found, arguments) if found else None
        if found and forms:
            unquoted, double = forms
            out.append({"": unquoted, '"': double, "'": f"'{unquoted}'"}[quote])
            at = found.end()
            continue
        ch = text[at]
        if ch == "\\" and quote != "'":
            out.append(text[at : at + 2])
            at += 2
            continue
        if quote == "" and ch in "'\"":
            quote = ch
        elif quote == ch:
            quote = ""
        out.append(ch)
        at += 1
    return "".join(out)


def step_environment(arguments: str) -> tuple[dict[str, str], list[str]]:
    """(environment, positional parameters) a shell step gets for a command's arguments."""
    import shlex

    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    return {ARGUMENTS_VAR: arguments}, words


def _double(value: str) -> str:
    """`value` as text inside double quotes."""
    return re.sub(r'([$`"\\])', r"\\\1", value)


def as_judged(step: str, arguments: str, root: str | None) -> str:
    """The step as the permission rules judge it: each reference replaced by its value, quoted
    as the shell will see it (the same words the step's command receives)."""
    import shlex

    _, words = step_environment(arguments)

    def one(m: re.Match[str]) -> str:
        text = m.group(0)
        if text == '"$@"':
            return " ".join(shlex.quote(w) for w in words)
        name = m.group(1)
        if name == "CLAUDE_PLUGIN_ROOT":
            return m.group(0) if root is None else _double(root)
        if name == ARGUMENTS_VAR:
            return _double(arguments)
        n = int(name)
        return _double(words[n - 1] if n <= len(words) else "")

    pattern = r'"\$@"|\$\{(CLAUDE_PLUGIN_ROOT|' + ARGUMENTS_VAR + r"|[1-9])\}"
    return re.sub(pattern, one, step)
