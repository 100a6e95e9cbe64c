"""The relay between agi's hooks and MCP client and the SDK that launched agi (docs:
claude-agent-sdk): run as a script (`python -I -S relay.py SOCKET hook ID` or `... mcp NAME`),
it imports nothing of agi. A hook: the event's JSON from stdin goes to the SDK's callback ID,
whose JSON answer is printed as a command hook's stdout (exit 0; exit 1 with the SDK's error on
stderr). An MCP server: each JSON-RPC line from stdin goes to the SDK's in-process server NAME
and each answer to a request comes back on stdout, so agi's MCP client sees a stdio server."""

import json
import socket
import sys


def exchange(conn: socket.socket, reader: object, message: dict) -> dict:
    conn.sendall((json.dumps(message) + "\n").encode())
    line = reader.readline()  # type: ignore[attr-defined]
    if not line:
        raise OSError("agi closed the relay")
    return json.loads(line)


def main(argv: list) -> int:
    path, kind, name = argv[1], argv[2], argv[3]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    reader = conn.makefile("rb")
    if kind == "hook":
        payload = json.loads(sys.stdin.buffer.read() or b"{}")
        answer = exchange(conn, reader, {"kind": "hook", "id": name, "input": payload})
        if "error" in answer:
            sys.stderr.write(f"the SDK's hook callback failed: {answer['error']}\n")
            return 1
        sys.stdout.write(json.dumps(answer.get("output") or {}))
        return 0
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        answer = exchange(conn, reader, {"kind": "mcp", "server": name, "message": message})
        if "id" in message and "method" in message:
            reply = answer.get("mcp_response")
            if not isinstance(reply, dict):
                error = {"code": -32603, "message": str(answer.get("error", "no answer"))}
                reply = {"jsonrpc": "2.0", "id": message["id"], "error": error}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, ValueError) as e:
        sys.stderr.write(f"agi's SDK relay: {e}\n")
        sys.exit(1)
