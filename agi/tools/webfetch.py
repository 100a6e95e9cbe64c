"""WebFetch {url, prompt}, as in Claude Code: fetch a page, make Markdown of it, and give it to
the model with the prompt in a separate small request (counted in usage); or, with
`webfetch_raw = true`, return the Markdown itself.

Only http and https; at most 5 redirects, each judged again by the permission rules; hosts
that resolve to loopback, link-local, private or other non-public addresses are refused
unless `web_allow_private = true`, and the connection goes to the address that was checked
(so a name cannot resolve elsewhere in between); 10 MB and 30 s at most (docs: tools).
"""

from __future__ import annotations

import ipaddress
import socket
import time
import zlib
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from agi.errors import ToolError
from agi.tools.protocol import ToolContext, require

if TYPE_CHECKING:
    import httpx

MAX_BYTES = 10 << 20
SECONDS = 30.0
MAX_REDIRECTS = 5
RAW_LIMIT = 30_000  # characters of Markdown returned as the result with webfetch_raw
PAGE_LIMIT = 100_000  # characters of Markdown given to the model with the prompt
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml")
USER_AGENT = "agi-WebFetch (+https://github.com/agi-cli)"


class WebFetch:
    name = "WebFetch"
    opt_in = True  # offered only when named (agi.engine.assemble.choose)
    per_call = True  # the toolbox gives the judge of its redirects
    description = (
        "Fetch a web page (http or https), convert it to Markdown and answer the prompt about "
        "it. Use for reading documentation or pages the user names."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The URL to fetch"},
            "prompt": {"type": "string", "description": "What to find out from the page"},
        },
        "required": ["url", "prompt"],
    }

    def run(self, input: dict[str, Any], ctx: ToolContext) -> str:
        url, prompt = require(input, "url").strip(), require(input, "prompt")
        final, kind, body, cut = fetch(url, prompt, ctx)
        page = markdown(body, kind)
        note = f"\n\n[... the page was cut at {MAX_BYTES} bytes ...]" if cut else ""
        if ctx.webfetch_raw or ctx.reader is None:
            if len(page) > RAW_LIMIT:
                left = len(page) - RAW_LIMIT
                page = page[:RAW_LIMIT] + f"\n\n[... {left} more characters not shown ...]"
            head = f"Fetched {final}\n\n" if final != url else ""
            return head + page + note
        if len(page) > PAGE_LIMIT:
            page = page[:PAGE_LIMIT] + "\n\n[... the rest of the page is left out ...]"
        answer = ctx.reader(page + note, prompt)
        return (f"Fetched {final}\n\n" if final != url else "") + (answer or "(no answer)")


def checked_url(url: str) -> tuple[str, str, int]:
    """The scheme, host and port of an http(s) URL; anything else is refused."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise ToolError(f"not a valid URL: {url!r} ({e})") from e
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ToolError(f"WebFetch fetches http and https URLs only, not {url!r}")
    if not parts.hostname:
        raise ToolError(f"the URL {url!r} names no host")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def address_for(host: str, port: int, allow_private: bool) -> str:
    """The address to connect to: the first the name resolves to that may be used."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise ToolError(f"cannot resolve {host}: {e}") from e
    addresses = list(dict.fromkeys(str(info[4][0]) for info in found))
    for address in addresses:
        if allow_private or public(address):
            return address
    raise ToolError(
        f"{host} is a loopback, link-local or private address ({', '.join(addresses)}): "
        "WebFetch refuses it unless the config sets web_allow_private = true"
    )


