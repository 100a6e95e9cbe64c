"""From a model's reply to the lines that replace a range: fences and prose dropped, indentation
set to the range's own, and for an implementation the comment kept above the new function."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from agi.errors import AgiError

# CommonMark fences: three or more backticks or tildes, indented by at most three spaces
OPENING = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
CLOSING = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})[ \t]*$")


@dataclass
class Style:
    """The buffer's indentation options ('expandtab', 'shiftwidth', 'tabstop')."""

    expandtab: bool = True
    shiftwidth: int = 4
    tabstop: int = 8

    @classmethod
    def from_request(cls, request: dict[str, Any]) -> Style:
        opts = request.get("indent") or {}
        tabstop = int(opts.get("tabstop") or 8)
        return cls(
            expandtab=bool(opts.get("expandtab", True)),
            shiftwidth=int(opts.get("shiftwidth") or tabstop),
            tabstop=tabstop,
        )


def extract_code(reply: str) -> list[str]:
    """The code of a reply: the first fenced block (prose around it dropped), else the whole text.

    A block the model never closed (a cut stream, a forgetful model) runs to the end.
    """
    lines = reply.replace("\r\n", "\n").split("\n")
    for i, line in enumerate(lines):
        opening = OPENING.match(line)
        if not opening:
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        body: list[str] = []
        for inner in lines[i + 1 :]:
            closing = CLOSING.match(inner)
            if closing and closing["fence"][0] == fence[0] and len(closing["fence"]) >= len(fence):
                break
            body.append(_unindent(inner, indent))
        return _trim_blank(body)
    text = reply.strip()
    if "\n" not in text and len(text) > 2 and text[0] == text[-1] == "`":
        text = text.strip("`")  # `x = 1` in inline code
    return _trim_blank(text.split("\n"))


def _unindent(line: str, width: int) -> str:
    """A fence indented by N spaces indents its content by up to N spaces (CommonMark)."""
    lead = len(line) - len(line.lstrip(" "))
    return line[min(lead, width) :]


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def base_indent(lines: list[str]) -> str:
    """The leading whitespace of the least indented non-blank line."""
    indents = [indent_of(line) for line in lines if line.strip()]
    return min(indents, key=lambda s: len(s.expandtabs(8)), default="")


def reindent(code: list[str], base: str, style: Style) -> list[str]:
    """Dedent the code, convert its relative indentation to the buffer's style, prefix `base`."""
    lines = textwrap.dedent("\n".join(code)).split("\n")
    unit = _space_unit(lines)
    out = []
    for line in lines:
        if not line.strip():
            out.append("")
            continue
        lead = indent_of(line)
        out.append(base + _convert(lead, style, unit) + line[len(lead) :])
    return out


def _space_unit(lines: list[str]) -> int:
    """The smallest indentation step of space-indented lines (the model's "one level")."""
    leads = [indent_of(line) for line in lines if line.strip()]
    return min((len(lead) for lead in leads if lead and "\t" not in lead), default=4)


def _convert(lead: str, style: Style, unit: int) -> str:
    if style.expandtab:
        return lead.replace("\t", " " * style.shiftwidth)
    if "\t" in lead or not lead:
        return lead
    levels, rest = divmod(len(lead), unit)
    return "\t" * levels + " " * rest


def blank_edges(lines: list[str]) -> tuple[list[str], list[str]]:
    """The blank lines at the start and at the end of a range, kept around the new code."""
    if not any(line.strip() for line in lines):
        return [], []
    first = next(i for i, line in enumerate(lines) if line.strip())
    last = max(i for i, line in enumerate(lines) if line.strip())
    return lines[:first], lines[last + 1 :]


def refactor_lines(lines: list[str], code: list[str], style: Style) -> list[str]:
    """The rewritten range: the new code at the range's indentation, its blank edges kept."""
    before, after = blank_edges(lines)
    return before + reindent(code, base_indent(lines), style) + after


def is_comment(line: str, leaders: list[str]) -> bool:
    text = line.strip()
    return bool(text) and any(text.startswith(leader) for leader in leaders if leader)


def implement_lines(
    lines: list[str], code: list[str], leaders: list[str], style: Style
) -> list[str]:
    """The comment block at the top of the range stays; the implementation replaces the rest
    (signature and stub), so the function appears once."""
    keep = 0
    while keep < len(lines) and (not lines[keep].strip() or is_comment(lines[keep], leaders)):
        keep += 1
    comment, rest = lines[:keep], lines[keep:]
    _, after = blank_edges(rest)
    said = {line.strip() for line in comment if line.strip()}
    start = 0  # the model may repeat the comment on top of its code: it is already there
    while start < len(code) and (not code[start].strip() or code[start].strip() in said):
        start += 1
    base = base_indent(rest) if any(line.strip() for line in rest) else base_indent(comment)
    return comment + reindent(code[start:], base, style) + after


def result_lines(request: dict[str, Any], reply: str) -> list[str]:
    """What replaces the request's range, given the model's reply."""
    code = extract_code(reply)
    if not any(line.strip() for line in code):
        raise AgiError("the model's reply holds no code")
    lines = list(request.get("lines") or [])
    style = Style.from_request(request)
    if request.get("kind") == "implement":
        return implement_lines(lines, code, list(request.get("leaders") or []), style)
    return refactor_lines(lines, code, style)


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in the text, so it cannot close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
