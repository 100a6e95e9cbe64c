"""Next-edit suggestions and diagnostics as context (issue 39): a real headless Neovim with agi's
Lua side and remote plugin, a file opened and edited with keys, against the scripted server;
and the formats of agi.frontends.nvim.nes on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import test_nvim
from test_nvim import WatchedModel, needs_nvim, until

from agi.frontends.nvim.nes import (
    CURSOR,
    END,
    START,
    excerpt,
    hunks,
    original_updated,
    read_window,
    sweep_prompt,
)

from fakeserver import FakeModel, completion, text

editor, manifest = test_nvim.editor, test_nvim.manifest  # its fixtures

FILLER = [f"# note {i}" for i in range(30)]
SOURCE = [
    "def area(width, height):",
    "    return width * height",
    "",
    *FILLER,
    "print(area(width=2, height=3))",
]
FAR = len(SOURCE) - 1  # the last row: out of view in a 24-line screen
RENAMED = [
    "def area(w, height):",
    "    return w * height",
    "",
    *FILLER,
    "print(area(w=2, height=3))",
]
# the documented mapping (doc/agi.txt, agi-nes): <Tab> takes or goes to a hunk, else is a <Tab>
TAB = """
vim.keymap.set({ 'n', 'i' }, '<Tab>', function()
  local agi = require('agi')
  if agi.nes_visible() then
    if not agi.nes_accept() then agi.nes_jump() end
  else
    vim.api.nvim_feedkeys(vim.keycode('<Tab>'), 'ni', false)
  end
end, { desc = 'agi: next edit' })
"""


def start(editor: Any, server: FakeModel, tmp_path: Path, **suggest: Any) -> Any:
    """A Neovim with next edits on (a short pause), SOURCE opened from a file."""
    setup = {"suggest": {"nes": True, "nes_delay": 60, **suggest}, "warmup": True}
    ed = editor(server, setup=setup)
    until(ed.host_running, "the Python host is up (warmed after startup)")
    path = tmp_path / "shapes.py"
    path.write_text("\n".join(SOURCE) + "\n")
    ed.nvim.command(f"cd {tmp_path}")
    ed.nvim.command("edit shapes.py")
    ed.lua(TAB)
    return ed


def typed(ed: Any, keys: str) -> None:
    ed.nvim.input(keys)
    ed.nvim.eval("1")  # a round trip: the keys before it are in


def marks(ed: Any) -> list[Any]:
    return ed.lua(
        "return vim.api.nvim_buf_get_extmarks(0, require('agi.nes').ns, 0, -1, {details = true})"
    )


def signs(ed: Any) -> list[int]:
    return sorted(m[1] for m in marks(ed) if m[3].get("sign_text"))


def region(lines: list[str]) -> str:
    """A reply holding the editable region rewritten to `lines`."""
    return "\n".join([START, *lines, END])


# --- the acceptance criteria, in a real Neovim ---------------------------------------------


@needs_nvim
def test_an_edit_asks_once_and_hunks_show_where_they_apply_to_jump_accept_and_undo(
    editor, tmp_path
):
    with FakeModel(text(region(RENAMED))) as server:
        ed = start(editor, server, tmp_path)
        typed(ed, "ggfwcww<Esc>")  # def area(w, height):
        until(lambda: len(signs(ed)) == 2, "two hunks are shown, each with a sign")
        assert len(server.requests) == 1
        body = server.requests[0]
        assert signs(ed) == [1, FAR]
        # the far hunk is out of view: the cursor line names it
        hints = [m for m in marks(ed) if m[3].get("virt_text_pos") == "eol"]
        assert [(m[1], m[3]["virt_text"][0][0]) for m in hints] == [
            (0, f" agi: next edit at line {FAR + 1}")
        ]
        added = [m for m in marks(ed) if m[3].get("virt_lines")]
        assert sorted((m[1], m[3]["virt_lines"][0][0][0]) for m in added) == [
            (1, "    return w * height"),
            (FAR, "print(area(w=2, height=3))"),
        ]
        assert ed.lines()[1] == "    return width * height"  # shown, not applied

        typed(ed, "<Tab>")  # not on a hunk: goes to the next one
        assert tuple(ed.nvim.current.window.cursor) == (2, 4)
        typed(ed, "<Tab>")  # on it: applies it
        assert ed.lines()[1] == "    return w * height" and signs(ed) == [FAR]
        typed(ed, "<Tab>")  # and on to the far one
        assert ed.nvim.current.window.cursor[0] == FAR + 1
        typed(ed, "u")  # one undo step: the accepted hunk only
        assert ed.lines()[:2] == ["def area(w, height):", "    return width * height"]
        # an undo is a change too: asked again, the same two hunks come back
        until(lambda: len(server.requests) == 2 and signs(ed) == [1, FAR], "asked again")
        ed.lua("require('agi').nes_dismiss()")
        assert not marks(ed) and ed.lines()[FAR] == SOURCE[FAR]
        ed.nvim.command("setlocal noexpandtab")
        typed(ed, "ggA<Tab><Esc>")  # nothing shown: <Tab> is a <Tab>
        assert ed.lines()[0] == "def area(w, height):\t"

    messages = body["messages"]
    assert messages[0]["role"] == "system" and "next edit" in messages[0]["content"]
    prompt = messages[-1]["content"]
    assert "User edited shapes.py:\n```diff\n@@ -1,4 +1,4 @@\n" in prompt, prompt
    assert "-def area(width, height):\n+def area(w, height):\n     return width" in prompt
    # the window with the region marked and the cursor where it is (on the `w` typed)
    assert f"```shapes.py\n<|start_of_file|>\n{START}\ndef area({CURSOR}w, height):\n" in prompt
    assert f"print(area(width=2, height=3))\n{END}\n```" in prompt
    assert "tools" not in body


@needs_nvim
def test_typing_cancels_the_request_and_stale_hunks_are_dropped_never_applied(editor, tmp_path):
    silent = {"kind": "silent"}
    answer = text(region(RENAMED[:1] + SOURCE[1:FAR] + RENAMED[FAR:]))
    with WatchedModel(silent, answer) as server:
        ed = start(editor, server, tmp_path)
        typed(ed, "ggfwcww<Esc>")
        assert server.answered.wait(10), "the first request never reached the server"
        assert ed.nvim.vars["agi_status"] == "agi: next edit…"
        typed(ed, "Ax<BS><Esc>")  # any change: the request in flight is cancelled
        assert server.closed.wait(10), "the server never saw the connection close"
        until(lambda: signs(ed) == [FAR], "the second request's hunk is shown")
        assert ed.nvim.vars["agi_status"] == ""
        assert len(server.requests) == 2
        assert "+def area(w, height):" in server.requests[1]["messages"][-1]["content"]
        ed.nvim.command("let b:agi_disable = v:true")
        typed(ed, f"{FAR + 1}GA # edited<Esc>")  # the hunk's line changes: it goes
        until(lambda: not marks(ed), "the stale hunk is dropped")
        assert not ed.lua("return require('agi').nes_accept()")
        assert ed.lines()[FAR] == SOURCE[FAR] + " # edited"
        ed.lua("vim.wait(200)")  # beyond the pause: b:agi_disable asks nothing
        assert len(server.requests) == 2
        ed.nvim.command("AgiNes off")
        assert ed.lua("return require('agi.suggest').config.nes") is False
        ed.nvim.command("AgiNes")  # toggles
        assert ed.lua("return require('agi.suggest').config.nes") is True


# counts the marks agi places for next edits
PLACED = """
_G.placed = 0
local set = vim.api.nvim_buf_set_extmark
vim.api.nvim_buf_set_extmark = function(buf, ns, ...)
  if ns == require('agi.nes').ns then _G.placed = _G.placed + 1 end
  return set(buf, ns, ...)
