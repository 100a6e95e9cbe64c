"""Running a Python program that uses `import agi` in a subprocess of its own, as a user's
program would (the library's tests drive it this way, never in the test's own process)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

PRELUDE = "import json, os, sys\nimport agi\nURL = os.environ.get('TEST_URL', '')\n"


def python(
    code: str,
    env: dict[str, str],
    cwd: Path,
    timeout: float = 120,
    prelude: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`python -c CODE` (after PRELUDE: `agi` imported, the fake server's URL in `URL`)."""
    source = (PRELUDE if prelude else "") + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", source],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def printed(done: subprocess.CompletedProcess[str]) -> list[Any]:
    """Every line the program printed, as JSON; its exit status must be 0."""
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def with_server(env: dict[str, str], url: str, **more: str) -> dict[str, str]:
    """`env` with the fake server's URL in TEST_URL (not an AGI_ variable)."""
    return {**env, "TEST_URL": url, **more}
