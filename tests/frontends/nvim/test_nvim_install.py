"""A plain install, as a new user's first hour goes: `:help agi` without a help-tags step,
`:AgiModel` saying which model the next request uses, and `:checkhealth agi`'s help links. A
real headless Neovim with a copy of the plugin (lua/, plugin/, doc/agi.txt, rplugin/; no
doc/tags), so nothing is written into the checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import test_nvim
from test_nvim import REPO, editor, manifest, needs_nvim, until  # noqa: F401  (fixtures)

from fakeserver import FakeModel, text


@pytest.fixture
def plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the plugin as a clone or a plugin manager leaves it: no doc/tags. Neovims the
    `editor` fixture starts load it instead of the checkout."""
    root = tmp_path / "plain"
    for part in ("lua", "plugin", "rplugin"):
        shutil.copytree(REPO / part, root / part, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "doc").mkdir()
    shutil.copy(REPO / "doc" / "agi.txt", root / "doc")
    base = test_nvim.nvim_env

    def with_copy(home: Any, python: str) -> dict[str, str]:
        return {**base(home, python), "AGI_TEST_REPO": str(root)}

    monkeypatch.setattr(test_nvim, "nvim_env", with_copy)
    return root


def help_tag(ed: Any) -> str:
    """The tag under the cursor in the help window `:help` opened."""
    line = ed.nvim.current.line
    col = ed.nvim.current.window.cursor[1]
    return re.search(r"\*([^*\s]+)\*", line[col:] or line)[1]


@needs_nvim
def test_help_agi_works_after_a_plain_install(plain, editor):  # noqa: F811
    assert not (plain / "doc" / "tags").exists()
    ed = editor(None, registered=False)
    until(lambda: (plain / "doc" / "tags").exists(), "the plugin makes the help tags")
    ed.command("help agi")
    assert ed.nvim.current.buffer.name == str(plain / "doc" / "agi.txt")
    assert help_tag(ed) == "agi"
    ed.command("help :AgiModel")
    assert help_tag(ed) == ":AgiModel"


@needs_nvim
def test_stale_help_tags_are_made_again(plain, editor):  # noqa: F811
    tags = plain / "doc" / "tags"
    tags.write_text("agi\tagi.txt\t/*agi-gone*\n")
    os.utime(tags, (1_000_000_000, 1_000_000_000))  # older than doc/agi.txt
    ed = editor(None, registered=False)
    until(lambda: ":AgiRefactor" in tags.read_text(), "the plugin makes the help tags again")
    ed.command("help agi")
    assert help_tag(ed) == "agi"


@needs_nvim
def test_agi_model_shows_the_model_the_next_request_uses(editor):  # noqa: F811
    with FakeModel(text("ok")) as server:  # AGI_MODEL=fake-model, AGI_BASE_URL=server.url
        ed = editor(server, setup={"warmup": False})  # the host has said nothing yet
        assert not ed.host_running()
        ed.command("AgiModel")
        until(lambda: "model: openai:fake-model (agi's configuration)" in ed.messages(), "it")
        assert "decides" not in ed.messages()
        assert ed.lua("return require('agi').model()") == "openai:fake-model"
        ed.lua("require('agi').setup({model = 'ollama:qwen3'})")
        ed.command("AgiModel")
        assert "model: ollama:qwen3 (set in this Neovim)" in ed.messages()


@needs_nvim
def test_agi_model_without_any_model_says_how_to_set_one(editor):  # noqa: F811
    ed = editor(None, setup={"warmup": False})
    ed.command("AgiModel")
    until(lambda: "no model configured" in ed.messages(), "the host's answer")
    assert "set AGI_MODEL or model in config.toml, or :AgiModel NAME" in ed.messages()


@needs_nvim
def test_every_help_link_of_checkhealth_opens_its_help(plain, editor):  # noqa: F811
    ed = editor(None, python="/nonexistent/python3", registered=False)
    until(lambda: (plain / "doc" / "tags").exists(), "the plugin makes the help tags")
    ed.nvim.command("checkhealth agi")
    report = "\n".join(ed.lines())
    assert "see :help |agi-install|" in report, report  # the advice for a host that cannot run
    links = re.findall(r"\|([^|\s]+)\|", report)
    for link in links:
        ed.nvim.command(f"help {link}")  # E149 for a tag no help file has
        assert help_tag(ed) == link, link


LUA_PROBE = """
vim.opt.runtimepath:prepend(_G.arg[1])
local modules = {}
for _, path in ipairs(vim.fn.glob(_G.arg[1] .. '/lua/agi/*.lua', false, true)) do
  table.insert(modules, 'agi.' .. vim.fn.fnamemodify(path, ':t:r'))
end
local before = #vim.api.nvim_get_autocmds({})
for _, name in ipairs(modules) do require(name) end
local created = #vim.api.nvim_get_autocmds({}) - before
require('agi').setup()
local exported = {}
for name, value in pairs(require('agi.request')) do
  if type(value) ~= 'function' then table.insert(exported, name) end
end
io.stdout:write(vim.json.encode({
  modules = modules,
  at_require = created,
  at_setup = #vim.api.nvim_get_autocmds({ group = 'agi' }),
  exported = exported,
}))
"""


@needs_nvim
def test_requiring_the_lua_modules_creates_no_autocommand_and_setup_does(tmp_path):
    """Every module of lua/agi is required in a Neovim without plugins: no autocommand exists
    until `setup` (plugin/agi.lua calls it at startup when the user's config has not); and
    lua/agi/request.lua exports functions only, no state."""
    probe = tmp_path / "probe.lua"
    probe.write_text(LUA_PROBE)
    done = subprocess.run(
        [test_nvim.NVIM, "--headless", "--clean", "-l", str(probe), str(REPO)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert {"agi.init", "agi.request", "agi.suggest", "agi.util"} <= set(found["modules"]), found
    assert found["at_require"] == 0, found
    assert found["at_setup"] == 2, found  # BufUnload and ColorScheme in the group "agi"
    assert found["exported"] == [], found
