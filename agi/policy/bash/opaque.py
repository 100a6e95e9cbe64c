"""Programs that run code or commands the judge cannot see (docs: permissions): the `OPAQUE`
table of agi.policy.bash.programs, program aliases and long options, and whether a rule vouches."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from agi.policy.bash.argv import Opaque, _values
from agi.policy.bash.checkers import (
    GDB_COMMANDS,
    TAR_COMMANDS,
    _always,
    _awk,
    _dc,
    _git,
    _interpreter,
    _make,
    _options_named,
    _rsync,
    _scp,
    _sed,
    _sqlite,
    _tar,
)
from agi.policy.bash.words import Word

MAKE_WHY = (
    "runs the recipes of a Makefile; `--eval`/`-E`, `-f`, `-C` and `VAR=value` arguments run code "
    "the project's Makefile does not hold (only a rule naming that option vouches for them)"
)

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
    "make": (MAKE_WHY, _make("make")),
    "gmake": (MAKE_WHY, _make("gmake")),
    "bmake": (MAKE_WHY, _make("bmake")),
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
