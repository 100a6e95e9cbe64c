"""Case: the Grep tool over a 5,000-file tree (issue 40). Standalone:

    python bench/grep_case.py [--runs N] [--out FILE]

- Grep (files_with_matches, the default mode) through agi's tool with ripgrep, against `rg -l`
  itself with the same flags: target within 2x when ripgrep is installed.
- The same Grep with the Python search (`AGI_RG=`), recorded beside them.
- content mode with ripgrep, against `rg --json` itself.

The tree: 5,000 files in 50 directories, 40 lines each, one file in ten holding the pattern,
a `.gitignore` that ignores a tenth of the tree. Ratios are recorded, never asserted
(bench/results/ keeps runs with their command).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from agi.tools.protocol import ToolContext  # noqa: E402
from agi.tools.search import Grep  # noqa: E402
from agi.tools.walk import RG_FLAGS  # noqa: E402

FILES, DIRS = 5000, 50


def build(root: Path) -> None:
    (root / ".gitignore").write_text("d049/\n")
    line = "def function_{n}(value):\n    return value * {n}  # ordinary code\n"
    for i in range(FILES):
        directory = root / f"d{i % DIRS:03}"
        directory.mkdir(exist_ok=True)
        body = "".join(line.format(n=n) for n in range(20))
        if i % 10 == 0:
            body += "# NEEDLE_MARK here\n"
        (directory / f"f{i:05}.py").write_text(body)


def timed(fn, runs: int) -> float:
    fn()  # warm the page cache and the imports
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rg = shutil.which("rg")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build(root)
        ctx = ToolContext(cwd=str(root))
        grep = Grep()
        found: dict[str, str] = {}

        def tool(mode: str, key: str):
            def run() -> None:
                found[key] = grep.run({"pattern": "NEEDLE_MARK", "output_mode": mode}, ctx)

            return run

        def raw(*extra: str):
            argv = [rg or "rg", *RG_FLAGS, *extra, "-e", "NEEDLE_MARK", "--", str(root)]
            return lambda: subprocess.run(argv, capture_output=True, cwd=root, check=False)

        result: dict[str, object] = {"files": FILES, "runs": args.runs, "ripgrep": rg}
        if rg is not None:
            os.environ.pop("AGI_RG", None)
            result["rg_files_s"] = timed(raw("--files-with-matches", "--null"), args.runs)
            result["grep_files_s"] = timed(tool("files_with_matches", "rg"), args.runs)
            result["rg_json_s"] = timed(raw("--json"), args.runs)
            result["grep_content_s"] = timed(tool("content", "rg-content"), args.runs)
            result["files_ratio"] = result["grep_files_s"] / result["rg_files_s"]  # type: ignore[operator]
            result["content_ratio"] = result["grep_content_s"] / result["rg_json_s"]  # type: ignore[operator]
        os.environ["AGI_RG"] = ""
        result["python_files_s"] = timed(tool("files_with_matches", "python"), args.runs)
        if rg is not None:
            result["same_results"] = found["rg"] == found["python"]
        result["matching_files"] = found["python"].splitlines()[0]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
