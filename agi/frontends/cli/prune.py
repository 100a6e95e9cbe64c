"""`agi --prune AGE [--dry-run]` (docs: volume): the old sessions under $AGI_HOME removed (or
listed), one path a line on stdout; a session a run holds locked is kept and named on stderr."""

from __future__ import annotations

import argparse
import sys

from agi.errors import UsageError
from agi.options.config import agi_home
from agi.sessions.prune import age_of, prune


def prune_command(args: argparse.Namespace) -> int:
    if args.prompt:
        raise UsageError("--prune takes no prompt")
    age = age_of(args.prune, "--prune")
    done = prune(agi_home(), age, dry_run=bool(args.dry_run))
    for path in [*done.sessions, *done.repositories, *done.blobs]:
        sys.stdout.write(f"{path}\n")
    for path in done.locked:
        sys.stderr.write(f"agi: kept {path}: a run holds it\n")
    sys.stdout.flush()
    return 0
