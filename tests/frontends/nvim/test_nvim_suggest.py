"""Inline suggestions (issue 20): a real headless Neovim with agi's Lua side and remote plugin,
keys fed with nvim_input, against the scripted server's fill-in-the-middle routes; and the
request shapes of agi.providers.fim on their own."""

from __future__ import annotations

import time
from typing import Any

import pytest
import test_nvim
from test_nvim import WatchedModel, needs_nvim, until

from agi.options.config import ModelConfig
from agi.providers.fim import Completer, choose, endpoint, from_chat, tidy

from fakeserver import FakeModel, completion, fim, infill, status, text

editor, manifest = test_nvim.editor, test_nvim.manifest  # its fixtures

BUFFER = ["def add(a, b):", "", "print(add(1, 2))"]
PREFIX = "def add(a, b):\n    return "
SUFFIX = "\nprint(add(1, 2))"
ANSWERED = "    return a + b"


def start(editor: Any, server: FakeModel | None, **suggest: Any) -> Any:
    """A Neovim with suggestions on, the host warmed up, BUFFER in a Python buffer."""
    options = {"enabled": True, "debounce_ms": 80, **suggest}
    ed = editor(server, setup={"suggest": options})
    until(ed.host_running, "the Python host is up (warmed after startup)")
    ed.buffer(BUFFER)
    ed.nvim.current.window.cursor = (2, 0)
    return ed


def ghost(ed: Any) -> str | None:
    """The suggestion text shown, as Lua knows it."""
    return ed.lua("return require('agi.suggest').visible()")


def marks(ed: Any) -> list[Any]:
    return ed.lua(
        "return vim.api.nvim_buf_get_extmarks(0, vim.api.nvim_create_namespace('agi-suggest'),"
        " 0, -1, {details = true})"
    )


def typed(ed: Any, keys: str) -> None:
    ed.nvim.input(keys)
    ed.nvim.eval("1")  # a round trip: the keys before it are in


class StaleModel(WatchedModel):
    """`{"kind": "stale", "frames": [...]}`: those frames at once, then silence until the client
    hangs up (`closed`); `answered` is set when they are out."""

    def _handler(self) -> Any:
        base = super()._handler()
        fake = self

        class Handler(base):  # type: ignore[misc, valid-type]
            def play(self, step: Any) -> None:
                if step["kind"] != "stale":
                    return super().play(step)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                for frame in step["frames"]:
                    self.wfile.write(frame)
                self.wfile.flush()
                fake.answered.set()
                self.connection.settimeout(30)
                if self.connection.recv(1) == b"":
                    fake.closed.set()

        return Handler


# --- the acceptance criteria, in a real Neovim ---------------------------------------------


@needs_nvim
@pytest.mark.parametrize(
    ("shape", "step", "path"),
    [
        ("completions", completion("a + b"), "/v1/completions"),
        ("infill", infill("a + b"), "/infill"),
        ("chat", text("```python\n    return a + b\n```"), "/v1/chat/completions"),
    ],
)
def test_typing_then_a_pause_asks_once_shows_ghost_text_and_tab_takes_it(editor, shape, step, path):
    with FakeModel(step) as server:
        ed = start(editor, server, fim=shape)
        typed(ed, "i    return ")
        until(lambda: ghost(ed) == "a + b", "the suggestion is shown")
        (mark,) = marks(ed)
        assert ed.lines() == ["def add(a, b):", "    return ", "print(add(1, 2))"]  # not in it
        assert mark[1:3] == [1, 11]  # at the cursor
        assert mark[3]["virt_text"] == [["a + b", "AgiSuggestion"]]
        assert mark[3]["virt_text_pos"] == "inline"
        assert ed.lua("return vim.api.nvim_get_hl(0, {name = 'AgiSuggestion'}).link") == "Comment"
        assert len(server.requests) == 1 and server.paths == [path]
        body = server.requests[0]
        typed(ed, "<Tab>")
        until(lambda: ed.lines()[1] == ANSWERED, "<Tab> inserted the suggestion")
        assert tuple(ed.nvim.current.window.cursor) == (2, len(ANSWERED))
        typed(ed, "<Esc>u")
        until(lambda: ed.lines() == BUFFER, "one u removed it, with the text typed before it")
    if shape == "completions":
        assert body["prompt"] == PREFIX and body["suffix"] == SUFFIX
        assert (
            body["model"] == "fake-model" and body["stream"] is True and body["max_tokens"] == 128
        )
    elif shape == "infill":
        assert body["input_prefix"] == PREFIX and body["input_suffix"] == SUFFIX
        assert body["n_predict"] == 128 and body["stream"] is True
    else:
        prompt = body["messages"][-1]["content"]
        assert PREFIX + "<|cursor|>" + SUFFIX in prompt and "python" in prompt
        assert "tools" not in body


