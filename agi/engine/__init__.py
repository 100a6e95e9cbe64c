"""The engine: the one door (a run opened from its specification), the loop, assembly.

spec = RunSpec(settings, cwd=..., view=..., ask=..., session=SessionChoice(path))
run = agi.engine.open(spec)      # everything built here; nothing is set on it afterwards
result = run.ask(prompt)         # or run.turn(prompt), run.compact(focus); events: the view
run.cancel(); run.set_mode("plan"); run.end_hooks("other"); run.close()
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the CLI imports this package before it knows it runs
if TYPE_CHECKING:
    from agi.engine.run import Run
    from agi.engine.spec import RunSpec


def open(spec: RunSpec) -> Run:
    """The run `spec` describes, opened: its checks passed, its tools, session and agent
    built, SessionStart's hooks run. An error after the checks carries the run's `result`."""
    # lazy: importing one module of the engine (agi.engine.absent) must not load the others
    from agi.engine.run import Run

    return Run(spec)
