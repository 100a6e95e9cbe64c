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
from agi.frontends.acp.permissions import EditorAsk, Started


class EditorRun(Run):
    def __init__(self, settings: Any, view: Any, editor: Any, meter: Any = None, saved: int = 0):
        from agi.engine.spec import RunSpec, SessionChoice

        self.editor = editor  # before the run opens: its lock and its guard need the editor
        spec = RunSpec(
            settings,
            cwd=editor.cwd,
            view=view,
            ask=EditorAsk(editor),
            mode=editor.mode,
            default_asks=True,
            files=editor.files,
            meter=meter,
            saved=saved,
            on_child_event=view.child,  # subagents' tool calls, shown as the agent's are
            interactive=True,  # --timeout limits each turn
            session=SessionChoice(path=editor.path),
            session_start=False,  # the session's first turn runs them (agi.frontends.acp.session)
        )
        super().__init__(spec)

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
