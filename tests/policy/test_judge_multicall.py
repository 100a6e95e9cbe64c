"""Multi-call binaries run the applet named first (docs: permissions): `busybox rm v` and
`toybox rm v` are judged as `rm v`, so `--deny 'Bash(rm:*)'` holds through them (found by the
fifth round of probes, tests/security/probes_round5.py). Through `decide`, and end to end."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agi.policy.permissions import Permissions, decide, parse_rule

from fakeserver import FakeModel, calls, text


@pytest.mark.parametrize(
    "line", ["busybox rm v", "toybox rm v", "toybox rm -f v", "nice toybox rm v"]
)
def test_a_multi_call_binary_s_applet_is_judged(line):
    rules = Permissions([parse_rule("Bash(rm:*)", "deny", "command line", "/tmp")], "default")
    decision = decide(rules, "Bash", {"command": line}, "/tmp")
    assert decision.verdict == "deny" and decision.rule is not None, line


@pytest.mark.skipif(shutil.which("toybox") is None, reason="toybox is not installed")
def test_toybox_rm_is_denied_end_to_end(agi, tmp_path: Path):
    (tmp_path / "v").write_text("keep")
    with FakeModel(calls(("Bash", {"command": "toybox rm v"})), text("done")) as server:
        r = agi("--deny", "Bash(rm:*)", "--permission-mode", "bypassPermissions", "go",
                server=server, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "v").exists()
