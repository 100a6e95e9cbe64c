"""Grep's search with ripgrep: the same records as agi.tools.grep_python, read from `rg -l`,
`rg -c`, `rg -n --null` (lines and context: `PATH NUL NUMBER : or - TEXT`, read with one regular
expression) or `rg --json` (multiline, where a match spans lines)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import TYPE_CHECKING

from agi.errors import ToolError
from agi.tools.grep_python import RECORD_LIMIT, Hits, decoded, line_text
from agi.tools.walk import RG_FLAGS, unignored_above

OUT_LIMIT = 16 << 20  # bytes of ripgrep's output read at most (RECORD_LIMIT lines fit in it)

if TYPE_CHECKING:
    from agi.tools.grep_query import Query


# one line of `rg --line-number --with-filename --null`: the path, NUL, the number, `:` for a
# match or `-` for context, the text; `--` between blocks has no NUL and is passed over
LINE = re.compile(rb"^([^\0\n]*)\0(\d+)([:-])(.*)$", re.M)


def argv_for(query: Query, rg: str, as_json: bool = False) -> list[str]:
    """ripgrep's command line; `as_json`: lines and context as JSON (multiline always is)."""
    argv = [rg, *RG_FLAGS, "--no-messages"]
    if query.ignore_case:
        argv.append("-i")
    if query.multiline:
        argv += ["-U", "--multiline-dotall"]
    for glob in query.globs:
        argv.append(f"--glob={glob}")
    if query.mode == "content":
        if query.before:
            argv.append(f"-B{query.before}")
        if query.after:
            argv.append(f"-A{query.after}")
    if query.multiline or as_json:
        argv.append("--json")
    elif query.mode == "content":
        argv += ["--line-number", "--with-filename", "--null", "--no-heading", "--color=never"]
    elif query.mode == "count":
        argv += ["--count", "--null", "--with-filename"]
    else:
        argv += ["--files-with-matches", "--null"]
    return [*argv, "-e", query.pattern, "--", query.root]


def search_rg(query: Query, rg: str, cwd: str, seconds: float) -> list[Hits]:
    out = _run(argv_for(query, rg), cwd, seconds, query)
    if query.multiline:
        hits = _from_json(out, query)
    elif query.mode == "content":
        found = _from_lines(out, query)
        if found is None:  # a file name with a newline in it: the lines cannot be told apart
            query.cut = 0
            found = _from_json(_run(argv_for(query, rg, as_json=True), cwd, seconds, query), query)
        hits = found
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


def _run(argv: list[str], cwd: str, seconds: float, query: Query) -> bytes:
    """ripgrep's output, at most OUT_LIMIT bytes of it: past that ripgrep is stopped, the
    output cut after its last whole record and `query.cut` set (a match on every line of a
    few MB had been read whole, hundreds of MB)."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=err, cwd=cwd, stdin=subprocess.DEVNULL
        )
        late = threading.Event()

        def stop() -> None:
            late.set()
            proc.kill()

        timer = threading.Timer(seconds, stop)
        timer.start()
        out = bytearray()
        try:
            assert proc.stdout is not None
            while len(out) <= OUT_LIMIT:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    break
                out += chunk
        finally:
            timer.cancel()
            if len(out) > OUT_LIMIT:
                proc.kill()
            proc.stdout.close()  # type: ignore[union-attr]
            code = proc.wait()
        if late.is_set():
            raise ToolError("the search took too long and was stopped; narrow it with path or glob")
        if len(out) > OUT_LIMIT:
            query.cut = RECORD_LIMIT
            del out[max(out.rfind(b"\n", 0, OUT_LIMIT), out.rfind(b"\0", 0, OUT_LIMIT)) + 1 :]
        if code == 2 and not out:
            err.seek(0)
            error = err.read(4096).decode("utf-8", "replace").strip()
            raise ToolError(f"the pattern is not a valid regular expression: {error}"
                            if "regex" in error else f"ripgrep: {error or 'failed'}")  # fmt: skip
    return bytes(out)


def _from_lines(out: bytes, query: Query) -> list[Hits] | None:
    """The records of `rg -n --null` lines, at most RECORD_LIMIT of them (`query.cut` set when
    more were left out, as the Python search does); None when some line is not one (nor, with
    context, the `--` between blocks): a file name with a newline split it."""
    by_path: dict[bytes, Hits] = {}
    rows, end = 0, 0
    for m in LINE.finditer(out):
        if rows >= RECORD_LIMIT:
            query.cut = RECORD_LIMIT
            break
        name, number, mark, text = m.groups()
        rows, end = rows + 1, m.end() + 1
        hits = by_path.get(name)
        if hits is None:
            hits = by_path[name] = Hits(os.fsdecode(name))
        matched = mark == b":"
        if matched:
            hits.matches += 1
        hits.add(int(number), [line_text(text.decode("utf-8", "replace"))], matched)
    read = out[:end] if query.cut else out
    blocks = read.count(b"\n--\n") if query.before or query.after else 0
    return list(by_path.values()) if rows + blocks == read.count(b"\n") else None


def _from_json(out: bytes, query: Query) -> list[Hits]:
    """The records of `rg --json`, at most RECORD_LIMIT lines of them (`query.cut` set when
    more were left out)."""
    by_path: dict[str, Hits] = {}
    rows = 0
    for raw in out.splitlines():
        try:
            message = json.loads(raw)
        except ValueError:
            continue
        kind, data = message.get("type"), message.get("data") or {}
        if kind not in ("match", "context"):
            continue
        if rows >= RECORD_LIMIT:
            query.cut = RECORD_LIMIT
            break
        path = decoded(data.get("path") or {})
        hits = by_path.setdefault(path, Hits(path))
        texts = [line_text(t) for t in decoded(data.get("lines") or {}).split("\n")]
        if len(texts) > 1 and texts[-1] == "":
            texts.pop()
        number = data.get("line_number") or 0
        if kind == "match":
            hits.matches += 1
        hits.add(number, texts, kind == "match")
        rows += len(texts)
    return list(by_path.values())
