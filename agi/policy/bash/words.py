"""Words of a Bash line as bash will see them, and the expansions that can run code.

A word of the parse (tree-sitter-bash) reduces to its literal value when bash would give it one
value whatever the environment: quoting removed (`'…'`, `"…"`, `$'…'` decoded, `$"…"`,
backslashes). Expansions (`$x`, `${x}`, `$(…)`) make a word data of unknown value: fine as an
argument, never as a command name or a wrapper's option. `unsafe` finds the constructs that make
bash evaluate a value as code: arithmetic on a variable of unknown value (`a='x[$(cmd)]';
$((a))`), `${x@P}`, `${!x}`, non-numeric subscripts, `declare -n`/`-i`, names given to `read`,
`unset`, `printf -v`, and assignments to variables that change what runs (`PATH`, `BASH_ENV`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

INTEGER = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]+|[0-9]+#[0-9A-Za-z@_]+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLAIN_CHARS = re.compile(r"[*?\[\]{}]")  # globbing and brace expansion: the word may become others
# variables whose value changes which program runs, or that bash evaluates as code
DANGEROUS = frozenset(
    {"PATH", "IFS", "BASH_ENV", "ENV", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND"}
    | {"BASH_ALIASES", "BASH_CMDS", "SHELLOPTS", "BASHOPTS", "EXECIGNORE", "BASH_LOADABLES_PATH"}
    | {"BASH_XTRACEFD", "HISTCONTROL", "INPUTRC", "CDPATH", "HOME", "FUNCNEST"}
)
# variables that name a command other programs run (a pager, an editor, git's ssh): setting
# one makes the command opaque (docs: permissions)
DANGEROUS |= {"PAGER", "GIT_PAGER", "MANPAGER", "SYSTEMD_PAGER", "EDITOR", "VISUAL", "GIT_EDITOR"}
DANGEROUS |= {"GIT_SEQUENCE_EDITOR", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXTERNAL_DIFF"}
DANGEROUS |= {"GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS", "GIT_PROXY_COMMAND", "GIT_EXEC_PATH"}
DANGEROUS |= {"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG", "GIT_CONFIG_GLOBAL"}
DANGEROUS |= {"GIT_CONFIG_SYSTEM", "GIT_TEMPLATE_DIR", "LESSOPEN", "LESSCLOSE", "RSYNC_RSH"}
DANGEROUS |= {"RSYNC_CONNECT_PROG", "TAR_OPTIONS", "PERL5OPT", "PERL5DB", "BROWSER"}
DANGEROUS_PREFIXES = ("LD_", "BASH_FUNC_", "DYLD_", "GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")
SPECIAL_NUMBERS = frozenset(  # bash gives these a number whatever was assigned
    {"#", "?", "$", "!", "RANDOM", "SRANDOM", "SECONDS", "LINENO", "BASHPID", "PPID", "UID"}
    | {"EUID", "EPOCHSECONDS"}
)
# builtins (and what runs builtins) that may set a variable named anywhere in their arguments
SETTERS = frozenset(
    {"read", "mapfile", "readarray", "printf", "getopts", "wait", "eval", "trap", "let", "unset"}
    | {"builtin", "command", "time", "coproc", "exec", "select", "export", "declare", "local"}
)
PARAMETERS = frozenset({"variable_name", "special_variable_name", "subscript"})
ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
ARITHMETIC_NODES = frozenset(
    {"binary_expression", "unary_expression", "postfix_expression", "ternary_expression"}
    | {"parenthesized_expression", "number"}
)
ANSI = re.compile(
    r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)", re.S
)
ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
ANSI_SIMPLE |= {"t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


class Unreducible(Exception):
    """The line does something the judge cannot follow: no rule may vouch for it."""


@dataclass(frozen=True)
class Word:
    """One word: as written, its value when bash gives it exactly one (else None), and whether
    it stays one word (no unquoted glob or brace characters)."""

    text: str
    value: str | None
    plain: bool = True

    @property
    def shown(self) -> str:
        return self.text if self.value is None else self.value


def dangerous(name: str) -> bool:
    return name in DANGEROUS or name.startswith(DANGEROUS_PREFIXES)


def text(node: Any, source: bytes) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "surrogatepass")


def ansi_c(body: str) -> str:
    """The value of `$'body'`."""

    def one(m: re.Match[str]) -> str:
        seq = m.group(1)
        if seq[0] in "xuU" and len(seq) > 1:
            return chr(min(int(seq[1:], 16), 0x10FFFF))
        if seq[0] in "01234567":
            return chr(int(seq, 8) & 0xFF)
        if seq[0] == "c" and len(seq) > 1:
            return chr(ord(seq[1].upper()) ^ 0x40)
        return ANSI_SIMPLE.get(seq, "\\" + seq)

    return ANSI.sub(one, body)


def unquoted(raw: str) -> str:
    """An unquoted word's value: a backslash quotes the next character."""
    return re.sub(r"\\(.)", r"\1", raw.replace("\\\n", ""), flags=re.S)


