"""Measuring processes: wall time around each, CPU and peak RSS from its rusage; and the report."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Sample:
    wall: float  # seconds
    cpu: float  # user + system seconds of the process (and children it waited for)
    rss: float  # peak resident set size, MiB
    code: int
    out: str = field(repr=False, default="")
    err: str = field(repr=False, default="")


TIME = "/usr/bin/time" if Path("/usr/bin/time").exists() else None
# Without GNU time, a small Python wrapper reports RUSAGE_CHILDREN (its own ~9 MiB is a floor).
WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "open(sys.argv[1], 'w').write(str(rss))\n"
    "sys.exit(code)\n"
)


def wrapped(cmd: list[str], rss_file: str) -> list[str]:
    """`cmd` under a small parent that reports its peak RSS: forking from this (large) process
    would count our own pages as the child's, which /usr/bin/time's tiny process does not."""
    if TIME:
        return [TIME, "-f", "%M", "-o", rss_file, *cmd]
    return [sys.executable, "-c", WRAPPER, rss_file, *cmd]


class Running:
    """One wrapped process; its output goes to temporary files, read once it has ended."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path | None = None):
        # closed in ended(); the process writes to them while this object lives
        self.out = tempfile.TemporaryFile()  # noqa: SIM115
        self.err = tempfile.TemporaryFile()  # noqa: SIM115
        fd, self.rss_file = tempfile.mkstemp(prefix="agi-bench-rss-")
        os.close(fd)
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            wrapped(cmd, self.rss_file),
            stdin=subprocess.DEVNULL,
            stdout=self.out,
            stderr=self.err,
            env=env,
            cwd=cwd,
        )

    def ended(self, status: int, usage: Any) -> Sample:
        wall = time.perf_counter() - self.started
        self.proc.returncode = code = os.waitstatus_to_exitcode(status)
        with open(self.rss_file) as f:
            lines = f.read().split()
        os.unlink(self.rss_file)
        rss = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
        outputs = []
        for f in (self.out, self.err):
            f.seek(0)
            outputs.append(f.read().decode("utf-8", "replace"))
            f.close()
        # CPU: the wrapper's rusage, which includes the child it waited for (and ~1 ms of its own)
        return Sample(wall, usage.ru_utime + usage.ru_stime, rss, code, *outputs)


def measure(cmd: list[str], env: dict[str, str], timeout: float = 300, cwd: Path | None = None):
    """Run `cmd` once: wall time around it, CPU and peak RSS from rusage."""
    run = Running(cmd, env, cwd)
    timer = threading.Timer(timeout, run.proc.kill)
    timer.start()
    _, status, usage = os.wait4(run.proc.pid, 0)
    timer.cancel()
    return run.ended(status, usage)


def measure_many(cmds: list[list[str]], env: dict[str, str], timeout: float = 300):
    """Start every command at once; (total wall, samples in start order)."""
    started = time.perf_counter()
    runs = [Running(cmd, env) for cmd in cmds]
    by_pid = {r.proc.pid: (i, r) for i, r in enumerate(runs)}
    killer = threading.Timer(timeout, lambda: [r.proc.kill() for r in runs])
    killer.start()
    samples: list[Any] = [None] * len(cmds)
    for _ in cmds:
        pid, status, usage = os.wait4(-1, 0)
        i, run = by_pid[pid]
        samples[i] = run.ended(status, usage)
    killer.cancel()
    return time.perf_counter() - started, samples


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary(samples: list[Sample]) -> dict[str, float]:
    return {
        "wall_ms": round(median([s.wall for s in samples]) * 1000, 1),
        "cpu_ms": round(median([s.cpu for s in samples]) * 1000, 1),
        "rss_mib": round(max(s.rss for s in samples), 1) if samples else float("nan"),
        "n": len(samples),
    }


class Failures(list):
    def check(self, what: str, s: Sample, answer: str | None) -> Sample:
        """Record a run that failed: a non-zero exit, or `answer` missing from its stdout."""
        if s.code != 0 or (answer is not None and answer not in s.out):
            self.append(f"{what}: exit {s.code}, stdout {s.out[-200:]!r}, stderr {s.err[-600:]!r}")
        return s


def alternate(
    variants: dict[str, Any], runs: int, failures: Failures, few: dict[str, int] | None = None
) -> dict[str, list[Sample]]:
    """Each variant is (cmd, env, answer); one untimed warm-up each, then runs in turn.
    `few` caps some variants' runs (llm at 200 tool steps takes ~20 s a run)."""
    for name, (cmd, env, answer) in variants.items():
        failures.check(f"{name} (warm-up)", measure(cmd(), env), answer)
    samples: dict[str, list[Sample]] = {name: [] for name in variants}
    names = list(variants)
    for i in range(runs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            if len(samples[name]) >= (few or {}).get(name, runs):
                continue
            cmd, env, answer = variants[name]
            samples[name].append(failures.check(name, measure(cmd(), env), answer))
    return samples


def ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("nan")


@dataclass
class Report:
    rows: list[dict[str, Any]] = field(default_factory=list)  # one line of the table each
    targets: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def row(self, case: str, what: str, s: dict[str, Any], **extra: Any) -> None:
        self.rows.append({"case": case, "what": what, **s, **extra})
        cols = f"{s.get('wall_ms', ''):>9} ms {s.get('cpu_ms', ''):>9} ms {s.get('rss_mib', ''):>7}"
        more = "  ".join(f"{k}={v}" for k, v in extra.items())
        print(f"  {what:<38}{cols} MiB  n={s.get('n', '')}  {more}", flush=True)

    def target(self, name: str, value: float, limit: float, unit: str = "", also: str = "") -> None:
        met = value <= limit
        self.targets.append(
            {"target": name, "value": value, "limit": limit, "met": met, "also": also}
        )
        verdict = ("met" if met else "MISSED") + (f"  [{also}]" if also else "")
        print(f"  target {name}: {value:g}{unit} (<= {limit:g}{unit}) {verdict}")

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)


def header(title: str) -> None:
    print(f"\n== {title}  (load average {os.getloadavg()[0]:.1f})", flush=True)
    print(f"  {'':<38}{'wall (median)':>12} {'cpu (median)':>12} {'peak RSS':>11}", flush=True)
