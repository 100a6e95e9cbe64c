"""The house style that a parser can check: no import circles in agi/ (imports inside functions
count too), no module over MAX_MODULE_LINES lines, no function over MAX_FUNCTION_LINES lines, at
most MAX_TOP_MODULES modules directly in agi/, nothing outside agi/frontends/nvim importing
agi.frontends.nvim, no Lua file over MAX_LUA_LINES lines, and a layout table in
docs/development.md that names every module and sub-package (see layout_table for the format it
reads)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agi"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
MAX_TOP_MODULES = 15  # .py files directly in agi/, __init__.py and __main__.py included
MAX_LUA_LINES = 400
LUA_FILES = sorted([*(ROOT / "lua").rglob("*.lua"), *(ROOT / "plugin").rglob("*.lua")])


def module_name(path: Path) -> str:
    """agi/tools/shell.py -> agi.tools.shell; a package's __init__.py is the package itself."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
SOURCES = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
TREES = {name: ast.parse(source, str(MODULES[name])) for name, source in SOURCES.items()}


def where(name: str) -> str:
    return str(MODULES[name].relative_to(ROOT))


def imported(module: str, tree: ast.Module) -> set[str]:
    """The agi modules `module` imports anywhere in its body (module level or in functions).

    `import agi.x.y` and `from agi.x.y import name` count as agi.x.y; `from agi.x import y`
    counts as agi.x.y when that is a module, else as agi.x; relative imports are resolved.
    Importing a submodule runs its packages' __init__ too, but that is not counted: a package
    may import its submodules without making a circle with each of them.
    """
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in MODULES else base)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {name: imported(name, tree) for name, tree in TREES.items()}


def unmarked_lazy_imports(source: str) -> list[int]:
    """The lines of imports of agi's own modules inside a function that no `# lazy: why`
    comment (on the line or the one above) explains (docs: development)."""
    lines = source.splitlines()
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, True)
            elif isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                names = [a.name for a in child.names] if isinstance(child, ast.Import) else []
                module = child.module or "" if isinstance(child, ast.ImportFrom) else ""
                ours = [n for n in [*names, module] if n == "agi" or n.startswith("agi.")]
                above = child.lineno - 2  # the comment may head a group of imports
                while above > 0 and lines[above].lstrip().startswith(("from ", "import ")):
                    above -= 1
                marks = [lines[child.lineno - 1], lines[above] if above >= 0 else ""]
                if ours and not any("# lazy:" in line for line in marks):
                    found.append(child.lineno)
            else:
                visit(child, in_function)

    visit(ast.parse(source), False)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle (a path a -> ... -> a) for each group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [circle(graph, group) for group in sorted(groups, key=min)]


def circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no circle through {start}")  # cannot happen in a strong component


def long_functions() -> list[str]:
    """`path:line name: N` for every function (methods and nested ones too) over the limit."""
    found = []
    for name, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{where(name)}:{node.lineno} {node.name}: {length} lines")
    return found


def test_every_function_level_import_of_agi_says_why_it_is_lazy():
    found = [
        f"{where(name)}:{line}"
        for name, source in SOURCES.items()
        for line in unmarked_lazy_imports(source)
    ]
    assert found == [], (
        "imports of agi's own modules go at the top of the module; one that must wait for its "
        "function (a heavy package behind it, agi --version's start-up, a front end the command "
        "line dispatches to, a circle) says so in a `# lazy: why` comment:\n" + "\n".join(found)
    )


def test_an_unmarked_function_level_import_is_found():
    source = (
        "import os\nfrom agi.errors import UsageError\n\n"
        "def f():\n    from agi.messages import Usage\n    import json\n"
        "    # lazy: agi.providers.transport loads httpx\n"
        "    from agi.providers.transport import Exchange\n"
        "    from agi.providers.wire import Wire\n"
        "    import agi.engine.run  # lazy: checked to import\n"
        "    return lambda: __import__('agi')\n\n"
        "class C:\n    def g(self):\n        if True:\n            import agi.tools\n"
    )
    assert unmarked_lazy_imports(source) == [5, 16]


def test_the_import_graph_sees_function_level_and_package_imports():
    assert "agi.errors" in GRAPH["agi.frontends.cli.main"]
    assert {"agi.tools.shell", "agi.tools.terminal"} <= GRAPH["agi.tools"]  # in builtin_tools()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_no_import_circles():
    found = cycles(GRAPH)
    tangled = {m for c in found for m in c}
    assert not found, (
        "import circles (one per tangle):\n"
        + "\n".join(" -> ".join(c) for c in found)
        + f"\nevery module on a circle: {', '.join(sorted(tangled))}"
    )


