"""Programs that run the rest of their arguments as a command or as a shell line (docs:
permissions): the `UNWRAPPED` table of agi.policy.bash.programs, and `unwrap`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agi.policy.bash.argv import Opaque, Opaqued, _values, getopt
from agi.policy.bash.words import Word

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
