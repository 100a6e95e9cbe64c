"""`agi --completion bash|zsh|fish`: a shell completion script made from the option table
(agi.options.table): every flag, the words a flag with choices takes, files after a flag whose
value is a file, directories after one whose value is a directory. Install it with
`agi --completion bash > ~/.local/share/bash-completion/completions/agi` (docs: command-line)."""

from __future__ import annotations

from agi.options.table import Option, ordered

FILES = {"FILE", "PATH", "SESSION"}  # a session is a directory, but may be named by any path
DIRS = {"DIR"}


def _rows() -> list[Option]:
    return [o for o in ordered() if o.flags]


def _takes(option: Option) -> bool:
    """Whether the flag takes the next word as its value (`--rewind [N]` and `--exit-code`
    take theirs only with `=`)."""
    return option.kind in ("value", "list")


def bash() -> str:
    flags = " ".join(f for o in _rows() for f in o.flags)
    cases: list[str] = []
    for o in _rows():
        if not _takes(o):
            continue
        names = "|".join(o.flags)
        if o.choices:
            reply = f'$(compgen -W "{" ".join(o.choices)}" -- "$cur")'
        elif o.metavar in FILES:
            reply = '$(compgen -f -- "$cur")'
        elif o.metavar in DIRS:
            reply = '$(compgen -d -- "$cur")'
        else:
            reply = ""  # a number, a model, a rule: nothing to offer
        cases.append(f"        {names}) COMPREPLY=({reply}); return ;;")
    body = "\n".join(cases)
    return f"""# agi's bash completion, made by `agi --completion bash`
_agi() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    case "$prev" in
{body}
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "{flags}" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -o filenames -F _agi agi
"""


def _zsh_text(text: str) -> str:
    for a, b in (("\\", "\\\\"), ("[", "\\["), ("]", "\\]"), (":", "\\:"), ("'", "'\\''")):
        text = text.replace(a, b)
    return text


def zsh() -> str:
    specs: list[str] = []
    for o in _rows():
        action = ""
        if o.choices:
            action = f":{o.metavar or 'value'}:({' '.join(o.choices)})"
        elif o.metavar in FILES:
            action = f":{o.metavar}:_files"
        elif o.metavar in DIRS:
            action = f":{o.metavar}:_files -/"
        elif _takes(o):
            action = f":{_zsh_text(o.metavar or 'value')}: "
        repeat = "*" if o.kind == "list" else ""
        for flag in o.flags:
            specs.append(f"    '{repeat}{flag}[{_zsh_text(o.help)}]{action}'")
    body = " \\\n".join(specs)
    return f"""#compdef agi
# agi's zsh completion, made by `agi --completion zsh`
_arguments -s \\
{body} \\
    '*:prompt:_files'
"""


def _fish_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish() -> str:
    lines = ["# agi's fish completion, made by `agi --completion fish`"]
    for o in _rows():
        words = ["complete", "-c", "agi"]
        for flag in o.flags:
            words += ["-s", flag[1:]] if len(flag) == 2 else ["-l", flag[2:]]
        words += ["-d", _fish_text(o.help)]
        if o.choices:
            words += ["-x", "-a", _fish_text(" ".join(o.choices))]
        elif o.metavar in FILES or o.metavar in DIRS:
            words += ["-r", "-F"]
        elif _takes(o):
            words += ["-x"]
        lines.append(" ".join(words))
    return "\n".join(lines) + "\n"


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


def script(shell: str) -> str:
    """The completion script for `shell` (one of SHELLS: the flag's choices)."""
    return SHELLS[shell]()