@needs_nvim
def test_typing_on_cancels_the_request_and_its_text_never_shows(editor):
    stale = {"kind": "stale", "frames": completion("STALE TEXT", pieces=2)["frames"][:1]}
    with StaleModel(stale, completion(" + 1")) as server:
        ed = start(editor, server, fim="completions")
        typed(ed, "i    return x")
        assert server.answered.wait(10), "the first request never reached the server"
        until(lambda: ghost(ed) == "STALE", "its first piece is shown")  # streamed in
        typed(ed, "y")  # differs: dismisses, and the request in flight is cancelled
        assert ghost(ed) is None
        # a hang guard, far short of the server's 30 s of silence
        assert server.closed.wait(10), "the server never saw the connection close"
        seen = []
        until(lambda: seen.append(ghost(ed)) or seen[-1] == " + 1", "the second suggestion")
    assert not any(s and "STALE" in s for s in seen), seen
    assert [r["prompt"] for r in server.requests] == [PREFIX + "x", PREFIX + "xy"]


@needs_nvim
def test_tab_without_a_suggestion_is_a_tab(editor):
    with FakeModel(completion("never asked")) as server:
        ed = start(editor, server, debounce_ms=60_000)
        ed.nvim.command("setlocal noexpandtab")
        typed(ed, "i<Tab>x<Esc>")
        until(lambda: ed.lines()[1] == "\tx", "a real Tab")
        assert not server.requests and not marks(ed)


@needs_nvim
def test_dismiss_and_typing_the_suggested_characters(editor):
    with FakeModel(completion("a + b")) as server:
        ed = start(editor, server, fim="completions", debounce_ms=150)
        typed(ed, "i    return <Cmd>AgiSuggest<CR>")  # at once, not after the pause
        until(lambda: ghost(ed) == "a + b", "the suggestion is shown")
        typed(ed, "<C-]>")
        assert ghost(ed) is None and not marks(ed)
        assert ed.lines()[1] == "    return "
        time.sleep(0.4)  # longer than the pause: <C-]> asks for nothing
        assert len(server.requests) == 1

        typed(ed, "<Cmd>AgiSuggest<CR>")  # the same text before the cursor: from the cache
        until(lambda: ghost(ed) == "a + b", "the suggestion is shown again")
        typed(ed, "a +")
        assert ghost(ed) == " b"
        (mark,) = marks(ed)
        assert mark[1:3] == [1, 14] and mark[3]["virt_text"] == [[" b", "AgiSuggestion"]]
        typed(ed, "<BS>")  # back into the suggestion: more of it shows again
        assert ghost(ed) == "+ b"
        typed(ed, "+<Left><Right>")  # the cursor moved: dropped; the pause then finds it cached
        until(lambda: ghost(ed) == " b", "the rest is shown again")
        time.sleep(0.4)
        assert len(server.requests) == 1  # none of that asked the model again
        typed(ed, "<Tab><Esc>")
        assert ed.lines()[1] == ANSWERED


