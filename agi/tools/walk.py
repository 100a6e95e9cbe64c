"""The files Glob and Grep look at: a walk that skips what `.gitignore` ignores, and ripgrep's
listing of the same files when it is installed.

Both ways read the `.gitignore` files of the searched directory and below, and those between
the working directory and it; hidden files are searched, `.git` directories and symbolic links
are not (ripgrep's `--hidden`, without `-L`). Files the run may not read (`Read` deny rules,
the checkpoint records' key) are left out by the caller's `hidden` (docs: tools).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

from agi.errors import ToolError

IGNORE_FILE = ".gitignore"
SKIPPED_DIRS = frozenset({".git"})
# ripgrep reading only `.gitignore` files, as the walk does (not .ignore, .rgignore, the global
# excludes or .git/info/exclude), in or outside a git repository; parents are applied by us
RG_FLAGS = (
    "--hidden",
    "--no-require-git",
    "--no-ignore-dot",
    "--no-ignore-global",
    "--no-ignore-exclude",
    "--no-ignore-parent",
    "--no-config",
    "--glob=!.git",
)


def ripgrep() -> str | None:
    """The ripgrep program: `AGI_RG` when set (empty: none, the Python search), else `rg`."""
    given = os.environ.get("AGI_RG")
    if given is not None:
        return shutil.which(given) if given else None
    return shutil.which("rg")


class Ignores:
    """The `.gitignore` rules in force: (directory, spec) pairs, outermost first."""

    def __init__(self, specs: list[tuple[str, object]] | None = None):
        self.specs = specs or []

    @classmethod
    def above(cls, root: str, cwd: str) -> Ignores:
        """The rules of the directories from `cwd` down to `root`'s parent (when `root` is
        below `cwd`): a search of `src` still skips what the top `.gitignore` ignores."""
        found = cls()
        base = os.path.realpath(cwd)
        rel = os.path.relpath(os.path.realpath(root), base)
        if rel == "." or rel == ".." or rel.startswith("../"):
            return found
        here = base
        for part in ["", *rel.split(os.sep)[:-1]]:
            here = os.path.join(here, part) if part else here
            found = found.with_dir(here)
        return found

    def with_dir(self, directory: str) -> Ignores:
        """These rules and the directory's own `.gitignore`, if it has one."""
        path = os.path.join(directory, IGNORE_FILE)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return self
        import pathspec

        return Ignores([*self.specs, (directory, pathspec.GitIgnoreSpec.from_lines(lines))])

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether git ignores `path`: the deepest `.gitignore` with a matching line decides."""
        for directory, spec in reversed(self.specs):
            rel = os.path.relpath(path, directory)
            if rel == ".." or rel.startswith("../"):
                continue
            result = spec.check_file(rel + "/" if is_dir else rel)  # type: ignore[attr-defined]
            if result.include is not None:
                return bool(result.include)
        return False

    def __bool__(self) -> bool:
        return bool(self.specs)


def search_root(path: object, cwd: str) -> str:
    """The directory or file a search starts at (`path`, else the working directory)."""
    if path is None or path == "":
        return os.path.abspath(cwd)
    if not isinstance(path, str):
        raise ToolError("'path' must be a string")
    if "\0" in path:
        raise ToolError("no file has a name with a NUL byte in it")
    root = os.path.abspath(os.path.join(cwd, os.path.expanduser(path)))
    if not os.path.exists(root):
        raise ToolError(f"{path} does not exist")
    return root


def walk(root: str, cwd: str, check: Callable[[], None]) -> Iterator[str]:
    """Every file under `root` git would not ignore, in directory order; `check()` is called
    now and then (it raises at the deadline)."""
    if not os.path.isdir(root):
        yield root
        return
    stack = [(root, Ignores.above(root, cwd).with_dir(root))]
    while stack:
        check()
        directory, ignores = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue  # unreadable: ripgrep skips it too
        subdirs = []
        for entry in entries:
            if entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and entry.name in SKIPPED_DIRS or ignores.ignored(entry.path, is_dir):
                continue
            if is_dir:
                subdirs.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield entry.path
        for sub in reversed(subdirs):
            stack.append((sub, ignores.with_dir(sub)))


def listed(root: str, cwd: str, rg: str, timeout: float | None) -> list[str]:
    """The files of `walk`, listed by ripgrep (`rg --files`), parents' rules applied here."""
    import subprocess

    argv = [rg, "--files", "--null", *RG_FLAGS, "--", root]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise ToolError("the search took too long and was stopped") from e
    if done.returncode not in (0, 1) and not done.stdout:
        raise ToolError(f"ripgrep: {done.stderr.decode('utf-8', 'replace').strip()}")
    paths = [os.fsdecode(p) for p in done.stdout.split(b"\0") if p]
    return unignored_above(paths, root, cwd)


def unignored_above(paths: list[str], root: str, cwd: str) -> list[str]:
    """`paths` less those the `.gitignore` files above `root` ignore (ripgrep reads none)."""
    above = Ignores.above(root, cwd) if os.path.isdir(root) else Ignores()
    if not above:
        return paths
    return [p for p in paths if not _under_ignored(p, root, above)]


def _under_ignored(path: str, root: str, above: Ignores) -> bool:
    """Whether the rules above `root` ignore the file or a directory on its way from `root`."""
    rel = os.path.relpath(path, root).split(os.sep)
    here = root
    for part in rel[:-1]:
        here = os.path.join(here, part)
        if above.ignored(here, True):
            return True
    return above.ignored(path, False)