def _double_quoted(raw: str) -> str:
    return re.sub(r'\\([$`"\\])', r"\1", raw.replace("\\\n", ""))


def word(node: Any, source: bytes) -> Word:
    """Reduce a word node to its value, if bash gives it exactly one."""
    raw = text(node, source)
    kind = node.type
    if kind == "word":
        return Word(raw, unquoted(raw), not PLAIN_CHARS.search(re.sub(r"\\.", "", raw)))
    if kind == "number":
        return Word(raw, raw)
    if kind == "raw_string":
        return Word(raw, raw[1:-1])
    if kind == "ansi_c_string":
        return Word(raw, ansi_c(raw[2:-1]))
    if kind == "translated_string":
        inner = [c for c in node.children if c.type == "string"]
        return Word(raw, word(inner[0], source).value if inner else None)
    if kind == "string":  # from the text: a lone `$` is an anonymous node, still a `$`
        pieces = [c for c in node.children if c.is_named]
        if all(c.type == "string_content" for c in pieces) and raw[-1:] == '"':
            return Word(raw, _double_quoted(raw[1:-1]))
        return Word(raw, None)
    if kind == "concatenation":
        parts = [word(c, source) for c in node.children]
        if all(p.value is not None for p in parts):
            value = "".join(p.value or "" for p in parts)
            return Word(raw, value, all(p.plain for p in parts))
        return Word(raw, None, all(p.plain for p in parts))
    return Word(raw, None, kind in ("simple_expansion", "expansion", "string"))


def integer_names(root: Any, source: bytes) -> set[str]:
    """Variables the line gives only literal integers (so arithmetic on them runs nothing). A
    name that a builtin may set (`read "a"`, `printf -v 'a'`, `eval "a=…"`, `trap 'a=…' DEBUG`,
    given in any quoting) is not one; after `source FILE` none is."""
    good: set[str] = set()
    bad: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type == "variable_assignment":  # `a[0]=…` sets what `$((a))` reads
            name = node.children[0]
            values = node.children[2:]
            target = good if values and all(_is_integer(v, source) for v in values) else bad
            target.add(text(name, source).split("[")[0])
        elif node.type == "for_statement":
            names = [c for c in node.children if c.type == "variable_name"]
            values = [c for c in node.children if c.is_named and c.type not in ("variable_name",)]
            values = [v for v in values if v.type != "do_group"]
            ok = all(_is_integer(v, source) for v in values) and bool(values)
            (good if ok else bad).update(text(n, source) for n in names)
        elif node.type == "expansion" and any(c.type in ("=", ":=") for c in node.children):
            bad.update(text(c, source) for c in node.children if c.type == "variable_name")
        elif node.type == "command":
            bad.update(text(c, source) for c in node.children[1:] if c.type == "word")
            named = [c.children[0] for c in node.children if c.type == "command_name"]
            first = word(named[0], source).value if named else ""
            if first in ("source", "."):
                return set()  # the file may set any variable
            if first in SETTERS or first is None:
                bad.update(NAME.findall(text(node, source)))
    return good - bad


def _is_integer(node: Any, source: bytes) -> bool:
    value = word(node, source).value
    return value is not None and INTEGER.fullmatch(value) is not None


def arithmetic_safe(node: Any, source: bytes, known: set[str]) -> bool:
    """Whether evaluating this arithmetic runs nothing: numbers, operators, and variables whose
    values are known integers."""
    kind = node.type
    if not node.is_named or kind == "number":
        return True
    if kind in ("variable_name", "word"):
        value = text(node, source)
        return bool(INTEGER.fullmatch(value)) or value in known or value in SPECIAL_NUMBERS
    if kind == "simple_expansion":  # `$1`, `$0`: positional, any value (`f 'a[$(cmd)]'`)
        names = [c for c in node.children if c.is_named]
        if len(names) == 1 and text(names[0], source).isdigit():
            return False
        return len(names) == 1 and arithmetic_safe(names[0], source, known)
    if kind == "special_variable_name":
        return text(node, source) in SPECIAL_NUMBERS
    if kind == "expansion":  # `${#x}` is a length
        kinds = [c.type for c in node.children]
        return kinds == ["${", "#", "variable_name", "}"]
    if kind == "variable_assignment":  # `for ((i=0; …))`
        return all(arithmetic_safe(c, source, known) for c in node.children[1:])
    if kind in ARITHMETIC_NODES:
        return all(arithmetic_safe(c, source, known) for c in node.children)
    return False


# what each quoting form is as bash reads it: tree-sitter's lexer ends `$'\\'…` too late
TOKENS = {
    "ansi_c_string": re.compile(r"\$'(?:[^'\\]|\\.)*'", re.S),
    "raw_string": re.compile(r"'[^']*'"),
    "string_content": re.compile(r'(?:[^"\\]|\\.)*', re.S),
    "word": re.compile(r"(?:[^'\"\\]|\\.)*\\?", re.S),
}


