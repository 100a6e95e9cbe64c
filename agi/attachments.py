"""Files sent with a prompt (docs: attachments): images (PNG, JPEG, GIF, WebP) and PDFs, read and
checked before anything is sent, kept once per session as `attachments/SHA256.EXT` and referred
to from the conversation by that name, and put back into each request as chat-completions parts
(`image_url` data URLs, `file` parts) that every protocol turns into its own form."""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agi.errors import UsageError
from agi.fileio import TooLarge, read_limited
from agi.sessions.files import make_private_dir, read_bytes, replace_file

DEFAULT_LIMIT = 20 << 20  # bytes: attach_limit's default
PART = "attachment"  # a content part's type: a file the session keeps
# the types agi sends, by the bytes they begin with, and the extension each is kept under
TYPES = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
    "application/pdf": "pdf",
}
KNOWN = "an image (PNG, JPEG, GIF, WebP) or a PDF"
# what a provider's models are known not to take (a model name that says otherwise aside)
REFUSED = {
    "deepseek": ("image", "pdf"),
    "ollama": ("pdf",),
}


def media_type(data: bytes) -> str | None:
    """The type of a file by its first bytes, or None when it is none agi sends."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data.startswith(b"%PDF-"):
        return "application/pdf"
    return None


@dataclass(frozen=True)
class Attachment:
    """One file to send: its name (as given), its type, its bytes and their SHA-256."""

    name: str
    media_type: str
    data: bytes
    sha256: str

    @property
    def kind(self) -> str:
        return "pdf" if self.media_type == "application/pdf" else "image"

    @property
    def stored_name(self) -> str:
        """Its name in the session: `attachments/SHA256.EXT`."""
        return f"attachments/{self.sha256}.{TYPES[self.media_type]}"

    @classmethod
    def of(cls, name: str, data: bytes, declared: str | None = None, where: str = "") -> Attachment:
        """An attachment from bytes (an editor's image block, say); UsageError when they are
        not a type agi sends (what they begin with decides, not `declared`)."""
        found = media_type(data)
        if found is None:
            said = f" ({declared})" if declared else ""
            raise UsageError(f"{where or 'attachment ' + name}{said}: not {KNOWN}")
        return cls(name, found, data, hashlib.sha256(data).hexdigest())


def read(paths: list[str] | None, limit: int | None = None) -> tuple[Attachment, ...]:
    """The files named (`-a FILE`, `attachments`), read whole and checked: an unreadable file, one
    over `limit` bytes or of a type agi does not send is a UsageError (exit 2), before anything
    is sent. A link is followed (the user named it); only a regular file is read."""
    limit = limit or DEFAULT_LIMIT
    found: list[Attachment] = []
    for name in paths or []:
        where = f"--attach {name}"
        try:
            if Path(name).expanduser().is_dir():
                raise UsageError(f"{where}: a directory, not a file")
            data = read_limited(name, limit)
        except TooLarge:
            raise UsageError(f"{where}: over attach_limit ({limit} bytes)") from None
        except FileNotFoundError:
            raise UsageError(f"{where}: no such file") from None
        except OSError as e:
            raise UsageError(f"{where}: cannot read it: {e.strerror or e}") from e
        except UsageError as e:
            if str(e).startswith(where):
                raise
            raise UsageError(f"{where}: cannot read it: not a regular file") from None
        found.append(Attachment.of(name, data, where=where))
    return tuple(found)


def check_model(attachments: tuple[Attachment, ...], model: Any) -> None:
    """A UsageError (exit 2, nothing sent) when the model (a ModelConfig) is known not to take
    a file's type."""
    refused = REFUSED.get(model.provider, ())
    for attachment in attachments:
        if attachment.kind in refused:
            what = "PDFs" if attachment.kind == "pdf" else "images"
            raise UsageError(f"--attach {attachment.name}: {model.label} does not take {what}")


class Store(Protocol):
    """Where a session keeps its attachments (agi.sessions.session.Session)."""

    def attach(self, name: str, data: bytes) -> None: ...
    def attachment(self, name: str) -> bytes | None: ...


def part(attachment: Attachment, store: Store) -> dict[str, Any]:
    """The content part that refers to an attachment, the file kept in `store` first (once)."""
    store.attach(attachment.stored_name, attachment.data)
    return {
        "type": PART,
        "path": attachment.stored_name,
        "media_type": attachment.media_type,
        "name": Path(attachment.name).name,
    }


def user_message(text: str, attachments: tuple[Attachment, ...], store: Store) -> dict[str, Any]:
    """A user message: its text, then a part for each attachment (none: content is the text)."""
    if not attachments:
        return {"role": "user", "content": text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [part(a, store) for a in attachments]
    return {"role": "user", "content": parts}


def wire_part(ref: dict[str, Any], data: bytes | None) -> dict[str, Any]:
    """A stored reference as chat completions carries the file: an `image_url` data URL or a
    `file` part with the PDF's data URL; a file the session lost, as a note."""
    name = str(ref.get("name") or ref.get("path") or "")
    kind = str(ref.get("media_type") or "")
    if data is None or kind not in TYPES:
        return {"type": "text", "text": f"[attachment {name} is no longer in the session]"}
    url = f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}"
    if kind == "application/pdf":
        return {"type": "file", "file": {"filename": name, "file_data": url}}
    return {"type": "image_url", "image_url": {"url": url}}


class Resolver:
    """The conversation as requests carry it: each message that refers to attachments with
    their bytes in place (converted once per message; the others are the same objects)."""

    def __init__(self, store: Store):
        self.store = store
        self.done: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    def __call__(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.message(m) for m in messages]

    def message(self, msg: dict[str, Any]) -> dict[str, Any]:
        content = msg.get("content")
        if not isinstance(content, list) or not any(_is_ref(p) for p in content):
            return msg
        hit = self.done.get(id(msg))
        if hit is not None and hit[0] is msg:
            return hit[1]
        parts = [
            wire_part(p, self.store.attachment(str(p.get("path") or ""))) if _is_ref(p) else p
            for p in content
        ]
        resolved = {**msg, "content": parts}
        self.done[id(msg)] = (msg, resolved)
        return resolved


def _is_ref(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == PART


def copy_folder(source: Path, target: Path) -> None:
    """A session's attached files into the copy of it a fork makes, never through a link: only
    names agi writes are copied."""
    folder = source / "attachments"
    if folder.is_symlink() or not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        name = f"attachments/{entry.name}"
        data = read_bytes(entry) if valid_name(name) else None
        if data is not None:
            make_private_dir(target / "attachments")
            replace_file(target / name, data)


def valid_name(name: str) -> bool:
    """A stored attachment's name as agi writes it (`attachments/HEX.EXT`): nothing else is read."""
    folder, _, file = name.partition("/")
    stem, _, ext = file.partition(".")
    hexdigits = set("0123456789abcdef")
    return (
        folder == "attachments"
        and len(stem) == 64
        and set(stem) <= hexdigits
        and ext in TYPES.values()
    )


ELIDED_OVER = 512  # characters of a data URL kept whole in a trace


def elided(value: Any) -> Any:
    """A request body as the trace keeps it: each long data URL (an attached file's bytes)
    replaced by its type, size and SHA-256, which name the file in the session's
    `attachments/`; everything else as it is (the same objects where nothing changed)."""
    if isinstance(value, str):
        if len(value) > ELIDED_OVER and value.startswith("data:") and ";base64," in value:
            head, _, data = value.partition(";base64,")
            try:
                raw = base64.b64decode(data)
            except ValueError:
                return f"{head};base64,… ({len(data)} characters)"
            return f"{head};base64,… ({len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()})"
        return value
    if isinstance(value, list):
        items = [elided(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = {k: elided(v) for k, v in value.items()}
        return value if all(pairs[k] is v for k, v in value.items()) else pairs
    return value


class Prompt(str):
    """A prompt's text and the files that came with it (an editor's image and resource blocks,
    docs: attachments): a `str` wherever a prompt goes; a run's turn takes its `attachments`."""

    attachments: tuple[Attachment, ...] = ()

    @classmethod
    def of(cls, text: str, attachments: tuple[Attachment, ...]) -> Prompt:
        prompt = cls(text)
        prompt.attachments = attachments
        return prompt


def from_base64(name: str, data: str, declared: str | None, limit: int | None = None) -> Attachment:
    """An attachment from base64 (an editor's image block or blob resource); UsageError when it
    is not base64, over `limit` bytes or not a type agi sends."""
    limit = limit or DEFAULT_LIMIT
    if len(data) > (limit + 2) // 3 * 4 + 4:
        raise UsageError(f"attachment {name}: over attach_limit ({limit} bytes)")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        raise UsageError(f"attachment {name}: its data is not base64") from None
    return Attachment.of(name, raw, declared)