def test_no_module_is_too_long():
    lengths = {name: len(source.splitlines()) for name, source in SOURCES.items()}
    over = [f"{where(n)}: {k} lines" for n, k in lengths.items() if k > MAX_MODULE_LINES]
    assert not over, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(over)


def test_no_function_is_too_long():
    over = long_functions()
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


@pytest.mark.parametrize("name", ["agi", "agi.tools", "agi.frontends.nvim"])
def test_packages_are_modules_of_the_graph(name):
    assert name in MODULES and MODULES[name].name == "__init__.py"


def test_at_most_15_modules_directly_in_agi():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, (
        f"{len(top)} modules directly in agi/ (at most {MAX_TOP_MODULES}; new ones go in the "
        f"sub-package of their concern): {', '.join(top)}"
    )


def is_nvim(name: str) -> bool:
    return name == "agi.frontends.nvim" or name.startswith("agi.frontends.nvim.")


def test_the_import_graph_sees_imports_of_agi_nvim():
    tree = ast.parse(
        "from agi.frontends import nvim\ndef f():\n    from agi.providers.fim import x\n"
    )
    assert imported("agi.engine.run", tree) == {"agi.frontends.nvim", "agi.providers.fim"}


def test_nothing_outside_agi_nvim_imports_it():
    found = [
        f"{where(name)} imports {', '.join(sorted(filter(is_nvim, deps)))}"
        for name, deps in sorted(GRAPH.items())
        if not is_nvim(name) and any(map(is_nvim, deps))
    ]
    assert not found, (
        "agi.frontends.nvim is Neovim's; the engine does not import it:\n" + "\n".join(found)
    )


def test_no_lua_file_is_too_long():
    assert LUA_FILES, "no Lua files found under lua/ and plugin/"
    lengths = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in LUA_FILES}
    over = [f"{p.relative_to(ROOT)}: {k} lines" for p, k in lengths.items() if k > MAX_LUA_LINES]
    assert not over, f"Lua files over {MAX_LUA_LINES} lines:\n" + "\n".join(over)


# --- the layout table of docs/development.md -----------------------------------------------

LAYOUT = ROOT / "docs" / "development.md"


def layout_table(readme: str) -> list[str]:
    """The paths the layout table of docs/development.md names, in order.

    The table is the first one in the page whose header row is `| where | what |`; it ends at
    the first line that does not start with `|`. Each row's first cell (`where`) names paths in
    backticks, one path per pair (`agi/engine/run.py`, `agi/sessions/`; several per cell): a
    module by its file (`agi/providers/cost.py`), a sub-package by its directory with a
    trailing slash (`agi/providers/`). No shorthand (`{a,b}.py`, `*.py`) and no dotted names.
    The second cell (`what`) is free text and is not read.
    """
    lines = readme.splitlines()
    header = re.compile(r"\|\s*where\s*\|\s*what\s*\|")
    start = next((i for i, line in enumerate(lines) if header.fullmatch(line.strip())), None)
    assert start is not None, f"{LAYOUT} has no table with the header `| where | what |`"
    named = []
    for line in lines[start + 2 :]:  # after the header and its |---|---| line
        if not line.startswith("|"):
            break
        named += re.findall(r"`([^`]+)`", line.split("|")[1])
    return named


def the_layout() -> set[str]:
    """What the table must name: every module under agi/ but the packages' __init__.py files
    (agi/__main__.py included), and every sub-package of agi as `agi/name/`."""
    modules = {str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    packages = {
        str(p.parent.relative_to(ROOT)) + "/"
        for p in PACKAGE.rglob("__init__.py")
        if p.parent != PACKAGE
    }
    return modules | packages


def test_the_layout_table_is_read_as_documented():
    readme = (
        "intro\n\n| where | what |\n|---|---|\n"
        "| `agi/engine/run.py`, `agi/tools/` | a `b` |\n\nmore `x`"
    )
    assert layout_table(readme) == ["agi/engine/run.py", "agi/tools/"]
    assert "agi/__main__.py" in the_layout() and "agi/tools/" in the_layout()
    assert "agi/__init__.py" not in the_layout() and "agi/tools/__init__.py" not in the_layout()


def test_the_readme_layout_names_every_module_and_sub_package():
    named = set(layout_table(LAYOUT.read_text(encoding="utf-8")))
    missing = sorted(the_layout() - named)
    assert not missing, f"the layout table (| where | what |) of {LAYOUT} does not name:\n" + (
        "\n".join(missing)
    )


def test_the_readme_layout_names_nothing_that_is_gone():
    named = layout_table(LAYOUT.read_text(encoding="utf-8"))
    gone = [path for path in named if path.startswith("agi/") and path not in the_layout()]
    assert not gone, f"the layout table of {LAYOUT} names what agi/ does not have:\n" + "\n".join(
        gone
    )
