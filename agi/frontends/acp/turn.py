"""The run behind an ACP session: agi's Run, with the editor's files, its permission question
and mode, and a word to the editor when an allowed call starts."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agi.engine.run import Run
from agi.errors import Cancelled, TimeLimit
from agi.frontends.acp.files import through_editor
from agi.frontends.acp.permissions import EditorAsk, Started


class EditorRun(Run):
    def __init__(self, settings: Any, started: float, view: Any, editor: Any, meter: Any = None):
        super().__init__(settings, started, view=view, meter=meter)
        self.editor = editor
        ctx = self.ctx
        ctx.cwd, ctx.ask, ctx.default_asks, ctx.mode = (
            editor.cwd,
            EditorAsk(editor),
            True,
            editor.mode,
        )
        ctx.tools = through_editor(list(ctx.tools or []), editor.files)
        ctx.on_child_event = view.child  # subagents' tool calls, shown as the agent's are

    def assemble(self, settings: Any) -> Any:
        agent = super().assemble(settings)
        guard = agent.toolbox.guard
        if guard is not None and not isinstance(guard, Started):
            agent.toolbox.guard = Started(guard, self.editor)
        return agent

    @contextmanager
    def locked(self) -> Iterator[Any]:
        """Run.locked, waiting for a session another process holds (`agi -s` in a shell) in
        short slices, so that a cancel ends the wait."""
        ctx, real = self.ctx, self.ctx.deadline
        while True:
            if self.editor.cancelled.is_set():
                raise Cancelled()
            now = time.monotonic()
            ctx.deadline = now + SLICE if real is None else min(real, now + SLICE)
            held = super().locked()
            try:
                session = held.__enter__()
                break
            except TimeLimit:
                if real is not None and time.monotonic() >= real:
                    raise
            finally:
                ctx.deadline = real
        try:
            yield session
        except BaseException:
            if not held.__exit__(*sys.exc_info()):
                raise
        else:
            held.__exit__(None, None, None)


SLICE = 0.2  # seconds of waiting for the session's lock between looks at a cancel
