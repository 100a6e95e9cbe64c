"""An interrupt that lands while a hook's thread has started its process but not yet listed it
(a busy machine can hold that thread between the two): the process is killed all the same, and
the run ends at once instead of waiting out the hook (seen as agi hanging after SIGTERM)."""

from __future__ import annotations

import signal
import subprocess
import threading

import pytest

from agi.claude.hooks import runs
from agi.claude.hooks.settings import Hook


def test_a_hook_started_as_the_interrupt_lands_is_killed(monkeypatch):
    real = subprocess.Popen
    started, go, made = threading.Event(), threading.Event(), []

    def slow_popen(*args, **kwargs):
        proc = real(*args, **kwargs)
        made.append(proc)
        started.set()
        go.wait(10)  # the thread is held here, its process running and not yet listed
        return proc

    def interrupt() -> None:
        started.wait(10)
        signal.pthread_kill(main, signal.SIGINT)  # as ^C: KeyboardInterrupt in the main thread
        threading.Timer(0.5, go.set).start()  # the main thread has killed what it knew of

    main = threading.main_thread().ident
    assert main is not None
    monkeypatch.setattr(runs.subprocess, "Popen", slow_popen)
    threading.Thread(target=interrupt, daemon=True).start()
    hook = Hook(command="sleep 8", timeout=30, matcher=None, source="test")
    with pytest.raises(KeyboardInterrupt):
        runs.run_all([hook], "PreToolUse", {}, {"PATH": "/usr/bin:/bin"}, "/")
    assert made and made[0].wait(timeout=20) == -signal.SIGKILL


def test_an_interrupt_while_the_hooks_are_being_handed_out_kills_them(monkeypatch):
    """The signal lands in the main thread while it is still handing hooks to their threads
    (inside `submit`), one hook's process already running: it is killed all the same."""
    real = subprocess.Popen
    started, made = threading.Event(), []

    def popen(*args, **kwargs):
        proc = real(*args, **kwargs)
        made.append(proc)
        started.set()
        return proc

    class Pool(runs.ThreadPoolExecutor):
        def submit(self, *args, **kwargs):  # type: ignore[override]
            super().submit(*args, **kwargs)
            started.wait(10)
            raise KeyboardInterrupt  # as ^C landing here

    monkeypatch.setattr(runs.subprocess, "Popen", popen)
    monkeypatch.setattr(runs, "ThreadPoolExecutor", Pool)
    hook = Hook(command="sleep 8", timeout=30, matcher=None, source="test")
    with pytest.raises(KeyboardInterrupt):
        runs.run_all([hook], "SessionEnd", {}, {"PATH": "/usr/bin:/bin"}, "/")
    assert made and made[0].wait(timeout=20) == -signal.SIGKILL
