"""One-shot runs and start-up of two checkouts of agi, in the same run, on the same interpreter.

    git worktree add /tmp/agi-before COMMIT
    python bench/commits.py /tmp/agi-before [--runs 15]

Each program is `python -m agi …` started in the checkout's directory, so that checkout's `agi`
package is the one imported (the interpreter and its dependencies are shared). The cases
alternate, run after run, so that load on a noisy machine falls on both alike; the ratio
(this checkout / the other) of the medians is what to read, CPU time more than wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from fakeserver import FakeModel, text  # noqa: E402


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system of the child) seconds of one run, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} in {cwd} failed: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other", type=Path, help="the other checkout (a git worktree)")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="agi-bench-commits-"))
    trees = {"this": ROOT, "other": args.other.resolve()}
    for tree in trees.values():  # both with bytecode (PYTHONDONTWRITEBYTECODE may be set)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "agi")], check=True)
    with FakeModel(text("The answer.")) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGI_", "OPENAI_"))} | {
            "AGI_HOME": str(home / "home"),
            "XDG_CONFIG_HOME": str(home / "config"),
        }
        env |= {"AGI_BASE_URL": server.url, "AGI_MODEL": "bench-model", "NO_COLOR": "1"}
        py = [sys.executable, "-m", "agi"]
        cases = {
            "agi --version": [*py, "--version"],
            "one-shot": [*py, "--no-stdin", "What is the answer?"],
            "import agi": [sys.executable, "-c", "import agi"],
        }
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            for case, argv in cases.items():
                for name, tree in trees.items():
                    results.setdefault((case, name), []).append(timed(argv, tree, env))
    print(f"load average {os.getloadavg()[0]:.1f}; {args.runs} runs each; other: {args.other}")
    print(
        f"{'case':16} {'this wall':>10} {'other wall':>10} {'this cpu':>9} {'other cpu':>9}  ratio"
    )
    for case in cases:
        this, other = results[(case, "this")], results[(case, "other")]
        tw, ow = (statistics.median(w for w, _ in r) * 1000 for r in (this, other))
        tc, oc = (statistics.median(c for _, c in r) * 1000 for r in (this, other))
        print(
            f"{case:16} {tw:8.1f}ms {ow:8.1f}ms {tc:7.1f}ms {oc:7.1f}ms  wall {tw / ow:.3f}x"
            f" cpu {tc / oc:.3f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
