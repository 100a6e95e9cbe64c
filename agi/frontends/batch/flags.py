"""The command-line options of `agi --batch` (kept light: the parser is built for --version too)."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

BATCH_ONLY = ("jobs", "batch_out", "shard")


def workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 1024:
        raise argparse.ArgumentTypeError(f"must be 1 to 1024: {text!r}")
    return value


def add_options(p: Any) -> None:
    """--batch, --jobs, --batch-out, --shard (CONTRACT section 19)."""
    p.add_argument(
        "--batch",
        metavar="FILE",
        help="run every JSON line of FILE ('-': stdin) as a job; one JSON line out per job",
    )
    p.add_argument("--jobs", type=workers, metavar="N", help="with --batch: jobs run at once (4)")
    p.add_argument(
        "--batch-out",
        metavar="FILE",
        help="with --batch: append the output lines to FILE too, and skip the jobs it holds "
        "with exit 0 (resume)",
    )
    p.add_argument(
        "--shard",
        metavar="K/N",
        help="with --batch: run only the jobs whose index modulo N is K (0-based)",
    )
