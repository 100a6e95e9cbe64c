"""Names of a plugin's skills, agents and commands: `PLUGIN:NAME`, and the bare `NAME` when no
other part of that kind has it (docs: permissions)."""

from __future__ import annotations

from collections.abc import Iterable


def bare(name: str) -> str:
    return name.rpartition(":")[2]


def resolve(name: str, names: Iterable[str]) -> str | None:
    """The full name `name` stands for: itself, or the one `PLUGIN:NAME` whose bare name it is;
    None when it names nothing, or when several plugins have it (say which with `candidates`)."""
    names = list(names)
    if name in names:
        return name
    found = candidates(name, names)
    return found[0] if len(found) == 1 else None


def candidates(name: str, names: Iterable[str]) -> list[str]:
    """The qualified names whose bare name is `name`."""
    return [n for n in names if ":" in n and bare(n) == name]


def clashes(kind: str, names: Iterable[str]) -> list[str]:
    """A warning for each bare name that several plugins share: only the full names work."""
    names = list(names)
    seen: dict[str, list[str]] = {}
    for name in names:
        if ":" in name:
            seen.setdefault(bare(name), []).append(name)
    return [
        f"the {kind} name {short} is in several plugins ({', '.join(full)}); use the full name"
        for short, full in seen.items()
        if len(full) > 1 and short not in names
    ]
