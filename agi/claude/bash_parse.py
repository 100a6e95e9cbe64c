"""The simple commands inside a Bash command line, found by a real shell parser (tree-sitter-bash).

Permission rules judge each simple command of a compound line (`&&`, `||`, `;`, `|`, newlines,
`$(…)`, backticks, process substitution, loops, functions) on its own. A line the parser cannot
read wholly returns None: the caller then lets it match no allow rule. tree-sitter-bash was
chosen over bashlex: it imports in about 2 ms instead of 100 ms and reads `[[ ]]`, `$(( ))` and
`case`, which bashlex refuses. It is imported only when a Bash rule has to be checked.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

REDIRECTS = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
SUBSTITUTIONS = frozenset({"command_substitution", "process_substitution", "arithmetic_expansion"})
QUOTED = frozenset({"raw_string", "ansi_c_string"})  # '…' and $'…': nothing runs inside
SUBSTITUTION_START = re.compile(rb"\$\(|<\(|>\(|`")
COMMANDS = frozenset({"command", "declaration_command", "unset_command"})


@dataclass(frozen=True)
class Part:
    """One simple command: as written (with leading `VAR=…`), and without those assignments."""

    text: str  # the command with its assignments, redirections left out
    bare: str  # the command from its name on

    def forms(self, strict: bool) -> set[str]:
        """The texts a rule may match: allow rules (`strict`) see the command with its
        assignments; deny and ask rules also see it without them. Each text also appears with
        its quoting removed, so `Bash(/path/x.sh:*)` matches `"/path/x.sh" arg`."""
        texts = [self.text] if strict else [self.text, self.bare]
        found = set()
        for text in texts:
            found.add(text)
            try:
                found.add(" ".join(shlex.split(text)))
            except ValueError:
                pass
        return {f for f in found if f}


@lru_cache(maxsize=1)
def _parser() -> Any:
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def split(command: str) -> list[Part] | None:
    """Every simple command in `command`, nested ones included, or None when it cannot be
    parsed (a syntax error, or the parser is missing)."""
    try:
        parser = _parser()
    except ImportError:
        return None
    source = command.encode("utf-8", "surrogatepass")
    tree = parser.parse(source)
    if tree.root_node.has_error:
        return None
    parts: list[Part] = []
    nodes = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        nodes.append(node)
        if node.type in COMMANDS:
            parts.append(_part(node, source))
        stack.extend(reversed(node.children))
    return None if _unaccounted(source, nodes) else parts


def _unaccounted(source: bytes, nodes: list[Any]) -> bool:
    """Whether the line may run commands the tree does not show: a substitution (`$(`, `<(`,
    `>(`, a backtick) that no substitution node starts or ends at, outside single quotes, a
    backtick escaped inside backticks, or a here-document continued with a backslash. Such a
    line is taken as unreadable, so that no rule is trusted with it."""
    if b"\\`" in source or (b"<<" in source and b"\\\n" in source):
        return True
    starts = {n.start_byte for n in nodes if n.type in SUBSTITUTIONS}
    ends = {n.end_byte - 1 for n in nodes if n.type in SUBSTITUTIONS}
    quoted = [(n.start_byte, n.end_byte) for n in nodes if n.type in QUOTED]
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


def _part(node: Any, source: bytes) -> Part:
    """A command node's text without its redirections, with and without leading assignments."""
    pieces = [c for c in node.children if c.type not in REDIRECTS]
    if not pieces:
        text = _slice(source, node.start_byte, node.end_byte)
        return Part(text, text)
    end = pieces[-1].end_byte
    text = _slice(source, pieces[0].start_byte, end)
    named = [c for c in pieces if c.type != "variable_assignment"]
    bare = _slice(source, named[0].start_byte, end) if named else text
    return Part(text, bare)


def _slice(source: bytes, start: int, end: int) -> str:
    return source[start:end].decode("utf-8", "surrogatepass").strip()