def check_node(node: Any, source: bytes, known: set[str]) -> None:
    """Raise Unreducible when this node makes bash evaluate a value as code, or is a token
    bash would end elsewhere (a misread line hides commands)."""
    kind = node.type
    if kind in TOKENS:
        _require(TOKENS[kind].fullmatch(text(node, source)) is not None)
    if kind == "arithmetic_expansion" or kind == "c_style_for_statement":
        inner = [c for c in node.children if c.is_named and c.type != "do_group"]
        _require(all(arithmetic_safe(c, source, known) for c in inner))
    elif kind == "compound_statement" and node.children and node.children[0].type == "((":
        _require(all(arithmetic_safe(c, source, known) for c in node.children))
    elif kind == "expansion":
        _expansion(node, source, known)
    elif kind == "subscript":
        _subscript(node, source, known)
    elif kind == "variable_assignment":
        _require(not dangerous(text(node.children[0], source).split("[")[0]))
    elif kind in ("for_statement", "select_statement"):  # `for PATH in /tmp/x; do ls; done`
        names = [c for c in node.children if c.type == "variable_name"]
        _require(not any(dangerous(text(n, source)) for n in names))
    elif kind == "test_command":
        _test(node, source, known)
    elif kind == "declaration_command":
        _declaration(node, source)
    elif kind == "unset_command":
        names = [word(c, source) for c in node.children[1:]]
        _require(all(n.value is not None and _name_ok(n.value) for n in names))


def _require(ok: bool) -> None:
    if not ok:
        raise Unreducible


def _name_ok(name: str) -> bool:
    """A name bash takes for a variable without evaluating anything: `x`, `a[3]`, `a[@]`, an
    option (`-f`)."""
    if name.startswith("-") or NAME.fullmatch(name):
        return True
    m = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\[([0-9]+|@|\*)\]", name)
    return m is not None


def _expansion(node: Any, source: bytes, known: set[str]) -> None:
    kinds = [c.type for c in node.children]
    if {"=", ":="} & set(kinds):  # `${PATH:=/tmp/x}` assigns
        names = [text(c, source) for c in node.children if c.type == "variable_name"]
        _require(not any(dangerous(n) for n in names))
    if len(kinds) > 1 and kinds[1] == "!":  # `${!x}` evaluates x's value as a name
        listing = kinds[-2] in ("*", "@") or any(
            c.type == "subscript" and text(c, source).endswith(("[@]", "[*]"))
            for c in node.children
        )
        _require(listing)
    for i, kind in enumerate(kinds):
        if kind == "@" and i + 1 < len(kinds) and text(node.children[i + 1], source) == "P":
            raise Unreducible  # `${x@P}` expands x's value as a prompt: substitutions run
    params = [i for i, k in enumerate(kinds) if k in PARAMETERS]
    if params:  # `${x:OFFSET:LENGTH}`, `${@:…}`, `${a[@]:…}`: both are arithmetic
        at = params[0]
        if at + 1 < len(kinds) and kinds[at + 1] == ":":
            rest = [c for c in node.children[at + 2 :] if c.is_named]
            _require(all(arithmetic_safe(c, source, known) for c in rest))


def _subscript(node: Any, source: bytes, known: set[str]) -> None:
    index = [c for c in node.children[1:] if c.is_named]
    if len(index) == 1 and text(index[0], source) in ("@", "*"):
        return
    _require(all(arithmetic_safe(c, source, known) for c in index))


def _test(node: Any, source: bytes, known: set[str]) -> None:
    double = bool(node.children) and node.children[0].type == "[["
    stack = list(node.children)
    while stack:
        part = stack.pop()
        stack.extend(part.children)
        operators = [c for c in part.children if c.type == "test_operator"]
        if not operators:
            continue
        op = text(operators[0], source)
        operands = [c for c in part.children if c.is_named and c.type != "test_operator"]
        if op in ("-v", "-R"):
            _require(
                all((w := word(c, source).value) is not None and _name_ok(w) for c in operands)
            )
        elif op in ARITHMETIC_TESTS and double:
            _require(all(arithmetic_safe(c, source, known) for c in operands))


def _declaration(node: Any, source: bytes) -> None:
    """`declare`, `local`, `export`, …: names must be written out; `-n` (a reference) and `-i`
    (arithmetic on every later assignment) are not followed."""
    for child in node.children[1:]:
        if child.type == "word" and text(child, source).startswith(("-", "+")):
            _require(not set(text(child, source)[1:]) & {"n", "i"})
        elif child.type not in ("variable_assignment", "variable_name"):
            _require(word(child, source).value is not None and _name_ok(text(child, source)))
