"""Neovim, second round (docs: neovim): the proposal streams in as virtual lines, is
reviewed hunk by hunk, refined in its own session; :AgiModel; usage and cost. A real headless
Neovim, the real remote plugin, the scripted model server (streaming slowly where it matters)."""

# ruff: noqa: F401, F811  (editor and manifest, imported from test_nvim, are fixtures)

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_nvim import PY_BUFFER, HeldReply, WatchedModel, editor, manifest, needs_nvim, until

from fakeserver import FakeModel, call, status, text

SOURCE = [
    "import math",  # 1
    "",  # 2
    "def area(r):",  # 3: the range is 3-11
    "    return 3.14 * r * r",  # 4: hunk 1 changes it (one line for two)
    "",  # 5
    "def perimeter(r):",  # 6
    "    return 2 * 3.14 * r",  # 7: hunk 2 changes it
    "",  # 8
    "def unused():",  # 9: hunk 3 deletes these two lines
    "    pass",  # 10
    "# end",  # 11
]
PROPOSAL = [
    "def area(r):",
    '    """The area of a circle of radius r."""',
    "    return math.pi * r * r",
    "",
    "def perimeter(r):",
    "    return 2 * math.pi * r",
    "",
    "# end",
]
HUNK1 = ['    """The area of a circle of radius r."""', "    return math.pi * r * r"]
HUNK2 = ["    return 2 * math.pi * r"]


def fenced(lines: list[str]) -> str:
    return "Here it is:\n```python\n" + "\n".join(lines) + "\n```\n"


def marks(ed: Any, namespace: str, buf: int = 0) -> list[Any]:
    return ed.lua(
        "local ns = vim.api.nvim_get_namespaces()[...]"
        " return ns and vim.api.nvim_buf_get_extmarks(select(2, ...), ns, 0, -1, {details = true})"
        " or {}",
        namespace,
        buf,
    )


def virtual_lines(ed: Any, namespace: str) -> list[str]:
    found = marks(ed, namespace)
    return ["".join(c[0] for c in line) for m in found for line in m[3].get("virt_lines", [])]


def visible(ed: Any) -> list[Any]:
    """The extmarks of every namespace that show something."""
    found = ed.lua("return vim.api.nvim_buf_get_extmarks(0, -1, 0, -1, {details = true})")
    keys = ("virt_lines", "virt_text", "hl_group", "line_hl_group")
    return [m for m in found if any(k in m[3] for k in keys)]


def review(ed: Any, server: FakeModel) -> None:
    """:3,11AgiRefactor on SOURCE, until its hunks are shown."""
    ed.buffer(SOURCE)
    ed.command("3,11AgiRefactor use math.pi, document area, drop unused")
    until(lambda: marks(ed, "agi-review"), "the hunks are shown")


def at_hunk(ed: Any, key: str) -> int:
    ed.nvim.feedkeys(ed.nvim.replace_termcodes(key, True, False, True), "x", False)
    return ed.nvim.current.window.cursor[0]


# --- streaming preview ------------------------------------------------------------------


@needs_nvim
def test_the_proposal_streams_in_below_the_range_and_cancel_removes_it(editor):
    reply = fenced([f"value_{i} = {i} * 2" for i in range(12)])
    with WatchedModel(text(reply, delay=0.1, pieces=30)) as server:  # about 3 s
        ed = editor(server)
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor unroll it")
        sizes: list[int] = []
        deadline = time.monotonic() + 10
        while len(set(sizes)) < 3 and time.monotonic() < deadline:
            shown = virtual_lines(ed, "agi-preview")
            if shown:
                sizes.append(len("".join(shown)))
                assert ed.lines() == PY_BUFFER  # the buffer's text is untouched meanwhile
                assert all("```" not in line for line in shown)
            time.sleep(0.05)
        assert not server.finished.is_set(), "the stream ended before the preview was seen"
        assert len(set(sizes)) >= 3 and sizes == sorted(sizes), sizes  # it grows
        shown = virtual_lines(ed, "agi-preview")
        assert shown[0] == "Here it is:" and "value_0 = 0 * 2".startswith(shown[1])
        row = marks(ed, "agi-preview")[0][1]
        assert row == 3  # below the range (rows 1-3, 0-based)
        ed.command("AgiCancel")
        assert virtual_lines(ed, "agi-preview") == []
        events = ed.done_exactly()
    assert [e["status"] for e in events] == ["cancelled"]
    assert ed.lines() == PY_BUFFER and visible(ed) == []


