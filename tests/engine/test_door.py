"""Every front end goes through the engine's one door (docs/python.md, "The door"): it gives its
inputs once, in the RunSpec, and afterwards only calls the run's verbs and consumes events. Read
from the code: no module under agi/frontends/ sets an attribute of a run, its context, a
transport, a toolbox, an agent, a session, a run's settings or result, of anything reached
through them, or of a class; nor subclasses the engine's classes to do it from `self`.

The rule is syntactic and has no false positives on a front end's own objects:

- an assignment (`=`, augmented, annotated, `del`, `setattr`, `__setattr__`, `__dict__[k] =`) to
  an attribute of an object whose expression names one of ENGINE_NAMES anywhere in its chain
  (`run.x`, `self.run.ctx.x`, `session.x`) is a violation; `self.x` and `job.x` are not;
- so is one to an object bound from such an expression in the same function (`for t in
  run.ctx.transports: t.x = …`, `r = engine.open(spec); r.x = …`);
- so is one to an attribute of a class (a chain starting with a capitalised name:
  `Transport.shared = …`);
- and, in a class deriving from a class imported from the engine's layers (ENGINE_MODULES),
  `self.x = …`: that object is the engine's, not the front end's.

Nor does a front end make settings by hand (docs: configuration): a `dataclasses.replace` of an
object whose expression names settings (`settings`, `self.settings.tools`, `Settings.load(…)`,
or a name bound from one) is a violation; a front end gives a layer instead.

A front end's own object that goes by one of those names (ACP's EditorSession is a `session`
there) is given its inputs when it is built too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRONTENDS = ROOT / "agi" / "frontends"
ENGINE_NAMES = frozenset(
    {"run", "runs", "ctx", "context", "transport", "transports", "exchange", "toolbox", "agent"}
    | {"session", "guard", "lifecycle", "hooks", "compactor", "settings", "spec", "result"}
)
ENGINE_MODULES = ("agi.engine", "agi.providers", "agi.tools", "agi.sessions", "agi.policy")
ENGINE_MODULES += ("agi.context", "agi.checkpoints", "agi.claude")
OPENERS = frozenset({"open", "open_run", "Run"})  # calls whose result is a run
SETTINGS_NAMES = frozenset({"settings", "Settings"})  # what names resolved settings


def chain(node: ast.expr) -> list[str]:
    """The names along an object's expression: `self.run.ctx` -> [self, run, ctx]; subscripts,
    calls and boolean or conditional picks looked through."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [*chain(node.value), node.attr]
    if isinstance(node, ast.Subscript | ast.Starred):
        return chain(node.value)
    if isinstance(node, ast.Call):
        return chain(node.func)
    if isinstance(node, ast.BoolOp):
        return [name for value in node.values for name in chain(value)]
    if isinstance(node, ast.IfExp):
        return [*chain(node.body), *chain(node.orelse)]
    return []


def opens_a_run(node: ast.expr) -> bool:
    """`engine.open(spec)`, `open_run(...)`, `Run(spec)`: a call whose result is a run."""
    if not isinstance(node, ast.Call):
        return False
    names = chain(node.func)
    return bool(names) and names[-1] in OPENERS and (names[-1] != "open" or len(names) > 1)


