"""Read rules judging Glob and Grep by the directory they search, and WebFetch(domain:) rules
against the host of the URL (the whole runs are in tests/tools/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agi.policy.permissions import Permissions, decide, parse_rule


@pytest.mark.parametrize(
    ("rule", "name", "input", "verdict"),
    [
        ("Read(secrets/**)", "Grep", {"pattern": "x", "path": "secrets"}, "deny"),
        ("Read(secrets/**)", "Glob", {"pattern": "*", "path": "secrets/sub"}, "deny"),
        ("Read(secrets/**)", "Grep", {"pattern": "x", "path": "secrets/key.txt"}, "deny"),
        ("Read(secrets/**)", "Grep", {"pattern": "x"}, "none"),  # above it: files are hidden
        ("Read(secrets/**)", "Grep", {"pattern": "x", "path": "src"}, "none"),
        ("Read", "Glob", {"pattern": "*"}, "deny"),
        ("Read(**)", "Grep", {"pattern": "x"}, "deny"),
        ("Edit(secrets/**)", "Grep", {"pattern": "x", "path": "secrets"}, "none"),
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://example.com/a"}, "deny"),
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://EXAMPLE.com./"}, "deny"),
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://www.example.com"}, "none"),
        ("WebFetch(domain:*.example.com)", "WebFetch", {"url": "http://a.example.com"}, "deny"),
        ("WebFetch(domain:example.com)", "WebFetch", {"url": "https://example.org"}, "none"),
        ("WebFetch(https://example.com)", "WebFetch", {"url": "https://example.com"}, "none"),
        ("WebFetch", "WebFetch", {"url": "https://example.org"}, "deny"),
    ],
)
def test_search_and_web_rules(tmp_path: Path, rule: str, name: str, input: dict, verdict: str):
    for directory in ("secrets/sub", "src"):
        (tmp_path / directory).mkdir(parents=True, exist_ok=True)
    (tmp_path / "secrets" / "key.txt").write_text("k")
    permissions = Permissions([parse_rule(rule, "deny", "command line", str(tmp_path))])
    assert decide(permissions, name, input, str(tmp_path)).verdict == verdict
