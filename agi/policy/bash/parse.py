"""What a Bash line makes bash run, found by a real shell parser (tree-sitter-bash) and
evaluated the way bash will (docs: security).

Every command of a compound line (`&&`, `||`, `;`, `|`, newlines, `$(…)`, backticks, process
substitution, loops, functions) is a Part, judged on its own, with its words as bash gives them
(agi.policy.bash.words) and the commands wrappers and evaluating builtins run added
(agi.policy.bash.wrappers). A line the judge cannot follow (a syntax error, a token bash reads
otherwise, an expansion that evaluates code, a command name from an expansion, an unknown
wrapper option) returns None: no allow rule vouches for it and the first deny rule denies it.
tree-sitter-bash was chosen over bashlex: it imports in about 2 ms instead of 100 ms and reads
`[[ ]]`, `$(( ))` and `case`, which bashlex refuses. It is imported only when a Bash rule has to
be checked.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from agi.policy.bash.argv import Opaque, Opaqued
from agi.policy.bash.opaque import opaque
from agi.policy.bash.words import Unreducible, Word, check_node, integer_names, word
from agi.policy.bash.wrapper_tables import RESERVED
from agi.policy.bash.wrappers import inner, need, program
from agi.policy.bash.writing import writes

REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution", "arithmetic_expansion"})
QUOTED = frozenset({"raw_string", "ansi_c_string"})  # '…' and $'…': nothing runs inside
SUBSTITUTION_START = re.compile(rb"\$\(|<\(|>\(|`")
COMMANDS = frozenset({"command", "declaration_command", "unset_command"})
WORDS = frozenset(  # what a word of a command may be
    {"word", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation"}
    | {"number", "simple_expansion", "expansion", "command_substitution"}
    | {"process_substitution", "arithmetic_expansion"}
)
MAX_DEPTH = 8  # `bash -c "eval 'sh -c …'"`: deeper nesting is not followed
WHITE = re.compile(r"\s")
# wrappers that add nothing to what they run: an allow rule for the command covers them
TRANSPARENT = frozenset({"time", "nohup", "nice", "timeout", "stdbuf", "command", "builtin"})
TRANSPARENT |= {"ionice", "setsid"}


@dataclass(frozen=True)
class Part:
    """One simple command: as written (with leading `VAR=…`), without those assignments, and
    as bash will run it (`words`: each word's value, the name first; `assigns` before it)."""

    text: str  # the command with its assignments, redirections left out
    bare: str  # the command from its name on
    words: tuple[str, ...] = ()
    assigns: tuple[str, ...] = ()
    transparent: bool = False  # `time`, `nohup`, …: allowed when what it runs is
    opaque: Opaque | None = None  # it runs code no rule sees (`python3 -c`, `sed 1e…`)
    writes: tuple[str | None, ...] = ()  # files it writes (redirections, `--output=F`)
    redirects: bool = False  # only the redirections of a line (no command of its own)

    def forms(self, strict: bool) -> set[str]:
        """The texts a rule may match: allow rules (`strict`) see the command with its
        assignments, as written and as bash runs it; deny and ask rules also see it without
        them, with its quoting removed, and with a program path's basename (`/bin/rm` is
        `rm`)."""
        found = {self.text} if strict else {self.text, self.bare}
        if not strict:
            for text in (self.text, self.bare):
                try:
                    found.add(" ".join(shlex.split(text)))
                except ValueError:
                    pass
        if self.words:
            found.add(" ".join([*self.assigns, *self.words]))
            if not strict:
                found.add(" ".join(self.words))
                found.add(" ".join([program(self.words[0]), *self.words[1:]]))
        return {f for f in found if f}


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def split(command: str, stateful: bool = False) -> list[Part] | None:
    """Every command `command` makes bash run, nested and wrapped ones included, or None when
    the judge cannot follow it (a syntax error, an expansion that evaluates code, an unknown
    wrapper option, a missing parser). A line with backslash-newlines is judged both as
    written and with them joined, as bash reads it. `stateful`: a line typed into a shell that
    ran earlier lines (whose functions and traps may set any variable)."""
    if "\x00" in command:
        return None
    try:
        _parser()
    except ImportError:
        return None
    try:
        return _split(command, 0, stateful)
    except (ValueError, TypeError, IndexError, AttributeError, OverflowError):
        return None  # what the judge cannot follow, it does not vouch for


def _split(command: str, depth: int, stateful: bool = False) -> list[Part] | None:
    """The line judged as written and, when it has backslash-newlines, with them joined (at
    every depth: `bash -c 'r\\<newline>m'` runs rm)."""
    parts: list[Part] = []
    for text in dict.fromkeys([command, join_continuations(command)]):
        found = _split_one(text, depth, stateful)
        if found is None:
            return None
        parts += found
    return parts


def _split_one(command: str, depth: int, stateful: bool) -> list[Part] | None:
    if depth > MAX_DEPTH:
        return None
    source = command.encode("utf-8", "surrogatepass")
    tree = _parser().parse(source)
    if tree.root_node.has_error:
        return None
    nodes = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed(node.children))
    if _unaccounted(source, nodes):
        return None
    # variables holding known integers: only in a line run on its own (an evaluated line runs
    # amid the caller's traps and functions, a terminal's amid earlier lines')
    known = integer_names(tree.root_node, source) if depth == 0 and not stateful else set()
    parts: list[Part] = []
    targets: list[str | None] = []
    try:
        for node in nodes:
            check_node(node, source, known)
            if node.type in COMMANDS:
                parts += _command(node, source, depth)
            elif node.type == "variable_assignment" and _bare_exported(node, source):
                parts.append(Part(_slice(source, node.start_byte, node.end_byte), ""))
            elif node.type == "file_redirect":
                targets += _target(node, source)
    except (Unreducible, RecursionError):
        return None
    if targets:  # the files the line's redirections write, judged as writes
        parts.append(Part("", "", transparent=True, writes=tuple(targets), redirects=True))
    return parts