def bound(target: ast.expr) -> list[str]:
    """The plain names an assignment or loop target binds."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for element in target.elts for n in bound(element)]
    if isinstance(target, ast.Starred):
        return bound(target.value)
    return []


def attribute_targets(target: ast.expr) -> list[ast.expr]:
    """The objects whose attributes `target` sets: `a.b = ` -> a; `a.__dict__[k] = ` -> a."""
    if isinstance(target, ast.Tuple | ast.List):
        return [o for element in target.elts for o in attribute_targets(element)]
    if isinstance(target, ast.Starred):
        return attribute_targets(target.value)
    if isinstance(target, ast.Attribute):
        return [target.value]
    value = target.value if isinstance(target, ast.Subscript) else None
    if isinstance(value, ast.Attribute) and value.attr == "__dict__":
        return [value.value]
    return []


class Door(ast.NodeVisitor):
    """Walks one module in source order, noting every assignment that reaches past the door."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.engine_classes: set[str] = set()  # names imported from the engine's layers
        self.tainted: list[set[str]] = [set(ENGINE_NAMES)]  # per function: engine objects
        self.settings: list[set[str]] = [set(SETTINGS_NAMES)]  # per function: settings
        self.replace: set[str] = set()  # names dataclasses.replace is imported as
        self.engine_self: list[bool] = [False]  # in a class deriving from an engine class

    def check(self, obj: ast.expr, node: ast.AST, how: str) -> None:
        names = chain(obj)
        if not names:
            return
        why = None
        if names[0][:1].isupper():
            why = "an attribute of a class"
        elif set(names) & self.tainted[-1]:
            why = f"an attribute of the engine's {'.'.join(names)}"
        elif names == ["self"] and self.engine_self[-1]:
            why = "an attribute of an engine object (a subclass of the engine's class)"
        if why is not None:
            self.found.append(f"line {getattr(node, 'lineno', 0)}: {how} sets {why}")

    def taints(self, value: ast.expr | None) -> bool:
        return value is not None and (
            opens_a_run(value) or bool(set(chain(value)) & self.tainted[-1])
        )

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module == "dataclasses":
            self.replace |= {a.asname or a.name for a in node.names if a.name == "replace"}
        if (node.module or "").startswith(ENGINE_MODULES):
            self.engine_classes |= {alias.asname or alias.name for alias in node.names}

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = {chain(base)[-1] for base in node.bases if chain(base)}
        self.engine_self.append(bool(bases & self.engine_classes))
        self.generic_visit(node)
        self.engine_self.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.tainted.append(set(self.tainted[-1]))
        self.settings.append(set(self.settings[-1]))
        self.generic_visit(node)
        self.tainted.pop()
        self.settings.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def assigned(self, node: ast.AST, targets: list[ast.expr], value: ast.expr | None) -> None:
        if value is not None:
            self.visit(value)
        for target in targets:
            for obj in attribute_targets(target):
                self.check(obj, node, "an assignment")
        if self.taints(value):
            for target in targets:
                self.tainted[-1].update(bound(target))
        if value is not None and set(chain(value)) & self.settings[-1]:
            for target in targets:
                self.settings[-1].update(bound(target))

    def visit_Assign(self, node: ast.Assign) -> None:
        self.assigned(node, node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.assigned(node, [node.target], node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.assigned(node, [node.target], None)

    def visit_Delete(self, node: ast.Delete) -> None:
        self.assigned(node, node.targets, None)

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.comprehension) -> None:
        if self.taints(node.iter):
            self.tainted[-1].update(bound(node.target))
        self.generic_visit(node)

    visit_AsyncFor = visit_For
    visit_comprehension = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None and self.taints(node.context_expr):
            self.tainted[-1].update(bound(node.optional_vars))
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.assigned(node, [node.target], node.value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "setattr" and node.args:
            self.check(node.args[0], node, "setattr")
        elif isinstance(func, ast.Attribute) and func.attr == "__setattr__":
            if chain(func.value) == ["object"] and node.args:
                self.check(node.args[0], node, "object.__setattr__")
            else:
                self.check(func.value, node, "__setattr__")
        elif self.replaces(func) and node.args and set(chain(node.args[0])) & self.settings[-1]:
            line = getattr(node, "lineno", 0)
            self.found.append(f"line {line}: dataclasses.replace makes settings by hand")
        self.generic_visit(node)

    def replaces(self, func: ast.expr) -> bool:
        """`dataclasses.replace(…)`, or `replace(…)` imported from dataclasses."""
        names = chain(func)
        return names == ["dataclasses", "replace"] or (len(names) == 1 and names[0] in self.replace)


def violations(source: str) -> list[str]:
    """What in `source` sets attributes past the door, one line each."""
    door = Door()
    door.visit(ast.parse(source))
    return door.found


MODULES = sorted(FRONTENDS.rglob("*.py"))


def test_the_front_ends_are_all_read():
    names = {p.relative_to(FRONTENDS).parts[0] for p in MODULES}
    assert {"acp", "batch", "cli", "mcp", "nvim", "views"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_front_end_sets_an_attribute_past_the_door(path: Path):
    assert violations(path.read_text(encoding="utf-8")) == [], path


# Each pattern the front ends used before they went through the door, as it was written.
CAUGHT = {
    "ACP: the run's context patched": "ctx = run.ctx\nctx.deadline = now + SLICE\n",
    "ACP: the context through self": (
        "class S:\n    def f(self):\n        self.run.ctx.mode = 'plan'\n"
    ),
    "ACP: the toolbox's guard wrapped": "agent.toolbox.guard = Started(guard, editor)\n",
    "ACP: the run's meter count": "run.metered = saved\n",
    "ACP: the run's mode": "run.ctx.mode = mode\n",
    "ACP: the transports' flag, looped over": (
        "for transport in run.ctx.transports:\n    transport.cancelled = False\n"
    ),
    "ACP: a transport picked by another name": (
        "def f(run):\n    for t in run.ctx.transports:\n        t.cancelled = None\n"
    ),
    "ACP: a Run subclass setting its own fields": (
        "from agi.engine.run import Run\n\n"
        "class EditorRun(Run):\n    def locked(self):\n        self.deadline = 1\n"
    ),
    "MCP: the run's cwd": "run = engine.open(spec)\nrun.ctx.cwd = call.cwd\n",
    "MCP: a run bound to another name": "r = engine.open(spec)\nr.view = Progress(send)\n",
    "MCP and batch: the class attribute": "Transport.shared = pool = Lent()\n",
    "batch: the class attribute, by setattr": "setattr(Transport, 'shared', Shared())\n",
    "class attribute through a module": "agi.providers.transport.Transport.shared = None\n",
    "Neovim: the run's session": "run.session = session\n",
    "Neovim: the session's secrets": "session.secrets = usable([key])\n",
    "a result's field": "out.result.session = Path(call.session)\n",
    "augmented": "run.metered += 1\n",
    "annotated": "run.view: Any = view\n",
    "in a tuple": "run.view, other = view, 1\n",
    "deleted": "del run.ctx.ask\n",
    "by object.__setattr__": "object.__setattr__(spec, 'cwd', '/')\n",
    "by __setattr__": "run.ctx.__setattr__('cwd', '/')\n",
    "by __dict__": "run.ctx.__dict__['cwd'] = '/'\n",
    "through with": "with run.locked() as held:\n    held.meta = {}\n",
    "a run chosen by a condition": "r = self.run or self.carried\nr.meter = None\n",
    "batch: a job's limits on its settings": (
        "def f(settings, o):\n    return dataclasses.replace(\n        settings,\n"
        "        max_steps=o.get('max_steps', settings.max_steps),\n    )\n"
    ),
    "MCP: a call's fields, by another name": (
        "class Base:\n    def for_call(self, call):\n        s = self.settings\n"
        "        return dataclasses.replace(s, **changed)\n"
    ),
    "MCP: rules anchored on loaded settings": (
        "settings = Settings.load(layer)\n"
        "settings = dataclasses.replace(settings, permissions=anchored(settings.permissions))\n"
    ),
    "ACP: the client's MCP servers, a part of the settings": (
        "tools = dataclasses.replace(settings.tools, mcp=[*settings.tools.mcp, *mcp])\n"
    ),
    "ACP: the learned rules and the mode": (
        "settings = dataclasses.replace(settings, permissions=Permissions(learned, mode))\n"
    ),
    "the REPL's /sys, replace imported": (
        "from dataclasses import replace\n\nnew = replace(talk.settings, system=text)\n"
    ),
}

# A front end's own objects: set as they like.
FINE = {
    "its own fields": "class View:\n    def __init__(self):\n        self.chars = 0\n",
    "its own field holding a run": (
        "class Call:\n    def start(self, run):\n        self.current = run\n"
    ),
    "its own timer": "class R:\n    def f(self):\n        self.timer.daemon = True\n",
    "its own outcome": "out = failure(error, before)\nout.text = run.redact(out.text)\n",
    "its own counter": "calls.count += 1\n",
    "its request's meter": "job.meter = Meter(settings.prices, settings.max_cost)\n",
    "its conversation's settings": "talk.settings = with_system(talk.settings, files)\n",
    "its conversation's settings, from a layer": "talk.settings = talk.settings.over(layer)\n",
    "a result replaced": "result = dataclasses.replace(result, verdict=verdict)\n",
    "an outcome's result replaced": "named = dataclasses.replace(out.result, session=path)\n",
    "a subscript": "event['usage'] = job.usage()\n",
    "a run's result read": "result = run.ask(prompt)\ncode = result.exit_code\n",
    "a local named like nothing of the engine's": "stop.signum = signum\n",
    "a subclass of a view": (
        "from agi.frontends.views.terminal import Silent\n\n"
        "class Progress(Silent):\n    def handle(self, event):\n        self.sent = 1\n"
    ),
    "a subclass of an error": (
        "from agi.errors import CostLimit\n\n"
        "class Spent(CostLimit):\n    def __init__(self):\n        self.args = ()\n"
    ),
}


@pytest.mark.parametrize("source", CAUGHT.values(), ids=list(CAUGHT))
def test_the_rule_catches_each_way_past_the_door(source: str):
    assert len(violations(source)) == 1, source


@pytest.mark.parametrize("source", FINE.values(), ids=list(FINE))
def test_the_rule_leaves_a_front_ends_own_objects_alone(source: str):
    assert violations(source) == []
