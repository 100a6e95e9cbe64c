"""The run behind an ACP session, opened through the engine's door: the editor's files, its
permission question and mode, a word to the editor when an allowed call starts, its subagents'
tool calls, and its cancel (which ends a wait for the session's lock too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agi import engine
from agi.engine.run import Run
from agi.engine.spec import RunSpec, SessionChoice
from agi.frontends.acp.permissions import EditorAsk

if TYPE_CHECKING:
    from agi.frontends.acp.bridge import EditorView
    from agi.options.settings import Settings
    from agi.providers.cost import Meter


def open_run(
    settings: Settings,
    view: EditorView,
    editor: Any,
    meter: Meter | None = None,
    saved: int = 0,
) -> Run:
    """The run for `editor` (an EditorSession): its inputs given once, in the spec."""
    spec = RunSpec(
        settings,
        cwd=editor.cwd,
        view=view,
        ask=EditorAsk(editor),
        mode=editor.mode,
        default_asks=True,
        rules=tuple(editor.learned),  # the session's rules: its settings.json, "always" answers
        mcp=tuple(editor.mcp),  # the MCP servers of session/new
        files=editor.files,
        meter=meter,
        saved=saved,
        on_child_event=view.child,  # subagents' tool calls, shown as the agent's are
        on_allowed=editor.started,  # the editor hears when a call it may have allowed starts
        interrupted=editor.cancelled,  # a cancel ends a wait for the session's lock
        interactive=True,  # --timeout limits each turn
        session=SessionChoice(path=editor.path, latest=False),  # listed, never -c's
        session_start=not editor.started_hooks,  # once for the session, not for each model
    )
    return engine.open(spec)
