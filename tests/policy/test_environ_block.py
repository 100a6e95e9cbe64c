"""The key leaves agi's own environment block at start-up (docs: security): what the kernel shows
in /proc/PID/environ is the block the process started with, whatever os.environ says since, so
even root (who may read any process's environ) finds the key nowhere. The real `agi` against the
scripted server; the tests run as root in containers, the case the block matters for."""

from __future__ import annotations

import os
import uuid

from fakeserver import FakeModel, call, calls, text

# every process's environment that holds the key, and agi's own (its pid is $PPID of the shell)
SWEEP = (
    'for f in /proc/[0-9]*/environ; do grep -qa "$K" "$f" 2>/dev/null && echo "hit $f"; done;'
    " tr '\\0' '\\n' < /proc/$PPID/environ | grep -a '^PLAIN='; echo swept"
)


def _results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_no_process_reads_the_key_from_agis_environment_block(agi, tmp_path):
    key = "sk-block-" + uuid.uuid4().hex
    # the shell finds the key by pieces, so its own command line does not hold it
    half = len(key) // 2
    command = f"K={key[:half]}; K=${{K}}{key[half:]}; {SWEEP}"
    with FakeModel(call("Bash", command=command), text("done")) as server:
        r = agi(
            "go",
            server=server,
            extra_env={"OPENAI_API_KEY": key, "OTHER_CFG": f"token={key};x", "PLAIN": "seen"},
        )
    assert r.returncode == 0, r.stderr
    (result,) = _results(server.requests[1])
    assert "swept" in result and "PLAIN=seen" in result, result  # agi's block was read
    assert "hit " not in result, result
    assert key not in result


def test_a_key_from_agi_api_key_leaves_the_block_too_and_tools_still_run(agi, tmp_path):
    key = "sk-block-" + uuid.uuid4().hex
    half = len(key) // 2
    forms = [f"K={key[:half]}; K=${{K}}{key[half:]}; {SWEEP}", "echo $PLAIN-$HOME"]
    with FakeModel(calls(*[("Bash", {"command": f}) for f in forms]), text("done")) as server:
        r = agi("go", server=server, extra_env={"AGI_API_KEY": key, "PLAIN": "seen"})
    assert r.returncode == 0, r.stderr
    swept, echoed = _results(server.requests[1])
    assert "swept" in swept and "hit " not in swept, swept
    assert echoed == f"seen-{os.environ['HOME']}"  # the rest of the environment is intact
    assert server.headers[0]["Authorization"] == f"Bearer {key}"
