"""Checkpoints (docs: checkpoints): what a turn's checkpoint costs, and the first snapshot.

- A generated tree of 5,000 files (100 directories of 50 text files, 0.2-8 KB), or the tree
  named by `AGI_BENCH_PROJECT` (a checkout of a real project; only read: snapshots never write
  to the work tree).
- First snapshot: the shadow repository's first `snapshot()` of the tree (every file hashed
  and stored): its time and the disk the repository takes.
- Warm, in process: what a turn adds, its start and end snapshots, after 3 files changed
  (in the generated tree only).
- Warm, end to end: the real `agi` running one turn with one Bash call (`true`) against the
  scripted server, with checkpoints and with `--no-checkpoints`, alternated; the difference of
  the medians is what checkpoints add to a turn (the contract's budget: 100 ms).

Recorded, never asserted: `python bench/checkpoint_case.py [--runs N] [--save]` prints JSON and
with --save writes bench/results/<date>-checkpoints.json.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from agi.checkpoints.shadow import Shadow  # noqa: E402

from fakeserver import FakeModel, call, text  # noqa: E402

AGI = shutil.which("agi", path=str(Path(sys.executable).parent)) or shutil.which("agi")


def generate(root: Path, files: int = 5000, per_dir: int = 50) -> None:
    rng = random.Random(5000)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "zeta",
        "eta",
        "theta",
        "iota",
        "kappa",
        "lambda",
    ]
    for i in range(files):
        folder = root / f"pkg{i // per_dir:03}"
        folder.mkdir(parents=True, exist_ok=True)
        size = rng.randint(200, 8000)
        body = " ".join(rng.choice(words) for _ in range(size // 6))
        (folder / f"mod{i % per_dir:02}.py").write_text(body[:size] + "\n")


def disk_use(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def in_process(tree: Path, home: Path, runs: int, change: bool) -> dict[str, object]:
    shadow = Shadow(home, str(tree), "bench")
    started = time.perf_counter()
    first = shadow.snapshot()
    cold = time.perf_counter() - started
    result: dict[str, object] = {
        "files": first.files,
        "first_snapshot_s": round(cold, 3),
        "shadow_disk_mib": round(disk_use(shadow.dir) / 2**20, 2),
    }
    candidates = [p for p in tree.rglob("*.py")][:50] if change else []  # never a real project
    turns = []
    time.sleep(1.1)  # files written in the index's second are re-read until it is rewritten
    for n in range(runs + 2):  # the first two: a warm-up, not counted
        for p in candidates[n % 10 :: 17][:3]:
            p.write_text(p.read_text() + f"# turn {n}\n")
        started = time.perf_counter()
        shadow.snapshot()  # the turn's start
        shadow.snapshot()  # and its end
        if n >= 2:
            turns.append(time.perf_counter() - started)
    result["warm_turn_ms_median"] = round(statistics.median(turns) * 1000, 1)
    result["warm_turn_ms_max"] = round(max(turns) * 1000, 1)
    return result


def end_to_end(tree: Path, work: Path, runs: int) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGI_", "OPENAI_", "XDG_"))}
    env.update(AGI_HOME=str(work / "home"), AGI_CONFIG=str(work / "none.toml"))
    times: dict[str, list[float]] = {"checkpoints": [], "no_checkpoints": []}

    def step(body: dict) -> dict:
        return (
            text("ok") if body["messages"][-1]["role"] == "tool" else call("Bash", command="true")
        )

    with FakeModel(step) as server:
        env.update(AGI_BASE_URL=server.url, AGI_MODEL="fake-model")
        for n in range(runs + 1):  # the first of each: a warm-up, not counted
            for label, flags in (("checkpoints", []), ("no_checkpoints", ["--no-checkpoints"])):
                session = work / f"s-{label}"
                started = time.perf_counter()
                r = subprocess.run(
                    [AGI, "-s", str(session), *flags, "go"],
                    cwd=tree,
                    env=env,
                    capture_output=True,
                    text=True,
                    stdin=subprocess.DEVNULL,
                )
                took = time.perf_counter() - started
                if r.returncode != 0:
                    raise SystemExit(f"agi failed: {r.stderr}")
                if n:
                    times[label].append(took)
    on, off = (statistics.median(times[k]) for k in ("checkpoints", "no_checkpoints"))
    return {
        "turn_s_median_checkpoints": round(on, 3),
        "turn_s_median_no_checkpoints": round(off, 3),
        "checkpoint_cost_per_turn_ms": round((on - off) * 1000, 1),
        "runs": runs,
    }


def main() -> int:
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 10
    with tempfile.TemporaryDirectory(prefix="agi-bench-ckpt-") as tmp:
        work = Path(tmp)
        project = os.environ.get("AGI_BENCH_PROJECT")
        tree = Path(project) if project else work / "tree"
        if not project:
            generate(tree)
        report = {
            "case": "checkpoints",
            "tree": project or "generated, 5000 files",
            "load": os.getloadavg()[0],
            "in_process": in_process(tree, work / "home-ip", runs, change=not project),
            "end_to_end": end_to_end(tree, work, runs),  # `true`: nothing in the tree changes
        }
    print(json.dumps(report, indent=1))
    if "--save" in sys.argv:
        project = os.environ.get("AGI_BENCH_PROJECT")
        kind = f"checkpoints-{Path(project).name}" if project else "checkpoints"
        out = HERE / "results" / f"{time.strftime('%Y-%m-%d')}-{kind}.json"
        out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