@needs_nvim
def test_accept_a_word_a_line_and_virtual_lines_below(editor):
    reply = "a + b\n\nprint(add(2, 3))"
    with FakeModel(completion(reply)) as server:
        ed = start(editor, server, fim="completions")
        typed(ed, "i    return ")
        until(lambda: ghost(ed) == reply, "the suggestion is shown")
        (mark,) = marks(ed)
        assert mark[3]["virt_text"] == [["a + b", "AgiSuggestion"]]
        assert mark[3]["virt_lines"] == [
            [["", "AgiSuggestion"]],
            [["print(add(2, 3))", "AgiSuggestion"]],
        ]
        typed(ed, "<M-Right>")
        until(lambda: ed.lines()[1] == "    return a", "a word")
        assert ghost(ed) == reply[1:]
        typed(ed, "<M-Right>")
        until(lambda: ed.lines()[1] == "    return a +", "the next word")
        typed(ed, "<M-Down>")
        until(lambda: ed.lines()[1] == ANSWERED, "the rest of the line")
        assert ghost(ed) == "\n\nprint(add(2, 3))"
        typed(ed, "<M-Down>")
        until(lambda: len(ed.lines()) == 5, "the next lines")
        assert ed.lines() == [*BUFFER[:1], ANSWERED, "", "print(add(2, 3))", BUFFER[2]]
        typed(ed, "<Esc>u")
        until(lambda: ed.lines() == BUFFER, "one undo step for all of it")
        assert len(server.requests) == 1


@needs_nvim
def test_agi_suggest_in_normal_mode_offers_the_line_below(editor):
    with FakeModel(completion(ANSWERED)) as server:
        ed = start(editor, server, fim="completions", enabled=False)
        ed.nvim.current.window.cursor = (1, 3)
        ed.command("AgiSuggest")
        until(lambda: ghost(ed) == "\n" + ANSWERED, "the suggestion is shown")
        (mark,) = marks(ed)
        assert mark[1:3] == [0, len(BUFFER[0])]
        assert mark[3]["virt_lines"] == [[[ANSWERED, "AgiSuggestion"]]]
        assert "virt_text" not in mark[3]
        body = server.requests[0]
        assert body["prompt"] == BUFFER[0] + "\n" and body["suffix"] == "\n".join(BUFFER[1:])
        typed(ed, "<Tab>")
        until(lambda: len(ed.lines()) == 4, "accepted")
        assert ed.lines() == [BUFFER[0], ANSWERED, *BUFFER[1:]]
        assert ed.nvim.current.window.cursor[0] == 2
        typed(ed, "u")
        until(lambda: ed.lines() == BUFFER, "one undo step")
        ed.nvim.current.window.cursor = (1, 0)
        ed.command("AgiSuggest")  # the same text around: from the cache
        until(lambda: ghost(ed) == "\n" + ANSWERED, "the suggestion is shown again")
        typed(ed, "o")  # the new line and its indent are what it suggests: the rest stays
        assert ed.lines()[1] == "    " and ghost(ed) == "return a + b"
        typed(ed, "<Tab><Esc>")
        assert ed.lines() == [BUFFER[0], ANSWERED, *BUFFER[1:]]
        assert len(server.requests) == 1


@needs_nvim
def test_the_context_sent_is_bounded(editor):
    with FakeModel(completion("x")) as server:
        ed = start(editor, server, fim="completions", context_lines=2)
        ed.buffer([f"line {i}" for i in range(1, 11)])
        ed.nvim.current.window.cursor = (5, 4)
        typed(ed, "a<Cmd>AgiSuggest<CR>")
        until(lambda: server.requests, "the request")
    body = server.requests[0]
    assert body["prompt"] == "line 3\nline 4\nline " and body["suffix"] == "5\nline 6\nline 7"


