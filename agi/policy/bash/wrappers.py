"""Commands that run other commands, and builtins that change what later commands do.

`inner(words)` returns what a simple command makes bash run besides itself: other commands
(`time rm x`, `env A=1 rm x`, `xargs rm`, `find . -exec rm {} ;`) and lines it evaluates
(`bash -c 'rm x'`, `eval rm x`, `trap 'rm x' EXIT`, `watch rm x`). A wrapper whose options it
does not know, a word it needs that has no single value, or a builtin that redefines commands
(`alias`, `shopt -s expand_aliases`, `hash -p`, `enable`, `bind -x`, …) raises Unreducible.
"""

from __future__ import annotations

import os
import re

from agi.policy.bash.runners import unwrap
from agi.policy.bash.words import INTEGER, NAME, Unreducible, Word, _name_ok, dangerous
from agi.policy.bash.wrapper_tables import (
    ASSIGNMENT,
    DASH_C,
    FIND_EXEC,
    OPAQUE,
    RESERVED,
    RUNNERS,
    SAFE_SHOPTS,
    SHELL_VALUE_OPTIONS,
    SHELLS,
    WRAPPERS,
)


def need(word: Word) -> str:
    """The single value of a word the judge must know, or Unreducible."""
    if word.value is None or not word.plain:
        raise Unreducible
    return word.value


def program(name: str) -> str:
    """A path to a program names the program: `/bin/rm` is `rm`."""
    return os.path.basename(name) if "/" in name else name


def inner(words: list[Word], fed: bool = True) -> tuple[list[list[Word]], list[str]]:
    """(commands this one runs, lines it evaluates); Unreducible when unsure. `fed`: its stdin
    is a pipe or a redirection (a shell reading commands from it runs what no rule sees)."""
    name = program(need(words[0]))
    args = words[1:]
    if name in WRAPPERS:
        return _wrapped(name, args), []
    if name in SHELLS:
        _keys(name, [w.value for w in args])
        return [], _shell(args, fed)
    if name in DASH_C:
        return _dash_c(name, args, fed)
    if name == "eval":
        return [], [" ".join(need(w) for w in args)] if args else []
    if name == "trap":
        return [], _trap(args)
    if name == "watch":
        return [], _watch(args)
    if name == "find":
        return _find(args), []
    if name in OPAQUE:
        raise Unreducible
    found = unwrap(name, args)  # setarch, chronic, uv run, docker exec, ssh HOST CMD, …
    if found is not None:
        return found
    _builtin(name, args)
    return [], []


def _options(args: list[Word], flags: frozenset[str], valued: frozenset[str]) -> int:
    """How many words the options take."""
    at = 0
    while at < len(args):
        value = need(args[at])
        if value == "--":
            return at + 1
        if not value.startswith("-") or value == "-" and "-" not in flags:
            return at
        if value in flags:
            at += 1
        elif value in valued:
            need(args[at + 1]) if at + 1 < len(args) else None
            at += 2
        elif (
            value.startswith("--")
            and value.partition("=")[0] in valued
            or value[:2] in valued
            and len(value) > 2
            or re.fullmatch(r"-[0-9]+", value)
        ):
            at += 1
        else:
            raise Unreducible
    return at


def _wrapped(name: str, args: list[Word]) -> list[list[Word]]:
    flags, valued, positional = WRAPPERS[name]
    if name == "command" and any(w.value in ("-v", "-V") for w in args[:2]):
        return []  # `command -v x` only looks x up
    at = _options(args, flags, valued)
    if name == "env":
        while at < len(args) and "=" in (args[at].value or "="):
            variable = need(args[at]).partition("=")[0]
            if dangerous(variable) or not NAME.fullmatch(variable):
                raise Unreducible  # `env PATH=… ls` runs another ls
            at += 1
    for _ in range(positional):
        need(args[at]) if at < len(args) else None
        at += 1
    rest = args[at:]
    while name in ("time", "coproc") and rest and ASSIGNMENT.match(rest[0].value or ""):
        target = need(rest[0]).partition("=")[0].rstrip("+")
        if dangerous(target.partition("[")[0]) or not _name_ok(target):
            raise Unreducible  # keywords take a whole simple command: `time PATH=… ls`
        rest = rest[1:]
    if not rest:
        return [] if name != "xargs" else [[Word("echo", "echo")]]
    if name == "coproc" and need(rest[0]) in RESERVED | {"((", "[["}:
        raise Unreducible
    if name == "xargs" and program(need(rest[0])) in RUNNERS:
        raise Unreducible  # `xargs env`: the command would come from stdin
    return [rest]


