"""The git plumbing under agi.checkpoints.shadow (docs: checkpoints): the shadow repository's
configuration, object names checked as hex, blobs read through `git cat-file --batch`, the
project's own ignore rules read, and files written whole (beside themselves, then renamed).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from agi.sessions.files import read_bytes


class Repository(Protocol):
    """What reading blobs and ignore rules needs of a shadow repository (agi.checkpoints.shadow)."""

    workdir: str
    dir: Path

    def env(self) -> dict[str, str]: ...

    def git(
        self, args: list[str], data: bytes | None = None, ok: tuple[int, ...] = (0,)
    ) -> bytes: ...


OBJECT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
END = "--end-of-options"  # every object name after it: never taken for an option
CONFIG = """[core]
\trepositoryformatversion = 0
\tfilemode = true
\tbare = true
\tsymlinks = true
\tautocrlf = false
\tsafecrlf = false
\tfsmonitor = false
\tquotePath = false
\thooksPath = /dev/null
\tlogAllRefUpdates = false
[gc]
\tauto = 0
[commit]
\tgpgSign = false
[add]
\tignoreErrors = true
"""
NO_ATTRIBUTES = "* -text -eol -filter -ident -diff -merge -working-tree-encoding\n"


def key_of(text: str) -> str:
    return hashlib.sha256(os.fsencode(text)).hexdigest()[:16]


def owner_of(session_path: Path) -> str:
    """The key of a session's index and records in shadow repositories."""
    return key_of(os.path.realpath(session_path))


class ShadowError(Exception):
    """git failed (or is missing) for a checkpoint."""


class TooMany(Exception):
    """The tree holds more than MAX_FILES files."""


class Blobs:
    """`git cat-file --batch`, one blob at a time."""

    def __init__(self, shadow: Repository):
        self.shadow = shadow
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Blobs:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.communicate()  # closes its input: it ends

    def read(self, sha: str) -> bytes:
        if self.proc is None:
            self.proc = subprocess.Popen(
                ["git", "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=self.shadow.workdir,
                env=self.shadow.env(),
            )
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(object_name(sha).encode() + b"\n")
        proc.stdin.flush()
        head = proc.stdout.readline().split()
        if len(head) != 3 or head[1] != b"blob":
            raise ShadowError(f"the checkpoint lacks object {sha}")
        data = proc.stdout.read(int(head[2]))
        proc.stdout.read(1)
        return data


def ignore_rules(
    repo: Repository, rules: str, tree: str, excludes: str | None
) -> Callable[[list[str]], set[str]]:
    """A directory holding only the ignore rules of checkpoint `tree`, and the function
    that says which of some paths those rules ignore (`git check-ignore`)."""
    git_dir, work = os.path.join(rules, "git"), os.path.join(rules, "work")
    for sub in ("objects", "refs", "info"):
        os.makedirs(os.path.join(git_dir, sub))
    os.mkdir(work)
    with open(os.path.join(git_dir, "HEAD"), "w") as f:
        f.write("ref: refs/heads/main\n")
    with open(os.path.join(git_dir, "config"), "w") as f:
        f.write(CONFIG)
    out = repo.git(["ls-tree", "-r", "-z", END, object_name(tree)])
    wanted = []
    for entry in out.split(b"\0"):
        head, _, path = entry.partition(b"\t")
        name = os.fsdecode(path)
        regular = head.split(b" ")[:2] in ([b"100644", b"blob"], [b"100755", b"blob"])
        if regular and os.path.basename(name) == ".gitignore":  # a link: git reads none
            wanted.append((name, head.split(b" ")[2].decode()))
    with Blobs(repo) as blobs:
        for name, sha in wanted:
            write_whole(checked_path(work, name), blobs.read(sha), "100644")
        if excludes is not None:
            data = blobs.read(excludes)
        else:
            data = read_bytes(repo.dir / "info" / "exclude") or b""
    with open(os.path.join(git_dir, "info", "exclude"), "wb") as out_file:
        out_file.write(data)
    env = {**repo.env(), "GIT_DIR": git_dir, "GIT_WORK_TREE": work}
    for name in ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"):
        env.pop(name, None)

    def ignored(paths: list[str]) -> set[str]:
        if not paths:
            return set()
        done = subprocess.run(
            ["git", "check-ignore", "--no-index", "-z", "--stdin"],
            input=nul_joined(paths),
            capture_output=True,
            cwd=work,
            env=env,
            check=False,
        )
        if done.returncode not in (0, 1):
            raise ShadowError("git check-ignore failed")
        return {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}

    return ignored


def project_excludes(workdir: str) -> bytes:
    """What the project ignores beyond the work tree's own .gitignore files, read (never
    written): its `.git/info/exclude` and, when the working directory lies inside a git work
    tree, the unanchored patterns of the `.gitignore` files above it (`node_modules/`, `*.o`)."""
    lines: list[bytes] = []
    here, above = workdir, []
    while not os.path.exists(os.path.join(here, ".git")):
        parent = os.path.dirname(here)
        if parent == here:
            return _read_lines(os.path.join(workdir, ".git", "info", "exclude"))
        here = parent
        above.append(here)
    for folder in reversed(above):
        for line in _read_lines(os.path.join(folder, ".gitignore")).splitlines():
            pattern = line.strip().lstrip(b"!").rstrip(b"/")
            if pattern and not line.startswith(b"#") and b"/" not in pattern:
                lines.append(line)
    own = _read_lines(os.path.join(here, ".git", "info", "exclude"))
    if not above:
        return own
    lines += [x for x in own.splitlines() if b"/" not in x.strip().lstrip(b"!").rstrip(b"/")]
    return b"".join(x + b"\n" for x in lines)


def _read_lines(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return b""


def object_name(sha: str) -> str:
    """A git object name as agi's records and git's output give them: hex, 40 or 64 digits
    (never an option, a revision expression or a path)."""
    if not isinstance(sha, str) or OBJECT.fullmatch(sha) is None:
        raise ShadowError(f"{str(sha)[:80]!r} is not an object name")
    return sha


def checked_path(workdir: str, rel: str) -> str:
    """`workdir/rel`, refused when it is not a plain path below `workdir` (no `..`, no `.git`)
    or a directory on the way is a link (never written through)."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise OSError(0, "not a plain relative path")
    here = workdir
    for part in parts[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here):
            raise OSError(0, f"{here} is a symbolic link; not written through")
    return os.path.join(workdir, *parts)


def write_whole(path: str, data: bytes, mode: str, note: object = None) -> None:
    """Put `data` at `path` atomically; `mode` is git's (100644, 100755, 120000)."""
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    if os.path.isdir(path) and not os.path.islink(path):
        raise OSError(0, "a directory stands there now")
    try:
        current = os.lstat(path)
    except FileNotFoundError:
        current = None
    name = os.path.basename(path)[:200]
    tmp = os.path.join(parent, f".{name}.agi-rewind.tmp")
    if callable(note):
        note(tmp)
    if os.path.lexists(tmp):
        os.unlink(tmp)
    if mode == "120000":
        os.symlink(os.fsdecode(data), tmp)
    else:
        executable = mode == "100755"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
            0o777 if executable else 0o666,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if current is not None and stat.S_ISREG(current.st_mode):
                bits = stat.S_IMODE(current.st_mode)
                bits = bits | (bits & 0o444) >> 2 if executable else bits & ~0o111
                os.fchmod(fd, bits)
        finally:
            os.close(fd)
    os.replace(tmp, path)


def nul_joined(items: list[str]) -> bytes:
    return b"\0".join(os.fsencode(i) for i in items) + b"\0"