end
"""


@needs_nvim
def test_an_answer_like_the_one_shown_keeps_its_marks_and_keys_typed_ahead_go_first(
    editor, tmp_path
):
    silent = {"kind": "silent"}
    with WatchedModel(text(region(RENAMED)), text(region(RENAMED)), silent) as server:
        ed = start(editor, server, tmp_path)
        typed(ed, "ggfwcww<Esc>")
        until(lambda: len(signs(ed)) == 2, "two hunks are shown")
        before = marks(ed)
        ed.lua(PLACED)
        ed.lua("require('agi.nes')._fire()")  # asked again, the same answer
        until(lambda: len(server.requests) == 2, "asked again")
        until(lambda: ed.nvim.vars["agi_status"] == "", "the second answer is in")
        assert ed.lua("return _G.placed") == 0 and marks(ed) == before  # left as they were

        ed.lua("require('agi.nes')._fire()")  # a third request, which the server holds
        assert server.answered.wait(10), "the third request never reached the server"
        # its answer comes in while keys wait: they go first, and their change drops it
        ed.lua(
            "vim.api.nvim_feedkeys('Go# more', 'n', false)\n"
            "require('agi.nes')._event(3, {type = 'done', hunks = {\n"
            "  {start = 2, count = 1, lines = {'# blank no more'}, at = 'replace'}}})"
        )
        typed(ed, "<Esc>")
        assert ed.lines()[-1] == "# more"
        assert server.closed.wait(10), "the request was not cancelled"
        assert marks(ed) == before and ed.lua("return _G.placed") == 0  # nothing placed


@needs_nvim
def test_zeta_prompt_goes_to_completions_and_its_answer_comes_back_as_hunks(editor, tmp_path):
    reply = f"```shapes.py\n<|start_of_file|>\n{region(RENAMED)}\n```"
    with FakeModel(completion(reply)) as server:
        ed = start(editor, server, tmp_path, nes_format="zeta")
        typed(ed, "ggfwcww<Esc>")
        until(lambda: len(signs(ed)) == 2, "the hunks of Zeta's answer are shown")
        assert ed.lua("return require('agi').nes_accept_all()") == 2
        assert ed.lines() == RENAMED
        typed(ed, "u")  # both, one undo step
        assert ed.lines() == ["def area(w, height):", *SOURCE[1:]]
        ed.nvim.command("checkhealth agi")
        report = "\n".join(ed.lines())
    assert server.paths == ["/v1/completions"]
    body = server.requests[0]
    assert "messages" not in body and "suffix" not in body and body["stream"] is True
    assert "<|endoftext|>" in body["stop"]
    prompt = body["prompt"]
    assert prompt.startswith(
        "### Instruction:\nYou are a code completion assistant and your task is to analyze user "
        "edits and then rewrite an excerpt that the user provides, suggesting the appropriate "
        "edits within the excerpt, taking into account the cursor location.\n\n"
        "### User Edits:\n\nUser edited shapes.py:\n```diff\n@@ -1,4 +1,4 @@\n"
    ), prompt
    assert f"### User Excerpt:\n\n```shapes.py\n<|start_of_file|>\n{START}\n" in prompt
    assert prompt.endswith(f"{END}\n```\n\n### Response:\n\n"), prompt
    assert (
        "OK next-edit suggestions: on, zeta format, model openai:fake-model "
        f"(completions: POST {server.url}/completions)"
    ) in report, report


@needs_nvim
def test_diagnostics_go_with_a_refactor_and_agi_fix_previews_the_fix(editor):
    source = ["import os", "print(nmae)", "x = 1"]
    fixed = "```python\nprint(name)\n```"
    with FakeModel(text(fixed), text(fixed)) as server:
        ed = editor(server, setup={"apply": "preview"})
        ed.buffer(source)
        ed.lua(
            "local ns = vim.api.nvim_create_namespace('lint')\n"
            "vim.diagnostic.set(ns, 0, {\n"
            "  {lnum = 1, col = 6, message = \"undefined name 'nmae'\", source = 'pyflakes',\n"
            "   severity = vim.diagnostic.severity.ERROR},\n"
            "  {lnum = 0, col = 0, message = \"'os' imported but unused\", source = 'pyflakes',\n"
            "   severity = vim.diagnostic.severity.WARN},\n"
            "  {lnum = 2, col = 0, message = 'far away', severity = vim.diagnostic.severity.HINT,\n"
            "   end_lnum = 2},\n"
            "})"
        )
        ed.nvim.command("2AgiRefactor use f-strings")
        assert ed.done(1)[0]["status"] == "preview"
        ed.nvim.command("AgiReject")
        ed.nvim.current.window.cursor = (2, 0)
        ed.command("AgiFix")  # no range: the cursor's line
        events = ed.done(2)
        assert events[1]["status"] == "preview", events
        assert ed.lines() == source  # shown, not applied
        ed.nvim.command("AgiAccept")
        assert ed.lines() == ["import os", "print(name)", "x = 1"]
        ed.nvim.command("undo")
        assert ed.lines() == source  # one undo step
    refactor = server.requests[0]["messages"][-1]["content"]
    fix = server.requests[1]["messages"][-1]["content"]
    assert "Diagnostics the editor reports in and near those lines:" in refactor
    assert "- line 2: ERROR: undefined name 'nmae' (pyflakes)" in refactor
    assert "- line 1: WARN: 'os' imported but unused (pyflakes)" in refactor
    assert "- line 3: HINT: far away" in refactor
    assert fix.startswith("Fix the problems the editor reports in lines 2-2")
    assert "Diagnostics the editor reports to fix:" in fix
    assert "- line 2: ERROR: undefined name 'nmae' (pyflakes)" in fix


# --- the formats on their own ----------------------------------------------------------------

REQUEST = {
    "filename": "calc.py",
    "first": 3,
    "window": ["def add(a, b):", "    return a + b"],
    "original": ["def add(x, b):", "    return a + b"],
    "cursor": [3, 9],
    "history": ["@@ -4,2 +4,2 @@\n-def add(x, b):\n+def add(a, b):\n     return a + b\n"],
    "options": {"format": "sweep"},
}


def test_sweep_prompt_is_its_published_format():
    assert sweep_prompt(REQUEST) == (
        "<|file_sep|>calc.py.diff\noriginal:\ndef add(x, b):\n    return a + b\n"
        "updated:\ndef add(a, b):\n    return a + b\n"
        "<|file_sep|>original/calc.py\ndef add(x, b):\n    return a + b\n"
        "<|file_sep|>current/calc.py\ndef add(a, b):\n    return a + b\n"
        "<|file_sep|>updated/calc.py\n"
    )
    assert original_updated("@@ -1 +1 @@\n-a\n+b\n c") == ("a\nc", "b\nc")


def test_every_reader_turns_an_answer_into_hunks_of_the_window():
    window = REQUEST["window"]
    sweep = read_window("def add(a, b):\n    return a - b\n<|file_sep|>x", "sweep")
    assert hunks(3, window, sweep or []) == [
        {"start": 4, "count": 1, "lines": ["    return a - b"], "at": "replace"}
    ]
    zeta = read_window(
        f"```calc.py\n{START}\n{window[0]}\n    # sum\n{window[1]}\n{END}\n```", "zeta"
    )
    assert hunks(3, window, zeta or []) == [
        {"start": 3, "count": 1, "lines": ["    # sum"], "at": "below"}
    ]
    top = read_window(f"{START}\n# add\n{window[0]}\n{window[1]}\n{END}", "chat")
    assert hunks(3, window, top or []) == [
        {"start": 3, "count": 1, "lines": ["# add"], "at": "above"}
    ]
    assert read_window(f"{START}\n{window[0]}\n", "chat") is None  # cut short: nothing
    assert read_window(f"{START}\n{window[0]}{CURSOR}\n{END}", "zeta") == [window[0]]
    assert f"def add(a, b{CURSOR}" not in excerpt(REQUEST)  # row 3 col 9 is after "def add(a"
    assert f"def add(a{CURSOR}, b):" in excerpt(REQUEST)
