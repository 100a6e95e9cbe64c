"""Options of otherwise reading programs that write a file (docs: permissions): the `WRITING`
table of agi.policy.bash.programs, and `writes`."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from agi.policy.bash.argv import UNKNOWN, _values
from agi.policy.bash.opaque import LONGS, canonical, expand
from agi.policy.bash.words import Word


def _option_values(values: list[str], options: Sequence[str]) -> list[str]:
    out = []
    for at, value in enumerate(values):
        name, eq, rest = value.partition("=")
        if name in options and eq:
            out.append(rest)
        elif value in options and at + 1 < len(values):
            out.append(values[at + 1])
        else:
            short = [o for o in options if len(o) == 2 and o[0] == "-" and value.startswith(o)]
            if short and len(value) > 2 and not value.startswith("--"):
                out.append(value[2:])
    return out


def _operands(values: list[str], valued: Sequence[str] = ()) -> list[str]:
    out: list[str] = []
    at = 0
    while at < len(values):
        value = values[at]
        if value == "--":
            return out + values[at + 1 :]
        if value in valued:
            at += 2
            continue
        if not value.startswith("-") or value == "-":
            out.append(value)
        at += 1
    return out


def _sed_in_place(values: list[str]) -> list[str]:
    if not any(
        v == "-i" or v.startswith(("-i", "--in-place")) or re.fullmatch(r"-[nErsuz]*i\S*", v)
        for v in values
    ):
        return []
    operands = _operands(values, ("-e", "--expression", "-f", "--file", "-l"))
    explicit = any(
        v in ("-e", "--expression", "-f", "--file") or v.startswith("--expression=") for v in values
    )
    return operands if explicit else operands[1:]


WRITING: dict[str, tuple[str, Callable[[list[str]], list[str]]]] = {
    "git": (
        "`--output=FILE` (log, diff, show, format-patch) writes a file",
        lambda v: (
            _option_values(v, ("--output", "-o"))
            if "format-patch" in v
            else _option_values(v, ("--output",))
        ),
    ),
    "sort": (
        "`-o FILE` writes the sorted lines there",
        lambda v: _option_values(v, ("-o", "--output")),
    ),
    "tee": ("writes its input to every file named", lambda v: _operands(v)),
    "find": (
        "`-fprint`, `-fprint0`, `-fprintf`, `-fls` write a file",
        lambda v: _option_values(v, ("-fprint", "-fprint0", "-fprintf", "-fls")),
    ),
    "sed": ("`-i` edits the files named in place", _sed_in_place),
    "curl": (
        "`-o`, `-D`, `-c`, `--trace` and the like write files",
        lambda v: _option_values(
            v,
            (
                "-o",
                "--output",
                "-D",
                "--dump-header",
                "-c",
                "--cookie-jar",
                "--trace",
                "--trace-ascii",
                "--stderr",
                "--etag-save",
                "--hsts",
                "--alt-svc",
            ),
        ),
    ),
    "wget": (
        "`-O`, `-o`, `-a` write files",
        lambda v: _option_values(
            v, ("-O", "--output-document", "-o", "--output-file", "-a", "--append-output")
        ),
    ),
    "less": (
        "`-o`/`-O`/`--log-file` copy the input to a file",
        lambda v: _option_values(v, ("-o", "-O", "--log-file", "--LOG-FILE")),
    ),
    "dd": ("`of=FILE` writes there", lambda v: [x[3:] for x in v if x.startswith("of=")]),
    "uniq": (
        "a second file name is where it writes",
        lambda v: _operands(
            v, ("-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars")
        )[1:2],
    ),
    "split": (
        "writes the pieces under the prefix given",
        lambda v: (
            _operands(v, ("-a", "-b", "-C", "-l", "-n", "-t", "--additional-suffix"))[1:2] or ["x"]
        ),
    ),
    "script": (
        "writes the session's typescript to the file named",
        lambda v: (
            _operands(
                v,
                (
                    "-c",
                    "--command",
                    "-E",
                    "--echo",
                    "-I",
                    "--log-in",
                    "-O",
                    "--log-out",
                    "-B",
                    "--log-io",
                    "-T",
                    "--log-timing",
                    "-m",
                ),
            )[:1]
            or ["typescript"]
        ),
    ),
}


def writes(name: str, args: list[Word]) -> list[str | None]:
    """Files a command writes through its options (`git log --output=F`); a name of unknown
    value is None."""
    entry = WRITING.get(canonical(name))
    if entry is None:
        return []
    values = expand(_values(args), LONGS.get(canonical(name), ()))
    return [None if UNKNOWN in f else f for f in entry[1](values)]
