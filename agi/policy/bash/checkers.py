"""How each opaque program is checked (docs: permissions): interpreters, sed and awk, git,
archivers and copiers, debuggers and calculators; the `OPAQUE` table names them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from agi.policy.bash.argv import UNKNOWN, Opaque
from agi.policy.bash.runners import SSH_COMMAND_OPTIONS


def _clusters(
    values: list[str],
    code: str,
    value_letters: str,
    longs: Sequence[str] = (),
    long_valued: Sequence[str] = (),
) -> str | None:
    """For interpreters with clustered short options (`perl -lane`, `python3 -Bc`): the code
    option found among the options before the script (`-e`), or None. A value letter ending
    its cluster takes the next word (`-W ignore`), as a listed long option does."""
    skip = False
    for value in values:
        if skip:
            skip = False
            continue
        if value == "--" or not value.startswith("-") or value == "-":
            return None
        if value.startswith("--"):
            name = value.partition("=")[0]
            if name in longs:
                return name
            skip = name in long_valued and "=" not in value
            continue
        for i, letter in enumerate(value[1:]):
            if letter in code:
                return "-" + letter
            if letter in value_letters:
                skip = i == len(value) - 2  # nothing after it in the cluster: the next word
                break  # the rest of the cluster is the option's value
    return None


def _script(values: list[str], value_options: str = "") -> str | None:
    """The first operand after the options (the script an interpreter runs), or None."""
    valued = set(value_options.split())
    at = 0
    while at < len(values):
        value = values[at]
        if value == "--":
            return values[at + 1] if at + 1 < len(values) else None
        if value in valued:
            at += 2
            continue
        if not value.startswith("-") or value == "-":
            return value
        at += 1
    return None


NODE_VALUED: tuple[str, ...] = ("--require", "--import", "--loader", "--experimental-loader")
NODE_VALUED += ("--inspect-port", "--title", "--env-file", "--input-type", "--stack-size")


def _interpreter(
    program: str, code: str, value_letters: str = "", longs: Sequence[str] = (), valued: str = ""
) -> Callable[[list[str], bool], Opaque | None]:
    """Code in an option (`python3 -c`, `perl -e`), or read from a pipe or a file given as
    input when no script is named (`echo 'code' | python3`)."""

    def check(values: list[str], fed: bool) -> Opaque | None:
        option = _clusters(values, code, value_letters, longs, NODE_VALUED)
        if option is not None:
            return Opaque(program, option)
        script = _script(values, valued)
        if fed and (script is None or script == "-" or script.startswith("/dev/")):
            return Opaque(program, None, exact=True)  # code from input: only the exact rule
        return None

    return check


# system(), pipes, writes, gawk's indirect calls (`@name(…)`)
AWK_CODE = re.compile(r"\bsystem\s*\(|\||\bprintf?\b[^;{}]*>|@\s*\w+\s*\(")
SED_SCRIPT_OPTIONS = ("-e", "--expression", "-f", "--file")


def _awk(values: list[str], fed: bool) -> Opaque | None:
    at = 0
    while at < len(values):
        value = values[at]
        if value in ("-f", "--file", "-E", "--exec", "-i", "--include", "-l", "--load"):
            return Opaque("awk", value)  # the program comes from a file
        if value.startswith(("-f", "--file=", "--exec=", "--include=", "--load=")):
            return Opaque(
                "awk", value.partition("=")[0][:2] if "=" not in value else value.partition("=")[0]
            )
        if value in ("-e", "--source") and at + 1 < len(values):
            if AWK_CODE.search(values[at + 1]):
                return Opaque("awk", None, exact=True)
            at += 2
            continue
        if value in ("-v", "-F", "--assign", "--field-separator"):
            at += 2
            continue
        if value == "--":
            at += 1
            break
        if not value.startswith("-"):
            break
        at += 1
    program = values[at] if at < len(values) else ""
    return (
        Opaque("awk", None, exact=True) if AWK_CODE.search(program) or UNKNOWN in program else None
    )


def _sed(values: list[str], fed: bool) -> Opaque | None:
    """`e` (run a command), `s///e`, and the `w`/`W`/`s///w` writes; a script from a file."""
    scripts: list[str] = []
    explicit = False
    at = 0
    while at < len(values):
        value = values[at]
        if (
            value in ("-f", "--file")
            or value.startswith(("--file=",))
            or re.fullmatch(r"-[nErsuz]*f.*", value)
        ):
            return Opaque("sed", "-f")
        if value in ("-e", "--expression"):
            scripts.append(values[at + 1] if at + 1 < len(values) else "")
            explicit = True
            at += 2
            continue
        if value.startswith("--expression="):
            scripts.append(value.partition("=")[2])
            explicit = True
        elif re.fullmatch(r"-[nErsuzi]*e.+", value):  # `-ne'1e cmd'`, `-e1e`
            scripts.append(value[value.index("e", 1) + 1 :])
            explicit = True
        elif value == "--":
            at += 1
            break
        elif not value.startswith("-") or value == "-":
            break
        at += 1
    if not explicit and at < len(values):
        scripts.append(values[at])
    return Opaque("sed", None, exact=True) if any(sed_runs(s) for s in scripts) else None


SED_ADDRESS = re.compile(
    r"\s*(?:\d+(?:~\d+)?|\$|/(?:[^/\\\n]|\\.)*/[IM]*|\\(.)(?:(?!\1).|\\.)*\1[IM]*)"
)


def _past_addresses(script: str, at: int) -> int:
    """Where a sed command starts after its addresses (ADDR1[,ADDR2]) and any `!`."""
    n = len(script)
    for _ in range(2):  # ADDR1[,ADDR2]
        m = SED_ADDRESS.match(script, at)
        if m and m.end() > at:
            at = m.end()
        if at < n and script[at] in ",~+" and _:
            break
        if at < n and script[at] == ",":
            at += 1
            continue
        break
    while at < n and script[at] in " \t!":
        at += 1
    return at


def sed_runs(script: str) -> bool:
    """Whether a sed script runs a command (`e`, `s///e`) or writes a file (`w`, `W`,
    `s///w`); a script this reader cannot follow counts as one that does."""
    at, n = 0, len(script)
    try:
        while at < n:
            while at < n and script[at] in " \t\n;":
                at += 1
            if at >= n:
                return False
            if script[at] == "#":
                at = script.find("\n", at)
                at = n if at < 0 else at
                continue
            at = _past_addresses(script, at)
            if at >= n:
                return False
            command = script[at]
            at += 1
            if command in "ewW":
                return True
            if command in "{}=dDgGhHlnNpPxzFqQL":
                while at < n and script[at] not in ";\n}":
                    at += 1
                continue
            if command in ":btTrRaic":
                end = script.find("\n", at)
                end = n if end < 0 else end
                if command in "btT":
                    semi = script.find(";", at, end)
                    end = semi if semi >= 0 else end
                at = end
                continue
            if command in "sy":
                delim = script[at]
                if delim in "\\\n":
                    return True
                at += 1
                for _ in range(2):
                    while script[at] != delim:
                        at += 2 if script[at] == "\\" else 1
                    at += 1
                if command == "s":
                    start = at
                    while at < n and script[at] not in ";\n}":
                        at += 1
                    flags = script[start:at]
                    if "e" in flags or "w" in flags or "W" in flags:
                        return True
                continue
            return True  # a command this reader does not know
    except IndexError:
        return True
    return False


GIT_SAFE_CONFIG = re.compile(
    r"(color|advice|i18n|log|format|column|status|init|user|author|committer|blame|grep|"
    r"merge\.conflictstyle|core\.(quotepath|autocrlf|safecrlf|eol|ignorecase|filemode|abbrev|"
    r"longpaths|symlinks|precomposeunicode))(\.|$)",
    re.I,
)
GIT_RUNS = {  # subcommand: options whose value is a command
    "rebase": ("-x", "--exec"),
    "difftool": ("-x", "--extcmd"),
    "grep": ("-O", "--open-files-in-pager"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "clone": ("-u", "--upload-pack", "--template"),
    "ls-remote": ("--upload-pack",),
    "push": ("--receive-pack", "--exec"),
    "archive": ("--exec",),
    "send-email": ("--to-cmd", "--cc-cmd", "--header-cmd", "--sendmail-cmd", "--smtp-server"),
}
GIT_LINES = frozenset({"bisect", "submodule", "filter-branch", "filter-repo"})  # `run`, `foreach`


def _git(values: list[str], fed: bool) -> Opaque | None:
    at = 0
    while at < len(values) and values[at].startswith("-"):
        value = values[at]
        if value in ("-c", "--config-env") and at + 1 < len(values):
            key = values[at + 1].partition("=")[0]
            if not GIT_SAFE_CONFIG.match(key) or values[at + 1].partition("=")[2].startswith("!"):
                return Opaque("git", value)
            at += 2
            continue
        if value.startswith(("-c", "--config-env=")) and value not in ("-c",):
            key = value.partition("=")[2] if value.startswith("--") else value[2:]
            if not GIT_SAFE_CONFIG.match(key.partition("=")[0]):
                return Opaque("git", value[:2] if not value.startswith("--") else "--config-env")
        if value.startswith("--exec-path="):
            return Opaque("git", "--exec-path")
        at += 2 if value in ("-C", "--git-dir", "--work-tree", "--namespace") else 1
    if at >= len(values):
        return None
    sub, rest = values[at], values[at + 1 :]
    for option in GIT_RUNS.get(sub, ()):
        if any(
            v == option or v.startswith(option + "=") or (len(option) == 2 and v.startswith(option))
            for v in rest
        ):
            return Opaque("git", f"{sub} {option}")
    if sub in GIT_LINES and (sub not in ("bisect", "submodule") or {"run", "foreach"} & set(rest)):
        return Opaque("git", sub)
    if sub == "config" and any(
        not GIT_SAFE_CONFIG.match(v) and "." in v
        for v in rest[:1] + [r for r in rest if not r.startswith("-")][:1]
    ):
        plain = [r for r in rest if not r.startswith("-")]
        if len(plain) >= 2 and not any(
            r in ("--get", "--get-all", "--list", "-l", "--get-regexp", "--unset", "--unset-all")
            for r in rest
        ):
            return Opaque("git", "config")  # setting a key that runs commands (alias.x=!…)
    return None


def _tar(values: list[str], fed: bool) -> Opaque | None:
    for at, value in enumerate(values):
        long = value.partition("=")[0]
        if long in TAR_COMMANDS:
            return Opaque("tar", long)
        if value.startswith("--checkpoint-action") and "exec" in value + "".join(
            values[at + 1 : at + 2]
        ):
            return Opaque("tar", "--checkpoint-action")
        short = (
            value[1:]
            if value.startswith("-") and not value.startswith("--")
            else value
            if at == 0
            else ""
        )
        for letter in short:
            if letter in "IF":  # -I PROGRAM (compression), -F SCRIPT (new volume)
                return Opaque("tar", "-" + letter)
            if letter in "fbCgHKLNTVX":  # takes a value: the rest of the cluster is not options
                break
    return None


TAR_COMMANDS = frozenset(
    {"--to-command", "--use-compress-program", "--info-script", "--new-volume-script"}
    | {"--rsh-command", "--rmt-command", "--checkpoint-action"}
)


def _rsync(values: list[str], fed: bool) -> Opaque | None:
    for value in values:
        if value.partition("=")[0] in ("--rsh", "--rsync-path", "--config"):
            return Opaque("rsync", value.partition("=")[0])
        if value.startswith("-") and not value.startswith("--") and "e" in value[1:]:
            return Opaque("rsync", "-e")
    return None


def _scp(program: str) -> Callable[[list[str], bool], Opaque | None]:
    def check(values: list[str], fed: bool) -> Opaque | None:
        for at, value in enumerate(values):
            if value.startswith("-S") or value.startswith("-F"):
                return Opaque(program, value[:2])
            if value.startswith("-o"):
                option = value[2:] or (values[at + 1] if at + 1 < len(values) else "")
                if option.split("=")[0].split()[0].lower() in SSH_COMMAND_OPTIONS:
                    return Opaque(program, "-o")
        return None

    return check


def _options_named(
    program: str, options: Sequence[str], plus: bool = False, fed_opaque: bool = False
) -> Callable[[list[str], bool], Opaque | None]:
    """Opaque when one of `options` is given (`vim -c`, `gdb -ex`), `+CMD` when `plus`, and
    when its input is a pipe or a file if `fed_opaque` (it reads commands from it)."""

    def check(values: list[str], fed: bool) -> Opaque | None:
        for value in values:
            name = value.partition("=")[0]
            if name in options:
                return Opaque(program, name)
            short = [o for o in options if len(o) == 2 and o[0] == "-" and value.startswith(o)]
            if short and not value.startswith("--"):
                return Opaque(program, short[0])
            if plus and value.startswith("+") and len(value) > 1:
                return Opaque(program, "+")
        return Opaque(program, None, exact=True) if fed and fed_opaque else None

    return check


GDB_COMMANDS: tuple[str, ...] = ("-ex", "-iex", "-x", "-ix", "--command", "--eval-command")
GDB_COMMANDS += ("--init-command",)
GDB_COMMANDS += ("--init-eval-command", "-batch", "--batch", "-p", "--pid", "--args")


def _always(program: str) -> Callable[[list[str], bool], Opaque | None]:
    return lambda values, fed: Opaque(program, None)


MAKE_LONG = {"--eval": "--eval", "--file": "-f", "--makefile": "-f", "--directory": "-C"}
MAKE_VALUED = "IjlWoO"  # short options whose value follows (in the word or the next one)
ASSIGNMENT = re.compile(r"[A-Za-z_.][A-Za-z0-9_.-]*[:+?!]*=")


def _make(program: str) -> Callable[[list[str], bool], Opaque | None]:
    """make runs the project's recipes (`Bash(make:*)` vouches for those); code given in its
    arguments only with a rule naming the option: `--eval`/`-E` (make code, `$(shell …)`), a
    makefile `-f` names and another directory's `-C` (not the project's recipes), and a variable
    set on the command line (`SHELL=…`, `CC=…` change what every recipe runs)."""

    def check(values: list[str], fed: bool) -> Opaque | None:
        for value in values:
            if value.startswith(UNKNOWN):  # `make "$x"`: any of the below
                return Opaque(program, None, exact=True)
            if value.startswith("--"):
                name = value.partition("=")[0]
                found = [o for o in MAKE_LONG if len(name) > 2 and o.startswith(name)]
                if found:  # `--ev=…`: getopt takes a prefix of the option
                    return Opaque(program, MAKE_LONG[found[0]])
            elif value.startswith("-") and len(value) > 1:
                for char in value[1:]:
                    if char in "EfC":
                        return Opaque(program, "-" + char)
                    if char in MAKE_VALUED:
                        break  # the rest of the word is its value
            elif ASSIGNMENT.match(value):
                return Opaque(program, value, exact=UNKNOWN in value)
        return Opaque(program, None)

    return check


def _sqlite(values: list[str], fed: bool) -> Opaque | None:
    for at, value in enumerate(values):
        if value in ("-cmd", "--cmd", "-init", "--init"):
            return Opaque("sqlite3", value)
        if at > 0 and value.lstrip().startswith("."):
            return Opaque("sqlite3", None, exact=True)  # `.shell`, `.system`, `.output`
    return Opaque("sqlite3", None, exact=True) if fed else None


def _dc(values: list[str], fed: bool) -> Opaque | None:
    for at, value in enumerate(values):
        if value in ("-e", "--expression") or value.startswith("--expression="):
            code = (
                values[at + 1]
                if value in ("-e", "--expression") and at + 1 < len(values)
                else value
            )
            if "!" in code:
                return Opaque("dc", None, exact=True)
        elif value in ("-f", "--file"):
            return Opaque("dc", value)
    return Opaque("dc", None, exact=True) if fed else None
