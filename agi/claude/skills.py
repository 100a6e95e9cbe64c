"""Agent Skills (`NAME/SKILL.md`): names and descriptions in the prompt, bodies on demand.

Skill directories are searched in the order given; when two skills share a name the first one
wins and the later one is reported in a warning. A broken SKILL.md is a warning, never a crash.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agi.claude.qualified import resolve
from agi.errors import UsageError
from agi.fileio import read_text
from agi.prompts import HERE
from agi.tools import ToolContext, ToolError

SKILL_FILE = "SKILL.md"
WS = " \t"  # YAML's white space; str.strip() would also take \xa0 and friends


class FrontMatterError(ValueError):
    """SKILL.md front matter that this small YAML subset cannot read."""


# --- front matter: the YAML subset real skills use, without a YAML dependency -----------------

KEY_RE = re.compile(r"^([A-Za-z0-9_][\w.-]*|\"[^\"]*\"|'[^']*')[ \t]*:(?:[ \t]+(.*?))?[ \t]*$")
BLOCK_RE = re.compile(r"^([|>])([1-9]?)([+-]?)([1-9]?)(?:[ \t]+#.*)?$")
ITEM_RE = re.compile(r"-(?:[ \t]|$)")
ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f"}
ESCAPES |= {"r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85"}
ESCAPES |= {"_": "\xa0", "L": "\u2028", "P": "\u2029"}  # YAML's double-quoted escapes


def split_front_matter(text: str) -> tuple[list[str], str]:
    """(front matter lines, body) of a document that starts with a `---` line."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    if not lines or lines[0].rstrip(WS) != "---":
        raise FrontMatterError("no front matter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].rstrip(WS) in ("---", "..."):
            return lines[1:i], "\n".join(lines[i + 1 :])
    raise FrontMatterError("the front matter is not closed by a '---' line")


def parse_front_matter(lines: list[str]) -> dict[str, Any]:
    """`key: value` lines: plain, quoted, `|`/`>` block scalars, lists and one-level maps."""
    result: dict[str, Any] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip(WS) or line.lstrip(WS).startswith("#"):
            i += 1
            continue
        if line[0] in " \t":
            raise FrontMatterError(f"line {i + 1}: unexpected indentation: {line.strip(WS)!r}")
        m = KEY_RE.match(line)
        if not m:
            raise FrontMatterError(f"line {i + 1}: expected 'key: value', got {line.strip(WS)!r}")
        value = "" if (m.group(2) or "#").startswith("#") else m.group(2)
        j = i + 1
        while j < len(lines) and (
            not lines[j].strip(WS) or lines[j][0] in WS or (not value and ITEM_RE.match(lines[j]))
        ):
            j += 1  # the value's lines: indented ones, and a list's `- ` items at any indentation
        key = m.group(1).strip("\"'") if m.group(1)[0] in "\"'" else m.group(1)
        try:
            result[key] = parse_value(value, lines[i + 1 : j])
        except FrontMatterError as e:
            raise FrontMatterError(f"line {i + 1} ({key}): {e}") from None
        i = j
    return result


# Claude Code's second try at front matter YAML rejects: top-level `key: value` lines whose value
# holds a character YAML gives a meaning to are read with the value double-quoted.
SIMPLE_LINE = re.compile(r"^([a-zA-Z_-]+):\s+(.+)$")
SPECIAL = re.compile(r"[{}[\]*&#!|>%@`]|: ")


def lenient_front_matter(lines: list[str]) -> tuple[dict[str, Any], str | None]:
    """(front matter, problem), read as Claude Code reads it: as written; else once more with
    such values quoted; else not at all: ({}, why), and the file loads without it (Claude Code
    loads a plugin agent whose description runs on over unindented `<example>` lines so). The
    caller decides what dropping it may not widen (see `written_keys`)."""
    try:
        return parse_front_matter(lines), None
    except FrontMatterError as e:
        problem = str(e)
    try:
        return parse_front_matter([_requoted(line) for line in lines]), None
    except FrontMatterError:
        return {}, problem


def _requoted(line: str) -> str:
    m = SIMPLE_LINE.match(line)
    value = m.group(2) if m else ""
    if not m or value[0] + value[-1] in ('""', "''") or not SPECIAL.search(value):
        return line
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'{m.group(1)}: "{escaped}"'


def written_keys(lines: list[str]) -> set[str]:
    """The top-level keys a front matter seems to set, even one that cannot be read."""
    return {m.group(1) for line in lines if (m := re.match(r"([A-Za-z][\w-]*):", line))}


def parse_value(first: str, block: list[str]) -> Any:
    """The value after `key:`, with the more-indented lines that follow it."""
    header = BLOCK_RE.match(first)
    if header:
        return block_scalar(header, block)
    if first.startswith(('"', "'")):
        return quoted(fold([first, *block]))
    if first.startswith("["):
        return flow_list(fold([first, *block]))
    lines = [line for line in block if not line.lstrip(WS).startswith("#")]
    if first:
        return fold([strip_comment(first), *map(strip_comment, lines)])
    content = [line for line in lines if line.strip(WS)]
    if not content:
        return None
    indent = min(len(line) - len(line.lstrip(WS)) for line in content)
    block = [line[indent:] for line in block]
    if ITEM_RE.match(content[0][indent:]):
        return parse_list(block)
    return parse_front_matter(block)


def parse_list(lines: list[str]) -> list[Any]:
    """A block sequence of scalars: `- item` lines, each with its more-indented lines."""
    items: list[tuple[str, list[str]]] = []
    for n, line in enumerate(lines):
        if ITEM_RE.match(line):
            items.append((line[1:].strip(WS), []))
        elif items:
            items[-1][1].append(line)
        elif line.strip(WS) and not line.lstrip(WS).startswith("#"):
            raise FrontMatterError(f"line {n + 1} of the list: expected '- item'")
    return [parse_value("" if v.startswith("#") else v, rest) for v, rest in items]


def block_scalar(header: re.Match[str], block: list[str]) -> str:
    """A `|` (literal) or `>` (folded) block scalar, with its chomping indicator (`-`, `+`)."""
    style, chomp = header.group(1), header.group(3)
    explicit = header.group(2) or header.group(4)
    content = [line for line in block if line.strip(WS)]
    if not content:
        return "\n" * len(block) if chomp == "+" else ""
    indent = int(explicit) if explicit else len(content[0]) - len(content[0].lstrip(" "))
    lines = [line[min(indent, len(line) - len(line.lstrip(" "))) :] for line in block]
    trailing = 0
    while not lines[-1].strip(WS):
        lines.pop()
        trailing += 1
    text = "\n".join(lines) if style == "|" else fold_block(lines)
    if chomp == "-":
        return text
    return text + "\n" * (1 + (trailing if chomp == "+" else 0))


def fold_block(lines: list[str]) -> str:
    """YAML folding: line breaks between ordinary lines become spaces, blank lines newlines."""
    out, prev, blanks = "", "", 0
    for line in lines:
        if not line.strip(WS):
            blanks += 1
            continue
        more = line[0] in " \t"  # more-indented lines keep their line breaks
        if not prev:
            out += "\n" * blanks
        elif blanks:
            out += "\n" * (blanks if prev == "normal" and not more else blanks + 1)
        else:
            out += " " if prev == "normal" and not more else "\n"
        out += line
        prev, blanks = ("more" if more else "normal"), 0
    return out


def fold(lines: list[str]) -> str:
    """A multi-line flow scalar: lines trimmed and joined by spaces, blank lines as newlines."""
    out = ""
    for line in (x.strip(WS) for x in lines):
        if not line:
            out += "\n"
        elif out and not out.endswith("\n"):
            out += " " + line
        else:
            out += line
    return out.strip("\n")


def strip_comment(text: str) -> str:
    return re.split(r"(?:^|[ \t])#", text, maxsplit=1)[0].strip(WS)


def quoted(text: str) -> str:
    """A single- or double-quoted scalar, with its escapes, and nothing but a comment after it."""
    q = text[0]
    pattern = r"'((?:[^']|'')*)'" if q == "'" else r'"((?:[^"\\]|\\.)*)"'
    m = re.match(pattern, text, re.S)
    if not m or strip_comment(text[m.end() :]):
        raise FrontMatterError(f"unterminated or malformed {q}quoted{q} value: {text[:60]!r}")
    inner = m.group(1)
    if q == "'":
        return inner.replace("''", "'")
    return re.sub(
        r"\\(U[0-9a-fA-F]{8}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", unescape, inner, flags=re.S
    )


def unescape(m: re.Match[str]) -> str:
    code = m.group(1)
    if code[0] in "Uux" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code not in ESCAPES:
        raise FrontMatterError(f"unknown escape \\{code} in a double-quoted value")
    return ESCAPES[code]


def scalar(text: str) -> str:
    text = text.strip(WS)
    return quoted(text) if text.startswith(('"', "'")) else strip_comment(text)


def flow_list(text: str) -> list[str]:
    """`[a, "b", c]`: a one-line flow sequence of scalars."""
    text = strip_comment(text) if not text.rstrip(WS).endswith("]") else text.strip(WS)
    if not text.endswith("]"):
        raise FrontMatterError(f"unterminated [list]: {text[:60]!r}")
    items = re.findall(r"\s*(\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^,]+)\s*(?:,|$)", text[1:-1])
    return [scalar(item) for item in items if item.strip(WS)]


# --- skills ------------------------------------------------------------------------------------


@dataclass
class Skill:
    """A skill as the prompt lists it; the body is read from disk only when the model asks."""

    name: str
    description: str
    path: Path  # the skill's directory, absolute
    meta: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def file(self) -> Path:
        return self.path / SKILL_FILE

    @property
    def body(self) -> str:
        return split_front_matter(read_text(self.file))[1].strip()


def read_skill(directory: Path) -> Skill:
    """The skill in a directory holding SKILL.md; FrontMatterError or OSError when unreadable."""
    text = read_text(directory / SKILL_FILE)  # bounded (docs: security)
    meta, problem = lenient_front_matter(split_front_matter(text)[0])
    if problem is not None:
        raise FrontMatterError(problem)
    name = meta.get("name") or directory.name
    description = meta.get("description")
    word = r"[A-Za-z0-9][\w.:-]{0,63}"
    if (
        isinstance(name, str)
        and not re.fullmatch(word, name)
        and re.fullmatch(word, directory.name)
    ):
        name = directory.name  # a display name ("Writing Hookify Rules"): Claude Code uses the dir
    if not isinstance(name, str) or not re.fullmatch(word, name):
        raise FrontMatterError(f"'name' must be a short word (letters, digits, -_.:), got {name!r}")
    if not isinstance(description, str) or not description.strip():
        raise FrontMatterError(
            "'description' is missing: it is what tells the model when to use it"
        )
    return Skill(name, " ".join(description.split()), directory.absolute(), meta)


def skill_dirs(directory: Path) -> list[Path]:
    """The skill directories in a skills directory (or the directory itself if it is one)."""
    if (directory / SKILL_FILE).is_file():
        return [directory]
    return [
        d
        for d in sorted(directory.iterdir())
        if not d.name.startswith(".") and (d / SKILL_FILE).is_file()
    ]


def load_skills(dirs: list[Path]) -> tuple[list[Skill], list[str]]:
    """Skills from each directory in order; a missing directory is a UsageError, bad skills warn."""
    skills: dict[str, Skill] = {}
    warnings: list[str] = []
    for directory in map(Path, dirs):
        directory = directory.expanduser()
        if not directory.is_dir():
            raise UsageError(f"skills directory {directory}: not a directory")
        for d in skill_dirs(directory):
            try:
                skill = read_skill(d)
            except (FrontMatterError, OSError, UnicodeDecodeError, UsageError) as e:
                warnings.append(f"skill {d / SKILL_FILE}: {e}; skipped")  # too large too
                continue
            first = skills.get(skill.name)
            if first is None:
                skills[skill.name] = skill
            elif os.path.realpath(first.path) != os.path.realpath(skill.path):
                warnings.append(
                    f"skill {d / SKILL_FILE}: the name {skill.name} is taken by {first.file}; "
                    "skipped"
                )
    return list(skills.values()), warnings


def invocable(skills: list[Skill]) -> list[Skill]:
    """Claude Code's `disable-model-invocation: true` keeps a skill away from the model."""
    return [s for s in skills if str(s.meta.get("disable-model-invocation")).lower() != "true"]


def named_tools(skills: list[Skill]) -> set[str]:
    """The tools the model's skills name in `allowed-tools` (`Grep`, `Bash(git:*)` names Bash):
    the opt-in ones among them are offered, since the model may load such a skill at any step
    (docs: tools). Read leniently, as skills are: an entry that is not a name is passed over."""
    names = set()
    for skill in invocable(skills):
        value = skill.meta.get("allowed-tools")
        items = value.split(",") if isinstance(value, str) else value
        for item in items if isinstance(items, list) else []:
            name = item.split("(", 1)[0].strip() if isinstance(item, str) else ""
            if re.fullmatch(r"[A-Za-z][\w-]*", name):
                names.add(name)
    return names


def skills_prompt(skills: list[Skill]) -> str:
    """The harness text for the system prompt: names and descriptions only, never bodies."""
    skills = invocable(skills)
    if not skills:
        return ""
    template = (HERE / "skills.md").read_text(encoding="utf-8").strip()
    listing = "\n".join(f"- {s.name}: {s.description}" for s in skills)
    return template.replace("{skills}", listing)


class SkillTool:
    """The `Skill` tool: returns a skill's body and names its directory."""

    name = "Skill"
    description = (
        "Load a skill by name: its instructions, and the directory holding its files. "
        "The available skills are listed in the system prompt."
    )

    def __init__(self, skills: list[Skill]):
        self.skills = {s.name: s for s in invocable(skills)}
        skill: dict[str, Any] = {"type": "string", "description": "The skill's name"}
        if self.skills:
            skill["enum"] = list(self.skills)
        self.parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "skill": skill,
                "args": {"type": "string", "description": "Optional arguments for the skill"},
            },
            "required": ["skill"],
        }

    def find(self, name: str) -> Skill:
        """By full name, by a plugin skill's bare name when no other has it, or ignoring case."""
        name = name.strip().lstrip("/")
        full = resolve(name, self.skills)
        found = self.skills.get(full or name) or next(
            (s for n, s in self.skills.items() if n.lower() == name.lower()), None
        )
        if found is None:
            names = ", ".join(self.skills) or "none"
            raise ToolError(f"there is no skill named {json.dumps(name)} (available: {names})")
        return found

    def canonical(self, input: dict[str, Any]) -> set[str]:
        """The full name the call's `skill` stands for, for `Skill(NAME)` permission rules."""
        try:
            return {self.find(str(input.get("skill") or "")).name}
        except ToolError:
            return set()

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        name, args = input.get("skill"), input.get("args")
        if not isinstance(name, str) or not name.strip():
            raise ToolError(f"'skill' is required: one of {', '.join(self.skills) or 'none'}")
        skill = self.find(name)
        try:
            body = skill.body
        except (FrontMatterError, OSError, UnicodeDecodeError) as e:
            raise ToolError(f"cannot read {skill.file}: {e}") from e
        text = (
            f"Skill {skill.name} (directory: {skill.path}) — files in it can be read with Read "
            f"or run with Bash:\n\n{body}"
        )
        if args not in (None, ""):
            text += f"\n\nArguments: {args if isinstance(args, str) else json.dumps(args)}"
        return text
