"""The run behind an ACP session: agi's Run, with the editor's files, its permission question
and mode, and a word to the editor when an allowed call starts."""

from __future__ import annotations

from typing import Any

from agi.frontends.acp.files import through_editor
from agi.frontends.acp.permissions import EditorAsk, Started
from agi.run import Run


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

    def assemble(self, settings: Any) -> Any:
        agent = super().assemble(settings)
        guard = agent.toolbox.guard
        if guard is not None and not isinstance(guard, Started):
            agent.toolbox.guard = Started(guard, self.editor)
        return agent
