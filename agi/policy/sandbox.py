"""The bubblewrap sandbox (`--sandbox`): which paths a run may write, and the bwrap command line.

Commands (Bash, user tools, terminals) run under `bwrap` with the whole filesystem read-only,
a private /tmp, new PID/IPC/UTS (and, with `--no-network`, network) namespaces and no
capabilities; in `workspace` mode the `--allow-write` directories are bound writable. The
native Write/Edit/TempDir tools ask `check_write` / `temp_dir` so they obey the same rules.

Why each flag: `--unshare-pid` hides the user's other processes (through `/proc/PID/root` a
process of the same user can otherwise write outside the sandbox); `--cap-drop ALL` stops root
from remounting `/` read-write; `--dev /dev` keeps raw disks out of reach; `--die-with-parent`
ends a command with agi, but is left out for terminals: PR_SET_PDEATHSIG follows the *thread*
that forked, and a terminal outlives the tool call's worker thread. No `--new-session`: it
takes the controlling terminal from the Terminal tool's programs (no job control, no Ctrl-C),
and run_process already starts a new session without a terminal to inject keystrokes into.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agi.errors import ToolError, UsageError

MODES = ("off", "read-only", "workspace")
INSTALL_HINT = (
    "install bubblewrap: apt-get install bubblewrap (Debian, Ubuntu) "
    "or dnf install bubblewrap (Fedora)"
)
USERNS_HINT = (
    "unprivileged user namespaces may be disabled: sysctl kernel.unprivileged_userns_clone=1 "
    "(Debian), kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu 24.04); in a container, "
    "allow unshare(2) (docker run --security-opt seccomp=unconfined, or run agi as root)"
)
PROBE_TIMEOUT = 10.0  # seconds `bwrap … true` may take
_scratch_lock = threading.Lock()  # TempDir calls run concurrently


def under(path: str, root: str) -> bool:
    """Whether `path` is `root` or inside it (both absolute and normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def depth(path: str) -> int:
    return len(Path(path).parts)


@dataclass
class Policy:
    """A run's sandbox: mode, writable directories (real absolute paths), network on or off."""

    mode: str = "off"
    writable: tuple[str, ...] = ()
    network: bool = True
    bwrap: str | None = field(default=None, compare=False)  # once `check` found it working
    scratch: str | None = field(default=None, compare=False)  # TempDir's parent, made on use
    # files no command may read (the key agi signs checkpoint records with; docs: checkpoints)
    hidden: tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def load(
        cls,
        mode: str | None,
        allow_write: Iterable[str] = (),
        no_network: bool = False,
        cwd: str | None = None,
    ) -> Policy:
        """The policy from the merged options; nonsense combinations are UsageErrors."""
        mode = mode or "off"
        if mode not in MODES:
            raise UsageError(f"--sandbox must be one of {', '.join(MODES)}, not {mode!r}")
        if mode == "off":
            if no_network:
                raise UsageError("--no-network needs a sandbox: add --sandbox read-only|workspace")
            return cls()
        dirs: list[str] = []
        if mode == "workspace":
            for d in list(allow_write) or [cwd or os.getcwd()]:
                real = os.path.realpath(os.path.expanduser(d))
                if not os.path.isdir(real):
                    raise UsageError(f"--allow-write {d}: not a directory")
                dirs.append(real)
        return cls(mode, tuple(dict.fromkeys(dirs)), not no_network)

    def widened(self, dirs: Iterable[str]) -> Policy:
        """In workspace mode, this policy with more writable directories (the Claude Agent
        SDKs' --add-dir, docs: sandbox); any other mode as it is (read-only writes nothing)."""
        if self.mode != "workspace":
            return self
        more = [os.path.realpath(os.path.expanduser(d)) for d in dirs]
        return replace(self, writable=tuple(dict.fromkeys([*self.writable, *more])))

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Policy:
        """The policy a trace recorded (for `--show`)."""
        writable = tuple(str(d) for d in record.get("writable") or ())
        return cls(str(record.get("mode", "off")), writable, record.get("network") is not False)

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def label(self) -> str:
        """For people: `read-only`, `workspace (writable: /src), no network`."""
        text = self.mode
        if self.mode == "workspace":
            text += f" (writable: {', '.join(self.writable)})"
        return text + ("" if self.network or not self.enabled else ", no network")

    def record(self) -> dict[str, Any]:
        """For the trace, which `--show` reads back."""
        return {"mode": self.mode, "writable": list(self.writable), "network": self.network}

    def check(self) -> None:
        """Make sure bwrap exists and can build this sandbox; never fall back to none."""
        if not self.enabled or self.bwrap:
            return
        import shutil
        import subprocess

        found = shutil.which("bwrap")
        if found is None:
            raise UsageError(
                f"--sandbox {self.mode} needs bwrap, which is not on PATH; {INSTALL_HINT}"
            )
        probe = self._argv(found, ["true"], "/")
        try:
            done = subprocess.run(probe, capture_output=True, timeout=PROBE_TIMEOUT, cwd="/")
        except (OSError, subprocess.TimeoutExpired) as e:
            raise UsageError(f"--sandbox {self.mode}: cannot run {found}: {e}") from e
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise UsageError(
                f"--sandbox {self.mode}: bwrap cannot set up a sandbox here"
                + (f" ({why[-1]})" if why else f" (exit {done.returncode})")
                + f"; {USERNS_HINT}"
            )
        self.bwrap = found

    def wrap(
        self, argv: list[str], cwd: str | None = None, die_with_parent: bool = True
    ) -> list[str]:
        """`argv` as it runs in this sandbox (unchanged when the sandbox is off)."""
        if not self.enabled:
            return list(argv)
        self.check()
        assert self.bwrap is not None
        return self._argv(self.bwrap, argv, cwd, die_with_parent)

    def _argv(
        self, bwrap: str, argv: list[str], cwd: str | None, die_with_parent: bool = True
    ) -> list[str]:
        binds = [d for d in self.writable if not any(o != d and under(d, o) for o in self.writable)]
        if self.scratch and not any(under(self.scratch, d) for d in binds):
            binds.append(self.scratch)
        out = [bwrap, "--ro-bind", "/", "/"]
        late: list[tuple[str, str]] = []  # mounts on top of the private /tmp
        for d in binds:
            if under(d, "/tmp"):
                late.append(("--bind", d))
            else:
                out += ["--bind", d, d]
        # the working directory and the program's directory must stay visible under /tmp
        shown = [cwd] if cwd else []
        if argv and os.path.isabs(argv[0]):
            shown += [os.path.dirname(argv[0]), os.path.dirname(os.path.realpath(argv[0]))]
        for p in dict.fromkeys(os.path.realpath(p) for p in shown):
            if under(p, "/tmp") and not any(under(p, d) for d in binds):
                late.append(("--ro-bind", p))
        out += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        for how, p in sorted(late, key=lambda m: depth(m[1])):  # parents before children
            out += [how, p, p]
        seen = [*binds, *(p for _, p in late)]
        for p in self.hidden:  # under the private /tmp only when a mount shows it
            if os.path.isfile(p) and (not under(p, "/tmp") or any(under(p, d) for d in seen)):
                out += ["--ro-bind", "/dev/null", p]
        out += ["--unshare-all", "--cap-drop", "ALL"]
        if die_with_parent:
            out.append("--die-with-parent")
        if self.network:
            out.append("--share-net")
        if cwd:
            out += ["--chdir", cwd]
        return [*out, "--", *argv]

    def allows_write(self, path: str | os.PathLike[str]) -> bool:
        """Whether the native tools may write `path` (symlinks and `..` resolved first)."""
        if not self.enabled:
            return True
        real = os.path.realpath(os.path.expanduser(path))
        roots = [*self.writable, *([self.scratch] if self.scratch else [])]
        return any(under(real, root) for root in roots)

    def check_write(self, path: str | os.PathLike[str]) -> Path:
        """The real path to write, or a ToolError the model reads; write there, not to `path`."""
        if not self.enabled:
            return Path(path)
        if not self.allows_write(path):
            allowed = f" (writable: {', '.join(self.writable)})" if self.writable else ""
            raise ToolError(f"the sandbox ({self.mode}) does not allow writing {path}{allowed}")
        return Path(os.path.realpath(os.path.expanduser(path)))

    def temp_dir(self) -> str:
        """A new private directory that the native tools and every later command may write."""
        import tempfile

        if not self.enabled:
            path = tempfile.mkdtemp(prefix="agi-")
        else:
            with _scratch_lock:
                if self.scratch is None:
                    self.scratch = os.path.realpath(tempfile.mkdtemp(prefix="agi-sandbox-"))
            path = tempfile.mkdtemp(prefix="agi-", dir=self.scratch)
        os.chmod(path, 0o700)
        return path