@needs_nvim
def test_tool_steps_show_one_line_each_while_the_answer_streams(editor, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("the constant is 42\n")
    answer = HeldReply(text("```python\nANSWER = 42\n```", pieces=6), head=3)
    with FakeModel(call("Read", file_path=str(notes)), answer.step) as server:
        ed = editor(server, setup={"tools": ["Read"]})
        ed.buffer(["ANSWER = None"])
        ed.command("AgiRefactor set it to the constant in notes.txt")
        assert answer.sent.wait(10), "the answer never started"
        until(lambda: len(virtual_lines(ed, "agi-preview")) >= 1, "the preview shows")
        shown = virtual_lines(ed, "agi-preview")
        assert len(shown) == 1 and "Read(" in shown[0] and "notes.txt" in shown[0], shown
        assert "✓" in shown[0], shown  # the step ended
        answer.release.set()
        (event,) = ed.done_exactly()
    assert event["status"] == "done" and ed.lines() == ["ANSWER = 42"]
    assert len(server.requests) == 2 and visible(ed) == []


@needs_nvim
def test_an_error_removes_the_streamed_preview(editor):
    partial = text(fenced(["x = 2", "y = 3"]), pieces=4)
    partial["frames"] = partial["frames"][:3]  # the stream breaks off: no finish, no [DONE]
    with FakeModel({"kind": "reset", "frames": partial["frames"], "raw": b""}) as server:
        ed = editor(server, setup={"apply": "review"})
        ed.buffer(["x = 1"])
        ed.command("AgiRefactor make it two")
        (event,) = ed.done_exactly()
    assert event["status"] == "error", event
    assert ed.lines() == ["x = 1"] and visible(ed) == []
    assert len(server.requests) == 1


# --- review by hunks --------------------------------------------------------------------


@pytest.mark.parametrize("order", ["forward", "reverse"])
@needs_nvim
def test_review_accept_reject_accept_lands_each_hunk_in_its_place(editor, order):
    with FakeModel(text(fenced(PROPOSAL))) as server:
        ed = editor(server, setup={"apply": "review"})
        review(ed, server)
        assert ed.lines() == SOURCE and ed.lua("return #_G.agi_done") == 0
        added = virtual_lines(ed, "agi-review")
        assert HUNK1[0] in added and HUNK2[0] in added
        # the user adds lines above the range meanwhile: nothing shifts to the wrong lines
        ed.nvim.current.window.cursor = (1, 0)
        ed.nvim.input("Oimport os<CR>import sys<Esc>")
        until(lambda: ed.lines()[:2] == ["import os", "import sys"], "the edit")
        if order == "forward":
            ed.nvim.current.window.cursor = (1, 0)
            assert at_hunk(ed, "]h") == 6  # hunk 1: "    return 3.14 * r * r"
            ed.command("AgiAccept")
            assert at_hunk(ed, "]h") == 10  # hunk 2, one line further down after hunk 1
            ed.command("AgiReject")
            assert at_hunk(ed, "]h") == 12  # hunk 3
            ed.command("AgiAccept")
        else:
            ed.nvim.current.window.cursor = (len(ed.lines()), 0)
            assert at_hunk(ed, "[h") == 11  # hunk 3
            ed.command("AgiAccept")
            assert at_hunk(ed, "[h") == 9  # hunk 2
            ed.command("AgiReject")
            assert at_hunk(ed, "[h") == 6  # hunk 1
            ed.command("AgiAccept")
        (event,) = ed.done_exactly()
        expected = ["import os", "import sys", *SOURCE[:3], *HUNK1, *SOURCE[4:8], "# end"]
        assert ed.lines() == expected
        assert event["status"] == "done" and "2 of 3 hunks" in event["message"], event
        assert visible(ed) == []
        assert ed.lua("return vim.fn.maparg(']h', 'n')") == ""  # the review's keys are gone
        ed.nvim.command("undo")  # one hunk at a time
        # the hunk accepted last goes first: hunk 3 (forward) or hunk 1 (reverse)
        once = [*SOURCE[:3], *HUNK1, *SOURCE[4:]] if order == "forward" else SOURCE[:8] + ["# end"]
        assert ed.lines() == ["import os", "import sys", *once]
        ed.nvim.command("undo")
        assert ed.lines() == ["import os", "import sys", *SOURCE]


@needs_nvim
def test_accept_all_is_one_undo_step_and_reject_all_changes_nothing(editor):
    with FakeModel(text(fenced(PROPOSAL))) as server:
        ed = editor(server, setup={"apply": "review"})
        review(ed, server)
        ed.nvim.current.window.cursor = (1, 0)  # not on a hunk: ! takes them all anyway
        ed.command("AgiAccept!")
        (event,) = ed.done_exactly()
        assert event["status"] == "done" and ed.lines() == [*SOURCE[:2], *PROPOSAL]
        ed.nvim.command("undo")
        assert ed.lines() == SOURCE
        assert visible(ed) == []

        ed.command("3,11AgiRefactor use math.pi, document area, drop unused")
        until(lambda: marks(ed, "agi-review"), "the hunks are shown")
        ed.command("AgiReject!")
        events = ed.done_exactly(2)
    assert events[1]["status"] == "rejected" and ed.lines() == SOURCE
    assert visible(ed) == []


@needs_nvim
def test_a_hunk_whose_lines_were_edited_is_not_applied_and_says_why(editor):
    with FakeModel(text(fenced(PROPOSAL))) as server:
        ed = editor(server, setup={"apply": "review"})
        review(ed, server)
        ed.nvim.current.window.cursor = (7, 0)  # hunk 2's line
        ed.nvim.input("A  # mine<Esc>")
        until(lambda: ed.lines()[6].endswith("# mine"), "the edit")
        ed.command("AgiAccept!")
        (event,) = ed.done_exactly()
    assert event["status"] == "done" and "(1 edited meanwhile)" in event["message"], event
    assert ed.lines() == [*SOURCE[:3], *HUNK1, *SOURCE[4:6], SOURCE[6] + "  # mine", "", "# end"]
    assert "(agi) not applied: lines 7-7 were edited" in ed.messages()


@needs_nvim
def test_review_hunks_that_add_lines_at_the_top_and_delete_at_the_end(editor):
    source = ["a = 1", "b = 2", "c = 3", "d = 4"]
    proposal = ["import x", "a = 1", "b = 20", "c = 3"]
    with FakeModel(text(fenced(proposal))) as server:
        ed = editor(server, setup={"apply": "review", "mappings": {"next_hunk": "gn"}})
        ed.buffer(source)
        ed.command("1,4AgiRefactor go")
        until(lambda: marks(ed, "agi-review"), "the hunks are shown")
        assert ed.lua("return vim.fn.maparg(']h', 'n')") == ""  # mapped to gn instead
        ed.nvim.current.window.cursor = (1, 0)
        ed.command("AgiAccept")  # the line added above "a = 1"
        assert ed.lines() == ["import x", *source]
        assert at_hunk(ed, "gn") == 3
        ed.command("AgiAccept")
        assert at_hunk(ed, "gn") == 5
        ed.command("AgiAccept")
        (event,) = ed.done_exactly()
    assert event["status"] == "done" and ed.lines() == proposal


@needs_nvim
def test_agi_done_once_when_a_review_request_is_cancelled_or_fails(editor):
    slow = text(fenced(PROPOSAL), delay=0.1, pieces=30)
    with FakeModel(slow, status(400, {"error": {"message": "no such model"}})) as server:
        ed = editor(server, setup={"apply": "review"})
        ed.buffer(SOURCE)
        ed.command("3,11AgiRefactor go")
        until(lambda: virtual_lines(ed, "agi-preview"), "the proposal streams in")
        ed.command("AgiCancel")
        ed.command("3,11AgiRefactor go")
        events = ed.done_exactly(2, grace=0.5)
    assert [e["status"] for e in events] == ["cancelled", "error"]
    assert ed.lines() == SOURCE and visible(ed) == []


# --- :AgiRefine ---------------------------------------------------------------------------


@needs_nvim
def test_refine_continues_the_session_and_replaces_the_preview(editor):
    first = fenced(["    result = [x * 2 for x in items]"])
    second = fenced(["    result = list(map(lambda x: x * 2, items))"])
    with FakeModel(text(first), text(second)) as server:
        ed = editor(server, setup={"apply": "preview"})
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor shorter")
        ed.done(1)
        assert "    result = [x * 2 for x in items]" in virtual_lines(ed, "agi-preview")
        ed.command("AgiRefine use map instead")
        events = ed.done_exactly(2)
        shown = virtual_lines(ed, "agi-preview")
        assert "    result = list(map(lambda x: x * 2, items))" in shown
        assert "    result = [x * 2 for x in items]" not in shown  # replaced
        ed.command("AgiAccept")
    assert [e["status"] for e in events] == ["preview", "preview"]
    assert ed.lines()[1] == "    result = list(map(lambda x: x * 2, items))"
    assert ed.lines()[2] == "    return result"
    one, two = server.requests
    assert two["messages"][: len(one["messages"])] == one["messages"]  # the same conversation
    assert two["messages"][len(one["messages"])] == {"role": "assistant", "content": first.rstrip()}
    refine = two["messages"][-1]["content"]
    assert refine.startswith("use map instead") and "has not been applied" in refine
    assert "        result.append(x * 2)" in refine  # the lines as they are
    assert Path(events[0]["log"]).parent == Path(events[1]["log"]).parent  # one session


@needs_nvim
def test_refine_after_a_direct_apply_changes_the_applied_lines(editor):
    script = [
        text(fenced(["result = [x * 2 for x in items]"])),
        text(fenced(["result = [2 * x for x in items]  # doubled"])),
    ]
    with FakeModel(*script) as server:
        ed = editor(server)
        ed.buffer(PY_BUFFER)
        ed.command("2,4AgiRefactor use a list comprehension")
        ed.done(1)
        ed.nvim.current.window.cursor = (1, 0)
        ed.nvim.input("Oimport os<Esc>")  # the applied lines move down: still tracked
        until(lambda: ed.lines()[0] == "import os", "the edit")
        ed.command("AgiRefine add a comment")
        events = ed.done_exactly(2)
    assert [e["status"] for e in events] == ["done", "done"]
    assert ed.lines() == [
        "import os",
        "def double_all(items):",
        "    result = [2 * x for x in items]  # doubled",
        "    return result",
        "",
        "print(double_all([1, 2]))",
    ]
    refine = server.requests[1]["messages"][-1]["content"]
    assert "was applied" in refine and "lines 3-3" in refine
    assert "result = [x * 2 for x in items]" in refine
    ed.nvim.command("undo")
    assert ed.lines()[2] == "    result = [x * 2 for x in items]"


@needs_nvim
def test_refine_needs_a_last_request_and_ends_a_review(editor):
    with FakeModel(text(fenced(PROPOSAL)), text(fenced(SOURCE[2:]))) as server:
        ed = editor(server, setup={"apply": "review"})
        ed.buffer(SOURCE)
        ed.command("AgiRefine shorter")
        assert "no request to refine" in ed.messages() and server.requests == []
        ed.command("3,11AgiRefactor go")
        until(lambda: marks(ed, "agi-review"), "the hunks are shown")
        ed.command("AgiRefine keep it as it was")  # the review ends: its hunks are dropped
        events = ed.done(1)
        assert events[0]["status"] == "rejected"
        (second,) = ed.done_exactly(2)[1:]
    assert second["status"] == "done" and second["message"] == "the proposal changes nothing"
    assert ed.lines() == SOURCE and visible(ed) == []


# --- :AgiModel ----------------------------------------------------------------------------


@needs_nvim
def test_model_sets_the_model_of_later_requests_and_completes_from_the_config(editor, tmp_path):
    (tmp_path / "config.toml").write_text(
        '[providers.mine]\nbase_url = "http://127.0.0.1:9/v1"\n\n'
        '[prices."openai:priced-model"]\ninput = 1.0\noutput = 2.0\n'
    )
    with FakeModel(text("```\nx = 2\n```")) as server:
        ed = editor(server)
        until(ed.host_running, "the host is warmed up")
        names: list[str] = []

        def completes() -> bool:
            names[:] = ed.nvim.call("getcompletion", "AgiModel ", "cmdline")
            return "openai:priced-model" in names

        until(completes, "the host's names reach the completion")
        assert {"mine:", "openai:", "anthropic:", "openai:fake-model"} <= set(names), names
        assert ed.nvim.call("getcompletion", "AgiModel mi", "cmdline") == ["mine:"]
        ed.command("AgiModel")
        assert "model: openai:fake-model (agi's configuration)" in ed.messages()
        ed.command("AgiModel openai:x")
        assert ed.lua("return require('agi').model()") == "openai:x"
        ed.buffer(["x = 1"])
        ed.command("AgiRefactor make it two")
        (event,) = ed.done()
    assert event["status"] == "done", event
    assert server.requests[0]["model"] == "x"


# --- usage ----------------------------------------------------------------------------------


@needs_nvim
def test_usage_and_cost_reach_agi_done_the_status_and_the_log(editor, tmp_path):
    (tmp_path / "config.toml").write_text('[prices."fake-model"]\ninput = 1.0\noutput = 2.0\n')
    with FakeModel(text(fenced(["x = 2"]))) as server:
        ed = editor(server)
        ed.buffer(["x = 1"])
        ed.command("AgiRefactor make it two")
        (event,) = ed.done()
        assert event["usage"] == {"input": 10, "output": 5, "cost": pytest.approx(2e-5)}
        assert ed.nvim.vars["agi_status"] == "agi 10 in, 5 out, $0.00002"
        ed.command("AgiLog")
        winbar = ed.nvim.current.window.options["winbar"]
        assert "agi refactor: done · 10 in, 5 out, $0.00002" in winbar
    meta = json.loads((Path(event["log"]).parent / "meta.json").read_text())
    assert meta["usage"]["input"] == 10 and meta["usage"]["cost"] == pytest.approx(2e-5)


@needs_nvim
def test_an_unknown_cost_stays_unknown(editor):
    with FakeModel(text(fenced(["x = 2"]))) as server:
        ed = editor(server, setup={"apply": "review"})
        ed.buffer(["x = 1"])
        ed.command("AgiRefactor make it two")
        until(lambda: ed.nvim.vars.get("agi_status", "").startswith("agi 10"), "the usage")
        assert ed.nvim.vars["agi_status"] == "agi 10 in, 5 out, cost unknown"
        ed.command("AgiAccept!")
        (event,) = ed.done()
    assert event["status"] == "done" and event["usage"] == {"input": 10, "output": 5}


# --- the host side on its own ---------------------------------------------------------------


def test_progress_reaches_neovim_batched_at_most_every_50_ms():
    from agi.frontends.nvim.plugin import UPDATE_EVERY, EditorRequest
    from agi.messages import StepStart, TextDelta, ToolCall, ToolEnd, ToolStart

    sent: list[tuple[float, dict[str, Any]]] = []

    class Plugin:
        def send(self, request_id: int, event: dict[str, Any]) -> None:
            sent.append((time.monotonic(), event))

    job = EditorRequest(Plugin(), {"id": 1})  # type: ignore[arg-type]
    started = time.monotonic()
    pieces = [f"token{i} " for i in range(400)]
    for i, piece in enumerate(pieces):
        job.progress(TextDelta(piece))
        if i == 200:
            read = ToolCall("c1", "Read", '{"file_path": "notes.txt"}')
            job.progress(StepStart(2))
            job.progress(ToolStart(read, {"file_path": "notes.txt"}))
            job.progress(ToolEnd(read, "42", False, 0.25))
        time.sleep(0.001)
    until(lambda: sent and time.monotonic() - sent[-1][0] > 2 * UPDATE_EVERY, "the last update")
    elapsed = time.monotonic() - started
    times = [t for t, _ in sent]
    assert len(sent) <= elapsed / UPDATE_EVERY + 2, len(sent)  # batched
    assert min(b - a for a, b in zip(times, times[1:], strict=False)) >= UPDATE_EVERY * 0.9
    ops = [op for _, event in sent for op in event["ops"]]
    text = "".join(op[1] for op in ops if op[0] == "text")
    assert text == "".join(pieces)  # nothing lost, in order
    tools = [op for op in ops if op[0] == "tool"]
    assert tools == [
        ["tool", "c1", "Read(notes.txt)"],
        ["tool", "c1", "Read(notes.txt) ✓ 0.25s"],
    ]
    assert ["step"] in ops and sent[-1][1]["chars"] == len("".join(pieces))
    job.close()
    job.progress(TextDelta("late"))
    time.sleep(2 * UPDATE_EVERY)
    assert "late" not in json.dumps([event for _, event in sent])  # nothing after the end


def test_refine_prompt_and_model_names(tmp_path, monkeypatch):
    from agi.frontends.nvim.engine import render_refine
    from agi.frontends.nvim.plugin import model_names

    prompt = render_refine(
        {
            "instruction": "keep the old names",
            "refine": "applied",
            "lines": ["    total = sum(xs)"],
            "first": 12,
            "filetype": "python",
            "filename": "stats.py",
        }
    )
    assert prompt.startswith("keep the old names\n")
    assert "was applied" in prompt and "Lines 12-12 of the python file `stats.py`" in prompt
    assert "```python\n    total = sum(xs)\n```" in prompt
    config = tmp_path / "config.toml"
    config.write_text('model = "mine:big"\n[providers.mine]\nbase_url = "http://x/v1"\n')
    monkeypatch.setenv("AGI_CONFIG", str(config))
    monkeypatch.delenv("AGI_MODEL", raising=False)
    found = model_names()
    assert found["configured"] == "mine:big"
    assert {"mine:big", "mine:", "openai:", "openai:gpt-4o", "anthropic:claude-sonnet-4-5"} <= set(
        found["names"]
    )


@needs_nvim
def test_help_documents_the_second_round(editor, tmp_path):
    docs = tmp_path / "rtp" / "doc"
    docs.mkdir(parents=True)
    (docs / "agi.txt").write_text((Path(__file__).parents[3] / "doc" / "agi.txt").read_text())
    ed = editor(None, setup={"warmup": False})
    ed.command(f"helptags {docs}")  # E154 on a duplicate tag
    names = [line.split("\t")[0] for line in (docs / "tags").read_text().splitlines()]
    assert len(names) == len(set(names))
    for tag in (":AgiRefine", ":AgiModel", "agi-review", "agi-streaming", "agi.refine()"):
        assert tag in names, tag
    for tag in ("agi.model()", "agi-highlights", "hl-AgiStream", "hl-AgiAdd", "hl-AgiDelete"):
        assert tag in names, tag
