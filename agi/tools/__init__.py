"""Tools the model can call: the registry, and running calls (in parallel), with their hooks.

The protocol a tool follows is in agi.tools.protocol; its names are re-exported here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agi.engine.absent import NO_CHECKPOINTS, NO_GUARD, NO_HOOKS
from agi.errors import AgiError, ToolError
from agi.messages import ToolCall, ToolEnd, ToolStart
from agi.tools.calculate import Calculate
from agi.tools.files import Edit, Read, TempDir, Write
from agi.tools.protocol import Tool, ToolContext, ToolText, require, spec
from agi.tools.shell import Bash

if TYPE_CHECKING:
    from agi.engine.seams import HookEvents, PermissionGuard, TurnCheckpoints

__all__ = [
    "Result",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolText",
    "Toolbox",
    "builtin_tools",
    "require",
    "spec",
]


def _with_notes(text: str, notes: list[str]) -> str:
    return "\n\n".join([text, *[n for n in notes if n]])


def builtin_tools() -> list[Tool]:
    """Every built-in tool, new (Glob, Grep, BashOutput, KillShell and WebFetch are offered
    only when named: agi.engine.assemble.choose)."""
    # lazy: agi.tools.terminal imports this module; the others import agi.tools.shell
    from agi.tools.background import BashOutput, Jobs, KillShell
    from agi.tools.search import Glob, Grep
    from agi.tools.terminal import Terminal
    from agi.tools.webfetch import WebFetch

    bash = Bash()
    jobs = Jobs(bash.processes)  # its background commands, ended with it
    bash.background = jobs.launch
    tools: list[Tool] = [bash, Read(), Write(), Edit(), TempDir(), Terminal(), Calculate()]
    return [*tools, Glob(), Grep(), BashOutput(jobs), KillShell(jobs), WebFetch()]


@dataclass
class Result:
    call: ToolCall
    text: str
    is_error: bool
    seconds: float


class Toolbox:
    """The tools offered in a run, by name."""

    def __init__(
        self,
        tools: list[Tool],
        ctx: ToolContext | None = None,
        hooks: HookEvents = NO_HOOKS,
        *,
        owner: bool = True,
        guard: PermissionGuard = NO_GUARD,
        checkpoints: TurnCheckpoints = NO_CHECKPOINTS,
    ):
        self.tools = {t.name: t for t in tools}
        self._specs: list[dict[str, Any]] | None = None
        self._specs_mode: str | None = None  # the permission mode the specs were built for
        self.ctx = ctx or ToolContext()
        self.hooks = hooks  # fires PreToolUse / PostToolUse hooks (agi.claude.hooks.lifecycle)
        self.guard = guard  # the permission rules, the mode, the question (agi.policy.guard)
        self.owner = owner  # a subagent's toolbox shares its parent's tools and must not close them
        self.checkpoints = checkpoints  # the run's (agi.checkpoints.snapshots), subagents' too

    def interrupt(self) -> None:
        """Kill the commands running now (a cancelled turn); background jobs and terminals stay."""
        for tool in self._distinct("interrupt"):
            try:
                tool.interrupt()
            except Exception:  # one tool's failure must not spare the others' commands
                pass

    def close(self) -> None:
        """End every process the tools started (jobs, terminals, MCP sessions); idempotent and
        never raises, so it belongs in a `finally`. A toolbox that is not the owner does nothing."""
        if not self.owner:
            return
        for tool in self._distinct("close"):
            try:
                tool.close()
            except Exception:  # closing must go on: one failure may not leave the rest running
                pass

    def _distinct(self, method: str) -> list[Any]:
        """The tools (or, for tools sharing one, the resources) that have `method`, once each."""
        seen: dict[int, Any] = {}
        for tool in self.tools.values():
            holder = getattr(tool, "resource", tool)  # e.g. MCP tools share one runtime
            if callable(getattr(holder, method, None)):
                seen.setdefault(id(holder), holder)
        return list(seen.values())

    @property
    def specs(self) -> list[dict[str, Any]]:
        """The `tools` of every request: built once (the same object each step, so that what
        measures or converts it per request can remember it)."""
        mode = self.guard.mode
        if self._specs is None or self._specs_mode != mode:  # plan mode offers fewer tools
            tools = [t for t in self.tools.values() if self.guard.offers(t.name)]
            names = {t.name for t in tools}
            self._specs = [
                t.spec_among(names) if hasattr(t, "spec_among") else spec(t) for t in tools
            ]
            self._specs_mode = mode
        return self._specs

    def run_one(self, call: ToolCall) -> Result:
        """Run a call, with its hooks; every failure becomes an `Error: …` result."""
        started = time.monotonic()
        try:
            if call.problem:  # an id or name of the wrong JSON type (docs: security)
                raise ToolError(call.problem)
            tool = self.tools.get(call.name)
            if tool is None:
                names = ", ".join(self.tools) or "none"
                raise ToolError(f"there is no tool named {call.name!r} (available: {names})")
            try:
                input = call.parse_arguments()
            except ValueError as e:
                raise ToolError(
                    f"the arguments are not a valid JSON object ({e}); "
                    f"you sent: {call.arguments[:500]}"
                ) from e
        except ToolError as e:
            return Result(call, f"Error: {e}", True, time.monotonic() - started)
        # hooks see the path the rules judge and the tool opens, absolute, as in Claude Code
        given = input = pinned(call.name, input, self.ctx.cwd)
        # approved: True when a PreToolUse hook allowed it (deny rules still hold), why it asks
        input, denied, notes, approved = self.hooks.before_tool(call, input)
        if denied is not None:
            return Result(call, _with_notes(denied, notes), True, time.monotonic() - started)
        if input is not given:  # a hook's updatedInput: pinned too
            input = pinned(call.name, input, self.ctx.cwd)
        try:
            refusal = self.guard.check(
                call.id, call.name, input, self.ctx.cwd, approved=approved, tool=tool
            )
        except (ValueError, TypeError, OSError) as e:  # input no rule can judge (a NUL byte)
            refusal = f"Error: the permission rules cannot judge this call: {e}"
        if refusal is not None:
            return Result(call, _with_notes(refusal, notes), True, time.monotonic() - started)
        self.checkpoints.before_tool(call.name, input, self.ctx.cwd)  # before the first change
        text, is_error, response = self._execute(tool, input, self._context(call, tool))
        notes += self.hooks.after_tool(call, input, text, is_error, response)
        return Result(call, _with_notes(text, notes), is_error, time.monotonic() - started)

    def _context(self, call: ToolCall, tool: Tool) -> ToolContext:
        """The context of one call: for the tools that ask, which files the rules hide from a
        search, the judge of the calls it makes itself (a redirect), the names offered."""
        if not getattr(tool, "per_call", False):
            return self.ctx
        cwd, guard = self.ctx.cwd, self.guard

        def judge(name: str, input: dict[str, Any]) -> str | None:
            return guard.check(call.id, name, input, cwd, tool=tool)

        offered = frozenset(n for n in self.tools if guard.offers(n))
        return replace(self.ctx, hides=guard.hiding(cwd), judge=judge, offered=offered)

    def _execute(
        self, tool: Tool, input: dict[str, Any], ctx: ToolContext
    ) -> tuple[str, bool, Any]:
        try:
            output = tool.run(input, ctx)
            return str(output), getattr(output, "error", False), getattr(output, "response", None)
        except ToolError as e:
            return f"Error: {e}", True, None
        except OSError as e:
            where = f": {e.filename}" if e.filename else ""
            return f"Error: {e.strerror or e}{where}", True, None
        except AgiError:
            raise  # a hook stopped the run, or it was interrupted
        except Exception as e:  # a tool bug must not end the run; the model reads what happened
            return f"Error: {type(e).__name__}: {e}", True, None

    def run_all(self, calls: list[ToolCall]) -> Generator[ToolStart | ToolEnd, None, list[Result]]:
        """Run one turn's calls concurrently; yield start and end events; results in call order."""
        for call in calls:
            try:
                input = call.parse_arguments()
            except ValueError:
                input = {"_raw": call.arguments}
            yield ToolStart(call, input)
        if len(calls) == 1:
            results = [self.run_one(calls[0])]
            yield ToolEnd(calls[0], results[0].text, results[0].is_error, results[0].seconds)
            return results
        from concurrent.futures import ThreadPoolExecutor

        results = []
        pool = ThreadPoolExecutor(max_workers=min(8, len(calls)))
        try:
            futures = [pool.submit(self.run_one, c) for c in calls]
            for future in futures:
                r = future.result()
                results.append(r)
                yield ToolEnd(r.call, r.text, r.is_error, r.seconds)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        return results


def pinned(name: str, input: dict[str, Any], cwd: str) -> dict[str, Any]:
    """A Write's or Edit's file as the real path it would touch now (links resolved, then
    `..`): the rules judge that path and the tool opens it following no link
    (agi.tools.reading.open_for_writing), so a link swapped in after the check cannot take the
    write elsewhere (docs: security)."""
    path = input.get("file_path") if name in ("Write", "Edit") else None
    if not isinstance(path, str) or not path or "\0" in path:
        return input  # the tool says what is wrong with it
    return {**input, "file_path": os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))}