def fetch(url: str, prompt: str, ctx: ToolContext) -> tuple[str, str, bytes, bool]:
    """GET `url`, following at most MAX_REDIRECTS redirects, each judged again: the final
    URL, its content type, at most MAX_BYTES of its body, and whether it was cut there."""
    import httpx

    seconds = SECONDS if ctx.remaining() is None else min(SECONDS, ctx.remaining() or 0.0)
    deadline = time.monotonic() + seconds
    with httpx.Client(trust_env=False, follow_redirects=False) as client:
        for hop in range(MAX_REDIRECTS + 1):
            scheme, host, port = checked_url(url)
            address = address_for(host, port, ctx.web_allow_private)
            target = httpx.URL(url).copy_with(host=address)
            left = max(0.1, deadline - time.monotonic())
            request = client.build_request(
                "GET",
                target,
                headers={"Host": httpx.URL(url).netloc.decode("ascii"), "User-Agent": USER_AGENT,
                         "Accept": "text/html, text/markdown, text/plain, */*;q=0.5",
                         "Accept-Encoding": ACCEPT_ENCODING},
                extensions={"sni_hostname": host, "timeout": httpx.Timeout(left).as_dict()},
            )  # fmt: skip
            try:
                response = client.send(request, stream=True)
            except httpx.TimeoutException as e:
                raise ToolError(f"fetching {url} took over {seconds:g} s") from e
            except httpx.HTTPError as e:
                raise ToolError(f"fetching {url} failed: {e}") from e
            try:
                if response.is_redirect and "location" in response.headers:
                    if hop == MAX_REDIRECTS:
                        raise ToolError(f"more than {MAX_REDIRECTS} redirects from {url}")
                    url = _judged(urljoin(url, response.headers["location"]), prompt, ctx)
                    continue
                if response.status_code >= 400:
                    raise ToolError(f"{url}: HTTP {response.status_code} {response.reason_phrase}")
                kind = response.headers.get("content-type", "")
                body, cut = _body(response, deadline, url, seconds)
                return url, kind, body, cut
            finally:
                response.close()
    raise ToolError(f"more than {MAX_REDIRECTS} redirects")  # not reached


def _judged(url: str, prompt: str, ctx: ToolContext) -> str:
    """A redirect's target, once the rules allow fetching it as a call of its own."""
    checked_url(url)
    denial = ctx.judge("WebFetch", {"url": url, "prompt": prompt}) if ctx.judge else None
    if denial is not None:
        raise ToolError(f"redirected to {url}, which is not allowed: {denial}")
    return url


# the encodings a page may come in, read here from the raw stream so that one small compressed
# chunk cannot expand past MAX_BYTES in memory (a gzip bomb): zlib's window bits for each
ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
ACCEPT_ENCODING = "gzip, deflate"


def _body(
    response: httpx.Response, deadline: float, url: str, seconds: float
) -> tuple[bytes, bool]:
    """At most MAX_BYTES of the decoded body, and whether it was cut there."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity") and encoding not in ENCODINGS:
        raise ToolError(f"{url}: the page is sent as {encoding!r}, not gzip or deflate")
    inflate = zlib.decompressobj(ENCODINGS[encoding]) if encoding in ENCODINGS else None
    data = bytearray()
    try:
        for raw in response.iter_raw():
            while raw:
                if inflate is None:
                    data += raw
                    raw = b""
                else:  # at most what is still wanted, the rest kept for the next round
                    data += inflate.decompress(raw, MAX_BYTES + 1 - len(data))
                    raw = inflate.unconsumed_tail
                if len(data) > MAX_BYTES:
                    return bytes(data[:MAX_BYTES]), True
            if time.monotonic() > deadline:
                raise ToolError(f"fetching {url} took over {seconds:g} s")
    except zlib.error as e:
        raise ToolError(f"{url}: the page's {encoding} encoding is broken: {e}") from None
    return bytes(data), False


def markdown(body: bytes, kind: str) -> str:
    """The page as Markdown: HTML converted (markdownify), other text as it is."""
    media, _, params = kind.partition(";")
    media = media.strip().lower()
    charset = "utf-8"
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip("\"' ")
    if media and not media.startswith(TEXT_TYPES) and not media.endswith(("+json", "+xml")):
        raise ToolError(f"the page is {media}, not text: WebFetch reads text and HTML only")
    try:
        text = body.decode(charset, "replace")
    except LookupError:
        text = body.decode("utf-8", "replace")
    if media in ("text/html", "application/xhtml+xml") or not media and "<html" in text[:1000]:
        try:
            import markdownify  # the `web` extra: pip install 'agi-cli[web]'
        except ImportError as e:
            raise ToolError(
                "WebFetch needs markdownify to read HTML: pip install 'agi-cli[web]'"
            ) from e
        return str(markdownify.markdownify(text, heading_style="ATX")).strip()
    return text.strip()


READER_PROMPT = """Web page content:
---
{page}
---

{prompt}

Answer from the content above only, concisely. Quote exactly where wording matters; say so if
the page does not tell."""