def _shell(args: list[Word], fed: bool) -> list[str]:
    """`bash -c LINE`: the line; `bash FILE`: nothing more to judge; `bash` alone reads its
    commands from stdin: from a pipe or a file no rule sees them (from a terminal, each line
    typed is judged; the Bash tool's stdin is empty)."""
    at = 0
    command = False
    while at < len(args):
        value = need(args[at])
        if value in SHELL_VALUE_OPTIONS:
            at += 2
            continue
        if value == "--":
            at += 1
            break
        if not value.startswith(("-", "+")) or value in ("-", "+"):
            break
        if not value.startswith("--") and "c" in value:
            command = True
        at += 1
    if command:
        if at >= len(args):
            raise Unreducible
        return [need(args[at])]
    if (at >= len(args) or args[at].value == "-") and fed:
        raise Unreducible  # the commands come from a pipe or a file
    if at < len(args) and _from_stdin(need(args[at])):
        raise Unreducible  # `bash /dev/stdin`, `bash /dev/fd/3 3<<<…`
    return []


def _dash_c(name: str, args: list[Word], fed: bool) -> tuple[list[list[Word]], list[str]]:
    """`su -c LINE`, `script -qc LINE`, `flock FILE -c LINE` or `flock FILE CMD …`."""
    if name == "flock":  # options, the lock file, then `-c LINE` or the command
        flags = "-s -x -e -n -u -o -F --shared --exclusive --nonblock --unlock --close --no-fork"
        at = _options(args, frozenset(flags.split()), frozenset({"-w", "--timeout", "-E"})) + 1
        if at < len(args) and args[at].value in ("-c", "--command"):
            return [], [need(args[at + 1])] if at + 1 < len(args) else []
        return ([args[at:]] if at < len(args) else []), []
    for at, word in enumerate(args):  # su, runuser, sg, script: no command among the words
        value = need(word)
        short = value.startswith("-") and not value.startswith("--") and "c" in value
        if (value == "--command" or short and value.endswith("c")) and at + 1 < len(args):
            return [], [need(args[at + 1])]  # `-c LINE`, `-qc LINE`
        if short:
            return [], [value[value.index("c") + 1 :]]  # `-cLINE`
        if value.startswith(("--command=", "--session-command=")):
            return [], [value.partition("=")[2]]
        if value == "--session-command" and at + 1 < len(args):
            return [], [need(args[at + 1])]
    named = _switch_user(name, args)
    if named is not None:
        return named
    if fed:
        raise Unreducible  # an interactive shell reading commands from a pipe or a file
    return [], []


def _switch_user(name: str, args: list[Word]) -> tuple[list[list[Word]], list[str]] | None:
    """What su, runuser and sg run without `-c`: `runuser -u USER CMD …` runs CMD, `sg GROUP
    LINE` runs LINE, and `-s PROGRAM` runs PROGRAM as the shell (`su -s /bin/rm`)."""
    values = [need(w) for w in args]
    for at, value in enumerate(values):
        if value in ("-s", "--shell") or value.startswith("--shell="):
            shell = value.partition("=")[2] or (values[at + 1] if at + 1 < len(values) else "")
            if program(shell) not in SHELLS:
                raise Unreducible
    if name == "sg":  # `sg [-] GROUP [-c] LINE`
        words = [v for v in values if v != "-"]
        return [], [" ".join(words[1:])] if len(words) > 1 else []
    if name != "runuser" or not {"-u", "--user"} & set(values):
        return None
    valued = {"-u", "--user", "-g", "--group", "-G", "--supp-group", "-s", "--shell", "-w"}
    at = 0
    while at < len(values) and values[at].startswith("-") and values[at] != "--":
        at += 2 if values[at] in valued else 1
    at += 1 if at < len(values) and values[at] == "--" else 0
    return ([args[at:]] if at < len(args) else []), []


def _from_stdin(path: str) -> bool:
    """A script path that is an open file descriptor: its commands come from a pipe."""
    return path == "-" or re.match(r"/(dev/(stdin|fd/)|proc/[^/]+/fd/)", path) is not None


def _trap(args: list[Word]) -> list[str]:
    values = [need(w) for w in args]
    if not values or values[0] in ("-p", "-l", "-P"):
        return []
    if values[0] == "--":
        values = values[1:]
    if not values or values[0] == "-" or INTEGER.fullmatch(values[0]) and len(values) == 1:
        return []
    return [values[0]]


def _watch(args: list[Word]) -> list[str]:
    flags = frozenset({"-b", "-c", "-e", "-g", "-t", "-p", "-d", "-r", "-w", "-C"})
    at = _options(args, flags | {"--beep", "--color", "--no-title", "--precise"}, frozenset())
    if any(w.value in ("-x", "--exec") for w in args[:at]):
        raise Unreducible
    valued = _options(args, flags, frozenset({"-n", "--interval", "-q"}))
    return [" ".join(need(w) for w in args[max(at, valued) :])] if args[max(at, valued) :] else []


