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
directory. A restore writes each file beside itself and renames it into place, after journalling
the temporary name, so a kill at any moment leaves every file whole (old or new content) and
the next snapshot or restore removes what a killed one left behind (agi.checkpoints.plumbing).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agi.checkpoints.plumbing import (
    CONFIG,
    END,
    NO_ATTRIBUTES,
    Blobs,
    ShadowError,
    TooMany,
    checked_path,
    ignore_rules,
    key_of,
    nul_joined,
    object_name,
    project_excludes,
    write_whole,
)
from agi.policy.environment import child_env
from agi.sessions.files import append_bytes, make_private_dir, read_bytes, replace_file

__all__ = ["Blobs", "ShadowError", "TooMany", "checked_path", "object_name", "write_whole"]
MAX_FILE = 5 * 1024 * 1024
MAX_FILES = 50_000
ADD_LISTED = 2_000  # more changed files than this: `git add -A` over the whole tree
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"


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
                self.git(["add", "-A", *pathspec], nul_joined([f":(literal){p}" for p in some]))
        except ShadowError:
            specs = [".", *(f":(exclude,literal){p}" for p in [*skip, *self.keep_out])]
            self.git(["add", "-A", *pathspec], nul_joined(specs), ok=(0, 1))
        if indexed:  # grown past the limit since the last snapshot: out of it now (not
            # `git rm --cached`, which refuses a path whose index entry no commit holds)
            self.git(["update-index", "-z", "--force-remove", "--stdin"], nul_joined(indexed))
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
            yield ignore_rules(self, folder, tree, excludes)

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


def put(shadow: Shadow, rel: str, data: bytes, mode: str) -> None:
    """Write one file (or link) whole: beside it, journalled, then renamed into place."""
    path = checked_path(shadow.workdir, rel)
    write_whole(path, data, mode, shadow.note_temporary)
