"""`agi --batch` and the operator's keys (docs: batch, security): result lines redacted value by
value, a job's `model` only on providers the operator configured (else that job's line, exit 2),
and every key the batch uses withheld from every job's children. The real executable against
the scripted server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from test_batch import lines_of, prompt_of
from test_mcp_serve_bound import listener

from fakeserver import FakeModel, call, text


def test_lines_are_redacted_value_by_value(agi, tmp_path: Path) -> None:
    key = 'sk-b"at\\ch-' + uuid.uuid4().hex  # `"` and `\` are escaped in a JSON line
    jobs = [
        {"id": "plain", "prompt": "plain"},
        {"id": "json", "prompt": "json", "schema": "name: str, note: str"},
    ]
    answers = {
        "plain": text(f"the key: {key}"),
        "json": text(json.dumps({"name": key, "note": f"a {key} b"})),
    }
    out = tmp_path / "out.jsonl"
    with FakeModel(lambda body: answers[prompt_of(body)]) as server:
        r = agi(
            "--batch", "-", "--batch-out", str(out), server=server,
            input="".join(json.dumps(j) + "\n" for j in jobs), extra_env={"AGI_API_KEY": key},
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    escaped = json.dumps(key)[1:-1]
    for written in (r.stdout, out.read_text()):
        assert key not in written and escaped not in written
        results = {res["id"]: res for res in lines_of(written)}
        assert results["plain"]["answer"] == "the key: [REDACTED]"
        assert results["json"]["answer"] == {"name": "[REDACTED]", "note": "a [REDACTED] b"}


def test_a_job_model_may_only_use_providers_the_operator_configured(agi, env, tmp_path):
    key = "sk-operator-" + uuid.uuid4().hex
    ears = [listener(11434), listener(4000)]
    jobs = [
        {"id": "ollama", "prompt": "a", "model": "ollama:x"},
        {"id": "litellm", "prompt": "b", "model": "litellm:x"},
        {"id": "mine", "prompt": "c"},
    ]
    try:
        with FakeModel(text("fine")) as server:
            r = agi(
                "--batch", "-", "--jobs", "1", input="".join(json.dumps(j) + "\n" for j in jobs),
                extra_env={"OPENAI_BASE_URL": server.url, "AGI_MODEL": "openai:fake-model",
                           "AGI_API_KEY": key},
            )  # fmt: skip
    finally:
        for ear in ears:
            if ear is not None:
                ear.close()
    assert r.returncode == 1, r.stderr
    results = {res["id"]: res for res in lines_of(r.stdout)}
    assert results["mine"]["exit"] == 0 and results["mine"]["answer"] == "fine"
    assert len(server.requests) == 1
    for name, line in (("ollama", 1), ("litellm", 2)):
        assert results[name]["exit"] == 2, results[name]
        error = results[name]["error"]
        assert f"line {line}" in error and "model" in error and name in error, error
        assert results[name]["steps"] == 0
    for ear in ears:
        if ear is not None:
            assert ear.heads == []


def test_no_job_s_tools_see_another_job_s_key(agi, env, tmp_path: Path) -> None:
    """The first job's Bash runs before the second job's run opens: the second's key (a
    provider of the config file's, read from its own variable) is withheld already."""
    first = "sk-first-" + uuid.uuid4().hex
    second = "sk-second-" + uuid.uuid4().hex
    dump = tmp_path / "env-dump"
    with (
        FakeModel(call("Bash", command=f"env > {dump}"), text("dumped")) as main,
        FakeModel(text("second done")) as other,
    ):
        Path(env["AGI_CONFIG"]).write_text(
            f'[providers.second]\nbase_url = "{other.url}"\napi_key_env = "SECOND_KEY"\n'
        )
        jobs = [{"id": 1, "prompt": "dump"}, {"id": 2, "prompt": "x", "model": "second:m"}]
        r = agi(
            "--batch", "-", "--jobs", "1", input="".join(json.dumps(j) + "\n" for j in jobs),
            extra_env={"OPENAI_BASE_URL": main.url, "AGI_MODEL": "openai:fake-model",
                       "OPENAI_API_KEY": first, "SECOND_KEY": second, "PLAIN": "seen"},
        )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert {res["id"]: res["exit"] for res in lines_of(r.stdout)} == {1: 0, 2: 0}
    assert other.headers[0]["Authorization"] == f"Bearer {second}"
    dumped = dump.read_text()
    assert "PLAIN=seen" in dumped
    assert first not in dumped and second not in dumped and "SECOND_KEY" not in dumped
