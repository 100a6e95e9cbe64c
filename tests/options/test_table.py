"""The option table (agi/options/table.py) is the one place an option is written: the flags of
`agi --help`, the config file's keys, the `Options` fields, the front ends' fields and the
generated reference pages (docs/reference/options.md, the man page agi.1) all follow it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agi.errors import ConfigError, UsageError
from agi.options.config import FILE_KEYS, load_file, resolve_model
from agi.options.table import BY_NAME, KEYWORDS, OPTIONS
from agi.options.values import LISTS, NAMES, Options, env_layer, file_layer, layer_from_kwargs
from agi.options.values import resolve as lay

from fakeserver import FakeModel, text

ROOT = Path(__file__).resolve().parents[2]
FLAGS = {flag for o in OPTIONS for flag in o.flags}


def help_flags(text_: str) -> set[str]:
    """The flags `agi --help` lists in its groups of options (each line's leading flags)."""
    section = text_[text_.index("\npositional arguments:\n") :]
    found = set()
    for line in section.splitlines():
        match = re.match(r"\s{2}(-[^ ].*?)(?:\s{2,}|$)", line)
        if match:
            found |= set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", match.group(1)))
    return found


# ---------------------------------------------------------------- the command line


def test_every_flag_of_help_is_in_the_table_and_every_row_is_in_help(agi):
    r = agi("--help")
    assert r.returncode == 0, r.stderr
    listed = help_flags(r.stdout)
    assert len(listed) > 50, listed  # the parse is real
    assert listed - FLAGS == set(), "flags of --help that the table lacks"
    assert FLAGS - listed == set(), "rows of the table that --help does not show"


def test_help_shows_each_rows_help_and_metavar(agi):
    r = agi("--help", extra_env={"COLUMNS": "200"})
    flat = " ".join(r.stdout.split())
    for option in OPTIONS:
        if option.flags:
            assert " ".join(option.help.split()) in flat, option.name
        if option.metavar and option.kind == "value" and not option.spelling:
            assert f"{option.flags[-1]} {option.metavar}" in r.stdout, option.name


def sample(option) -> tuple[list[str], object]:
    """A flag's words and the config value that says the same."""
    if option.kind == "switch":
        return [option.flags[-1]], option.given
    if option.choices:
        return [option.flags[-1], option.choices[-1]], option.choices[-1]
    if option.type in ("int", "float"):
        return [option.flags[-1], "3"], 3
    if option.kind == "list":
        return [option.flags[-1], "x", option.flags[-1], "y"], ["x", "y"]
    return [option.flags[-1] + "=x"], "x"


def plain(options: Options) -> dict:
    values = {name: getattr(options, name) for name in NAMES}
    tools = values["tools"]
    values["tools"] = tools and (tools.allow, tools.builtin, tools.none)
    return values


@pytest.mark.parametrize("name", sorted(o.name for o in OPTIONS if o.option and o.flags))
def test_a_flag_and_its_config_key_say_the_same(name, tmp_path):
    """`--no-checkpoints` is `checkpoints = false`, `--sys x --sys y` is `sys = ["x", "y"]`:
    the command line's layer and the file's hold the same options."""
    from agi.frontends.cli.flags import build_parser, flags_layer, rewrite

    words, value = sample(BY_NAME[name])
    flags = flags_layer(build_parser().parse_args(rewrite(words)))
    file = file_layer({name: value}, tmp_path / "config.toml")
    assert plain(flags.options) == plain(file.options)
    field = BY_NAME[name].field
    assert flags.where(field) == (BY_NAME[name].flags[-1] if field != "tools" else "--tools")


def test_an_error_about_a_flag_names_the_flag_the_table_gives(agi, tmp_path):
    with FakeModel(text("never")) as server:
        r = agi("--sys", str(tmp_path / "absent.md"), "hi", server=server)
    assert r.returncode == 2
    assert r.stderr.startswith("agi: --sys: cannot read"), r.stderr
    assert server.requests == []


# ---------------------------------------------------------------- the config file


def test_the_config_checks_are_the_tables_options():
    assert set(FILE_KEYS) == {o.name for o in OPTIONS if o.option}
    assert all(FILE_KEYS[o.name] is o.check for o in OPTIONS if o.option)


@pytest.mark.parametrize("name", sorted(FILE_KEYS))
def test_every_config_key_is_checked_with_the_tables_words(tmp_path, name):
    """A value of the wrong kind is refused, naming the key and saying what it may be."""
    option = BY_NAME[name]
    path = tmp_path / "config.toml"
    wrong = "1" if option.check[1].startswith("a table") else "{ wrong = 1 }"
    path.write_text(f"{name} = {wrong}\n")
    with pytest.raises(ConfigError) as e:
        load_file(path)
    assert str(e.value).startswith(f"config file {path}: {name} must be {option.check[1]}, not ")


def test_a_key_the_table_lacks_is_unknown(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("session = 'somewhere'\n")  # a flag of the command line, not a config key
    with pytest.raises(ConfigError, match="unknown setting 'session'"):
        load_file(path)


# ---------------------------------------------------------------- Options and the layers


def test_the_options_fields_are_the_tables():
    assert set(NAMES) == {o.field for o in OPTIONS if o.field}
    annotations = Options.__annotations__
    for option in OPTIONS:
        if option.field == option.name:
            assert annotations[option.name] == f"{option.type} | None", option.name
    assert {o.name for o in OPTIONS if o.type == "list[str]" and o.field == o.name} == LISTS


def test_the_front_ends_fields_are_the_tables():
    """Batch jobs and MCP calls take the options the table says they take (`fronts`)."""
    from agi.frontends.batch.jobs import FIELDS
    from agi.frontends.mcp.call import PARSERS

    for front, fields in (("batch", set(FIELDS) - {"id"}), ("mcp", set(PARSERS) - {"cwd"})):
        rows = {o.name for o in OPTIONS if front in o.fronts}
        assert fields - {"prompt"} == rows, front


def test_keyword_arguments_make_a_layer_as_the_config_file_would():
    layer = layer_from_kwargs(
        "agi.run",
        model="local:m",
        max_steps=3,
        sys=Path("terse.md"),
        tools=("Read",),
        no_bash=True,
        schema={"type": "object"},
        ask_rules=["Bash(git push:*)"],
        timeout=None,  # says nothing
    )
    o = layer.options
    assert (o.model, o.max_steps, o.sys, o.schema) == (
        "local:m",
        3,
        ["terse.md"],
        '{"type": "object"}',
    )
    assert o.tools is not None and (o.tools.allow, o.tools.builtin) == (("Read",), False)
    assert o.ask == ["Bash(git push:*)"] and o.timeout is None
    assert layer.where("ask") == "agi.run: ask_rules"
    assert layer.where("max_steps") == "agi.run: max_steps"
    assert set(KEYWORDS) == {o.keyword for o in OPTIONS if o.option}


def test_keyword_arguments_are_checked_and_unknown_ones_refused():
    with pytest.raises(UsageError, match=r"^agi.run: max_steps must be a positive integer, not 0$"):
        layer_from_kwargs("agi.run", max_steps=0)
    with pytest.raises(UsageError, match="sandbox must be one of off, read-only, workspace"):
        layer_from_kwargs("agi.run", sandbox="everything")
    with pytest.raises(TypeError, match="unknown option 'colour'"):
        layer_from_kwargs("agi.run", colour="red")
    with pytest.raises(TypeError, match="unknown option 'ask'"):  # ask= is the API's function
        layer_from_kwargs("agi.run", ask=["Bash"])


def test_a_keyword_layer_replaces_the_file_and_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text('max_steps = 5\ntools = "Bash,Read"\napi_key = "sk-file"\n')
    monkeypatch.setenv("AGI_API_KEY", "sk-env")
    monkeypatch.setenv("AGI_MODEL", "local:env-model")
    file = file_layer(load_file(path), path)
    call = layer_from_kwargs("agi.run", max_steps=7, tools=(), api_key="sk-call")
    r = lay([file, env_layer(), call])
    assert r.options.max_steps == 7 and r.options.tools is not None
    assert r.options.tools.allow == () and r.where("max_steps") == "agi.run: max_steps"
    assert r.options.model == "local:env-model" and r.where("model") == "AGI_MODEL"
    extra = {"providers": {"local": {"base_url": "http://127.0.0.1:9/v1"}}}
    with_file = file_layer({**load_file(path), **extra}, path)
    assert resolve_model(lay([with_file, env_layer(), call]), path).api_key == "sk-call"
    assert resolve_model(lay([with_file, env_layer()]), path).api_key == "sk-env"
    monkeypatch.delenv("AGI_API_KEY")
    assert resolve_model(lay([with_file, env_layer()]), path).api_key == "sk-file"
    monkeypatch.setenv("AGI_API_KEY", "sk-env")  # a run without the environment's layer
    hermetic = layer_from_kwargs("agi.run", model="local:m")  # (isolated) does not read it
    assert resolve_model(lay([with_file, hermetic]), path).api_key == "sk-file"


def test_the_tables_defaults_are_what_a_run_gets(tmp_path, monkeypatch):
    from agi.options.settings import Settings
    from agi.process import STDIN_LIMIT

    monkeypatch.setenv("AGI_CONFIG", str(tmp_path / "absent.toml"))
    monkeypatch.setenv("AGI_HOME", str(tmp_path / "home"))
    s = Settings.load(
        layer_from_kwargs("test", model="bare-model", base_url="http://127.0.0.1:9/v1")
    )
    d = {name: BY_NAME[name].default for name in BY_NAME}
    assert (s.max_steps, s.output, s.verbose, s.quiet) == (
        d["max_steps"], d["output"], d["verbose"], d["quiet"],
    )  # fmt: skip
    assert (s.model.provider, s.model.idle_timeout) == (d["provider"], d["idle_timeout"])
    assert (s.window.compact, s.window.threshold) == (
        d["compact"] == "auto",
        d["compact_threshold"],
    )
    assert (s.sandbox.mode, s.checkpoints, s.react) == (d["sandbox"], d["checkpoints"], d["react"])
    assert d["stdin_limit"] == STDIN_LIMIT


# ---------------------------------------------------------------- the generated pages


def test_the_generated_pages_are_current():
    """docs/reference/options.md and agi.1 are what the table makes now."""
    from agi.options.reference import pages

    for relative, expected in pages().items():
        current = (ROOT / relative).read_text(encoding="utf-8")
        assert current == expected, f"{relative} is stale: run python -m agi.options.reference"
    r = subprocess.run(
        [sys.executable, "-m", "agi.options.reference", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (r.returncode, r.stdout) == (0, ""), r.stdout + r.stderr


def test_the_reference_names_every_option_and_its_config_key():
    page = (ROOT / "docs/reference/options.md").read_text(encoding="utf-8")
    for option in OPTIONS:
        if option.flags:
            assert f"`{option.shown().replace('|', chr(92) + '|')}`" in page, option.name
        if option.option:
            assert f"| `{option.name}` |" in page, option.name


def exit_codes(table_text: str) -> set[str]:
    rows = re.findall(r"^\| ([0-9][0-9 /]*) \|", table_text, re.M)
    return {code.strip() for row in rows for code in row.split("/")}


def test_the_man_pages_exit_status_is_the_documented_one():
    from agi.options.reference import EXIT_STATUS

    documented = exit_codes((ROOT / "docs/reference/exit-codes.md").read_text(encoding="utf-8"))
    assert {code for code, _ in EXIT_STATUS} == documented


@pytest.mark.skipif(
    shutil.which("man") is None, reason="man is not installed (apt-get install man-db)"
)
def test_the_man_page_renders_without_warnings():
    r = subprocess.run(
        ["man", "--warnings", "-l", str(ROOT / "agi.1")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "", "PAGER": "cat"},
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0 and r.stderr == "", r.stderr
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS", "ENVIRONMENT"):
        assert f"\n{heading}\n" in r.stdout, heading
    flat = " ".join(r.stdout.split())
    for flag in FLAGS:
        assert flag in flat, flag
