"""Case 10: `agi --batch` (issue 30) against a process per prompt.

- 100 trivial jobs (one-step answers from the loopback server): `agi --batch FILE --jobs 4`
  against `xargs -P 4 -n 1 agi --no-stdin`, taking turns in the same run. Reported: the wall
  ratio (xargs / batch; the issue asks >= 3x, aims at 10x) and the batch's peak RSS, the whole
  batch being one process (<= 60 MiB); for xargs, the largest single agi's.
- 1,000 jobs against 100: the batch's wall time per job and its peak RSS must stay flat (no
  growth with the job count).

Every output line is checked: one per job, exit 0, the expected answer.

    python bench/run.py --cases batch          # with the other cases' machinery
    python bench/batch_case.py --save          # alone (--runs N, --big N); results/DATE-batch.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cases import ANSWER  # noqa: E402
from measure import Sample, alternate, header, measure, ratio, summary  # noqa: E402

PROMPT = "bench steps=0: job {i}"


def job_file(work: Path, n: int) -> tuple[Path, Path]:
    """The same n prompts as batch lines and as one prompt a line for xargs."""
    jobs, plain = work / f"batch-{n}.jsonl", work / f"prompts-{n}.txt"
    prompts = [PROMPT.format(i=i) for i in range(n)]
    jobs.write_text(
        "".join(json.dumps({"id": i, "prompt": p}) + "\n" for i, p in enumerate(prompts))
    )
    plain.write_text("".join(p + "\n" for p in prompts))
    return jobs, plain


def lines_ok(sample: Sample, n: int) -> str | None:
    """What is wrong with a batch's output, or None: n lines, every job exit 0 and answered."""
    try:
        results = [json.loads(line) for line in sample.out.splitlines()]
    except ValueError as e:
        return f"a line that is not JSON: {e}"
    if sample.code != 0 or len(results) != n:
        return f"exit {sample.code}, {len(results)} lines of {n}: {sample.err[-300:]!r}"
    bad = [r for r in results if r.get("exit") != 0 or ANSWER not in str(r.get("answer"))]
    return f"{len(bad)} jobs failed, e.g. {bad[0]}" if bad else None


def checked(b: Any, what: str, sample: Sample, n: int) -> Sample:
    problem = lines_ok(sample, n)
    if problem:
        b.failures.append(f"{what}: {problem}")
    return sample


def batch_cmd(b: Any, jobs: Path) -> list[str]:
    return [str(b.programs.agi), "--batch", str(jobs), "--jobs", "4"]


def xargs_cmd(b: Any, plain: Path) -> list[str]:
    agi = str(b.programs.agi)
    return ["xargs", "-a", str(plain), "-d", "\n", "-P", "4", "-n", "1", agi, "--no-stdin"]


def compare(b: Any, runs: int) -> dict[str, Any]:
    """100 jobs: the batch and xargs taking turns."""
    p = b.programs
    jobs, plain = job_file(p.work, 100)
    variants = {
        "agi --batch --jobs 4": (lambda: batch_cmd(b, jobs), p.agi_env, None),
        "xargs -P 4 agi": (lambda: xargs_cmd(b, plain), p.agi_env, ANSWER),
    }
    samples = alternate(variants, runs, b.failures)
    for s in samples["agi --batch --jobs 4"]:
        checked(b, "batch of 100", s, 100)
    for s in samples["xargs -P 4 agi"]:
        if s.out.count(ANSWER) != 100:
            b.failures.append(f"xargs: {s.out.count(ANSWER)} answers of 100")
    return {name: summary(v) for name, v in samples.items()}


def scale(b: Any, big: int, runs: int) -> dict[str, Any]:
    """The batch at 100 and at `big` jobs: wall per job and peak RSS."""
    p = b.programs
    out: dict[str, Any] = {}
    for n in (100, big):
        jobs, _ = job_file(p.work, n)
        samples = [checked(b, f"batch of {n}", measure(batch_cmd(b, jobs), p.agi_env), n)]
        samples += [
            checked(b, f"batch of {n}", measure(batch_cmd(b, jobs), p.agi_env), n)
            for _ in range(runs - 1)
        ]
        s = summary(samples)
        s["per_job_ms"] = round(s["wall_ms"] / n, 2)
        s["cpu_per_job_ms"] = round(s["cpu_ms"] / n, 2)
        out[str(n)] = s
    return out


def run_case(b: Any, big: int = 1000) -> None:
    header("10. batch: 100 trivial jobs, agi --batch --jobs 4 against xargs -P 4 agi")
    runs = max(1, min(b.runs, 5))
    s = compare(b, runs)
    b.report.raw["batch"] = {"100": s}
    for name, v in s.items():
        b.report.row("batch", f"100 jobs: {name}", v)
    batch, xargs = s["agi --batch --jobs 4"]["wall_ms"], s["xargs -P 4 agi"]["wall_ms"]
    speedup = ratio(xargs, batch)
    b.report.raw["batch"]["speedup"] = speedup
    b.report.target(
        "batch of 100: agi --batch / xargs -P 4 agi wall",
        ratio(batch, xargs),
        0.333,
        "x",
        also=f"{speedup}x faster; 3x asked, 10x aimed at",
    )
    b.report.target("batch of 100: peak RSS", s["agi --batch --jobs 4"]["rss_mib"], 60, " MiB")
    header(f"10. batch: 100 against {big} jobs (time per job, memory)")
    grown = scale(b, big, max(1, min(b.runs, 3)))
    b.report.raw["batch"]["scale"] = grown
    for n, v in grown.items():
        b.report.row("batch", f"{n} jobs, per job {v['per_job_ms']} ms", v)
    small, large = grown["100"], grown[str(big)]
    b.report.target(
        f"batch: per-job wall at {big} / at 100",
        ratio(large["per_job_ms"], small["per_job_ms"]),
        1.2,
    )
    b.report.target(
        f"batch: peak RSS growth from 100 to {big} jobs",
        round(large["rss_mib"] - small["rss_mib"], 1),
        5,
        " MiB",
    )


def main() -> int:
    """The case alone: its own server, programs and report."""
    import argparse
    import os
    import shutil
    import tempfile

    from cases import Bench, Programs, Script
    from measure import Failures, Report
    from run import find_agi

    from fakeserver import FakeModel

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--big", type=int, default=1000)
    p.add_argument("--agi")
    p.add_argument("--save", action="store_true", help="write results/<date>-batch.json")
    args = p.parse_args()
    work, cwd = Path(tempfile.mkdtemp(prefix="agi-bench-batch-")), os.getcwd()
    os.chdir(work)
    script, report, failures = Script(), Report(), Failures()
    try:
        with FakeModel(script) as server:
            script.server = server
            programs = Programs(find_agi(args.agi), None, server.url, work)
            bench = Bench(programs, script, report, failures, args.runs, 1, (0, 0), 0, 0)
            run_case(bench, args.big)
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    for f in failures:
        print(f"bench: FAILED {f}")
    if args.save:
        import time

        saved = {"rows": report.rows, "targets": report.targets, "raw": report.raw}
        saved["load_average"] = round(os.getloadavg()[0], 1)
        saved["command"] = "python bench/batch_case.py " + " ".join(sys.argv[1:])
        path = HERE / "results" / f"{time.strftime('%Y-%m-%d')}-batch.json"
        path.write_text(json.dumps(saved, indent=1) + "\n")
        print(f"bench: saved {path.relative_to(HERE.parent)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
