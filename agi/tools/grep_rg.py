"""Grep's search with ripgrep: the same records as agi.tools.grep_python, read from `rg -l`,
`rg -c` or `rg --json` (for lines and context)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import TYPE_CHECKING

from agi.errors import ToolError
from agi.tools.grep_python import Hits, decoded, line_text
from agi.tools.walk import RG_FLAGS, unignored_above

if TYPE_CHECKING:
    from agi.tools.grep_query import Query


def argv_for(query: Query, rg: str) -> list[str]:
    argv = [rg, *RG_FLAGS, "--no-messages"]
    if query.ignore_case:
        argv.append("-i")
    if query.multiline:
        argv += ["-U", "--multiline-dotall"]
    for glob in query.globs:
        argv.append(f"--glob={glob}")
    if query.mode == "content" or query.multiline:
        argv.append("--json")
        if query.before:
            argv.append(f"-B{query.before}")
        if query.after:
            argv.append(f"-A{query.after}")
    elif query.mode == "count":
        argv += ["--count", "--null", "--with-filename"]
    else:
        argv += ["--files-with-matches", "--null"]
    return [*argv, "-e", query.pattern, "--", query.root]


def search_rg(query: Query, rg: str, cwd: str, seconds: float) -> list[Hits]:
    try:
        done = subprocess.run(
            argv_for(query, rg), capture_output=True, timeout=seconds, cwd=cwd,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except subprocess.TimeoutExpired as e:
        raise ToolError(
            "the search took too long and was stopped; narrow it with path or glob"
        ) from e
    if done.returncode == 2 and not done.stdout:
        error = done.stderr.decode("utf-8", "replace").strip()
        raise ToolError(f"the pattern is not a valid regular expression: {error}"
                        if "regex" in error else f"ripgrep: {error or 'failed'}")  # fmt: skip
    out = done.stdout
    if query.mode == "content" or query.multiline:
        hits = _from_json(out, query)
    elif query.mode == "count":
        hits = []
        for row in out.split(b"\n"):
            name, _, count = row.partition(b"\0")
            if name and count.strip().isdigit():
                hits.append(Hits(os.fsdecode(name), matches=int(count)))
    else:
        hits = [Hits(os.fsdecode(p), matches=1) for p in out.split(b"\0") if p]
    kept = set(unignored_above([h.path for h in hits], query.root, cwd))
    return [h for h in hits if h.path in kept]


def _from_json(out: bytes, query: Query) -> list[Hits]:
    by_path: dict[str, Hits] = {}
    for raw in out.splitlines():
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        kind, data = message.get("type"), message.get("data") or {}
        if kind not in ("match", "context"):
            continue
        path = decoded(data.get("path") or {})
        hits = by_path.setdefault(path, Hits(path))
        texts = [line_text(t) for t in decoded(data.get("lines") or {}).split("\n")]
        if len(texts) > 1 and texts[-1] == "":
            texts.pop()
        number = data.get("line_number") or 0
        if kind == "match":
            hits.matches += 1
        hits.add(number, texts, kind == "match")
    return list(by_path.values())
