"""WebFetch's rules: `WebFetch(domain:example.com)` against the host of the URL fetched."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


def domain_matches(specifier: str, url: object) -> bool:
    """`domain:example.com` (`*` any text: `domain:*.example.com`) against a URL's host, in
    any case; a specifier of another form never matches."""
    if not specifier.startswith("domain:") or not isinstance(url, str):
        return False
    try:
        host = (urlsplit(url.strip()).hostname or "").rstrip(".").lower()
    except ValueError:
        return False
    wanted = specifier[len("domain:") :].strip().rstrip(".").lower()
    pattern = ".*".join(re.escape(piece) for piece in wanted.split("*"))
    return bool(host) and re.fullmatch(pattern, host) is not None
