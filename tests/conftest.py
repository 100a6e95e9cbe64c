"""Shared test fixtures: a clean environment and the real `agi` executable in a subprocess."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# the tests mirror the package, a folder per layer or front end (tests/policy/, tests/frontends/
# acp/, ...); every folder is importable, so a test imports another's helpers by module name
for _folder in sorted({p.parent for p in TESTS.rglob("test_*.py")}, reverse=True):
    sys.path.insert(0, str(_folder))
sys.path.insert(0, str(TESTS))

from fakeserver import FakeModel  # noqa: E402

# A process started in the background by a non-interactive shell ignores SIGINT, and so would
# every agi the tests start (an ignored signal is inherited across exec): the tests that send
# SIGINT need the default, whatever started pytest.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

AGI = shutil.which("agi", path=str(Path(sys.executable).parent)) or shutil.which("agi")
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # recorded data, kept in the repository
PROVIDER_VARS = (
    "AGI_",
    "OPENAI_",
    "ANTHROPIC_",
    "GEMINI_",
    "DEEPSEEK_",
    "OPENROUTER_",
    "LITELLM_",
    "XDG_",
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment with no model settings of the developer's, and agi's state under tmp_path."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARS)}
    clean.update(AGI_HOME=str(tmp_path / "agi-home"), AGI_CONFIG=str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").touch()  # a named config file must exist (docs: configuration)
    return clean


@pytest.fixture
def agi(env: dict[str, str], tmp_path: Path):
    """Run the installed `agi` executable: agi(*args, server=FakeModel, input=str) -> result."""
    assert AGI, "the agi executable is not installed (pip install -e '.[test]')"

    def run(
        *args: str,
        server: FakeModel | None = None,
        input: str | None = None,
        timeout: float = 60,
        extra_env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        e = dict(env)
        if server is not None:
            e.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        e.update(extra_env or {})
        return subprocess.run(
            [AGI, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=e,
            cwd=cwd or tmp_path,
            stdin=None if input is not None else subprocess.DEVNULL,
        )

    return run


def start_agi(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """The real executable in the background (e.g. to signal it): argv[0] is AGI."""
    return subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_file(path: Path, timeout: float = 15) -> None:
    """Wait until a marker file exists (a command or hook has started)."""
    import time

    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def timed(name: str, log: Path, command: str = "sleep 1") -> str:
    """A shell command that runs `command` and records its own interval in `log`, one line
    `NAME START END` (seconds, from `date +%s.%N`): concurrency is proven by the commands' own
    clocks, never by how long the test took."""
    return f"s=$(date +%s.%N); {command}; e=$(date +%s.%N); echo \"{name} $s $e\" >> '{log}'"


def intervals(log: Path) -> dict[str, tuple[float, float]]:
    """What `timed` commands recorded: name -> (start, end)."""
    found = {}
    for line in log.read_text().splitlines():
        name, start, end = line.split()
        found[name] = (float(start), float(end))
    return found


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Two intervals share some time: each started before the other ended."""
    return a[0] < b[1] and b[0] < a[1]


def unique_seconds(base: int) -> str:
    """A sleep duration that is also a marker no other process has (`sleep 31.04821937`), so that
    `pgrep -f` finds this test's processes only, even with other tests running at once."""
    return f"{base}.{uuid.uuid4().int % 10**8:08d}"


# A child forked from a test process counts that process's pages in its peak memory (the high
# water mark survives exec), and pytest's workers grow large: a command's own peak is measured
# by a small Python that starts it and reports its child's peak.
_PEAK = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,"
    " stderr=subprocess.DEVNULL)\n"
    "sys.stdout.buffer.write(done.stdout)\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(done.returncode)\n"
)


def peak_rss(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 300
) -> tuple[int, bytes, int]:
    """(exit code, stdout, peak resident memory in bytes) of a command, measured on its own."""
    report = cwd / "peak-rss.txt"
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, str(report), *argv],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout, int(report.read_text()) * 1024  # Linux: KiB