WRITING_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&"})
QUIET_TARGETS = re.compile(r"/dev/(null|stdout|stderr|tty|fd/[0-9]+)|-|[0-9]+-?")


def _target(node: Any, source: bytes) -> list[str | None]:
    """The file a redirection writes (`> F`, `>> F`, `&> F`, `>| F`, `>&F`); none for reads,
    descriptor copies (`2>&1`) and /dev/null; None for a name of unknown value."""
    operators = [c.type for c in node.children if not c.is_named]
    if not WRITING_REDIRECTS.intersection(operators):
        return []
    words = [c for c in node.children if c.type in WORDS]
    if not words:
        return []
    found = word(words[0], source)
    if found.value is None or not found.plain:
        return [None]
    if QUIET_TARGETS.fullmatch(found.value) or ">&" in operators and found.value.isdigit():
        return []
    return [found.value]


def _bare_exported(node: Any, source: bytes) -> bool:
    """A bare `NAME=value` that may change the environment of later commands (a name without
    lower-case letters, as environment variables are named) is judged as a command."""
    parent = node.parent
    if parent is None or parent.type in ("command", "declaration_command", "c_style_for_statement"):
        return False
    name = source[node.children[0].start_byte : node.children[0].end_byte].decode(errors="replace")
    return name == name.upper()


