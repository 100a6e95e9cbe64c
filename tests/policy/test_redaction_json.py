"""Redaction covers every output, JSON too (docs: security): a key with characters JSON escapes
(`"`, `\\`, control characters, non-ASCII) is caught in its escaped form as well, in stdout
(`--schema`, `--output json|jsonl`) and in the session's files. The real `agi` against the
scripted server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from fakeserver import FakeModel, text


def forms(key: str) -> list[str]:
    return [key, json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]]


@pytest.mark.parametrize(
    "args",
    [["--schema", "name: str"], ["--output", "json"], ["--output", "jsonl"], []],
    ids=["schema", "json", "jsonl", "text"],
)
def test_a_key_json_would_escape_is_redacted_everywhere(agi, tmp_path, args):
    key = 'sk-q"u\\o-' + uuid.uuid4().hex
    answer = json.dumps({"name": key}) if "--schema" in args else f"the key: {key}"
    session = tmp_path / "sess"
    with FakeModel(text(answer)) as server:
        r = agi(*args, "-s", str(session), "go", server=server, extra_env={"AGI_API_KEY": key})
    assert r.returncode == 0, r.stderr
    assert server.headers[0]["Authorization"] == f"Bearer {key}"
    written = {"stdout": r.stdout, "stderr": r.stderr}
    written.update({p.name: p.read_text() for p in Path(session).iterdir() if p.is_file()})
    for name, content in written.items():
        for form in forms(key):
            assert form not in content, (name, form)
    assert "[REDACTED]" in r.stdout
    if args[:1] != ["--output"] or args[1] == "json":
        json.loads(r.stdout) if args else None  # still JSON where it was
    for line in (session / "messages.jsonl").read_text().splitlines():
        json.loads(line)


def test_a_result_nested_deeper_than_the_stack_is_redacted_without_recursion():
    """Python API results and events walk their JSON without recursion (one walker for all)."""
    from agi.engine.result import RunResult
    from agi.messages import Usage

    key = "sk-" + uuid.uuid4().hex
    deep: object = [key]
    for _ in range(50_000):
        deep = [deep]
    result = RunResult(answer=deep, exit_code=0, usage=Usage()).redacted(
        lambda text: text.replace(key, "[REDACTED]")
    )
    inner = result.answer
    while isinstance(inner, list) and inner and isinstance(inner[0], list):
        inner = inner[0]
    assert inner == ["[REDACTED]"]