def _find(args: list[Word]) -> list[list[Word]]:
    found = []
    at = 0
    while at < len(args):
        if args[at].value in FIND_EXEC:
            end = at + 1
            while end < len(args) and args[end].value not in (";", "+"):
                end += 1
            command = args[at + 1 : end]
            if not command or need(command[0]) == "{}" or "{}" in need(command[0]):
                raise Unreducible  # the found file is what runs
            found.append(command)
            at = end
        at += 1
    return found


def _keys(name: str, values: list[str | None]) -> None:
    """What changes the meaning of keys typed into a terminal's shell (a line typed after it
    would not be the line the judge replays): readline bindings and macros (`bind`), vi mode
    (`set -o vi`, `set +o emacs`, `bash -o vi`, `--noediting`), the terminal's erase and kill
    characters (`stty erase q`). Raise Unreducible."""
    if name == "bind" and not set(values) <= {"-l", "-p", "-P", "-s", "-S", "-v", "-V", "-X"}:
        raise Unreducible
    if name == "stty" and not set(values) <= {"-a", "--all", "-g", "--save", "size", "speed"}:
        raise Unreducible
    editing = {"vi", "emacs", "--noediting"} & set(values)
    if editing and (name in ("set", "shopt") or name in SHELLS):
        raise Unreducible


def _builtin(name: str, args: list[Word]) -> None:
    """Builtins that change what later commands run, or evaluate names: raise Unreducible."""
    values = [w.value for w in args]
    _keys(name, values)
    if name in ("alias", "enable", "fc", "complete", "compgen", "unalias"):
        if name == "alias" and all(v is not None and "=" not in v for v in values):
            return  # listing aliases
        if args:
            raise Unreducible
        return
    if name == "hash" and any(v is None or v.startswith("-p") for v in values):
        raise Unreducible
    if name == "shopt":
        chosen = set(values) - {"-s", "-u", "-q", "-p"}
        setting = bool({"-s", "-u"} & set(values))
        if None in chosen or setting and not chosen <= SAFE_SHOPTS:
            raise Unreducible
    if name in ("read", "mapfile", "readarray", "getopts", "unset", "wait", "printf", "let"):
        _names(name, args)
    if name in ("test", "[") and any(w.value in ("-v", "-R") for w in args):
        at = next(i for i, w in enumerate(args) if w.value in ("-v", "-R"))
        if at + 1 >= len(args) or not _name_ok(need(args[at + 1])):
            raise Unreducible  # `test -v 'a[$(cmd)]'` evaluates the subscript
    if name in ("source", ".") and (not args or _from_stdin(need(args[0]))):
        raise Unreducible


NAME_OPTIONS = {"read": "adinNptu", "mapfile": "dnOsuc", "readarray": "dnOsuc", "wait": "p"}


def _names(name: str, args: list[Word]) -> None:
    """Builtins that take variable names: each must be a plain name (a subscript is arithmetic,
    and a name of unknown value may be one)."""
    if name == "printf":  # `-v NAME`, `-vNAME`: a plain name that changes nothing that runs
        first = args[0].value if args else ""
        if first is None:  # `"Total: $n"` cannot start with `-v`; `"$fmt"` can
            first = need(args[0]) if args[0].text.lstrip("'\"")[:1] in "$`-\\" else ""
        if first.startswith("-v"):
            target = first[2:] or (need(args[1]) if len(args) > 1 else "")
            if not _name_ok(target) or target.startswith("-") or dangerous(target.split("[")[0]):
                raise Unreducible
        return
    values = [need(w) for w in args]
    if name == "let":
        for v in values:  # only numbers, operators and the names assigned to
            bare = re.sub(r"[A-Za-z_]\w*(?=\s*(?:[-+*/%&|^]|<<|>>)?=(?!=))", "", v)
            if re.search(r"[$`\[A-Za-z_]", bare):
                raise Unreducible
        return
    if name in ("mapfile", "readarray") and any(v.startswith("-C") for v in values):
        raise Unreducible
    names: list[str] = []
    valued = NAME_OPTIONS.get(name, "")
    at = 0
    while at < len(values):
        v = values[at]
        if v.startswith("-") and len(v) > 1 and name != "getopts":
            if v[-1] in valued and name in NAME_OPTIONS:
                if at + 1 < len(values) and v[-1] == {"read": "a", "wait": "p"}.get(name):
                    names.append(values[at + 1])
                at += 1
        else:
            names.append(v)
        at += 1
    if name == "getopts":
        names = names[1:2]
    if not all(_name_ok(n) and (name == "unset" or not dangerous(n.split("[")[0])) for n in names):
        raise Unreducible  # `read PATH < f` changes what runs next