@needs_nvim
def test_no_suggestions_where_they_do_not_belong(editor):
    with FakeModel(completion("x")) as server:
        ed = start(editor, server, filetypes={"markdown": False}, max_filesize=4096)
        ed.nvim.command("setlocal filetype=markdown")
        typed(ed, "ihello<Esc>")
        time.sleep(0.4)
        refused = "return require('agi.suggest').trigger()"
        assert ed.lua(refused) is None and "filetype markdown" in ed.messages()
        ed.buffer(["x = 1"] * 1000)  # 6000 bytes
        typed(ed, "Goy<Esc>")
        time.sleep(0.4)
        assert ed.lua(refused) is None and "max_filesize" in ed.messages()
        ed.nvim.command("enew | setlocal buftype=prompt")
        typed(ed, "ihello<Esc>")
        time.sleep(0.4)
        assert ed.lua(refused) is None
        ed.buffer(["x = 1"])
        ed.nvim.command("let b:agi_disable = v:true")
        typed(ed, "Ay<Esc>")
        time.sleep(0.4)
        assert ed.lua(refused) is None
        assert not server.requests
        only_python = {"enabled": True, "filetypes": {"*": False, "python": True}}
        ed.lua("require('agi').setup({suggest = ...})", only_python)  # an allowlist
        ed.buffer(["x"], filetype="text")
        assert ed.lua(refused) is None
        ed.buffer(["x"], filetype="python")
        assert ed.lua(refused) is not None


@needs_nvim
def test_a_slow_server_never_delays_typing(editor):
    """Every pause asks a server that takes a minute to answer, and typing goes on: a keystroke
    that waited for it would trip the hang guard (how fast keys are is bench/nvim_suggest.py's)."""
    words = ["total", "=", "sum(values)", "#", "the", "numbers", "added", "up"]
    with FakeModel(completion("late", delay=60.0, pieces=1)) as server:
        ed = start(editor, server, fim="completions", debounce_ms=50)
        ed.nvim.input("i")
        worst, started = 0.0, time.monotonic()
        for word in words:
            for ch in word + " ":
                t = time.perf_counter()
                ed.nvim.input(ch)
                assert ed.nvim.eval("1") == 1
                worst = max(worst, time.perf_counter() - t)
            time.sleep(0.12)  # a pause: a request starts, and the next key cancels it
        took = time.monotonic() - started
        assert ed.lines()[1] == " ".join(words) + " "
        until(lambda: server.requests, "a pause asked the slow server")
    print(
        f"\n{sum(len(w) + 1 for w in words)} keys in {took:.2f} s, worst key: {worst * 1000:.1f} ms"
    )
    assert took < 30, f"{took:.1f} s"  # a hang guard: about 1.5 s expected, 60 s per answer


@needs_nvim
def test_a_failing_model_shows_once_in_the_status_not_as_messages(editor):
    body = {"error": {"message": "model 'fake-model' not found"}}
    with FakeModel(status(404, body)) as server:
        ed = start(editor, server, fim="completions")
        typed(ed, "i    return ")
        until(lambda: "suggestion failed" in (ed.nvim.vars.get("agi_status") or ""), "the status")
        assert "not found" in ed.nvim.vars["agi_status"]
        assert "not found" not in ed.messages()
        assert ed.lines()[1] == "    return " and ghost(ed) is None
        assert len(server.requests) == 1  # a 404 is not retried


@needs_nvim
def test_bad_suggest_options_are_agi_errors(editor):
    ed = editor(None, setup={"warmup": False})
    before = ed.nvim.call("maparg", "<Tab>", "i")  # Neovim's own (snippets), if any
    for bad in ("{suggest = {fim = 'fast'}}", "{suggest = {debounce_ms = -1}}", "{suggest = 1}"):
        message = ed.lua(
            f"local ok, err = pcall(require('agi').setup, {bad}); return tostring(err)"
        )
        assert message.startswith("(agi) `suggest"), message
    ed.lua("require('agi').setup({suggest = {enabled = true, keys = {accept_word = false}}})")
    assert ed.nvim.call("maparg", "<Tab>", "i") != ""
    assert ed.nvim.call("maparg", "<M-Right>", "i") == ""
    ed.lua("require('agi').setup({})")  # off again: the keys are as they were
    assert ed.nvim.call("maparg", "<Tab>", "i") == before


