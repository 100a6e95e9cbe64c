"""`agi --serve` answers before its application is built (docs: serve): while the routes are
still being imported, `GET /healthz` says `starting`, a wrong token is 401 all the same, and a
run asked for meanwhile waits and is then served whole. The real executable; the building is
held by an import hook (a `sitecustomize` on PYTHONPATH) until the test lets it go."""

from __future__ import annotations

import os
import subprocess
import threading
import time

import httpx
from test_serve import GUARD, free_port, model_env, pytestmark  # noqa: F401

from conftest import AGI
from fakeserver import FakeModel, text

HOLD = '''
import os, sys, time

class Hold:
    """Holds the import of agi's routes until the file GATE exists."""

    def find_spec(self, name, path=None, target=None):
        if name == "agi.frontends.serve.routes":
            open(os.environ["AGI_TEST_HELD"], "w").close()
            while not os.path.exists(os.environ["AGI_TEST_GATE"]):
                time.sleep(0.01)
        return None

sys.meta_path.insert(0, Hold())
'''


def test_healthz_and_the_token_are_answered_before_the_application_is_built(env, tmp_path):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOLD)
    gate, held = tmp_path / "gate", tmp_path / "held"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with FakeModel(text("served after the wait")) as fake:
        served = {
            **model_env(env, fake),
            "PYTHONPATH": os.pathsep.join([str(hook), env.get("PYTHONPATH", "")]),
            "AGI_TEST_GATE": str(gate),
            "AGI_TEST_HELD": str(held),
        }
        command = [AGI, "--serve", f"127.0.0.1:{port}", "--serve-token", "tok-early"]
        server = subprocess.Popen(command, env=served, cwd=tmp_path, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + GUARD
            while not held.exists():  # the application's import has begun, and is held
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.01)
            good = {"authorization": "Bearer tok-early"}
            assert httpx.get(f"{base}/healthz", headers=good, timeout=GUARD).json() == {
                "status": "starting"
            }
            wrong = httpx.get(f"{base}/healthz", headers={"authorization": "Bearer no"})
            assert wrong.status_code == 401
            assert wrong.json()["error"]["code"] == "invalid_api_key"
            assert "bearer token" in wrong.json()["error"]["message"]

            answers: list[httpx.Response] = []
            run = threading.Thread(
                target=lambda: answers.append(
                    httpx.post(
                        f"{base}/v1/runs", json={"prompt": "wait"}, headers=good, timeout=GUARD
                    )
                )
            )
            run.start()
            time.sleep(0.3)  # the run's request is in and waiting for the application
            assert not answers and fake.requests == []
            gate.touch()
            run.join(GUARD)
            assert answers[0].status_code == 200, answers[0].text
            assert answers[0].json()["answer"] == "served after the wait"
            health = httpx.get(f"{base}/healthz", headers=good, timeout=GUARD)
            assert health.json() == {"status": "ok"}
        finally:
            gate.touch()
            server.terminate()
            server.wait(GUARD)
