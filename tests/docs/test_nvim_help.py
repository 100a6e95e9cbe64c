"""`:help agi` (doc/agi.txt) documents what the Lua side offers: every public function of
lua/agi/*.lua and every user command the plugin creates has a *tag*."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HELP = REPO / "doc" / "agi.txt"
FUNCTION = re.compile(r"^\s*(?:M\.(\w+)\s*=\s*function\b|function\s+M\.(\w+)\s*\()", re.M)
# nvim_create_user_command('AgiX', ...), or plugin/agi.lua's `command('AgiX', ...)` around it
COMMAND = re.compile(r"""\b(?:nvim_create_user_command|command)\(\s*['"](Agi\w*)['"]""")


def tags() -> set[str]:
    return set(re.findall(r"\*([^*\s|]+)\*", HELP.read_text(encoding="utf-8")))


def public_functions() -> list[str]:
    """`agi.NAME()` for lua/agi/init.lua, `agi.MODULE.NAME()` for the others; names that start
    with `_` are the plugin's own."""
    found = []
    for path in sorted((REPO / "lua" / "agi").glob("*.lua")):
        module = "agi" if path.stem == "init" else f"agi.{path.stem}"
        for a, b in FUNCTION.findall(path.read_text(encoding="utf-8")):
            if not (a or b).startswith("_"):
                found.append(f"{module}.{a or b}()")
    return found


def user_commands() -> list[str]:
    lua = [*(REPO / "lua").rglob("*.lua"), *(REPO / "plugin").rglob("*.lua")]
    return sorted({f":{m}" for p in lua for m in COMMAND.findall(p.read_text(encoding="utf-8"))})


def test_the_readers_find_what_they_should():
    functions, commands = public_functions(), user_commands()
    assert {"agi.setup()", "agi.refactor()", "agi.suggest.trigger()"} <= set(functions)
    assert not any("._" in f for f in functions)
    assert {":AgiRefactor", ":AgiImplement", ":AgiRewind", ":AgiModel"} <= set(commands)
    sample = "function M.open(x) end\nM.close = function() end\nlocal f = function() end\n"
    assert [a or b for a, b in FUNCTION.findall(sample)] == ["open", "close"]
    assert COMMAND.findall("vim.api.nvim_create_user_command('AgiX', f, {})") == ["AgiX"]


def test_every_public_lua_function_has_a_help_tag():
    missing = [f for f in public_functions() if f not in tags()]
    assert not missing, "doc/agi.txt has no *tag* for:\n" + "\n".join(missing)


def test_every_user_command_has_a_help_tag():
    missing = [c for c in user_commands() if c not in tags()]
    assert not missing, "doc/agi.txt has no *tag* for:\n" + "\n".join(missing)