def _command(node: Any, source: bytes, depth: int) -> list[Part]:
    part = _part(node, source)
    if node.type != "command":
        return [part]
    pieces = _pieces(node)
    assigns = [word(c, source).shown for c in pieces if c.type == "variable_assignment"]
    named = [c for c in pieces if c.type != "variable_assignment"]
    if not named:
        return [part]
    first = named[0].children[0] if named[0].type == "command_name" else named[0]
    words = [word(first, source), *(word(c, source) for c in named[1:])]
    _name(words[0])
    shown = tuple(w.shown for w in words)
    fed = _fed(node)
    try:
        inside = _inner(words, depth, fed)
        dark = opaque(program(shown[0]), words[1:], fed)
    except Opaqued as e:  # a wrapper that runs what no rule sees (`ssh -o ProxyCommand=…`)
        inside, dark = [], e.found
    clear = bool(inside) and program(shown[0]) in TRANSPARENT
    found = tuple(writes(program(shown[0]), words[1:]))
    part = replace(part, words=shown, assigns=tuple(assigns), transparent=clear)
    return [replace(part, opaque=dark, writes=found), *inside]


def _name(first: Word) -> None:
    name = need(first)
    if not name or name in RESERVED - {"time", "coproc"} or WHITE.search(name):
        raise Unreducible


def _fed(node: Any) -> bool:
    """Whether a command's stdin is a pipe or a redirection rather than the caller's."""
    inputs = ("<", "<<", "<<<", "<&", "<<-", "<>")
    parent = node.parent
    redirects = [c for c in node.children if c.type in REDIRECTS]
    if parent is not None and parent.type == "redirected_statement":
        redirects += [c for c in parent.children if c.type in REDIRECTS]
        node, parent = parent, parent.parent
    if any(t.type in inputs for r in redirects for t in r.children):
        return True
    return parent is not None and parent.type == "pipeline" and parent.children[0] != node


def _inner(words: list[Word], depth: int, fed: bool = True) -> list[Part]:
    """What a command runs besides itself (wrapped commands, evaluated lines), judged too."""
    if depth >= MAX_DEPTH:
        raise Unreducible
    commands, lines = inner(words, fed)
    parts: list[Part] = []
    for argv in commands:
        _name(argv[0])
        shown = tuple(w.shown for w in argv)
        text = " ".join(shown)
        inside = _inner(argv, depth + 1)
        clear = bool(inside) and program(shown[0]) in TRANSPARENT
        dark = opaque(program(shown[0]), argv[1:], True)
        wrote = tuple(writes(program(shown[0]), argv[1:]))
        part = Part(text, text, shown, transparent=clear, opaque=dark, writes=wrote)
        parts += [part, *inside]
    for line in lines:
        found = _split(line, depth + 1)
        if found is None:
            raise Unreducible
        parts += found
    return parts


def join_continuations(command: str) -> str:
    """The line with backslash-newlines removed where bash removes them: outside single quotes
    and comments."""
    if "\\\n" not in command:
        return command
    out: list[str] = []
    quote = ""
    at = 0
    while at < len(command):
        ch = command[at]
        if quote == "'" or quote == "#":
            if ch == quote or quote == "#" and ch == "\n":
                quote = ""
            out.append(ch)
        elif ch == "\\":
            pair = command[at : at + 2]
            if pair != "\\\n":
                out.append(pair)
            at += 2
            continue
        elif quote == '"':
            quote = "" if ch == '"' else quote
            out.append(ch)
        else:
            if ch in "'\"" or ch == "#" and (not out or out[-1] in " \t\n;&|()<>"):
                quote = ch
            out.append(ch)
        at += 1
    return "".join(out)


def _unaccounted(source: bytes, nodes: list[Any]) -> bool:
    """Whether the line may run commands the tree does not show: a substitution (`$(`, `<(`,
    `>(`, a backtick) that no substitution node starts or ends at, outside single quotes, a
    backtick escaped inside backticks, or a here-document continued with a backslash. Such a
    line is taken as unreadable, so that no rule is trusted with it."""
    if b"\\`" in source or (b"<<" in source and b"\\\n" in source):
        return True
    starts = {n.start_byte for n in nodes if n.type in SUBSTITUTIONS}
    ends = {n.end_byte - 1 for n in nodes if n.type in SUBSTITUTIONS}
    # '…' and $'…' quote nothing inside double quotes (`"${x-'$(cmd)'}"` runs cmd)
    quoted = [(n.start_byte, n.end_byte) for n in nodes if n.type in QUOTED and _unquoted(n)]
    quoted += [  # the body of a here-document whose delimiter is quoted runs nothing
        (body.start_byte, body.end_byte)
        for n in nodes
        if n.type == "heredoc_redirect"
        for start in n.children
        if start.type == "heredoc_start" and source[start.start_byte] in b"'\""
        for body in n.children
        if body.type == "heredoc_body"
    ]
    for found in SUBSTITUTION_START.finditer(source):
        at = found.start()
        if at in starts or at in ends or any(a <= at < b for a, b in quoted):
            continue
        return True
    return False


