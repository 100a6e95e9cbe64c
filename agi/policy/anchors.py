"""Relative path rules pinned to a directory (docs: security): a server (`--mcp-serve`, `--acp`)
resolves its options where it starts, and a call or session naming another `cwd` must not move
the rules with it (`Write(secrets/**)` given in DIR keeps guarding DIR/secrets, from `cwd: src`
too)."""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from agi.policy.permissions import PATH_TOOLS

if TYPE_CHECKING:
    from agi.policy.permissions import Permissions, Rule


def anchored(permissions: Permissions | None, cwd: str) -> Permissions | None:
    """These permissions with every path pattern relative to the working directory rooted in
    `cwd` instead, matching what it matched there: `a/b` and `./a/b` become `/a/b` from `cwd`,
    a pattern without a slash (`*.pem`, which matches at any depth) `/**/*.pem`."""
    if permissions is None or not permissions.rules:
        return permissions
    root = os.path.abspath(cwd)
    return dataclasses.replace(
        permissions, rules=[_anchor(rule, root) for rule in permissions.rules]
    )


def _anchor(rule: Rule, root: str) -> Rule:
    spec = rule.specifier
    if rule.tool not in PATH_TOOLS or not spec or spec.startswith("/"):
        return rule
    if spec == "~" or spec.startswith("~/"):
        return rule
    while spec.startswith("./"):
        spec = spec[2:]
    if spec in ("", "."):
        spec = "**"
    pattern = "/" + spec if "/" in spec.rstrip("/") else "/**/" + spec
    return dataclasses.replace(rule, specifier=pattern, base=root)
