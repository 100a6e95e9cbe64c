"""Agent Skills: the real fixture skills, the front matter subset, the prompt text, the Skill tool.

The end-to-end tests drive the real `agi` executable.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agi.claude.skills import (
    FrontMatterError,
    SkillTool,
    load_skills,
    parse_front_matter,
    skills_prompt,
    split_front_matter,
)
from agi.errors import UsageError
from agi.tools import ToolContext, ToolError

from conftest import FIXTURES
from fakeserver import FakeModel, call, text

try:
    import yaml  # only to check the small parser against a real one
except ImportError:  # pragma: no cover
    yaml = None

SKILLS = FIXTURES / "skills"
COMMS = (
    "A set of resources to help me write all kinds of internal communications, using the formats "
    "that my company likes to use. Claude should use this skill whenever asked to write some sort "
    "of internal communications (status reports, leadership updates, 3P updates, company "
    "newsletters, FAQs, incident reports, project updates, etc.)."
)
VERIFY = (
    "Use when about to claim work is complete, fixed, or passing, before committing or creating "
    "PRs - requires running verification commands and confirming output before making any "
    "success claims; evidence before assertions always"
)


def make_skill(root: Path, dirname: str, front: str, body: str = "The body.\n") -> Path:
    d = root / dirname
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{textwrap.dedent(front).strip()}\n---\n{body}")
    return d


def front(text: str) -> dict:
    return parse_front_matter(textwrap.dedent(text).strip("\n").split("\n"))


# --- the real skills -----------------------------------------------------------------------------


def test_the_fixture_skills_load():
    skills, warnings = load_skills([SKILLS])
    assert warnings == []
    assert [(s.name, s.description) for s in skills] == [
        ("internal-comms", COMMS),
        ("verification-before-completion", VERIFY),
    ]
    assert skills[0].path == SKILLS / "internal-comms"
    assert skills[0].meta["license"] == "Complete terms in LICENSE.txt"
    assert skills[1].body.startswith("# Verification Before Completion")
    assert "---" not in skills[0].body.splitlines()[0]


# --- front matter --------------------------------------------------------------------------------

CASES = {
    "plain": (
        "name: pdf\ndescription: Fill in PDF forms.",
        {"name": "pdf", "description": "Fill in PDF forms."},
    ),
    "double quoted": (
        'description: "Say \\"hi\\": a\\tb \\u00e9 # not a comment"',
        {"description": 'Say "hi": a\tb é # not a comment'},
    ),
    "single quoted": ("description: 'it''s: fine'  # a comment", {"description": "it's: fine"}),
    "comment": ("name: x # trailing\n# whole line\nlicense: MIT", {"name": "x", "license": "MIT"}),
    "colon in a plain value": ("description: Use it: always", {"description": "Use it: always"}),
    "folded": (
        "description: >\n  Folded lines\n  become one.\n\n  New paragraph.\nname: f",
        {"description": "Folded lines become one.\nNew paragraph.\n", "name": "f"},
    ),
    "folded strip": ("description: >-\n  one\n  two\n\n", {"description": "one two"}),
    "folded more indented": (
        "description: >\n  text\n    code\n  more\n",
        {"description": "text\n  code\nmore\n"},
    ),
    "literal": (
        "description: |\n  line one\n    indented\n  line three\nname: l",
        {"description": "line one\n  indented\nline three\n", "name": "l"},
    ),
    "literal keep": ("description: |+\n  a\n\nname: k", {"description": "a\n\n", "name": "k"}),
    "literal strip": ("description: |-\n  a\n  b", {"description": "a\nb"}),
    "plain continued": (
        "description: a long\n  description that\n  wraps\n\n  on\nname: w",
        {"description": "a long description that wraps\non", "name": "w"},
    ),
    "quoted continued": (
        'description: "a long\n  quoted one"',
        {"description": "a long quoted one"},
    ),
    "block list": (
        "allowed-tools:\n  - Read\n  - 'Bash(git:*)'\n",
        {"allowed-tools": ["Read", "Bash(git:*)"]},
    ),
    "indentless list": (
        "allowed-tools: # comment\n- Read\n-   Grep\n- >-\n  folded\n  item\nname: n",
        {"allowed-tools": ["Read", "Grep", "folded item"], "name": "n"},
    ),
    "flow list": (
        'allowed-tools: [Read, "Grep", Glob]',
        {"allowed-tools": ["Read", "Grep", "Glob"]},
    ),
    "nested map": (
        "metadata:\n  author: someone\n  version: '1.0'\nname: m",
        {"metadata": {"author": "someone", "version": "1.0"}, "name": "m"},
    ),
    "empty": ("license:\nname: e", {"license": None, "name": "e"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_front_matter(case):
    source, expected = CASES[case]
    assert front(source) == expected


needs_yaml = pytest.mark.skipif(yaml is None, reason="PyYAML is not installed")


@needs_yaml
@pytest.mark.parametrize("case", [c for c in CASES if c not in ("colon in a plain value",)])
def test_front_matter_agrees_with_pyyaml(case):
    source, _ = CASES[case]
    assert front(source) == yaml.safe_load(source)


YAML_TEXT = st.text(
    st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_categories=("Cs", "Cc"))
    | st.sampled_from("\n\n  \t"),
    max_size=40,
)
YAML_KEY = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)
YAML_VALUE = (
    YAML_TEXT
    | st.lists(YAML_TEXT, min_size=1, max_size=3)
    | st.dictionaries(YAML_KEY, YAML_TEXT, min_size=1, max_size=3)
)


@needs_yaml
@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(YAML_KEY, YAML_VALUE, min_size=1, max_size=4),
    st.sampled_from([None, '"', "'", "|", ">"]),
    st.sampled_from([80, 10**6]),
)
def test_front_matter_reads_what_pyyaml_writes(doc, style, width):
    dumped = yaml.safe_dump(
        doc, default_style=style, default_flow_style=False, allow_unicode=True, width=width
    )
    lines = [line for line in dumped.rstrip("\n").split("\n") if line != "..."]
    assert parse_front_matter(lines) == yaml.safe_load(dumped), dumped


@pytest.mark.parametrize(
    "source",
    [
        "name: x\n- stray item",
        "no colon here",
        'description: "unterminated',
        "description: 'closed' trailing",
        "description: [a, b",
    ],
)
def test_front_matter_errors(source):
    with pytest.raises(FrontMatterError):
        front(source)


def test_front_matter_must_be_there_and_closed():
    with pytest.raises(FrontMatterError, match="unexpected indentation"):
        parse_front_matter(["  indented: first"])
    with pytest.raises(FrontMatterError, match="no front matter"):
        split_front_matter("# Just a heading\n")
    with pytest.raises(FrontMatterError, match="not closed"):
        split_front_matter("---\nname: x\n")
    assert split_front_matter("\ufeff---\r\nname: x\r\n---\r\nbody\n")[0] == ["name: x"]


# --- loading -------------------------------------------------------------------------------------


def test_broken_skills_are_warnings_and_the_others_load(tmp_path):
    make_skill(tmp_path, "good", "name: good\ndescription: Works.")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "SKILL.md").write_text("# No front matter\n")
    make_skill(tmp_path, "nodesc", "name: nodesc")
    make_skill(tmp_path, "badyaml", "name: x\ndescription: d\n- stray item")
    (tmp_path / "not-a-skill").mkdir()  # no SKILL.md: not a skill, no warning
    skills, warnings = load_skills([tmp_path])
    assert [s.name for s in skills] == ["good"]
    assert len(warnings) == 3
    assert any("plain/SKILL.md" in w and "no front matter" in w for w in warnings)
    assert any("nodesc/SKILL.md" in w and "description" in w for w in warnings)
    assert any("badyaml/SKILL.md" in w and "line 3" in w for w in warnings)


def test_a_missing_name_falls_back_to_the_directory_and_the_description_is_one_line(tmp_path):
    make_skill(tmp_path, "dir-name", "description: >\n  Two\n  lines.\n\n  And more.")
    (skill,), _ = load_skills([tmp_path])
    assert (skill.name, skill.description) == ("dir-name", "Two lines. And more.")


def test_the_first_directory_wins_on_duplicate_names(tmp_path):
    make_skill(tmp_path / "a", "one", "name: same\ndescription: From a.")
    make_skill(tmp_path / "b", "two", "name: same\ndescription: From b.")
    skills, warnings = load_skills([tmp_path / "a", tmp_path / "b", tmp_path / "a"])
    assert [s.description for s in skills] == ["From a."]
    assert len(warnings) == 1 and "two/SKILL.md" in warnings[0] and "same" in warnings[0]


def test_a_single_skill_directory_and_a_missing_directory(tmp_path):
    d = make_skill(tmp_path, "solo", "name: solo\ndescription: Alone.")
    assert [s.name for s in load_skills([d])[0]] == ["solo"]
    with pytest.raises(UsageError, match="not a directory"):
        load_skills([tmp_path / "missing"])


# --- the prompt and the tool ---------------------------------------------------------------------


def test_the_prompt_lists_names_and_descriptions_but_no_bodies():
    skills, _ = load_skills([SKILLS])
    prompt = skills_prompt(skills)
    assert f"- internal-comms: {COMMS}" in prompt
    assert f"- verification-before-completion: {VERIFY}" in prompt
    assert "Skill tool" in prompt
    for skill in skills:
        for line in skill.body.splitlines():
            if len(line) > 30 and line not in (COMMS, VERIFY):
                assert line not in prompt
    assert skills_prompt([]) == ""


def test_the_skill_tool_returns_the_body_and_the_directory():
    skills, _ = load_skills([SKILLS])
    tool = SkillTool(skills)
    assert tool.name == "Skill"
    assert tool.parameters["properties"]["skill"]["enum"] == [s.name for s in skills]
    got = tool.run({"skill": "verification-before-completion"}, ToolContext())
    directory = SKILLS / "verification-before-completion"
    header, _, body = got.partition("\n\n")
    assert header == (
        f"Skill verification-before-completion (directory: {directory}) — files in it can be "
        "read with Read or run with Bash:"
    )
    assert body == (directory / "SKILL.md").read_text().split("---\n", 2)[2].strip()
    with_args = tool.run({"skill": "/Internal-Comms", "args": "weekly update"}, ToolContext())
    assert with_args.startswith("Skill internal-comms (directory: ")
    assert with_args.endswith("\n\nArguments: weekly update")


def test_an_unknown_skill_lists_the_available_ones():
    tool = SkillTool(load_skills([SKILLS])[0])
    with pytest.raises(
        ToolError, match="available: internal-comms, verification-before-completion"
    ):
        tool.run({"skill": "nope"}, ToolContext())
    with pytest.raises(ToolError, match="'skill' is required"):
        tool.run({}, ToolContext())


def test_the_body_is_read_when_asked_for(tmp_path):
    d = make_skill(tmp_path, "live", "name: live\ndescription: Changes.", "old body\n")
    tool = SkillTool(load_skills([tmp_path])[0])
    (d / "SKILL.md").write_text("---\nname: live\ndescription: Changes.\n---\nnew body\n")
    assert tool.run({"skill": "live"}, ToolContext()).endswith("\n\nnew body")
    (d / "SKILL.md").unlink()
    with pytest.raises(ToolError, match="cannot read"):
        tool.run({"skill": "live"}, ToolContext())


def test_disable_model_invocation_keeps_a_skill_from_the_model(tmp_path):
    make_skill(
        tmp_path, "manual", "name: manual\ndescription: Hidden.\ndisable-model-invocation: true"
    )
    make_skill(tmp_path, "auto", "name: auto\ndescription: Shown.")
    skills, _ = load_skills([tmp_path])
    assert "Hidden." not in skills_prompt(skills) and "Shown." in skills_prompt(skills)
    assert list(SkillTool(skills).skills) == ["auto"]


# --- end to end, through the real executable -----------------------------------------------------


def test_the_description_is_in_the_first_request_and_the_body_after_a_skill_call(agi, tmp_path):
    body = "Step one: write SECRET-BODY-MARKER into the answer.\n"
    make_skill(tmp_path / "myskills", "marker", "name: marker\ndescription: Marks answers.", body)
    script = [call("Skill", skill="marker"), text("done")]
    with FakeModel(*script) as server:
        r = agi("--skills", str(tmp_path / "myskills"), "go", server=server)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    first = server.requests[0]
    system = first["messages"][0]
    assert system["role"] == "system" and "- marker: Marks answers." in system["content"]
    assert "SECRET-BODY-MARKER" not in str(first)
    assert "Skill" in {t["function"]["name"] for t in first["tools"]}
    (result,) = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
    assert "SECRET-BODY-MARKER" in result["content"]
    assert str(tmp_path / "myskills" / "marker") in result["content"]


def test_the_fixture_skills_through_the_config_skills_dir(agi, tmp_path):
    shutil.copytree(SKILLS, tmp_path / "skills")  # beside $AGI_CONFIG = tmp_path/config.toml
    with FakeModel(text("done")) as server:
        r = agi("go", server=server)
    assert r.returncode == 0, r.stderr
    system = server.requests[0]["messages"][0]["content"]
    assert COMMS in system and VERIFY in system
    assert "The Iron Law" not in system


def test_a_broken_skill_is_a_warning(agi, tmp_path):
    (tmp_path / "myskills" / "bad").mkdir(parents=True)
    (tmp_path / "myskills" / "bad" / "SKILL.md").write_text("no front matter\n")
    with FakeModel(text("done")) as server:
        r = agi("--skills", str(tmp_path / "myskills"), "go", server=server)
    assert r.returncode == 0 and r.stdout == "done\n"
    assert r.stderr.startswith("agi: ") and "bad/SKILL.md" in r.stderr
