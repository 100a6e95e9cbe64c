"""Attachments (docs: attachments): `-a FILE`, batch lines and `agi.run(attachments=)` send
images and PDFs in each protocol's form, the session keeps each file once by its hash and its
messages refer to it, and a file agi cannot send is exit 2 with nothing sent. Driven through
the real `agi` executable against the scripted server."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from fakeresponses import r_text
from fakeserver import FakeModel, anthropic_text, ollama_chat, text


def png_bytes(size: int = 1) -> bytes:
    """A real PNG of `size` by `size` pixels, each a different colour (no two alike)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    rows = b"".join(b"\x00" + os.urandom(3 * size) for _ in range(size))
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {"png": tmp_path / "receipt.png", "pdf": tmp_path / "letter.pdf"}
    made["png"].write_bytes(png_bytes(24))
    made["pdf"].write_bytes(PDF)
    return made


def data_url(path: Path, kind: str) -> str:
    return f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode()}"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_chat_gets_image_url_and_file_parts_and_the_session_keeps_names(
    agi, tmp_path: Path, files
) -> None:
    session = tmp_path / "s"
    with FakeModel(text("a receipt and a letter")) as server:
        done = agi("-a", str(files["png"]), "--attach", str(files["pdf"]), "-s", str(session),
                   "--no-tools", "what are these?", server=server)  # fmt: skip
    assert done.returncode == 0, done.stderr
    content = server.requests[0]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "what are these?"}
    assert content[1] == {
        "type": "image_url",
        "image_url": {"url": data_url(files["png"], "image/png")},
    }
    assert content[2] == {
        "type": "file",
        "file": {"filename": "letter.pdf", "file_data": data_url(files["pdf"], "application/pdf")},
    }
    kept = session / "attachments" / f"{sha(files['png'])}.png"
    assert kept.read_bytes() == files["png"].read_bytes()
    assert (session / "attachments" / f"{sha(files['pdf'])}.pdf").read_bytes() == PDF
    stored = (session / "messages.jsonl").read_text()
    assert base64.b64encode(files["png"].read_bytes()).decode() not in stored
    first = lines(session / "messages.jsonl")[0]["content"]
    assert first[1] == {
        "type": "attachment",
        "path": f"attachments/{sha(files['png'])}.png",
        "media_type": "image/png",
        "name": "receipt.png",
    }
    trace = (session / "trace.jsonl").read_text()
    assert base64.b64encode(files["png"].read_bytes()).decode() not in trace
    assert sha(files["png"]) in trace  # the trace names the file it sent
    meta = json.loads((session / "meta.json").read_text())
    assert meta["first_prompt"] == "what are these?"  # what session lists show: the text


def test_a_file_is_kept_once_and_sent_again_with_the_conversation(agi, tmp_path, files) -> None:
    session = tmp_path / "s"
    with FakeModel(text("one"), text("two")) as server:
        for word in ("first", "second"):
            done = agi("-a", str(files["png"]), "-s", str(session), "--no-tools", word,
                       server=server)  # fmt: skip
            assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (session / "attachments").iterdir()) == [
        f"{sha(files['png'])}.png"
    ]
    urls = [
        p["image_url"]["url"]
        for m in server.requests[1]["messages"]
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    assert urls == [data_url(files["png"], "image/png")] * 2


def test_responses_gets_input_image_and_input_file(agi, files) -> None:
    with FakeModel(r_text("seen")) as server:
        done = agi("-m", "openai:gpt-5.1", "-a", str(files["png"]), "-a", str(files["pdf"]),
                   "--no-tools", "look", server=server)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["input"][-1] == {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": data_url(files["png"], "image/png")},
            {
                "type": "input_file",
                "filename": "letter.pdf",
                "file_data": data_url(files["pdf"], "application/pdf"),
            },
        ],
    }