@needs_nvim
def test_tab_falls_through_to_the_mapping_it_replaced(editor):
    ed = editor(None, setup={"warmup": False})
    ed.lua("vim.keymap.set('i', '<Tab>', function() return 'TAB' end, {expr = true})")
    ed.lua("require('agi').setup({suggest = {enabled = true, debounce_ms = 60000}})")
    ed.buffer([""])
    typed(ed, "i<Tab><Esc>")
    until(lambda: ed.lines() == ["TAB"], "the earlier mapping ran")


# --- the request shapes, without Neovim -----------------------------------------------------


def model(url: str, provider: str = "openai") -> ModelConfig:
    return ModelConfig(provider, "coder", url)


def ask(server: FakeModel, fim_choice: str, provider: str = "openai", **more: Any) -> list[str]:
    shown: list[str] = []
    request = {"prefix": PREFIX, "suffix": SUFFIX, "filetype": "python", **more}
    request["options"] = {"fim": fim_choice, "model": f"{provider}:coder", "base_url": server.url}
    shown.append(Completer().complete(request, shown.append, lambda t: None))
    return shown


def test_each_shape_reaches_its_endpoint_and_streams(monkeypatch, tmp_path):
    monkeypatch.setenv("AGI_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("AGI_HOME", str(tmp_path / "home"))
    for var in ("AGI_MODEL", "AGI_BASE_URL", "AGI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with FakeModel(fim("a + b", pieces=3)) as server:
        (tmp_path / "config.toml").write_text(f'[providers.mistral]\nbase_url = "{server.url}"\n')
        assert ask(server, "completions")[-1] == "a + b"
        assert ask(server, "infill")[-1] == "a + b"
        assert ask(server, "auto", provider="mistral")[-1] == "a + b"
        shown = ask(server, "auto", provider="ollama")
    assert shown == ["a", "a +", "a + b", "a + b"]  # the text so far as it streams, then all
    assert server.paths == ["/v1/completions", "/infill", "/v1/fim/completions", "/v1/completions"]
    mistral = server.requests[2]
    assert mistral["prompt"] == PREFIX and mistral["suffix"] == SUFFIX


def test_auto_chooses_by_provider():
    assert choose("auto", model("http://localhost:11434/v1", "ollama")) == "completions"
    assert choose("auto", model("https://api.deepseek.com/v1", "deepseek")) == "completions"
    assert choose("auto", model("http://localhost:8080/v1", "llamacpp")) == "infill"
    assert choose("auto", model("https://codestral.mistral.ai/v1", "codestral")) == "mistral"
    assert choose("auto", model("https://api.openai.com/v1")) == "chat"
    assert choose("infill", model("https://api.openai.com/v1")) == "infill"
    deepseek = model("https://api.deepseek.com/v1", "deepseek")
    assert endpoint("completions", deepseek) == "https://api.deepseek.com/beta/completions"
    assert endpoint("infill", model("http://127.0.0.1:8080/v1")) == "http://127.0.0.1:8080/infill"


def test_a_chat_reply_gives_only_the_inserted_text():
    line = "    return "
    assert from_chat("```python\n    return a + b\n```\nThat adds them.", line, True) == "a + b"
    assert from_chat("a + b", line, True) == "a + b"
    assert from_chat("return a + b", line, True) == "a + b"  # the line again, less indented
    assert from_chat("```py", line, False) == ""  # may still be a fence: nothing yet
    assert from_chat("```py\n    ret", line, False) == ""  # may still be the line again
    assert from_chat("a + b<|cursor|>", line, True) == "a + b"
    assert tidy("a + b\r\n\r\n", "", 16) == ("a + b", False)
    assert tidy("f(x)", ")\nmore", 16) == ("f(x", False)  # what follows the cursor already
    assert tidy("1\n2\n3", "", 2) == ("1\n2", True)
