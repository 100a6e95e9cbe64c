"""Programs judged by what they run (docs: permissions): wrappers that run their arguments as a
command, programs that run code taken from their arguments or input, and options that write.

Three tables, each entry with the reason it is there, listed on the permissions page:

- `UNWRAPPED`: programs that run the rest of their arguments as a command (`setarch x86_64 rm v`,
  `uv run rm v`, `docker exec box rm v`) or as a shell line (`ssh host 'rm v'`, `tmux new 'rm
  v'`). The wrapped command is judged as if written alone (agi.policy.bash.wrappers also has the
  older table of `time`, `env`, `sudo`, …).
- `OPAQUE`: programs that run code or commands the judge cannot see (`awk`'s `system`, `sed`'s
  `e`, `git -c alias.x=!…`, `python -c`, `make`). Such a command is denied by the first Bash deny
  rule and allowed by no allow rule, unless the rule names that program with that option
  (`Bash(python3 -c:*)`), or for code inside a script, the exact command.
- `WRITING`: options of otherwise reading programs that write a file (`git log --output=F`,
  `sort -o F`, `tee F`): judged as writes, as redirections are.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agi.policy.bash.words import Unreducible, Word


@dataclass(frozen=True)
class Opaque:
    """What makes a command opaque: its program, the option that runs code (None: the program
    itself), and whether only an exact rule (no `*`) may vouch for it (code inside a script)."""

    program: str
    option: str | None
    exact: bool = False


UNKNOWN = "\x00"  # marks a word of unknown value (`"$x"`): no option, no safe name


def _values(args: Sequence[Word], strict: bool = False) -> list[str]:
    """The words' values; a word of unknown value is Unreducible when `strict` (a wrapper's
    command must be known), else its text marked UNKNOWN (an argument of unknown value)."""
    out = []
    for w in args:
        if w.value is None or not w.plain:
            if strict:
                raise Unreducible
            out.append(UNKNOWN + w.text)
        else:
            out.append(w.value)
    return out


def getopt(
    args: list[str], flags: str, valued: str, long_flags: str = "", long_valued: str = ""
) -> int:
    """Where the first operand is, for a program with getopt-style options: short `flags`
    and `valued` letters (clustered: `-it`, `-oValue`), long options (`--x`, `--x=v`, `--x v`).
    An option not listed is Unreducible (it may take a value that looks like the command)."""
    longs, long_values = set(long_flags.split()), set(long_valued.split())
    at = 0
    while at < len(args):
        value = args[at]
        if value == "--":
            return at + 1
        if not value.startswith("-") or value == "-":
            return at
        if value.startswith("--"):
            name = value.partition("=")[0]
            if name in long_values:
                at += 1 if "=" in value else 2
                continue
            if name in longs and "=" not in value:
                at += 1
                continue
            raise Unreducible
        letters = value[1:]
        for i, letter in enumerate(letters):
            if letter in valued:
                at += 1 if i + 1 < len(letters) else 2
                break
            if letter not in flags:
                raise Unreducible
        else:
            at += 1
    return at


# --- wrappers: (what follows the options is) "argv" a command, "line" a shell line ---------------


@dataclass(frozen=True)
class Wrapper:
    why: str
    unwrap: Callable[[list[str]], tuple[int, str]]  # values -> (where the command starts, kind)


def _spec(
    flags: str = "",
    valued: str = "",
    longs: str = "",
    long_valued: str = "",
    lead: int = 0,
    positional: int = 0,
    kind: str = "argv",
) -> Callable[[list[str]], tuple[int, str]]:
    """`lead` words before the options (setarch's ARCH), options, `positional` words after
    them (a container, a user, a host), then the command."""

    def unwrap(values: list[str]) -> tuple[int, str]:
        at = lead + getopt(values[lead:], flags, valued, longs, long_valued)
        if positional:  # options may follow the container or user too (`pod -it -- CMD`)
            at += positional
            at += getopt(values[at:], flags, valued, longs, long_valued)
        return at, kind

    return unwrap


SETARCH_FLAGS = "vRFZLXBIST3"
SETARCH_LONGS = (
    "--verbose --addr-no-randomize --fdpic-funcptrs --mmap-page-zero --addr-compat-layout "
    "--read-implies-exec --32bit --short-inode --whole-seconds --sticky-timeouts --3gb "
    "--4gb --uname-2.6 --list"
)
ARCHES = [
    "linux32",
    "linux64",
    "i386",
    "i486",
    "i586",
    "i686",
    "x86_64",
    "ia64",
    "ppc",
    "ppc32",
    "ppc64",
    "ppc64le",
    "s390",
    "s390x",
    "arm",
    "arm64",
    "aarch64",
    "armv7l",
    "armv8l",
    "mips",
    "mips64",
    "parisc",
    "parisc64",
    "sparc",
    "sparc32",
    "sparc64",
    "uname26",
    "riscv64",
    "loongarch64",
    "alpha",
]


def _ssh(values: list[str]) -> tuple[int, str]:
    for at, value in enumerate(values):  # options that run a command on this machine
        if value in ("-o",) and at + 1 < len(values) or value.startswith("-o") and value != "-o":
            option = value[2:] if value != "-o" else values[at + 1]
            if option.split("=")[0].split()[0].lower() in SSH_COMMAND_OPTIONS:
                raise Opaqued(Opaque("ssh", "-o"))
        if value == "-F" or value.startswith("-F"):
            raise Opaqued(Opaque("ssh", "-F"))
    at = getopt(values, "46AaCfGgKkMNnqsTtVvXxYy", "BbcDEeFIiJLlmOopQRSWw")
    return at + 1, "line"  # the host, then the remote command (a line the remote shell runs)


SSH_COMMAND_OPTIONS = frozenset(
    {"proxycommand", "localcommand", "permitlocalcommand", "knownhostscommand", "match"}
    | {"remotecommand", "include", "securitykeyprovider", "pkcs11provider"}
)


class Opaqued(Exception):
    """Raised while unwrapping: the command is opaque (`ssh -o ProxyCommand=…`)."""

    def __init__(self, found: Opaque):
        super().__init__(found.program)
        self.found = found


def _tmux(values: list[str]) -> tuple[int, str]:
    """`tmux [options] new[-session] [options] [command]`: the command is a shell line. Other
    tmux commands that run or type commands are opaque; a few read-only ones run nothing."""
    at = getopt(values, "2CDlNuvV", "cfLST")
    if any(v.startswith("-f") for v in values[:at]):
        raise Opaqued(Opaque("tmux", "-f"))  # a configuration file runs commands
    if at >= len(values):
        return at, "none"
    sub, rest = values[at], values[at + 1 :]
    if sub in ("new", "new-session"):
        return at + 1 + getopt(rest, "AdDEPX", "cefFnstxy"), "line"
    if sub in TMUX_QUIET:
        return len(values), "none"
    raise Opaqued(Opaque("tmux", sub))


TMUX_QUIET = frozenset(
    {"ls", "list-sessions", "list-windows", "lsw", "list-panes", "lsp", "has-session", "has"}
    | {"kill-session", "kill-server", "kill-window", "kill-pane", "attach", "attach-session"}
    | {"a", "at", "detach", "detach-client", "capture-pane", "capturep", "list-clients"}
)


def _screen(values: list[str]) -> tuple[int, str]:
    for value in values:
        if value in ("-X", "-c", "-s") or value.startswith("-X"):
            raise Opaqued(Opaque("screen", value[:2]))  # -X types commands; -c, -s run others
    at = getopt(values, "dDmRrxqAaUOiln", "SpeThtL", "--help --version", "-Logfile")
    return at, "argv"


def _subcommand(
    name: str, subs: dict[str, Callable[[list[str]], tuple[int, str]]]
) -> Callable[[list[str]], tuple[int, str]]:
    """`uv run CMD`, `docker exec BOX CMD`: a wrapper only for the subcommands listed."""

    def unwrap(values: list[str]) -> tuple[int, str]:
        at = 0
        while at < len(values) and values[at].startswith("-"):
            at += 1  # global options before the subcommand: as given (flags only)
        if at < len(values) and values[at] in subs:
            start, kind = subs[values[at]](values[at + 1 :])
            return at + 1 + start, kind
        return len(values), "none"

    return unwrap


def _line_option(options: str, program: str) -> Callable[[list[str]], tuple[int, str]]:
    """`nix-shell --run LINE`, `npx -c LINE`: the option's value is a shell line."""
    names = set(options.split())

    def unwrap(values: list[str]) -> tuple[int, str]:
        for at, value in enumerate(values):
            if value in names:
                return at + 1, "one-line"
            if value.partition("=")[0] in names and "=" in value:
                raise Opaqued(Opaque(program, value.partition("=")[0]))
        return len(values), "none"

    return unwrap


def _npx(values: list[str]) -> tuple[int, str]:
    for at, value in enumerate(values):
        if value in ("-c", "--call"):
            return at + 1, "one-line"
    return getopt(values, "yq", "p", "--yes --no --quiet --ignore-existing", "--package"), "argv"


EXEC_OPTIONS = _spec(  # docker/podman exec: options, then the container, then the command
    flags="dit",
    valued="euw",
    longs="--detach --interactive --tty --privileged",
    long_valued="--env --env-file --user --workdir --detach-keys",
    positional=1,
)
KUBECTL_EXEC = _spec(
    flags="itq",
    valued="cnf",
    longs="--stdin --tty --quiet",
    long_valued="--container --namespace --context --kubeconfig --filename --cluster --user "
    "--pod-running-timeout --server --token --as",
    positional=1,
)
RUN_OPTIONS = _spec(  # uv run, poetry run, …: their common options
    flags="qvn",
    valued="pC",
    longs="--quiet --verbose --no-interaction --isolated --no-project --frozen --locked "
    "--no-sync --all-extras --no-dev --active --no-ansi --ansi",
    long_valued="--with --python --directory --project --env-file --package --extra --group "
    "--with-requirements --with-editable --index --default-index",
)

UNWRAPPED: dict[str, Wrapper] = {
    "setarch": Wrapper(
        "runs a program under another architecture's personality",
        _spec(SETARCH_FLAGS, "", SETARCH_LONGS, "", lead=1),
    ),
    **{
        arch: Wrapper(
            f"setarch under the name {arch}: runs a program",
            _spec(SETARCH_FLAGS, "", SETARCH_LONGS),
        )
        for arch in ARCHES
    },
    "chronic": Wrapper("runs a command, showing its output only on failure", _spec("ev")),
    "ifne": Wrapper("runs a command when its input is not empty", _spec("n")),
    "eatmydata": Wrapper("runs a command with fsync disabled", _spec()),
    "tini": Wrapper(
        "an init that runs a command as its child",
        _spec("svwgl", "pe", "--version"),
    ),
    "dumb-init": Wrapper(
        "an init that runs a command", _spec("cv", "r", "--single-child --verbose", "--rewrite")
    ),
    "gosu": Wrapper("runs a command as another user", _spec(positional=1)),
    "su-exec": Wrapper("runs a command as another user", _spec(positional=1)),
    "setpgid": Wrapper("runs a command in its own process group", _spec()),
    "systemd-inhibit": Wrapper(
        "runs a command holding an inhibitor lock",
        _spec("", "", "--no-pager --no-legend --no-ask-password", "--what --who --why --mode"),
    ),
    "ssh-agent": Wrapper(
        "runs a command with an agent in its environment", _spec("dDk", "aEPt", "--")
    ),
    "dbus-launch": Wrapper(
        "runs a command with a session bus",
        _spec(
            "",
            "",
            "--sh-syntax --csh-syntax --exit-with-session --exit-with-x11 --autolaunch",
            "--config-file",
        ),
    ),
    "sshpass": Wrapper("runs a command, typing a password into it", _spec("ev", "pfdP")),
    "flatpak-spawn": Wrapper(
        "runs a command on the host or in a sandbox",
        _spec("", "", "--host --clear-env --watch-bus --no-network --sandbox", "--env --directory"),
    ),
    "direnv": Wrapper(
        "`direnv exec DIR CMD` runs a command", _subcommand("direnv", {"exec": _spec(positional=1)})
    ),
    "entr": Wrapper("runs a command when files change", _spec("acdnprsz")),
    "ssh": Wrapper(
        "runs its arguments after the host as a line the remote shell reads; `-o "
        "ProxyCommand` and the like run commands here (opaque)",
        _ssh,
    ),
    "tmux": Wrapper(
        "`tmux new` runs a line in a new session; other commands that run or type commands "
        "are opaque",
        _tmux,
    ),
    "screen": Wrapper("runs a command in a new window; `-X` types commands (opaque)", _screen),
    "uv": Wrapper(
        "`uv run CMD` runs a command in the project's environment",
        _subcommand("uv", {"run": RUN_OPTIONS}),
    ),
    "uvx": Wrapper("runs a tool's command", RUN_OPTIONS),
    "poetry": Wrapper(
        "`poetry run CMD` runs a command", _subcommand("poetry", {"run": RUN_OPTIONS})
    ),
    "pipenv": Wrapper(
        "`pipenv run CMD` runs a command", _subcommand("pipenv", {"run": RUN_OPTIONS})
    ),
    "pdm": Wrapper("`pdm run CMD` runs a command", _subcommand("pdm", {"run": RUN_OPTIONS})),
    "hatch": Wrapper("`hatch run CMD` runs a command", _subcommand("hatch", {"run": RUN_OPTIONS})),
    "rye": Wrapper("`rye run CMD` runs a command", _subcommand("rye", {"run": RUN_OPTIONS})),
    "pixi": Wrapper("`pixi run CMD` runs a command", _subcommand("pixi", {"run": RUN_OPTIONS})),
    "conda": Wrapper(
        "`conda run CMD` runs a command",
        _subcommand(
            "conda",
            {"run": _spec("", "np", "--no-capture-output --live-stream", "--name --prefix --cwd")},
        ),
    ),
    "mamba": Wrapper(
        "`mamba run CMD` runs a command",
        _subcommand(
            "mamba",
            {"run": _spec("", "np", "--no-capture-output --live-stream", "--name --prefix --cwd")},
        ),
    ),
    "micromamba": Wrapper(
        "`micromamba run CMD` runs a command",
        _subcommand("micromamba", {"run": _spec("", "np", "", "--name --prefix --cwd")}),
    ),
    "bundle": Wrapper("`bundle exec CMD` runs a command", _subcommand("bundle", {"exec": _spec()})),
    "rbenv": Wrapper("`rbenv exec CMD` runs a command", _subcommand("rbenv", {"exec": _spec()})),
    "pyenv": Wrapper("`pyenv exec CMD` runs a command", _subcommand("pyenv", {"exec": _spec()})),
    "asdf": Wrapper("`asdf exec CMD` runs a command", _subcommand("asdf", {"exec": _spec()})),
    "mise": Wrapper(
        "`mise exec -- CMD` runs a command",
        _subcommand("mise", {"exec": _spec("", "C", "", "--cd"), "x": _spec("", "C", "", "--cd")}),
    ),
    "stack": Wrapper("`stack exec -- CMD` runs a command", _subcommand("stack", {"exec": _spec()})),
    "cabal": Wrapper("`cabal exec -- CMD` runs a command", _subcommand("cabal", {"exec": _spec()})),
    "opam": Wrapper("`opam exec -- CMD` runs a command", _subcommand("opam", {"exec": _spec()})),
    "nix": Wrapper(
        "`nix develop -c CMD` and `nix shell … -c CMD` run a command",
        _subcommand(
            "nix",
            {
                "develop": _line_option("-c --command", "nix"),
                "shell": _line_option("-c --command", "nix"),
            },
        ),
    ),
    "nix-shell": Wrapper(
        "`--run LINE` and `--command LINE` run a shell line",
        _line_option("--run --command", "nix-shell"),
    ),
    "npx": Wrapper("runs a package's command, or one on PATH; `-c LINE` a shell line", _npx),
    "bunx": Wrapper(
        "runs a package's command, or one on PATH",
        _spec("", "p", "--bun --silent --verbose", "--package"),
    ),
    "bun": Wrapper(
        "`bun x CMD` runs a package's command",
        _subcommand("bun", {"x": _spec("", "p", "--bun", "--package")}),
    ),
    "pnpm": Wrapper(
        "`pnpm dlx CMD` and `pnpm exec CMD` run a command",
        _subcommand(
            "pnpm",
            {
                "dlx": _spec("", "", "--silent", "--package"),
                "exec": _spec("r", "", "--recursive --parallel --no-bail --silent", "--filter"),
                "x": _spec(),
            },
        ),
    ),
    "yarn": Wrapper(
        "`yarn dlx CMD` and `yarn exec CMD` run a command",
        _subcommand("yarn", {"dlx": _spec("q", "p", "--quiet", "--package"), "exec": _spec()}),
    ),
    "npm": Wrapper(
        "`npm exec -- CMD` runs a command; `-c LINE` a shell line",
        _subcommand("npm", {"exec": _npx, "x": _npx}),
    ),
    "docker": Wrapper(
        "`docker exec BOX CMD` runs a command in a container",
        _subcommand("docker", {"exec": EXEC_OPTIONS}),
    ),  # type: ignore[arg-type]
    "podman": Wrapper(
        "`podman exec BOX CMD` runs a command in a container",
        _subcommand("podman", {"exec": EXEC_OPTIONS}),
    ),  # type: ignore[arg-type]
    "kubectl": Wrapper(
        "`kubectl exec POD -- CMD` runs a command in a pod",
        _subcommand("kubectl", {"exec": KUBECTL_EXEC}),
    ),  # type: ignore[arg-type]
    "ip": Wrapper(
        "`ip netns exec NAME CMD` runs a command in a namespace",
        lambda v: (3, "argv") if v[:2] == ["netns", "exec"] else (len(v), "none"),
    ),
}


def unwrap(name: str, args: list[Word]) -> tuple[list[list[Word]], list[str]] | None:
    """(commands, lines) a wrapper of UNWRAPPED runs; None when `name` is not one. Raises
    Opaqued when the wrapper itself runs what no one can see, Unreducible when unsure."""
    wrapper = UNWRAPPED.get(name)
    if wrapper is None:
        return None
    values = _values(args, strict=True)
    start, kind = wrapper.unwrap(values)
    rest = args[start:] if start <= len(args) else []
    if kind == "none" or not rest:
        if kind != "none" and name in ("setarch", *ARCHES):
            return [[Word("sh", "sh")]], []  # setarch with no program runs a shell
        return [], []
    if kind == "argv":
        return [rest], []
    if kind == "one-line":
        return [], [values[start]]
    return [], [" ".join(values[start:])]


# --- opaque programs ---------------------------------------------------------------------------


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


OPAQUE: dict[str, tuple[str, Callable[[list[str], bool], Opaque | None]]] = {
    "awk": ("its program may call `system`, pipe to commands or write files", _awk),
    "sed": ("its `e` command and `s///e` run commands; `w` writes files", _sed),
    "git": (
        "`-c` config (aliases with `!`, `core.pager`, `core.sshCommand`, …), `rebase -x`, "
        "`bisect run`, `submodule foreach` and the like run commands",
        _git,
    ),
    "tar": (
        "`--to-command`, `--checkpoint-action=exec`, `-I`/`--use-compress-program` run programs",
        _tar,
    ),
    "rsync": ("`-e`/`--rsh` and `--rsync-path` name the command it runs", _rsync),
    "scp": ("`-S` and `-o ProxyCommand` run programs", _scp("scp")),
    "sftp": ("`-S` and `-o ProxyCommand` run programs", _scp("sftp")),
    "find": (
        "`-exec`, `-execdir`, `-ok`, `-okdir` run a command per file (also judged)",
        _options_named("find", ("-exec", "-execdir", "-ok", "-okdir")),
    ),
    "make": ("runs the recipes of a Makefile", _always("make")),
    "gmake": ("runs the recipes of a Makefile", _always("gmake")),
    "bmake": ("runs the recipes of a Makefile", _always("bmake")),
    "just": ("runs the recipes of a justfile", _always("just")),
    "m4": ("`syscmd` and `esyscmd` run commands", _always("m4")),
    "gdb": (
        "`-ex`, `-x` and the commands in its input run commands (`shell …`)",
        _options_named("gdb", GDB_COMMANDS, fed_opaque=True),
    ),
    "lldb": ("its commands (`platform shell …`) run commands", _always("lldb")),
    "vim": (
        "`-c`, `--cmd`, `+CMD`, `-S`, `-s` run Ex commands (`:!…`)",
        _options_named(
            "vim",
            ("-c", "--cmd", "-S", "-s", "-u", "-e", "-E", "-es", "-Es"),
            plus=True,
            fed_opaque=True,
        ),
    ),
    "nvim": (
        "`-c`, `--cmd`, `+CMD`, `-S`, `-s`, `-l` run Ex commands or Lua",
        _options_named(
            "nvim",
            ("-c", "--cmd", "-S", "-s", "-u", "-e", "-E", "-es", "-Es", "-l", "--headless"),
            plus=True,
            fed_opaque=True,
        ),
    ),
    "vi": (
        "`-c` and `+CMD` run Ex commands",
        _options_named("vi", ("-c", "--cmd", "-S", "-s", "-u", "-e"), plus=True, fed_opaque=True),
    ),
    "view": (
        "`-c` and `+CMD` run Ex commands",
        _options_named("view", ("-c", "--cmd", "-S", "-s"), plus=True, fed_opaque=True),
    ),
    "ex": (
        "`-c`, `+CMD`, `-S` and the commands in its input run Ex commands (`:!…`)",
        _options_named("ex", ("-c", "--cmd", "-S", "-s", "-u"), plus=True, fed_opaque=True),
    ),
    "ed": ("`!CMD` in its input runs commands", _options_named("ed", (), fed_opaque=True)),
    "emacs": (
        "`--eval`, `-l`, `-f`, `--script` run Lisp",
        _options_named(
            "emacs",
            ("--eval", "-eval", "--execute", "-l", "--load", "-f", "--funcall", "--script", "-x"),
        ),
    ),
    "less": ("`+CMD` runs less commands (`!…` a shell)", _options_named("less", (), plus=True)),
    "man": (
        "`-P`/`--pager` and `-H` name programs it runs",
        _options_named("man", ("-P", "--pager", "-H", "--html")),
    ),
    "python": (
        "`-c` runs code; with no script it reads code from its input",
        _interpreter("python", "c", "WXQm", valued="-W -X -m"),
    ),
    "perl": (
        "`-e`, `-E`, `-M`, `-d` run code; with no script it reads code from its input",
        _interpreter("perl", "eEMmd", "0lIiCFxD"),
    ),
    "ruby": (
        "`-e` runs code; with no script it reads code from its input",
        _interpreter("ruby", "e", "0CEFIiKrTWx"),
    ),
    "irb": ("reads Ruby code from its input", _always("irb")),
    "node": (
        "`-e`, `-p` run code; with no script it reads code from its input",
        _interpreter("node", "ep", "r", ("--eval", "--print")),
    ),
    "deno": ("`deno eval` and `deno repl` run code", _options_named("deno", ("eval", "repl"))),
    "php": ("`-r`, `-B`, `-R`, `-E`, `-a` run code", _interpreter("php", "rBREFa", "cdzf")),
    "lua": ("`-e` runs code", _interpreter("lua", "e", "l")),
    "luajit": ("`-e` runs code", _interpreter("luajit", "e", "lbjO")),
    "Rscript": ("`-e` runs code", _interpreter("Rscript", "e", "")),
    "R": (
        "`-e` runs code; it reads code from its input",
        _options_named("R", ("-e",), fed_opaque=True),
    ),
    "julia": ("`-e`, `-E` run code", _interpreter("julia", "eE", "pLJCOtg")),
    "tclsh": ("reads Tcl code from its input", _interpreter("tclsh", "", "")),
    "wish": ("reads Tcl code from its input", _interpreter("wish", "", "")),
    "expect": ("`-c` runs commands (`spawn`, `exec`)", _interpreter("expect", "c", "f")),
    "osascript": ("`-e` runs a script", _interpreter("osascript", "e", "l")),
    "pwsh": (
        "`-c`/`-Command` and `-e`/`-EncodedCommand` run code",
        _options_named(
            "pwsh", ("-c", "-Command", "-command", "-e", "-EncodedCommand", "-ec"), fed_opaque=True
        ),
    ),
    "sqlite3": ("`.shell` and `.system` run commands; it reads them from its input", _sqlite),
    "mysql": (
        "`-e`/`--execute` and its input may hold `system` commands",
        _options_named("mysql", ("-e", "--execute"), fed_opaque=True),
    ),
    "psql": (
        "`-c`, `-f` and its input may hold `\\!` commands",
        _options_named("psql", ("-c", "--command", "-f", "--file"), fed_opaque=True),
    ),
    "dc": ("`!` runs a command", _dc),
    "at": (
        "reads the commands it schedules from its input or a file",
        lambda v, fed: None if set(v) <= {"-l"} else Opaque("at", None),
    ),
    "batch": ("reads the commands it schedules from its input", _always("batch")),
    "docker": (
        "`docker run` runs an image's command with mounts the judge cannot see",
        lambda v, fed: Opaque("docker", "run") if "run" in v[:3] else None,
    ),
    "bwrap": ("runs a command after options the judge does not follow", _always("bwrap")),
    "hyperfine": ("runs the lines it is given", _always("hyperfine")),
}
ALIASES = {  # other names of the programs above
    "gawk": "awk",
    "mawk": "awk",
    "nawk": "awk",
    "busybox-awk": "awk",
    "gsed": "sed",
    "nodejs": "node",
    "bun": "node",
    "gtar": "tar",
    "bsdtar": "tar",
    "cgdb": "gdb",
    "gvim": "vim",
    "vimdiff": "vim",
    "rvim": "vim",
    "evim": "vim",
    "nex": "ex",
    "red": "ed",
    "powershell": "pwsh",
    "mariadb": "mysql",
    "pypy": "python",
    "pypy3": "python",
    "ipython": "python",
    "ipython3": "python",
}
PYTHON = re.compile(r"python[0-9.]*")
PERL = re.compile(r"perl[0-9.]*")
RUBY = re.compile(r"ruby[0-9.]*")


def canonical(name: str) -> str:
    if PYTHON.fullmatch(name):
        return "python"
    if PERL.fullmatch(name):
        return "perl"
    if RUBY.fullmatch(name):
        return "ruby"
    return ALIASES.get(name, name)


# long options that run code or write, by program: GNU getopt (and git's parser) take any
# unambiguous prefix (`--to-com=…`), which is read here as the option it abbreviates
LONGS: dict[str, tuple[str, ...]] = {
    "tar": tuple(sorted(TAR_COMMANDS)),
    "sed": ("--expression", "--file", "--in-place"),
    "awk": ("--file", "--exec", "--include", "--load", "--source"),
    "git": ("--config-env", "--exec", "--exec-path", "--output", "--open-files-in-pager")
    + (
        "--extcmd",
        "--upload-pack",
        "--receive-pack",
        "--template",
        "--to-cmd",
        "--cc-cmd",
        "--header-cmd",
    )
    + ("--sendmail-cmd", "--smtp-server"),
    "rsync": ("--rsh", "--rsync-path", "--config"),
    "python": ("--command",),
    "node": ("--eval", "--print"),
    "find": (),
    "sort": ("--output",),
    "curl": ("--output", "--dump-header", "--cookie-jar", "--trace", "--trace-ascii", "--stderr"),
    "wget": ("--output-document", "--output-file", "--append-output"),
    "man": ("--pager", "--html"),
    "emacs": ("--eval", "--execute", "--load", "--funcall", "--script"),
    "mysql": ("--execute",),
    "psql": ("--command", "--file"),
    "dc": ("--expression", "--file"),
}


def expand(values: list[str], options: Sequence[str]) -> list[str]:
    """`--abbrev[=v]` written out as the option it is a prefix of (at least 4 characters)."""
    out = []
    for value in values:
        name, eq, rest = value.partition("=")
        if value.startswith("--") and len(name) >= 4 and name not in options:
            found = sorted((o for o in options if o.startswith(name)), key=len)
            if found:  # the shortest: `--exe` is `--exec` (ambiguous ones fail anyway)
                value = found[0] + eq + rest
        out.append(value)
    return out


def opaque(name: str, args: list[Word], fed: bool) -> Opaque | None:
    """Why a command is opaque (its program and the option that runs code), or None."""
    entry = OPAQUE.get(canonical(name))
    if entry is None:
        return None
    values = expand(_values(args), LONGS.get(canonical(name), ()))
    found = entry[1](values, fed)
    if found is None:
        return None
    return Opaque(name, found.option, found.exact)  # named as written: `python3 -c`


def vouches(specifier: str, found: Opaque) -> bool:
    """Whether an allow rule's specifier names the opaque program with its option: `Bash(python3
    -c:*)` for `python3 -c …`; for code inside a script only an exact rule (no `*`)."""
    if found.exact:
        return "*" not in specifier
    head = specifier[:-2] if specifier.endswith((":*", " *")) else specifier
    head = head.split("*")[0]
    words = head.split()
    if not words or words[0].rpartition("/")[2] != found.program:
        return False
    if found.option is None:
        return True
    wanted = found.option.split()
    for option in wanted:
        short = len(option) == 2 and option[0] == "-" and option[1] != "-"
        if not any(
            w == option
            or w.startswith(option + "=")
            or short
            and w.startswith("-")
            and not w.startswith("--")
            and option[1] in w[1:]
            for w in words[1:]
        ):
            return False
    return True


# --- options that write a file -----------------------------------------------------------------


def _option_values(values: list[str], options: Sequence[str]) -> list[str]:
    out = []
    for at, value in enumerate(values):
        name, eq, rest = value.partition("=")
        if name in options and eq:
            out.append(rest)
        elif value in options and at + 1 < len(values):
            out.append(values[at + 1])
        else:
            short = [o for o in options if len(o) == 2 and o[0] == "-" and value.startswith(o)]
            if short and len(value) > 2 and not value.startswith("--"):
                out.append(value[2:])
    return out


def _operands(values: list[str], valued: Sequence[str] = ()) -> list[str]:
    out: list[str] = []
    at = 0
    while at < len(values):
        value = values[at]
        if value == "--":
            return out + values[at + 1 :]
        if value in valued:
            at += 2
            continue
        if not value.startswith("-") or value == "-":
            out.append(value)
        at += 1
    return out


def _sed_in_place(values: list[str]) -> list[str]:
    if not any(
        v == "-i" or v.startswith(("-i", "--in-place")) or re.fullmatch(r"-[nErsuz]*i\S*", v)
        for v in values
    ):
        return []
    operands = _operands(values, ("-e", "--expression", "-f", "--file", "-l"))
    explicit = any(
        v in ("-e", "--expression", "-f", "--file") or v.startswith("--expression=") for v in values
    )
    return operands if explicit else operands[1:]


WRITING: dict[str, tuple[str, Callable[[list[str]], list[str]]]] = {
    "git": (
        "`--output=FILE` (log, diff, show, format-patch) writes a file",
        lambda v: (
            _option_values(v, ("--output", "-o"))
            if "format-patch" in v
            else _option_values(v, ("--output",))
        ),
    ),
    "sort": (
        "`-o FILE` writes the sorted lines there",
        lambda v: _option_values(v, ("-o", "--output")),
    ),
    "tee": ("writes its input to every file named", lambda v: _operands(v)),
    "find": (
        "`-fprint`, `-fprint0`, `-fprintf`, `-fls` write a file",
        lambda v: _option_values(v, ("-fprint", "-fprint0", "-fprintf", "-fls")),
    ),
    "sed": ("`-i` edits the files named in place", _sed_in_place),
    "curl": (
        "`-o`, `-D`, `-c`, `--trace` and the like write files",
        lambda v: _option_values(
            v,
            (
                "-o",
                "--output",
                "-D",
                "--dump-header",
                "-c",
                "--cookie-jar",
                "--trace",
                "--trace-ascii",
                "--stderr",
                "--etag-save",
                "--hsts",
                "--alt-svc",
            ),
        ),
    ),
    "wget": (
        "`-O`, `-o`, `-a` write files",
        lambda v: _option_values(
            v, ("-O", "--output-document", "-o", "--output-file", "-a", "--append-output")
        ),
    ),
    "less": (
        "`-o`/`-O`/`--log-file` copy the input to a file",
        lambda v: _option_values(v, ("-o", "-O", "--log-file", "--LOG-FILE")),
    ),
    "dd": ("`of=FILE` writes there", lambda v: [x[3:] for x in v if x.startswith("of=")]),
    "uniq": (
        "a second file name is where it writes",
        lambda v: _operands(
            v, ("-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars")
        )[1:2],
    ),
    "split": (
        "writes the pieces under the prefix given",
        lambda v: (
            _operands(v, ("-a", "-b", "-C", "-l", "-n", "-t", "--additional-suffix"))[1:2] or ["x"]
        ),
    ),
    "script": (
        "writes the session's typescript to the file named",
        lambda v: (
            _operands(
                v,
                (
                    "-c",
                    "--command",
                    "-E",
                    "--echo",
                    "-I",
                    "--log-in",
                    "-O",
                    "--log-out",
                    "-B",
                    "--log-io",
                    "-T",
                    "--log-timing",
                    "-m",
                ),
            )[:1]
            or ["typescript"]
        ),
    ),
}


def writes(name: str, args: list[Word]) -> list[str | None]:
    """Files a command writes through its options (`git log --output=F`); a name of unknown
    value is None."""
    entry = WRITING.get(canonical(name))
    if entry is None:
        return []
    values = expand(_values(args), LONGS.get(canonical(name), ()))
    return [None if UNKNOWN in f else f for f in entry[1](values)]


# --- programs that read code from the terminal ---------------------------------------------------

# what a line typed into the Terminal goes to, once one of these runs in the foreground: its
# code (`system "rm v"` in `perl -de0`), never a Bash line (docs: permissions)
INTERACTIVE = frozenset(
    {"python", "perl", "ruby", "irb", "pry", "node", "deno", "php", "lua", "luajit", "R"}
    | {"julia", "tclsh", "wish", "expect", "gdb", "lldb", "sqlite3", "mysql", "psql", "dc"}
    | {"bc", "ed", "ex", "vim", "vi", "nvim", "view", "emacs", "less", "more", "man", "ftp"}
    | {"sftp", "ghci", "octave", "scala", "jshell", "erl", "iex", "guile", "racket", "sbcl"}
    | {"ocaml", "mongo", "mongosh", "clisp", "gnuplot", "maxima", "redis-cli", "lftp"}
)
SCRIPTED = frozenset({"python", "perl", "ruby", "node", "php", "lua", "luajit", "julia"})
SCRIPTED |= {"tclsh", "wish", "expect", "scala", "guile", "racket", "ocaml"}
QUICK = frozenset({"--version", "-V", "--help", "-h", "-v", "-version"})


def starts_reader(words: Sequence[str]) -> bool:
    """Whether a command starts a program that reads code typed at the terminal: an
    interpreter with no script (`python3`, `perl -de0`, `node -i`), or a debugger, a database
    shell, an editor or a pager, which run commands typed into them."""
    if not words:
        return False
    name = canonical(words[0].rpartition("/")[2])
    if name not in INTERACTIVE or QUICK.intersection(words[1:2]):
        return False
    if name not in SCRIPTED:
        return True
    args = list(words[1:])
    if any(a in ("-i", "--interactive") or a.startswith("-d") for a in args if a != "--"):
        return True  # `python3 -i x.py`, `perl -d x.pl`, `node -i`
    code = _clusters(args, "ceEp", "WXQmrlI0CFxD", ("--eval", "--print", "--command"))
    return code is None and _script(args, "-W -X -m") in (None, "-")


HEADINGS = {
    "wrapper": "Wrappers: the command they run is judged",
    "opaque": "Opaque: they run code no rule sees",
    "writes": "Options that write a file",
}


def reference() -> str:
    """The tables as the permissions page lists them (a test keeps the page up to date:
    `python -m agi.policy.bash.programs` prints this block)."""
    out = ["<!-- generated by python -m agi.policy.bash.programs -->"]
    for kind, heading in HEADINGS.items():
        out += ["", f"**{heading}**", "", "| program | why |", "|---|---|"]
        for row_kind, names, why in table():
            if row_kind == kind:
                shown = ", ".join(f"`{name}`" for name in names.split())
                out.append(f"| {shown} | {why.replace('|', '&#124;')} |")
    out.append("<!-- end of generated tables -->")
    return "\n".join(out) + "\n"


def table() -> list[tuple[str, str, str]]:
    """(table, program, why) of every entry, for the permissions page."""
    # lazy: agi.policy.bash.wrappers imports this module
    from agi.policy.bash.wrappers import WHY

    rows = [("wrapper", name, why) for name, why in WHY.items()]
    rows += [("wrapper", name, w.why) for name, w in UNWRAPPED.items() if name not in ARCHES]
    rows.append(("wrapper", " ".join(ARCHES), "setarch under another name: runs a program"))
    rows += [("opaque", name, why) for name, (why, _) in OPAQUE.items()]
    rows += [("writes", name, why) for name, (why, _) in WRITING.items()]
    return rows


if __name__ == "__main__":
    print(reference(), end="")
