"""`agi --serve` keeps the answers of the last KEPT_FINISHED ended background runs (docs: serve):
a long-lived server's memory does not grow with every background run it ever served."""

from __future__ import annotations

from types import SimpleNamespace

from test_serve import pytestmark  # noqa: F401


def test_the_oldest_ended_background_runs_are_forgotten():
    from agi.frontends.serve.app import KEPT_FINISHED, Server
    from agi.frontends.serve.runner import Shared
    from agi.options.values import overlay

    server = Server(Shared(overlay("test"), None), None, 1, 1)
    entries = [SimpleNamespace(id=f"run_{i}") for i in range(KEPT_FINISHED + 5)]
    for entry in entries:
        server.background[entry.id] = entry
    server.background["run_still_running"] = SimpleNamespace(id="run_still_running")
    for entry in entries:
        server.ended(entry)
    assert len(server.finished) == KEPT_FINISHED
    assert "run_0" not in server.background and "run_4" not in server.background
    assert "run_5" in server.background and f"run_{KEPT_FINISHED + 4}" in server.background
    assert "run_still_running" in server.background  # only ended runs are forgotten
