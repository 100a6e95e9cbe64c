"""Reading sessions for people: `--list-sessions` and `--show` (a transcript with timings)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agi.checkpoints.rewind import files_rewinds
from agi.errors import UsageError
from agi.messages import Usage
from agi.policy.decoding import one_line
from agi.policy.sandbox import Policy
from agi.policy.text import escape_controls
from agi.providers.cost import describe, money
from agi.sessions.files import read_lines
from agi.sessions.session import Session, iter_sessions, read_meta, session_size


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSON-lines file, read as a stream (lines at \\n only, not U+2028)."""
    for line in read_lines(path):
        if line is None:  # over the bound: skipped
            continue
        try:
            record = json.loads(line.decode("utf-8", "replace"))
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def human_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


HEADER = "PATH\tUPDATED\tMODEL\tMESSAGES\tSIZE\tUSAGE\tFIRST PROMPT"


def list_sessions(home: Path, limit: int | None = None) -> str:
    """One line per session, newest first: path, first prompt, model, messages, size. With a
    `limit` (a terminal's listing), a header first and the newest `limit` only, then how many
    more there are; a pipe gets every line and no header (docs: sessions)."""
    rows: list[str] = []
    more = 0
    for path in iter_sessions(home):  # one bad session spoils no other's line
        if limit is not None and len(rows) >= limit:
            more += 1
            continue
        meta = read_meta(path)
        prompt = " ".join(str(meta.get("first_prompt", "")).split())
        prompt = prompt if len(prompt) <= 60 else prompt[:59] + "…"
        fields = [str(path), *(str(meta.get(k, "?")) for k in ("updated", "model", "messages"))]
        path_, updated, model, count = map(one_line, fields)
        rewinds = meta.get("rewinds")  # section 18
        if isinstance(rewinds, int) and rewinds > 0:
            count += f" messages, {rewinds} rewind{'s' if rewinds > 1 else ''}"
        else:
            count += " messages"
        rows.append(
            f"{path_}\t{updated}\t{model}\t{count}\t{human_size(session_size(path))}\t"
            f"{usage_summary(meta.get('usage'))}\t{one_line(prompt)}"
        )
    if limit is not None:
        rows.insert(0, HEADER)
        if more:
            rows.append(f"({more} older not shown: agi --list-sessions | cat lists every one)")
    return escape_controls("\n".join(rows))


def usage_summary(recorded: Any, detail: bool = False) -> str:
    """A usage object as meta.json or the trace holds it: `1234 in, 56 out, $0.0123`."""
    if not isinstance(recorded, dict):
        return "usage unknown"  # a session from before agi recorded usage
    usage = Usage.from_dict(recorded)
    if detail:
        return describe(usage)
    cost = "cost unknown" if recorded.get("cost") is None else money(usage.cost or 0.0)
    return f"{usage.input} in, {usage.output} out, {cost}"


def must_be_session(path: Path) -> None:
    """A UsageError unless `path` is a session: a directory holding meta.json."""
    if not path.is_dir():
        what = "no such directory" if not path.exists() else "not a directory"
        raise UsageError(f"{path} is not a session ({what})")
    if not (path / "meta.json").exists():
        raise UsageError(f"{path} is not an agi session (no meta.json)")


