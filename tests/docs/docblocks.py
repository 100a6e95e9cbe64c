"""The shell blocks of README.md and docs/: found, named, and run against the scripted model."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakeserver import Step, text

REPO = Path(__file__).resolve().parents[2]
SHELLS = {"sh", "bash"}
# other names a shell block could be given: a page must not use them (the test would miss it)
SHELL_LIKE = {"shell", "console", "zsh", "shell-session", "sh-session"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it is, its language and its text."""

    page: str
    line: int
    lang: str
    text: str

    @property
    def name(self) -> str:
        """`page: first command`: what the tests call the block."""
        for line in self.text.splitlines():
            command = re.sub(r"\s{2,}#.*$", "", line.strip().removeprefix("$ "))
            if command and not command.startswith("#"):
                return f"{self.page}: {command}"
        return f"{self.page}: line {self.line}"


def pages() -> list[Path]:
    """README.md and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file (indented ones in lists too)."""
    found: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    page = str(path.relative_to(REPO))
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        text_ = "\n".join(body) + "\n"
        found.append(Block(page, i + 1, opening["lang"].lower(), text_))
        i = j + 1
    return found


def shell_blocks() -> list[Block]:
    """Every sh and bash block of the README and the docs."""
    return [b for p in pages() for b in blocks_of(p) if b.lang in SHELLS]


# ------------------------------------------------------------------ the model behind the blocks


def instance(schema: dict[str, Any]) -> Any:
    """A small value that satisfies a JSON Schema (the forms agi's --schema DSL makes)."""
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return instance(schema[key][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "object":
        return {k: instance(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [instance(schema.get("items", {"type": "string"}))] * max(
            1, schema.get("minItems", 1)
        )
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        return int(low) + 1 if kind == "integer" else float(low) + 0.5
    return "x" * max(4, schema.get("minLength", 0))


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON Schema a request asks the answer to match, if it asks for one."""
    form = body.get("response_format") or {}
    if form.get("type") == "json_schema":
        return (form.get("json_schema") or {}).get("schema")
    return form.get("schema")


def turn(body: dict[str, Any]) -> tuple[str, int]:
    """The prompt of the request's turn (its last user message) and how many replies the model
    has given since (0 for the turn's first request)."""
    messages = body.get("messages") or []
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    content = messages[last].get("content") if last >= 0 else ""
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    replies = sum(1 for m in messages[last + 1 :] if m.get("role") == "assistant")
    return str(content or ""), replies


@dataclass
class Oracle:
    """Answers every request: a schema's request with a value matching it, a turn whose prompt
    holds a key of `routes` with that route's steps (one per model call of the turn, the last
    repeated), anything else with `fallback`."""

    routes: dict[str, list[Step]] = field(default_factory=dict)
    fallback: str = "Done."

    def __call__(self, body: dict[str, Any]) -> Step:
        schema = requested_schema(body)
        if schema is not None:
            return text(json.dumps(instance(schema)))
        prompt, replies = turn(body)
        for key, steps in self.routes.items():
            if key in prompt:
                return steps[min(replies, len(steps) - 1)]
        return text(self.fallback)


Setup = Callable[[Path, Path], None]  # (work directory, home)


@dataclass
class Ran:
    """What running a block left: its process, its directories, the requests the model got."""

    returncode: int
    stdout: str
    stderr: str
    work: Path
    home: Path
    requests: list[dict[str, Any]]

    def users(self) -> list[str]:
        """The prompt of every request's turn, in order."""
        return [turn(body)[0] for body in self.requests]

    def systems(self) -> list[str]:
        """The system prompt of every request."""
        return [
            str(m.get("content"))
            for body in self.requests
            for m in (body.get("messages") or [])[:1]
            if m.get("role") == "system"
        ]

    def tool_results(self) -> list[str]:
        """Every tool result the model was sent (each once)."""
        seen: dict[str, str] = {}
        for body in self.requests:
            for m in body.get("messages") or []:
                if m.get("role") == "tool":
                    seen[str(m.get("tool_call_id"))] = str(m.get("content"))
        return list(seen.values())

    def offered(self, index: int) -> list[str]:
        """The tool names request `index` offered."""
        return sorted(t["function"]["name"] for t in self.requests[index].get("tools") or [])


@dataclass
class Case:
    """How one block is run: files it expects, the model's answers, what must hold after."""

    setup: Setup | None = None
    routes: dict[str, list[Step]] = field(default_factory=dict)
    prelude: str = ""  # shell run first, with the same model (e.g. to make a session)
    check: Callable[[Ran], None] | None = None
    needs: tuple[str, ...] = ()  # programs the block runs
    errexit: bool = True  # run under `set -e`
    env: dict[str, str] = field(default_factory=dict)
    config: str = ""  # the config file's text


MAIN_PY = "def total(xs):\n    return sum(xs)\n\n\nprint(total([1, 2, 3]))\n"
FILES = {
    "main.py": MAIN_PY,
    "util.py": "def double(x):\n    return 2 * x  # TODO: floats\n",
    "README.md": "# demo\n\nA small project that adds numbers.\n",
    "question.txt": "What does main.py print?\n",
    "package.json": '{"name": "demo", "version": "1.2.3"}\n',
    "totals.txt": "total: 200\n",
    "essay.txt": "Pipes are the best idea in UNIX.\n",
    "tests/test_io.py": "def test_io():\n    assert True\n",
}
GIT_ID = {
    "GIT_AUTHOR_NAME": "Doc Test",
    "GIT_AUTHOR_EMAIL": "doc@example.invalid",
    "GIT_COMMITTER_NAME": "Doc Test",
    "GIT_COMMITTER_EMAIL": "doc@example.invalid",
}


def workspace(work: Path, home: Path, env: dict[str, str]) -> None:
    """The directory every block runs in: a git repository of a small project, committed and
    then changed (so `git diff` has something to show), and an empty home."""
    import subprocess

    home.mkdir(parents=True, exist_ok=True)
    for name, body in FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(body)
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(["git", *argv], cwd=work, env=env, check=True, capture_output=True)
    (work / "main.py").write_text(MAIN_PY.replace("[1, 2, 3]", "[1, 2, 3, 4]"))
