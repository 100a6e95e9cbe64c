"""Numbers read back from session files are finite: JSON's 1e999 reads as infinity, and a
count or cost that is not finite breaks every sum it enters (docs: security)."""

from __future__ import annotations

import math
from typing import Any


def finite_meta(meta: dict[str, Any], path: Any, warnings: list[str] | None) -> dict[str, Any]:
    """meta.json's object without its non-finite numbers, with a warning naming them."""
    bad: list[str] = []
    meta = finite(meta, "", bad)
    if bad and warnings is not None:
        warnings.append(f"{path}: {', '.join(bad)} not a finite number; ignored")
    return meta


def finite(value: Any, where: str, bad: list[str]) -> Any:
    """`value` without numbers outside finite range (1e999 is read as infinity), each named
    in `bad`: such a field is taken as absent, never written back."""
    if isinstance(value, dict):
        kept = {}
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if _infinite(item):
                bad.append(name)
            else:
                kept[key] = finite(item, name, bad)
        return kept
    if isinstance(value, list):
        return [finite(v, f"{where}[{i}]", bad) for i, v in enumerate(value) if not _infinite(v)]
    return value


def _infinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 1 << 63
