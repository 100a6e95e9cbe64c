"""User-defined tools: any executable that describes itself with `--describe` (docs: tools).

`TOOL --describe` prints `{"name", "description", "parameters"}`; a call runs TOOL with the input
JSON object on stdin, stdout and stderr interleaved are the result, a non-zero exit makes it
`Error (exit N): …`. Descriptions are cached by (realpath, mtime_ns, size) so startup does not
run every tool again.

Errors: a tool named explicitly (`--tool PATH`) that cannot be loaded is a UsageError (exit 2);
one found by scanning a directory (`--tools-dir`, the config's `tools/`) becomes a warning and is
skipped, so one broken script does not stop every run.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agi.errors import ToolError, UsageError
from agi.fileio import loads, read_text
from agi.policy.environment import child_env
from agi.tools.protocol import ToolContext, ToolText
from agi.tools.shell import Processes, kill_group, run_process

if TYPE_CHECKING:
    from agi.tools.shell import Output

DEFAULT_TIMEOUT = 120.0  # seconds a call may take
DESCRIBE_TIMEOUT = 10.0  # seconds `--describe` may take
NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
CACHE_VERSION = 1


@dataclass
class ExternalTool:
    """One executable offered to the model under the name it gave in `--describe`."""

    path: str
    name: str
    description: str
    parameters: dict[str, Any]
    timeout: float = DEFAULT_TIMEOUT
    processes: Processes = field(default_factory=Processes, repr=False, compare=False)

    def interrupt(self) -> None:
        self.processes.interrupt()

    def close(self) -> None:
        self.processes.close()

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        if not os.access(self.path, os.X_OK):
            raise ToolError(f"{self.path} is no longer an executable file")
        timeout = self.timeout
        left = ctx.remaining()
        if left is not None:
            timeout = min(timeout, left)
        output, code, timed_out = self.execute(json.dumps(input), ctx, timeout)
        text = output.text().strip("\n")
        if timed_out:
            raise ToolError(
                f"{self.name} timed out after {timeout:g} s and was killed"
                + (f"; its output so far:\n{text}" if text else "")
            )
        if code != 0:
            # not raised: Toolbox would prefix `Error: `; the model reads `Error (exit N): …`
            return ToolText.failure(f"Error (exit {code}): {text or '(no output)'}")
        return text or "(no output)"

    def execute(self, stdin: str, ctx: ToolContext, timeout: float) -> tuple[Output, int, bool]:
        """Run the executable as Bash runs commands: own process group, one pipe, deadline.

        The input comes from a private temporary file, so a tool that never reads stdin cannot
        block us and large inputs are no problem.
        """
        with tempfile.TemporaryFile() as f:
            f.write(stdin.encode("utf-8"))
            f.seek(0)
            return run_process(
                [self.path],
                ctx.cwd,
                timeout,
                ctx.environ(),
                stdin=f,
                sandbox=ctx.sandbox,
                processes=self.processes,
            )


def validate(description: Any, where: str) -> dict[str, Any]:
    """The `--describe` object checked and reduced to name, description, parameters."""
    if not isinstance(description, dict):
        raise UsageError(f"{where}: --describe must print a JSON object")
    name, text, params = (description.get(k) for k in ("name", "description", "parameters"))
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise UsageError(f"{where}: --describe 'name' must match {NAME_RE.pattern}, got {name!r}")
    if not isinstance(text, str) or not text.strip():
        raise UsageError(f"{where}: --describe 'description' must be a non-empty string")
    if not isinstance(params, dict) or params.get("type") != "object":
        raise UsageError(
            f"{where}: --describe 'parameters' must be a JSON Schema object ({{\"type\": "
            f'"object", "properties": …}}), got {json.dumps(params)[:200]}'
        )
    if not isinstance(params.get("properties", {}), dict):
        raise UsageError(f"{where}: --describe 'parameters.properties' must be an object")
    return {"name": name, "description": text, "parameters": params}


def describe(
    path: str, timeout: float = DESCRIBE_TIMEOUT, live: list[Any] | None = None
) -> dict[str, Any]:
    """Run `PATH --describe` (stdin empty, its own process group) and validate what it prints;
    the process is in `live` while it runs (for a --timeout to kill it)."""
    where = f"tool {path}"
    try:
        proc = subprocess.Popen(
            [path, "--describe"],
            env=child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        raise UsageError(f"{where}: cannot run it: {e.strerror or e}") from e
    if live is not None:
        live.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        kill_group(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        raise UsageError(f"{where}: --describe timed out after {timeout:g} s") from e
    if proc.returncode != 0:
        why = (err or out).decode("utf-8", "replace").strip().splitlines()
        raise UsageError(
            f"{where}: --describe failed (exit {proc.returncode})"
            + (f": {why[-1][:300]}" if why else "")
        )
    if live is not None and proc in live:
        live.remove(proc)
    try:
        data = loads(out)
    except ValueError as e:
        shown = out.decode("utf-8", "replace").strip()[:200]
        raise UsageError(
            f"{where}: --describe did not print valid JSON ({e}): {shown or '(nothing)'}"
        ) from e
    return validate(data, where)


class DescriptionCache:
    """`--describe` results by realpath, valid while mtime_ns and size are unchanged.

    Stored as one JSON file, replaced atomically; a missing or corrupt file is an empty cache.
    """

    def __init__(self, file: str | Path | None):
        self.file = Path(file) if file else None
        self.entries: dict[str, Any] = {}
        self.changed = False
        if self.file is None:
            return
        try:
            data = loads(read_text(self.file, 64 << 20))
        except (OSError, ValueError, UsageError):
            return
        if isinstance(data, dict) and data.get("version") == CACHE_VERSION:
            tools = data.get("tools")
            self.entries = tools if isinstance(tools, dict) else {}

    @staticmethod
    def stamp(path: str) -> tuple[str, int, int] | None:
        try:
            real = os.path.realpath(path)
            st = os.stat(real)
        except OSError:
            return None
        return real, st.st_mtime_ns, st.st_size

    def get(self, stamp: tuple[str, int, int] | None) -> dict[str, Any] | None:
        if stamp is None:
            return None
        real, mtime_ns, size = stamp
        entry = self.entries.get(real)
        if not isinstance(entry, dict):
            return None
        if entry.get("mtime_ns") != mtime_ns or entry.get("size") != size:
            return None
        try:
            return validate(entry.get("description"), real)
        except UsageError:  # hand-edited or from another version: describe again
            return None

    def put(self, stamp: tuple[str, int, int] | None, description: dict[str, Any]) -> None:
        """Remember a description under the stamp taken *before* `--describe` ran."""
        if stamp is not None:
            real, mtime_ns, size = stamp
            self.entries[real] = {"mtime_ns": mtime_ns, "size": size, "description": description}
            self.changed = True

    def save(self) -> None:
        """Write the file if anything changed, dropping entries whose file is gone."""
        if self.file is None or not self.changed:
            return
        entries = {p: e for p, e in self.entries.items() if os.path.exists(p)}
        data = json.dumps({"version": CACHE_VERSION, "tools": entries}, indent=1, sort_keys=True)
        tmp = ""
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".tool-cache-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(data)
            os.replace(tmp, self.file)
            self.changed = False
        except OSError:
            pass  # a cache that cannot be written only costs the next startup some time
        finally:
            if tmp and os.path.exists(tmp):
                os.unlink(tmp)


def check_executable(path: str | Path) -> str:
    """The absolute path of an executable regular file, or a UsageError saying what is wrong."""
    p = os.path.abspath(os.path.expanduser(str(path)))
    if not os.path.exists(p):
        raise UsageError(f"tool {path}: no such file")
    if not os.path.isfile(p):
        raise UsageError(f"tool {path}: not a regular file")
    if not os.access(p, os.X_OK):
        raise UsageError(f"tool {path}: not executable (chmod +x {shlex.quote(str(path))})")
    return p


def scan(directory: str | Path) -> list[str]:
    """Every executable regular file in a directory, sorted; hidden files and backups~ skipped."""
    d = Path(directory).expanduser()
    if not d.is_dir():
        raise UsageError(f"tools directory {directory}: not a directory")
    found = []
    for entry in sorted(d.iterdir()):
        if entry.name.startswith(".") or entry.name.endswith("~"):
            continue
        if entry.is_file() and os.access(entry, os.X_OK):
            found.append(str(entry.absolute()))
    return found


def _describe_all(paths: list[str], cache: DescriptionCache) -> list[dict[str, Any] | UsageError]:
    """Descriptions in order: from the cache, or by running the misses concurrently."""
    stamps = [cache.stamp(p) for p in paths]
    results: list[dict[str, Any] | UsageError | None] = [cache.get(s) for s in stamps]
    misses = [i for i, r in enumerate(results) if r is None]

    live: list[Any] = []  # the --describe processes running

    def one(path: str) -> dict[str, Any] | UsageError:
        try:
            return describe(path, live=live)
        except UsageError as e:
            return e

    if misses:
        with ThreadPoolExecutor(max_workers=min(8, len(misses))) as pool:
            try:
                for i, got in zip(misses, pool.map(one, [paths[i] for i in misses]), strict=True):
                    results[i] = got
                    if isinstance(got, dict):
                        cache.put(stamps[i], got)
            except BaseException:  # --timeout or a signal: the waits end now (docs: tools)
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in list(live):
                    kill_group(proc)
                raise
    return [r for r in results if r is not None]  # every slot is filled by now


def load_tools(
    files: Iterable[str | Path] = (),
    dirs: Iterable[str | Path] = (),
    cache_file: str | Path | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[list[ExternalTool], list[str]]:
    """What the CLI calls: tool files (errors raise UsageError), then directories (warnings)."""
    cache = DescriptionCache(cache_file)
    try:
        return _load(files, dirs, cache, timeout)
    finally:
        cache.save()


def load_tool(path: str | Path, cache: DescriptionCache | None = None) -> ExternalTool:
    """One tool; any problem is a UsageError naming the file."""
    return _load([path], [], cache or DescriptionCache(None))[0][0]


def load_dir(
    directory: str | Path, cache: DescriptionCache | None = None
) -> tuple[list[ExternalTool], list[str]]:
    """Every executable in a directory; broken ones become warnings and are skipped."""
    return _load([], [directory], cache or DescriptionCache(None))


def _load(
    files: Iterable[str | Path],
    dirs: Iterable[str | Path],
    cache: DescriptionCache,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[list[ExternalTool], list[str]]:
    """Duplicate names: the first one wins, later ones are skipped with a warning."""
    explicit = [check_executable(f) for f in files]
    paths = explicit + [p for d in dirs for p in scan(d)]
    tools: list[ExternalTool] = []
    warnings: list[str] = []
    seen: dict[str, str] = {}
    for n, (path, got) in enumerate(zip(paths, _describe_all(paths, cache), strict=True)):
        if isinstance(got, UsageError):
            if n < len(explicit):
                raise got
            warnings.append(f"{got}; skipped")
            continue
        name = got["name"]
        if name in seen:
            if os.path.realpath(seen[name]) != os.path.realpath(path):
                warnings.append(f"tool {path}: the name {name} is taken by {seen[name]}; skipped")
            continue
        seen[name] = path
        tools.append(ExternalTool(path, name, got["description"], got["parameters"], timeout))
    return tools, warnings