def test_anthropic_gets_image_and_document_blocks(agi, files) -> None:
    with FakeModel(anthropic_text("seen")) as server:
        env = {"ANTHROPIC_BASE_URL": server.url.removesuffix("/v1"), "ANTHROPIC_API_KEY": "k"}
        done = agi("-m", "anthropic:claude-sonnet-4-5", "-a", str(files["png"]), "-a",
                   str(files["pdf"]), "--no-tools", "look", extra_env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    blocks = server.requests[0]["messages"][-1]["content"]
    image, document = blocks[1], blocks[2]
    assert image["type"] == "image" and image["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(files["png"].read_bytes()).decode(),
    }
    assert document["type"] == "document" and document["source"] == {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(PDF).decode(),
    }


def ollama(*script: Any) -> FakeModel:
    server = FakeModel(*script)
    server.route("POST", "/api/show", {"model_info": {"llama.context_length": 8192}})
    server.route("GET", "/api/ps", {"models": []})
    return server


def test_ollama_gets_images_and_refuses_a_pdf(agi, files) -> None:
    with ollama(ollama_chat("a receipt")) as server:
        done = agi("-m", "ollama:llava", "--base-url", server.url, "-a", str(files["png"]),
                   "--no-tools", "look")  # fmt: skip
    assert done.returncode == 0, done.stderr
    sent = server.requests[0]["messages"][-1]
    assert sent["images"] == [base64.b64encode(files["png"].read_bytes()).decode()]
    with ollama(ollama_chat("no")) as server:
        done = agi("-m", "ollama:llava", "--base-url", server.url, "-a", str(files["pdf"]),
                   "--no-tools", "look")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == f"agi: --attach {files['pdf']}: ollama:llava does not take PDFs\n"
    assert server.requests == []


@pytest.mark.parametrize(
    ("make", "config", "message"),
    [
        (None, "", "no such file"),
        (lambda p: p.mkdir(), "", "a directory, not a file"),
        (
            lambda p: p.write_text("plain words\n"),
            "",
            "not an image (PNG, JPEG, GIF, WebP) or a PDF",
        ),
        (
            lambda p: p.write_bytes(png_bytes(64)),
            "attach_limit = 100\n",
            "over attach_limit (100 bytes)",
        ),
    ],
)
def test_a_file_agi_cannot_send_is_exit_2_with_nothing_sent(
    agi, tmp_path: Path, make, config, message
) -> None:
    target = tmp_path / "thing.png"
    if make is not None:
        make(target)
    (tmp_path / "config.toml").write_text(config)
    with FakeModel(text("never")) as server:
        done = agi("-a", str(target), "-s", str(tmp_path / "s"), "look", server=server)
    assert done.returncode == 2
    assert done.stderr.startswith("agi: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert server.requests == []
    assert not (tmp_path / "s").exists()


def test_an_unreadable_file_is_exit_2(agi, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"  # no writer: reading it would wait forever
    os.mkfifo(fifo)
    with FakeModel(text("never")) as server:
        done = agi("-a", str(fifo), "look", server=server, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith(f"agi: --attach {fifo}: cannot read it")
    assert server.requests == []


def test_a_provider_without_images_is_exit_2(agi, files) -> None:
    with FakeModel(text("never")) as server:
        done = agi("-m", "deepseek:deepseek-chat", "-a", str(files["png"]), "look", server=server)
    assert done.returncode == 2 and "does not take images" in done.stderr
    assert server.requests == []


def test_a_fork_keeps_the_files(agi, tmp_path: Path, files) -> None:
    session, fork = tmp_path / "s", tmp_path / "f"
    with FakeModel(text("one"), text("two")) as server:
        assert agi("-a", str(files["pdf"]), "-s", str(session), "--no-tools", "a",
                   server=server).returncode == 0  # fmt: skip
        done = agi("--fork", str(session), "-s", str(fork), "--no-tools", "b", server=server)
    assert done.returncode == 0, done.stderr
    assert (fork / "attachments" / f"{sha(files['pdf'])}.pdf").read_bytes() == PDF
    sent = json.dumps(server.requests[1]["messages"])
    assert base64.b64encode(PDF).decode() in sent


def test_an_ephemeral_run_sends_the_file_and_writes_nothing(agi, tmp_path: Path, files) -> None:
    with FakeModel(text("seen")) as server:
        done = agi("--ephemeral", "-a", str(files["png"]), "--no-tools", "look", server=server)
    assert done.returncode == 0, done.stderr
    assert data_url(files["png"], "image/png") in json.dumps(server.requests[0])
    assert not (tmp_path / "agi-home").exists() or not any((tmp_path / "agi-home").rglob("*.png"))


def test_batch_lines_take_attachments(agi, tmp_path: Path, files) -> None:
    jobs = tmp_path / "jobs.jsonl"
    rows = [
        {"id": "a", "prompt": "look", "attachments": [str(files["png"])]},
        {"id": "b", "prompt": "read", "attachments": str(files["pdf"])},
    ]
    jobs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeModel(text("ok")) as server:
        done = agi("--batch", str(jobs), "--no-tools", server=server)
    assert done.returncode == 0, done.stderr
    out = {line["id"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert out["a"]["exit"] == 0 and out["b"]["exit"] == 0
    assert len(server.requests) == 2
    bodies = json.dumps(server.requests)
    assert data_url(files["png"], "image/png") in bodies
    assert data_url(files["pdf"], "application/pdf") in bodies


def test_a_batch_line_with_a_bad_file_stops_the_batch_before_any_job(agi, tmp_path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    rows = [{"prompt": "fine"}, {"prompt": "bad", "attachments": [str(tmp_path / "gone.png")]}]
    jobs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FakeModel(text("ok")) as server:
        done = agi("--batch", str(jobs), "--no-tools", server=server)
    assert done.returncode == 2
    assert done.stderr == f"agi: batch line 2: --attach {tmp_path / 'gone.png'}: no such file\n"
    assert server.requests == []


def test_the_python_api_takes_attachments(env, tmp_path: Path, files) -> None:
    import subprocess

    script = (
        "import agi, json\n"
        f"r = agi.run('look', attachments=[{str(files['png'])!r}], tools=[], isolated=True,"
        " ephemeral=True)\n"
        "print(json.dumps(r.answer))\n"
    )
    with FakeModel(text("a picture")) as server:
        run_env = {**env, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k"}
        done = subprocess.run(
            [sys.executable, "-c", script.replace("'look'", "'look', model='gpt-4.1'")],
            capture_output=True, text=True, env=run_env, timeout=60, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "a picture"
    assert data_url(files["png"], "image/png") in json.dumps(server.requests[0])
