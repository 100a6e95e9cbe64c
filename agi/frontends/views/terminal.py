"""The view for people, on stderr: spinner, reasoning, tool calls with timings. Knows no loop."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, TextIO

from agi.messages import (
    AssistantText,
    Notice,
    ReasoningDelta,
    StepStart,
    TextDelta,
    ToolEnd,
    ToolStart,
    Usage,
)
from agi.policy.text import escape_controls
from agi.providers.cost import describe

if TYPE_CHECKING:
    from agi.engine.seams import Event

SPIN = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
DIM, RED, CYAN, RESET = "\033[2m", "\033[31m", "\033[36m", "\033[0m"


def colored(setting: str, tty: bool) -> bool:
    """Whether stderr gets colour: `--color always` or `never`, else (`auto`) a terminal with
    no `NO_COLOR` set to anything but the empty string (no-color.org)."""
    if setting in ("always", "never"):
        return setting == "always"
    return tty and not os.environ.get("NO_COLOR")


def short(value: Any, width: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = escape_controls(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def describe_input(input: dict[str, Any]) -> str:
    """`Bash(ls -la)` style: the main argument, or the whole input when there is none."""
    for key in ("command", "file_path", "expression", "prompt", "skill"):
        if isinstance(input.get(key), str):
            return short(input[key])
    return short(input) if input else ""


class Silent:
    """Pipe mode: nothing but the one-line warnings (a retry that may still succeed is none)."""

    def __init__(self, out: TextIO | None = None):
        self.out = out or sys.stderr

    def handle(self, event: Event) -> None:
        pass

    def warn(self, text: str) -> None:
        self.out.write(f"agi: {escape_controls(text)}\n")
        self.out.flush()

    def close(self) -> None:
        pass

    def judgement(self, success: bool, reason: str) -> None:
        pass

    def sandbox(self, label: str) -> None:
        pass

    def finish(self, session: str, usage: Usage, seconds: float, steps: int) -> None:
        pass


class Terminal(Silent):
    """A terminal (or -v): the run as it happens; `color` paints it, `cursor` (a terminal;
    by default when painted) lets a spinner rewrite its line."""

    def __init__(
        self,
        out: TextIO | None = None,
        color: bool = True,
        spinner: bool = True,
        cursor: bool | None = None,
    ):
        super().__init__(out)
        self.color = color
        self.cursor = color if cursor is None else cursor
        self.lock = threading.Lock()
        self.status = ""  # what the spinner says; empty: no spinner
        self.since = time.monotonic()
        self.started = time.monotonic()
        self.in_reasoning = False
        self.chars = 0
        self.tool_starts: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if spinner and self.cursor:
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()

    def paint(self, text: str, style: str) -> str:
        return f"{style}{text}{RESET}" if self.color else text

    def _spin(self) -> None:
        i = 0
        while not self._stop.wait(0.1):
            with self.lock:
                if self.status and not self.in_reasoning:
                    elapsed = time.monotonic() - self.since
                    line = f"{SPIN[i % len(SPIN)]} {self.status} {elapsed:.1f}s"
                    self.out.write("\r\033[K" + self.paint(line, DIM))
                    self.out.flush()
            i += 1

    def write(self, text: str) -> None:
        """Print whole lines above the spinner."""
        with self.lock:
            if self.in_reasoning:
                self.out.write("\n")
                self.in_reasoning = False
            elif self.cursor:
                self.out.write("\r\033[K")
            self.out.write(text + "\n")
            self.out.flush()

    def handle(self, event: Event) -> None:
        if isinstance(event, StepStart):
            self.status, self.since, self.chars = "thinking", time.monotonic(), 0
        elif isinstance(event, ReasoningDelta):
            with self.lock:
                if not self.in_reasoning:
                    self.out.write(("\r\033[K" if self.cursor else "") + self.paint("✻ ", DIM))
                    self.in_reasoning = True
                self.out.write(self.paint(escape_controls(event.text), DIM))
                self.out.flush()
        elif isinstance(event, TextDelta):
            self.chars += len(event.text)
            if self.in_reasoning:
                with self.lock:
                    self.out.write("\n")
                    self.in_reasoning = False
            self.status = f"writing ({self.chars} chars)"
        elif isinstance(event, AssistantText):
            self.write(escape_controls(event.text))
        elif isinstance(event, ToolStart):
            self.status = ""
            self.tool_starts[event.call.id] = time.monotonic()
            name = escape_controls(str(event.call.name))
            self.write(self.paint("⏺ ", CYAN) + f"{name}({describe_input(event.input)})")
            self.status, self.since = f"running {name}", time.monotonic()
        elif isinstance(event, ToolEnd):
            rows = event.result.splitlines() or [""]
            more = f" … +{len(rows) - 1} lines" if len(rows) > 1 else ""
            line = f"  ⎿ {short(rows[0], 80)}{more} ({event.seconds:.2f}s)"
            self.write(self.paint(line, RED if event.is_error else DIM))
        elif isinstance(event, Notice):
            self.warn(event.text)

    def warn(self, text: str) -> None:
        self.write(self.paint(f"agi: {escape_controls(text)}", RED))

    def child(self, event: Event) -> None:
        """A subagent's tool calls, indented under the Task call that runs it (-v, a terminal);
        its text and reasoning stay its own."""
        if isinstance(event, ToolStart):
            name = escape_controls(str(event.call.name))
            self.write("    " + self.paint("↳ ", CYAN) + f"{name}({describe_input(event.input)})")
        elif isinstance(event, ToolEnd):
            rows = event.result.splitlines() or [""]
            more = f" … +{len(rows) - 1} lines" if len(rows) > 1 else ""
            line = f"      ⎿ {short(rows[0], 76)}{more} ({event.seconds:.2f}s)"
            self.write(self.paint(line, RED if event.is_error else DIM))

    def close(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=1)
        with self.lock:
            if self.in_reasoning:
                self.out.write("\n")
                self.in_reasoning = False
            if self.cursor:
                self.out.write("\r\033[K")
            self.out.flush()
        self.status = ""

    def sandbox(self, label: str) -> None:
        self.write(self.paint(f"⛉ sandbox {label}", DIM))

    def judgement(self, success: bool, reason: str) -> None:
        mark = self.paint("✓ success", CYAN) if success else self.paint("✗ failure", RED)
        self.write(f"{mark}: {escape_controls(reason)}")

    def finish(self, session: str, usage: Usage, seconds: float, steps: int) -> None:
        self.close()
        self.write(
            self.paint(
                f"✓ {seconds:.1f}s, {steps} step{'s' * (steps != 1)}, "
                f"{describe(usage)}" + (f" · session {session}" if session else ""),
                DIM,
            )
        )