def show(path: Path) -> str:
    """A readable transcript from messages.jsonl, with timings from trace.jsonl."""
    must_be_session(path)
    session = Session(path)
    session.load()
    meta = session.meta
    tool_times = {
        t.get("id"): t.get("seconds")
        for t in _jsonl(path / "trace.jsonl")
        if t.get("type") == "tool"
    }
    decisions = {  # permission rules' decisions, by tool call
        t.get("id"): t for t in _jsonl(path / "trace.jsonl") if t.get("type") == "permission"
    }
    model_times = [  # each reply's duration and usage
        (t.get("seconds"), t.get("usage"))
        for t in _jsonl(path / "trace.jsonl")
        if t.get("type") == "response" and not t.get("error") and not t.get("ghost")
    ]
    sandboxes = [  # each run's, in order; runs before --sandbox existed recorded none
        Policy.from_record(t["sandbox"]).label()
        for t in _jsonl(path / "trace.jsonl")
        if t.get("type") == "run" and isinstance(t.get("sandbox"), dict)
    ]
    out = [
        f"session {path}  ·  model {meta.get('model', '?')}  ·  {len(session.messages)} messages"
        + (f"  ·  sandbox {', '.join(dict.fromkeys(sandboxes))}" if sandboxes else "")
    ]
    if "usage" in meta:
        out.append(f"usage {usage_summary(meta['usage'], detail=True)}")
    replies = iter(model_times)
    copies = 0  # a compaction's copies of the turns it kept: already shown above
    marks = files_rewinds(path)  # section 18: files-only rewinds, where they were made
    for i, m in enumerate(session.messages):
        out += marks.pop(i, [])
        role = m.get("role")
        if i in session.hidden or copies:  # an unfinished compaction's lines; kept copies
            copies -= 0 if i in session.hidden else 1
            continue
        if isinstance(m.get("compaction"), dict):
            out += _compaction(m)
            copies = int(m["compaction"].get("kept") or 0)
        elif isinstance(m.get("rewind"), dict):  # section 18: the view went back
            out += ["", f"── rewound to before turn {m['rewind'].get('turn', '?')} ──"]
        elif role == "user":
            out += ["", "▶ user", _indent(str(m.get("content", "")))]
        elif role == "assistant":
            out += _assistant(m, *next(replies, (None, None)))
        elif role == "tool":
            took = tool_times.get(m.get("tool_call_id"))
            timing = f" ({took:.2f}s)" if isinstance(took, float) else ""
            decision = decisions.get(m.get("tool_call_id"))
            if decision is not None:
                out.append(_indent(_permission(decision)))
            out.append(_indent(f"⎿{timing} " + str(m.get("content", ""))))
    out += [line for _, lines in sorted(marks.items()) for line in lines]
    for warning in session.warnings:
        out.append(f"(warning: {warning})")
    return escape_controls("\n".join(out))


def _assistant(m: dict[str, Any], took: Any, used: Any) -> list[str]:
    """An assistant message: its time and usage, reasoning, text and tool calls."""
    about = [f"{took:.2f}s"] if isinstance(took, (int, float)) else []
    about += [usage_summary(used)] if isinstance(used, dict) else []
    out = ["", "◀ assistant" + (f"  ({', '.join(about)})" if about else "")]
    for field in ("reasoning_content", "reasoning"):
        if m.get(field):
            out.append(_indent("✻ " + str(m[field]).strip()))
    if m.get("content"):
        out.append(_indent(str(m["content"])))
    for call in m.get("tool_calls") or []:
        fn = call.get("function") or {}
        out.append(_indent(f"⏺ {fn.get('name')}({fn.get('arguments', '')})"))
    return out


def _compaction(record: dict[str, Any]) -> list[str]:
    """A compaction record as --show prints it: what it stands for, then the summary."""
    c = record["compaction"]
    how = "mechanically" if c.get("mechanical") else str(c.get("trigger", "auto"))
    head = (
        f"── compacted ({how}): {c.get('summarized', '?')} messages summarised, about "
        f"{c.get('tokens_before', '?')} → {c.get('tokens_after', '?')} tokens; "
        f"the last {c.get('kept', 0)} kept as they were ──"
    )
    return ["", head, _indent(str(record.get("content", "")))]


def _permission(record: dict[str, Any]) -> str:
    """A permission decision as --show prints it: `⚖ deny by rule "Bash(rm:*)" (FILE)`."""
    verdict = "denied" if record.get("denied") else "allowed"
    rule = record.get("rule")
    why = f'rule "{rule}" ({record.get("source")})' if rule else f"mode {record.get('mode')}"
    return f"⚖ {verdict} by {why}" + (" after a hook allowed it" if record.get("hook") else "")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines()) or "  "
