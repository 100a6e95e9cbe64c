"""The seams (docs/development.md, "Lint, format and types"): every collaborator's Protocol in
agi/engine/seams.py and used, at most ANY_CEILING parameters and fields in agi/ typed plain
`Any`, no `None` branches in the loop and the toolbox for the parts a run may lack (hooks, the
permission check, compaction, checkpoints), and, with none of them configured, a run that
imports, parses and starts nothing of theirs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from fakeserver import FakeModel, call, text

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "agi"
SEAMS = PACKAGE / "engine" / "seams.py"
# parameters and fields annotated exactly `Any` (JSON values, mostly): 297 until round four's
# front ends, whose request parsers take JSON values (serve's fields, the SDK protocol's lines,
# the MCP call's arguments, NES and settings listing); their collaborators are typed
ANY_CEILING = 338
PARTS = {"hooks", "lifecycle", "guard", "compactor", "checkpoints"}
NULL_BRANCH_FREE = [PACKAGE / "engine" / "loop.py", PACKAGE / "tools" / "__init__.py"]


def trees() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in PACKAGE.rglob("*.py")}


def plain_any(node: ast.expr | None) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Constant) and node.value == "Any"
    )


def typed_any(path: Path, tree: ast.Module) -> list[str]:
    """`path:line name` for every parameter and annotated field or variable typed plain Any."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if plain_any(arg.annotation):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}({arg.arg})")
        elif isinstance(node, ast.AnnAssign) and plain_any(node.annotation):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node.target)}")
    return found


def test_typed_any_is_counted_as_documented():
    tree = ast.parse(
        "def f(a: Any, b: 'Any', c: int, *, d: Any = None, e: dict[str, Any] = {}) -> Any:\n"
        "    x: Any = 1\n"
        "class C:\n    y: Any\n    z: list[Any]\n"
    )
    found = typed_any(PACKAGE / "m.py", tree)
    assert [f.split(" ")[1] for f in found] == ["f(a)", "f(b)", "f(d)", "x", "y"]


def test_parameters_and_fields_typed_plain_any_stay_at_or_below_the_ceiling():
    found = [line for path, tree in sorted(trees().items()) for line in typed_any(path, tree)]
    assert len(found) <= ANY_CEILING, (
        f"{len(found)} parameters and fields typed plain Any (at most {ANY_CEILING}): type a "
        "collaborator with its Protocol from agi/engine/seams.py or its class; keep Any for "
        "JSON values. The last ones:\n" + "\n".join(found[-20:])
    )


def protocols() -> list[str]:
    """The Protocol classes agi/engine/seams.py declares."""
    tree = ast.parse(SEAMS.read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
    ]


def annotation_names(tree: ast.Module) -> set[str]:
    """Every name used in the module's annotations (string annotations read too)."""
    annotations: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            annotations += [a.annotation for a in every if a is not None and a.annotation]
            annotations += [node.returns] if node.returns else []
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
    names = set()
    for annotation in annotations:
        for part in ast.walk(annotation):
            if isinstance(part, ast.Name):
                names.add(part.id)
            elif isinstance(part, ast.Attribute):
                names.add(part.attr)
            elif isinstance(part, ast.Constant) and isinstance(part.value, str):
                names |= annotation_names(ast.parse(f"x: {part.value}"))
    return names


def test_the_seams_declare_every_collaborator():
    assert {
        "ModelStream",
        "View",
        "Ask",
        "Files",
        "HookEvents",
        "PermissionGuard",
        "ContextCompactor",
        "TurnCheckpoints",
        "UsageMeter",
    } <= set(protocols())
    source = SEAMS.read_text(encoding="utf-8")
    assert "from agi.tools.protocol import Tool" in source  # the tool's, re-exported


def test_every_protocol_of_the_seams_is_used_outside_them():
    used: set[str] = set()
    for path, tree in trees().items():
        if path != SEAMS:
            used |= annotation_names(tree)
    unused = [name for name in protocols() if name not in used]
    assert not unused, f"Protocols of agi/engine/seams.py no annotation uses: {unused}"


