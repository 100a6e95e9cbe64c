"""`agi --serve` keeps a request within what the server was given (docs: serve): the files a
request names (`sys`, `attachments`, `schema @FILE`, `session`) only inside the server's working
directory (and sessions under $AGI_HOME too), the opt-in tools only when the server offers them,
and a body no larger than the server reads. Found by the sixth round of hostile probes."""

from __future__ import annotations

import json

import httpx
import pytest
from test_serve import GUARD, model_env, serving  # the same real server on a free port

from fakeserver import FakeModel, text

pytest.importorskip("starlette")


def test_files_a_request_names_stay_inside_the_server_s_working_directory(env, tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "sys.md").write_text("INSIDE-SYS")
    secret = tmp_path / "outside.txt"
    secret.write_text("OUTSIDE-SECRET")
    (work / "link.md").symlink_to(secret)
    sessions = tmp_path / "elsewhere"
    with FakeModel(*[text("x")] * 10) as fake, serving(model_env(env, fake), work) as base:
        asks = [
            {"prompt": "x", "sys": [str(secret)]},
            {"prompt": "x", "sys": ["../outside.txt"]},
            {"prompt": "x", "sys": ["link.md"]},
            {"prompt": "x", "attachments": [str(secret)]},
            {"prompt": "x", "schema": f"@{secret}"},
            {"prompt": "x", "session": str(sessions / "s"), "keep": True},
        ]
        answers = [httpx.post(f"{base}/v1/runs", json=a, timeout=GUARD) for a in asks]
        inside = httpx.post(f"{base}/v1/runs", json={"prompt": "x", "sys": "sys.md"}, timeout=GUARD)
        sent = json.dumps(fake.requests)
    for a in answers:
        assert a.status_code == 403, a.text
        assert "outside the server's working directory" in a.json()["error"]["message"]
    assert "OUTSIDE-SECRET" not in sent and not sessions.exists()
    assert inside.status_code == 200 and "INSIDE-SYS" in sent


def test_opt_in_tools_only_when_the_server_offers_them(env, tmp_path):
    with FakeModel(*[text("x")] * 4) as fake, serving(model_env(env, fake), tmp_path) as base:
        r = httpx.post(
            f"{base}/v1/runs", json={"prompt": "x", "tools": ["WebFetch"]}, timeout=GUARD
        )
        assert r.status_code == 403 and "WebFetch" in r.json()["error"]["message"], r.text
        ok = httpx.post(f"{base}/v1/runs", json={"prompt": "x", "tools": ["Read"]}, timeout=GUARD)
        assert ok.status_code == 200, ok.text
    with (
        FakeModel(text("x")) as fake,
        serving(model_env(env, fake), tmp_path, "--tools", "Read,WebFetch") as base,
    ):
        r = httpx.post(
            f"{base}/v1/runs", json={"prompt": "x", "tools": ["WebFetch"]}, timeout=GUARD
        )
        assert r.status_code == 200, r.text


def test_a_body_larger_than_the_server_reads_is_413(env, tmp_path):
    (tmp_path / "config.toml").write_text("stdin_limit = 100000\n")
    with FakeModel(*[text("x")] * 2) as fake, serving(model_env(env, fake), tmp_path) as base:
        big = json.dumps({"prompt": "a" * 200_000})
        r = httpx.post(f"{base}/v1/runs", content=big, timeout=GUARD)
        assert r.status_code == 413 and "100000" in r.json()["error"]["message"], r.text
        chunks = (b"a" * 50_000 for _ in range(4))  # no content-length: read up to the bound
        r = httpx.post(f"{base}/v1/runs", content=chunks, timeout=GUARD)
        assert r.status_code == 413, r.text
        assert not fake.requests
        ok = httpx.post(f"{base}/v1/runs", json={"prompt": "x"}, timeout=GUARD)
        assert ok.status_code == 200
