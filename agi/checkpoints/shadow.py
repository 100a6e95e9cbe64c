"""A shadow git repository: snapshots of a working directory that never touch its own `.git`.

One repository per working directory, `$AGI_HOME/checkpoints/<key>/` (objects shared by every
session working there), with one index per session (`index-<owner>`), so two sessions in one
directory keep separate checkpoints. Every `git` runs with its own GIT_DIR, GIT_WORK_TREE and
GIT_INDEX_FILE, no system or user configuration, no hooks, and attributes switched off (no
filters, no line-ending conversion): the work tree's `.gitignore` files are honoured, nothing
else of the user's git is read, and the project's `.git` is never opened for writing.

A snapshot is a tree object (`git add -A`, `git write-tree`); files over MAX_FILE bytes, and
files holding a key, are left out and named, and a tree of more than MAX_FILES files is not
snapshotted at all (TooMany). Object names are checked as hex and given after
`--end-of-options`; a dry run (`Shadow.dry`) writes its snapshot to a temporary index and object
directory.
A restore writes each file beside itself and renames it into place, after journalling the
temporary name, so a kill at any moment leaves every file whole (old or new content) and the
next snapshot or restore removes what a killed one left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agi.policy.environment import child_env
from agi.sessions.files import append_bytes, make_private_dir, read_bytes, replace_file

MAX_FILE = 5 * 1024 * 1024
MAX_FILES = 50_000
ADD_LISTED = 2_000  # more changed files than this: `git add -A` over the whole tree
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
OBJECT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
END = "--end-of-options"  # every object name after it: never taken for an option
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
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


class ShadowError(Exception):
    """git failed (or is missing) for a checkpoint."""


class TooMany(Exception):
    """The tree holds more than MAX_FILES files."""


@dataclass
class Snapshot:
    tree: str
    skipped: list[str] = field(default_factory=list)  # files over MAX_FILE, left out
    files: int = 0
    withheld: list[str] = field(default_factory=list)  # files holding a key, left out
    excludes: str | None = None  # the blob of the project's own ignore rules (info/exclude)
    stamps: dict[str, list[int]] = field(default_factory=dict)  # left out: [size, mtime_ns]


@dataclass
class Change:
    """One path that differs between two trees, seen from the older one."""

    status: str  # A: created since, D: deleted since, M/T: changed since
    path: str
    mode: str  # the older tree's mode ("000000" when absent there)
    sha: str  # the older tree's blob
    now_mode: str = ""  # the newer tree's mode ("160000": a nested repository)


def key_of(text: str) -> str:
    return hashlib.sha256(os.fsencode(text)).hexdigest()[:16]


class Shadow:
    """The shadow repository of `workdir`, seen through the index of one session (`owner`)."""

    def __init__(
        self,
        home: Path,
        workdir: str,
        owner: str,
        keep_out: tuple[Path, ...] = (),
        secrets: list[bytes] | None = None,
    ):
        """`keep_out`: directories never snapshotted nor restored (the session, $AGI_HOME);
        `secrets`: keys no snapshot keeps (a file holding one is left out, as one over 5 MB)."""
        self.workdir = os.path.realpath(workdir)
        self.secrets = [k for k in secrets or [] if k]
        self.scratch: str | None = None  # a dry run's: its index and objects, removed after
        root = self.workdir.rstrip("/") + "/"
        outs = [os.path.realpath(p) for p in keep_out]
        self.keep_out = [p[len(root) :] for p in outs if p.startswith(root)]
        name = "".join(c if c.isalnum() else "_" for c in os.path.basename(self.workdir))[:40]
        self.dir = home / "checkpoints" / f"{key_of(self.workdir)}-{name or 'root'}"
        self.index = self.dir / f"index-{owner}"
        self.journal = self.dir / f"restoring-{owner}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in child_env().items() if not k.startswith("GIT_")}
        env.update(
            GIT_DIR=str(self.dir),
            GIT_WORK_TREE=self.workdir,
            GIT_INDEX_FILE=str(self.index),
            GIT_CONFIG_NOSYSTEM="1",
            GIT_CONFIG_GLOBAL=os.devnull,
            GIT_ATTR_NOSYSTEM="1",
            GIT_TERMINAL_PROMPT="0",
            GIT_NO_REPLACE_OBJECTS="1",
            HOME=str(self.dir),
            XDG_CONFIG_HOME=str(self.dir),
            LC_ALL="C",
        )
        if self.scratch is not None:  # nothing written to the repository nor its index
            env.update(
                GIT_INDEX_FILE=os.path.join(self.scratch, "index"),
                GIT_OBJECT_DIRECTORY=os.path.join(self.scratch, "objects"),
                GIT_ALTERNATE_OBJECT_DIRECTORIES=str(self.dir / "objects"),
            )
        return env

    @contextlib.contextmanager
    def dry(self) -> Iterator[None]:
        """Within it, snapshots go to a temporary index and object directory (the session's
        index copied in, the repository's objects readable), all removed at the end: a dry run
        or a listing writes nothing of agi's."""
        import tempfile

        self.scratch = tempfile.mkdtemp(prefix="agi-dry-")
        try:
            os.mkdir(os.path.join(self.scratch, "objects"))
            index = read_bytes(self.index)
            if index is not None:
                with open(os.path.join(self.scratch, "index"), "wb") as f:
                    f.write(index)
            yield
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def git(self, args: list[str], data: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
        try:
            done = subprocess.run(
                ["git", *args],
                input=data,
                capture_output=True,
                cwd=self.workdir,
                env=self.env(),
                check=False,
            )
        except OSError as e:
            raise ShadowError(f"cannot run git: {e.strerror or e}") from e
        if done.returncode not in ok:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise ShadowError(f"git {args[0]} failed: {why[-1] if why else done.returncode}")
        return done.stdout

    def ensure(self) -> None:
        """Create the repository (built under another name and renamed: a kill leaves none or
        a whole one); remove what a killed snapshot or restore left behind."""
        if self.scratch is not None:
            if not (self.dir / "HEAD").exists():
                raise ShadowError(f"{self.dir} is gone: the checkpoint is lost")
            return
        if not (self.dir / "HEAD").exists():
            make_private_dir(self.dir.parent)
            building = self.dir.with_name(f".{self.dir.name}.{os.getpid()}")
            shutil.rmtree(building, ignore_errors=True)
            env = {**self.env(), "GIT_DIR": str(building)}
            del env["GIT_WORK_TREE"], env["GIT_INDEX_FILE"]
            try:
                subprocess.run(
                    ["git", "init", "-q", "--bare", str(building)],
                    env=env,
                    capture_output=True,
                    check=True,
                )
                (building / "config").write_text(CONFIG)
                (building / "info").mkdir(exist_ok=True)
                (building / "info" / "attributes").write_text(NO_ATTRIBUTES)
                (building / "agi-workdir").write_text(self.workdir + "\n")
                (building / "hooks").mkdir(exist_ok=True)
                os.chmod(building, 0o700)
                os.rename(building, self.dir)
            except (OSError, subprocess.CalledProcessError) as e:
                if not (self.dir / "HEAD").exists():
                    raise ShadowError(f"cannot create {self.dir}: {e}") from e
            finally:
                shutil.rmtree(building, ignore_errors=True)
        self.tidy()
        wanted = project_excludes(self.workdir)
        exclude = self.dir / "info" / "exclude"
        if (read_bytes(exclude) or b"") != wanted:  # the same for every session here
            replace_file(exclude, wanted)

    def tidy(self) -> None:
        """Locks and temporary files of a killed run (we hold the session's lock: ours)."""
        self.index.with_name(self.index.name + ".lock").unlink(missing_ok=True)
        for name in (read_bytes(self.journal) or b"").split(b"\0"):
            if name and os.path.lexists(name) and not os.path.isdir(name):
                os.unlink(name)
        self.journal.unlink(missing_ok=True)

    def indexed(self) -> int:
        """How many files the session's index holds (from its header)."""
        index = self.index if self.scratch is None else os.path.join(self.scratch, "index")
        try:
            with open(index, "rb") as f:
                head = f.read(12)
        except OSError:
            return 0
        return int.from_bytes(head[8:12], "big") if head[:4] == b"DIRC" else 0

    def listing(self) -> tuple[list[str], int]:
        """The files that changed since the last snapshot or are new (not ignored), and how
        many files the snapshot will hold; TooMany past MAX_FILES (the listing stops there)."""
        args = ["git", "ls-files", "-z", "-t", "-m", "-o", "--exclude-standard", "--", "."]
        args += [f":(exclude,literal){p}" for p in self.keep_out]
        try:
            proc = subprocess.Popen(
                args,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=self.workdir,
                env=self.env(),
            )
        except OSError as e:  # the directory is gone, or git is
            raise ShadowError(f"cannot list {self.workdir}: {e.strerror or e}") from e
        assert proc.stdout is not None
        chunks, count = [], self.indexed()
        try:
            while chunk := proc.stdout.read(1 << 16):
                chunks.append(chunk)
                count += chunk.count(b"\0? ") + chunk.startswith(b"? ")  # new files
                if count > MAX_FILES:
                    raise TooMany()
        finally:
            if proc.poll() is None and count > MAX_FILES:
                proc.kill()
            proc.stdout.close()
            proc.wait()
        if proc.returncode != 0:  # an unreadable index: never a snapshot that misses changes
            raise ShadowError(f"git ls-files failed (exit {proc.returncode})")
        # each entry: "? PATH" (new) or "C PATH" (in the index, changed or gone)
        return [os.fsdecode(p) for p in b"".join(chunks).split(b"\0") if p], count

    def snapshot(self) -> Snapshot:
        """The work tree now, as a tree object; a damaged index (a git killed with agi) is
        dropped and the snapshot taken afresh."""
        self.ensure()
        index = Path(self.env()["GIT_INDEX_FILE"])
        try:
            return self._snapshot()
        except ShadowError:
            if not index.exists():
                raise
            index.unlink()
            return self._snapshot()

    def _snapshot(self) -> Snapshot:
        """One walk of the tree (`listing`); then only the files it found changed or new are
        added (all of them the first time). Files over MAX_FILE, and files holding a key
        (read here, before git does), are left out."""
        fresh = not os.path.exists(self.env()["GIT_INDEX_FILE"])
        changed, files = self.listing()
        big, indexed = [], []  # over MAX_FILE; of those, the ones the index holds
        keyed: list[str] = []  # holding a key
        stamps: dict[str, list[int]] = {}
        for entry in changed:
            rel = entry[2:]
            try:
                st = os.lstat(os.path.join(self.workdir, rel))
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if st.st_size > MAX_FILE:
                big.append(rel)
            elif self.secrets and self._holds_key(rel):
                keyed.append(rel)
            else:
                continue
            stamps[rel] = [st.st_size, st.st_mtime_ns]
            if not entry.startswith("?"):
                indexed.append(rel)
        pathspec = ["--pathspec-from-file=-", "--pathspec-file-nul"]
        skip = {*big, *keyed}  # and nested repositories (`dir/`): a gitlink at most
        some = [e[2:] for e in changed if e[2:] not in skip and not e.endswith("/")]
        try:
            if fresh or len(some) > ADD_LISTED:
                raise ShadowError("add them all")
            if some:  # a file gone since the listing fails this: then the whole tree
                self.git(["add", "-A", *pathspec], _nul([f":(literal){p}" for p in some]))
        except ShadowError:
            specs = [".", *(f":(exclude,literal){p}" for p in [*skip, *self.keep_out])]
            self.git(["add", "-A", *pathspec], _nul(specs), ok=(0, 1))
        if indexed:  # grown past the limit since the last snapshot: out of it now (not
            # `git rm --cached`, which refuses a path whose index entry no commit holds)
            self.git(["update-index", "-z", "--force-remove", "--stdin"], _nul(indexed))
        tree = self.git(["write-tree"]).decode().strip()
        return Snapshot(tree, big, files, keyed, self._excludes(), stamps)

    def _holds_key(self, rel: str) -> bool:
        try:
            fd = os.open(
                os.path.join(self.workdir, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
            )
        except OSError:
            return False
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE + 1)
        return any(k in data for k in self.secrets)

    def _excludes(self) -> str | None:
        """The blob of the repository's info/exclude (the project's own ignore rules), kept
        so a rewind judges what was ignored by the rules of the checkpoint."""
        data = read_bytes(self.dir / "info" / "exclude") or b""
        if not data:
            return None
        sha = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        loose = Path(self.env().get("GIT_OBJECT_DIRECTORY") or self.dir / "objects")
        if (
            not (loose / sha[:2] / sha[2:]).exists()
            and not (self.dir / "objects" / sha[:2] / sha[2:]).exists()
        ):
            self.git(["hash-object", "-w", "--stdin"], data)
        return sha

    def kept_out(self, rel: str) -> bool:
        return any(rel == p or rel.startswith(p + "/") for p in self.keep_out)

    def changes(self, old: str, new: str) -> list[Change]:
        """What differs from tree `old` to tree `new`, file by file."""
        if old == new:
            return []
        out = self.git(
            ["diff-tree", "-r", "-z", "--no-renames", END, object_name(old), object_name(new)]
        )
        parts = out.split(b"\0")
        found = []
        for head, path in zip(parts[0::2], parts[1::2], strict=False):
            if not head.startswith(b":"):
                continue
            mode, now_mode, sha, _, status = head[1:].decode("ascii", "replace").split(" ")
            object_name(sha)
            if not self.kept_out(os.fsdecode(path)):
                found.append(Change(status[0], os.fsdecode(path), mode, sha, now_mode))
        return found

    @contextlib.contextmanager
    def rules(self, tree: str, excludes: str | None) -> Iterator[Callable[[list[str]], set[str]]]:
        """The ignore rules of checkpoint `tree` (its `.gitignore` files, and `excludes`: the
        project's own rules then), as a function saying which of some paths they ignore; in a
        temporary directory, removed after."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="agi-rules-") as folder:
            yield self._rules(folder, tree, excludes)

    def hidden(self, ignored: Callable[[list[str]], set[str]], since: float) -> list[str]:
        """Files the work tree holds now that the checkpoint's rules (`ignored`, from `rules`)
        do not ignore but today's rules do: a turn wrote a rule over files it made. Only files
        changed after `since` (the turn's start) count: what was there before is never taken
        for the turn's. Nested repositories are left alone."""
        args = ["ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory", "--", "."]
        out = self.git([*args, *(f":(exclude,literal){p}" for p in self.keep_out)])
        entries = [os.fsdecode(p) for p in out.split(b"\0") if p]
        if not entries:
            return []
        files: list[str] = []
        before = ignored(entries)
        for entry in (e for e in entries if e not in before):
            if not entry.endswith("/"):
                files.append(entry)
                continue
            top = os.path.join(self.workdir, entry)
            for dirpath, dirnames, filenames in os.walk(top):
                if ".git" in dirnames or ".git" in filenames:
                    dirnames.clear()  # a repository of its own: not ours to remove
                    continue
                rel = os.path.relpath(dirpath, self.workdir)
                links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
                files += [os.path.join(rel, n) for n in [*filenames, *links]]
                if len(files) > MAX_FILES:
                    raise TooMany()
        kept = ignored(files)
        found = []
        for rel in files:
            if rel in kept or self.kept_out(rel):
                continue
            try:
                if os.lstat(os.path.join(self.workdir, rel)).st_ctime >= since - 1:
                    found.append(rel)
            except OSError:
                continue
        return sorted(found)

    def _rules(
        self, rules: str, tree: str, excludes: str | None
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
        out = self.git(["ls-tree", "-r", "-z", END, object_name(tree)])
        wanted = []
        for entry in out.split(b"\0"):
            head, _, path = entry.partition(b"\t")
            name = os.fsdecode(path)
            regular = head.split(b" ")[:2] in ([b"100644", b"blob"], [b"100755", b"blob"])
            if regular and os.path.basename(name) == ".gitignore":  # a link: git reads none
                wanted.append((name, head.split(b" ")[2].decode()))
        with Blobs(self) as blobs:
            for name, sha in wanted:
                write_whole(checked_path(work, name), blobs.read(sha), "100644")
            if excludes is not None:
                data = blobs.read(excludes)
            else:
                data = read_bytes(self.dir / "info" / "exclude") or b""
        with open(os.path.join(git_dir, "info", "exclude"), "wb") as out_file:
            out_file.write(data)
        env = {**self.env(), "GIT_DIR": git_dir, "GIT_WORK_TREE": work}
        for name in ("GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"):
            env.pop(name, None)

        def ignored(paths: list[str]) -> set[str]:
            if not paths:
                return set()
            done = subprocess.run(
                ["git", "check-ignore", "--no-index", "-z", "--stdin"],
                input=_nul(paths),
                capture_output=True,
                cwd=work,
                env=env,
                check=False,
            )
            if done.returncode not in (0, 1):
                raise ShadowError("git check-ignore failed")
            return {os.fsdecode(p) for p in done.stdout.split(b"\0") if p}

        return ignored

    def names(self, tree: str) -> set[str]:
        """The paths of a tree's files."""
        out = self.git(["ls-tree", "-r", "-z", "--name-only", END, object_name(tree)])
        return {os.fsdecode(p) for p in out.split(b"\0") if p}

    def restore(self, tree: str, changes: list[Change]) -> tuple[list[str], list[str]]:
        """Bring the files of `changes` back to tree `tree`: created ones removed, the others
        written back whole. Returns (restored paths, failures as text)."""
        done, failed = [], []
        for change in sorted(changes, key=lambda c: c.status != "A"):  # removals first
            if change.status == "A":
                try:
                    self._remove(change.path, tree)
                    done.append(change.path)
                except OSError as e:
                    failed.append(f"{change.path}: {e.strerror or e}")
        wanted = [c for c in changes if c.status != "A" and c.mode != "160000"]
        with Blobs(self) as blobs:
            for change in wanted:
                try:
                    put(self, change.path, blobs.read(change.sha), change.mode)
                    done.append(change.path)
                except (OSError, ShadowError) as e:
                    failed.append(f"{change.path}: {getattr(e, 'strerror', None) or e}")
        self.journal.unlink(missing_ok=True)
        return done, failed

    def _remove(self, rel: str, tree: str) -> None:
        path = checked_path(self.workdir, rel)
        if os.path.lexists(path) and not os.path.isdir(path) or os.path.islink(path):
            os.unlink(path)
        parent = os.path.dirname(path)
        while parent != self.workdir and parent.startswith(self.workdir + os.sep):
            try:
                os.rmdir(parent)  # only when empty: what the turn made for the file
            except OSError:
                break
            parent = os.path.dirname(parent)

    def note_temporary(self, path: str) -> None:
        append_bytes(self.journal, os.fsencode(path) + b"\0")


class Blobs:
    """`git cat-file --batch`, one blob at a time."""

    def __init__(self, shadow: Shadow):
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


def put(shadow: Shadow, rel: str, data: bytes, mode: str) -> None:
    """Write one file (or link) whole: beside it, journalled, then renamed into place."""
    path = checked_path(shadow.workdir, rel)
    write_whole(path, data, mode, shadow.note_temporary)


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


def _nul(items: list[str]) -> bytes:
    return b"\0".join(os.fsencode(i) for i in items) + b"\0"
