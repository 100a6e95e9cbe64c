"""Case: the Grep tool over a 5,000-file tree (issue 40). Standalone:

    python bench/grep_case.py [--runs N] [--out FILE]

- Grep (files_with_matches, the default mode) through agi's tool with ripgrep, against `rg -l`
  itself with the same flags: target within 2x when ripgrep is installed.
- The same Grep with the Python search (`AGI_RG=`), recorded beside them.
- content mode with ripgrep (which reads `rg -n --null` lines), against plain `rg -n` itself
  (`content_ratio`, target within 2x) and against `rg --json` (`content_json_ratio`); and the
  same for a pattern on 18,000 lines (`many_*`: agi reads them all, then shows about 30,000
  characters).

The tree: 5,000 files in 50 directories, 40 lines each, one file in ten holding the pattern,
a `.gitignore` that ignores a tenth of the tree. Each ratio is the median of paired samples
(the tool and ripgrep timed one after the other, in turn), so that a loaded machine's drift
between phases does not enter it. Ratios are recorded, never asserted (bench/results/ keeps
runs with their command).
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
MANY = r"value \* 1[0-3]"  # 4 of each file's 40 lines: 18,000, under the 20,000 records' bound


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


def paired(ours, theirs, runs: int) -> tuple[float, float, float]:
    """Medians of `ours` and `theirs` timed in turn, and the median of their per-pair ratios."""
    ours(), theirs()  # warm the page cache and the imports
    a, b = [], []
    for _ in range(runs):
        for fn, samples in ((ours, a), (theirs, b)):
            started = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - started)
    ratio = statistics.median(x / y for x, y in zip(a, b, strict=True))
    return statistics.median(a), statistics.median(b), ratio


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

        def tool(mode: str, key: str, pattern: str = "NEEDLE_MARK"):
            def run() -> None:
                found[key] = grep.run({"pattern": pattern, "output_mode": mode}, ctx)

            return run

        def raw(*extra: str, pattern: str = "NEEDLE_MARK"):
            argv = [rg or "rg", *RG_FLAGS, *extra, "-e", pattern, "--", str(root)]
            return lambda: subprocess.run(argv, capture_output=True, cwd=root, check=False)

        result: dict[str, object] = {"files": FILES, "runs": args.runs, "ripgrep": rg}
        if rg is not None:
            os.environ.pop("AGI_RG", None)
            files = tool("files_with_matches", "rg"), raw("--files-with-matches", "--null")
            ours, theirs, ratio = paired(*files, args.runs)
            result.update(grep_files_s=ours, rg_files_s=theirs, files_ratio=ratio)
            content = tool("content", "rg-content")
            lines = raw("--line-number", "--with-filename", "--null", "--no-heading")
            ours, theirs, ratio = paired(content, lines, args.runs)
            result.update(grep_content_s=ours, rg_lines_s=theirs, content_ratio=ratio)
            ours, theirs, ratio = paired(content, raw("--json"), args.runs)
            result.update(rg_json_s=theirs, content_json_ratio=ratio)
            many = tool("content", "rg-many", MANY)
            lines = raw("--line-number", "--with-filename", "--null", "--no-heading", pattern=MANY)
            ours, theirs, ratio = paired(many, lines, args.runs)
            result.update(many_grep_s=ours, many_rg_lines_s=theirs, many_ratio=ratio)
            ours, theirs, ratio = paired(many, raw("--json", pattern=MANY), args.runs)
            result.update(many_rg_json_s=theirs, many_json_ratio=ratio)
        os.environ["AGI_RG"] = ""
        result["python_files_s"] = timed(tool("files_with_matches", "python"), args.runs)
        if rg is not None:
            tool("content", "python-content")()  # once, untimed: the same lines?
            result["same_results"] = found["rg"] == found["python"]
            result["same_content"] = found["rg-content"] == found["python-content"]
            tool("content", "python-many", MANY)()
            result["same_many"] = found["rg-many"] == found["python-many"]
        result["matching_files"] = found["python"].splitlines()[0]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