def none_tests(tree: ast.Module) -> list[str]:
    """`line: expression` for every `PART is None` / `PART is not None` in the module."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not isinstance(node.ops[0], ast.Is | ast.IsNot):
            continue
        left, right = node.left, node.comparators[0]
        name = left.attr if isinstance(left, ast.Attribute) else getattr(left, "id", None)
        if name in PARTS and isinstance(right, ast.Constant) and right.value is None:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_loop_and_the_toolbox_have_no_none_branches_for_absent_parts():
    assert none_tests(ast.parse("if self.guard is not None and hooks is None: pass")) == [
        "1: self.guard is not None",
        "1: hooks is None",
    ]
    for path in NULL_BRANCH_FREE:
        found = none_tests(ast.parse(path.read_text(encoding="utf-8")))
        assert not found, f"{path.relative_to(ROOT)} tests a part for None: {found}"


def program(code: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_a_run_with_nothing_configured_loads_no_hook_nor_permission_code(env, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeModel(call("Bash", command="echo from-bash"), text("all done")) as server:
        done = program(
            """
            import json, sys
            from agi.frontends.cli.main import main

            code = main(["run echo"])
            loaded = sorted(m for m in sys.modules if m.startswith("agi."))
            print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
            """,
            {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"},
            work,
        )
        sent = server.requests
    assert done.stdout == "all done\n", done.stderr
    report = json.loads(done.stderr.splitlines()[-1])
    assert report["code"] == 0
    tool_result = [m for m in sent[-1]["messages"] if m["role"] == "tool"]
    assert "from-bash" in tool_result[0]["content"]  # the call ran, unchecked
    loaded = set(report["loaded"])
    assert {"agi.engine.seams", "agi.engine.absent", "agi.tools"} <= loaded
    for module in (
        "agi.claude.hooks.lifecycle",
        "agi.claude.hooks.run",
        "agi.policy.guard",
        "agi.policy.permissions",
        "agi.policy.asking",
    ):
        assert module not in loaded, f"{module} was imported by a run that configures no part"


def test_a_library_run_with_nothing_configured_loads_no_permission_code(env, tmp_path):
    """`agi.run` (and `agi --serve`'s runs) always give an `ask` (NoOne when none is named):
    in agi's default mode with no rules it is never put a question, so no guard is built."""
    work = tmp_path / "work"
    work.mkdir()
    with FakeModel(call("Bash", command="echo from-bash"), text("all done")) as server:
        done = program(
            """
            import json, sys
            import agi

            result = agi.run("run echo")
            loaded = sorted(m for m in sys.modules if m.startswith("agi."))
            print(json.dumps({"answer": result.answer, "loaded": loaded}))
            """,
            {**env, "AGI_BASE_URL": server.url, "AGI_MODEL": "fake-model"},
            work,
        )
        sent = server.requests
    report = json.loads(done.stdout)
    assert report["answer"] == "all done", done.stderr
    assert "from-bash" in [m for m in sent[-1]["messages"] if m["role"] == "tool"][0]["content"]
    loaded = set(report["loaded"])
    for module in ("agi.policy.guard", "agi.policy.permissions", "agi.policy.anchors"):
        assert module not in loaded, f"{module} was imported by a run that configures no rule"


def test_a_call_is_parsed_for_the_rules_only_when_there_is_a_guard(tmp_path):
    from agi.engine.absent import NoGuard
    from agi.messages import ToolCall
    from agi.policy.guard import Guard
    from agi.policy.permissions import Permissions
    from agi.tools import Toolbox, ToolContext

    class Probe:
        """A tool whose names for the rules cannot be worked out."""

        name, description, parameters = "Probe", "a probe", {"type": "object"}
        asked = 0

        def canonical(self, input):
            self.asked += 1
            raise ValueError("nothing here a rule can read")

        def run(self, input, ctx):
            return "probed"

    probe, ctx = Probe(), ToolContext(cwd=str(tmp_path))
    bare = Toolbox([probe], ctx)
    assert isinstance(bare.guard, NoGuard)
    result = bare.run_one(ToolCall("1", "Probe", "{}"))
    assert (result.text, result.is_error, probe.asked) == ("probed", False, 0)

    guarded = Toolbox([probe], ctx, guard=Guard(Permissions()))
    result = guarded.run_one(ToolCall("2", "Probe", "{}"))
    assert result.is_error and probe.asked == 1
    assert result.text == (
        "Error: the permission rules cannot judge this call: nothing here a rule can read"
    )
    guard = Guard(Permissions())  # names given: the tool is not asked
    assert guard.check("3", "Probe", {}, str(tmp_path), {"Probe"}, tool=probe) is None
    assert probe.asked == 1


def test_an_agent_without_hooks_or_compaction_has_their_null_objects(tmp_path):
    from agi.engine.absent import NoCompaction, NoHooks
    from agi.engine.loop import Agent
    from agi.sessions.session import Session
    from agi.tools import Toolbox

    class Silent:
        """A model stream that is never asked."""

        deadline = None

    session = Session.open(tmp_path / "session")
    agent = Agent(Silent(), Toolbox([]), session, "")  # type: ignore[arg-type]
    assert isinstance(agent.hooks, NoHooks) and isinstance(agent.compactor, NoCompaction)
    assert agent.lifecycle is None  # front ends that fire SessionStart themselves ask this
    assert agent.compactor.usage.empty
    assert list(agent.compactor.run("manual", "focus")) == []
    agent.close_pending("nothing pending")
    assert agent.hooks.prompt("as typed") == "as typed" and agent.hooks.stop("answer") is None