def _pieces(node: Any) -> list[Any]:
    """A command's assignments and words in order, with the words tree-sitter files under a
    redirection: in `exec 3>&1 rm v` (and `make test >/dev/null install`) bash runs `rm v`,
    where the parse makes `rm v` destinations of `3>&1`."""
    pieces = [c for c in node.children if c.type not in REDIRECTS]
    redirects = [c for c in node.children if c.type in REDIRECTS]
    parent = node.parent
    if parent is not None and parent.type == "redirected_statement" and parent.children[0] == node:
        redirects += [c for c in parent.children if c.type in REDIRECTS]
    for redirect in redirects:
        words = [c for c in redirect.children if c.type in WORDS]
        pieces += words if redirect.type == "heredoc_redirect" else words[1:]
    return sorted(pieces, key=lambda c: c.start_byte)


def _unquoted(node: Any) -> bool:
    """Whether a node stands outside double quotes."""
    parent = node.parent
    while parent is not None:
        if parent.type == "string":
            return False
        parent = parent.parent
    return True


def _part(node: Any, source: bytes) -> Part:
    """A command node's text without its redirections, with and without leading assignments."""
    pieces = _pieces(node) if node.type == "command" else []
    pieces = pieces or [c for c in node.children if c.type not in REDIRECTS]
    if not pieces:
        text = _slice(source, node.start_byte, node.end_byte)
        return Part(text, text)
    end = pieces[-1].end_byte
    named = [c for c in pieces if c.type != "variable_assignment"]
    if any(c.parent != node for c in pieces):  # words after a redirection: joined as bash does
        text = " ".join(_slice(source, c.start_byte, c.end_byte) for c in pieces)
        bare = " ".join(_slice(source, c.start_byte, c.end_byte) for c in named)
        return Part(text, bare or text)
    text = _slice(source, pieces[0].start_byte, end)
    bare = _slice(source, named[0].start_byte, end) if named else text
    return Part(text, bare)


def _slice(source: bytes, start: int, end: int) -> str:
    return source[start:end].decode("utf-8", "surrogatepass").strip()


STRUCTURES = frozenset(  # what makes a line more than simple commands (no "always" rule)
    {"subshell", "compound_statement", "command_substitution", "process_substitution"}
    | {"function_definition", "if_statement", "while_statement", "for_statement"}
    | {"c_style_for_statement", "case_statement", "test_command", "negated_command"}
    | {"arithmetic_expansion", "declaration_command", "unset_command", "select_statement"}
)


def simple_commands(command: Any) -> list[tuple[str, ...]] | None:
    """The words of each command a line of simple commands runs (joined by `&&`, `||`, `;`,
    `|`, newlines; wrapped commands included), for "always" rules; None for anything more
    (subshells, groups, tests, loops, substitutions, bare assignments) or unreadable."""
    if not isinstance(command, str) or not command.strip():
        return None
    parts = split(command)
    if parts is None:
        return None
    stack = [_parser().parse(command.encode("utf-8", "surrogatepass")).root_node]
    while stack:
        node = stack.pop()
        if node.type in STRUCTURES:
            return None
        stack.extend(node.children)
    found = []
    for part in parts:
        if part.redirects:
            continue
        if not part.words:
            return None
        found.append(part.words)
    return found or None
