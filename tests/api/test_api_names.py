"""agi.__all__ and agi.api.__all__ are one list written twice: each stays a literal, which ruff's
unused-import check and the API reference (mkdocstrings reads `__all__` as written) need, and
agi/__init__.py cannot import agi.api without making `import agi` as heavy as the library."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def literal_all(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{path}: no literal __all__")


def test_the_library_gives_what_import_agi_names():
    package = literal_all(ROOT / "agi" / "__init__.py")
    library = literal_all(ROOT / "agi" / "api" / "__init__.py")
    assert [n for n in package if n != "__version__"] == library
