"""A key no HTTP header can carry (non-ASCII, a control character: a paste gone wrong) is a
one-line configuration error naming where it came from, exit 2, never a traceback and never
the key itself (docs: security). The real `agi` against the scripted server."""

from __future__ import annotations

import pytest

from fakeserver import FakeModel, text


@pytest.mark.parametrize("bad", ["\u00e9", "\t", "\n", "\x7f"], ids=["e-acute", "tab", "nl", "del"])
def test_a_key_a_header_cannot_carry_is_one_line_exit_2(agi, bad):
    key = f"sk-paste{bad}d-0123456789abcdef"
    with FakeModel(text("never")) as server:
        r = agi("go", server=server, extra_env={"OPENAI_API_KEY": key})
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("agi: the API key for openai (from OPENAI_API_KEY)"), r.stderr
    assert r.stderr.count("\n") == 1 and "position 9" in r.stderr
    assert "0123456789abcdef" not in r.stderr + r.stdout
    assert server.requests == []
