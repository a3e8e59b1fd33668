#!/usr/bin/env python3
"""Logging stub MCP server for capturing what 2026-07-28 clients put on the wire.

Usage:
    python3 tests/interop/modern_stub.py [--port 8765] [--log FILE] [--sse] [--legacy]

Serves POST on any path (use http://127.0.0.1:PORT/t/demo/mcp) with the stdlib only, and
appends every HTTP exchange (method, path, headers, body, response status and body) to
FILE as JSON lines (default: stderr, pretty-printed). It answers plausibly at protocol
2026-07-28:

- server/discover -> DiscoverResult (supportedVersions [2026-07-28], ttlMs, cacheScope,
  _meta serverInfo); with --legacy it refuses it instead (--discover-reply: 404 + JSON-RPC
  -32601 by default, 200err = -32601 at HTTP 200, 400text/405/500 = that status with a
  text/plain body, hang = no answer for 30 s then 504) and serves the legacy initialize
  handshake (2025-11-25), to watch a client fall back;
- tools/list -> test_simple_text and test_elicitation (ttlMs/cacheScope set);
- tools/call test_simple_text -> one text block;
- tools/call test_elicitation -> first an `input_required` result with one
  elicitation/create input request and a requestState; on the retry carrying
  inputResponses + the same requestState, the final text
  "User response: action=..., content={...}" (the same text as mcp-harbor's reference tool);
- notifications -> 202; GET/DELETE -> 405; anything else -> -32601.

--bare-discover omits resultType/ttlMs/cacheScope from the DiscoverResult (to see whether a
client still treats the server as modern).
--no-result-type omits resultType from every complete result except server/discover's.
--sse answers requests with a one-event text/event-stream instead of application/json.
Not a conformant server: it checks nothing beyond what it needs, on purpose.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODERN = "2026-07-28"
STATE = "stub-state-v1"
TOOLS = [
    {
        "name": "test_simple_text",
        "description": "Returns a simple text response",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "test_elicitation",
        "description": "Asks the user for a username and an email (form elicitation)",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
]
ELICIT_SCHEMA = {
    "type": "object",
    "properties": {
        "username": {"type": "string", "description": "User's response"},
        "email": {"type": "string", "description": "User's email address"},
    },
    "required": ["username", "email"],
}

LOCK = threading.Lock()
OPTS: argparse.Namespace


def log(entry: dict) -> None:
    with LOCK:
        if OPTS.log:
            with open(OPTS.log, "a") as f:
                f.write(json.dumps(entry) + "\n")
        else:
            print(json.dumps(entry, indent=2), file=sys.stderr, flush=True)


def text(t: str) -> dict:
    return {"resultType": "complete", "content": [{"type": "text", "text": t}]}


def answer(msg: dict) -> tuple[int, dict]:
    """(HTTP status, JSON-RPC response) for one request."""
    rid = msg.get("id")
    method = msg.get("method")
    params = msg.get("params") or {}

    def ok(result: dict) -> tuple[int, dict]:
        if OPTS.no_result_type and method != "server/discover" and result.get("resultType") == "complete":
            result = {k: v for k, v in result.items() if k != "resultType"}
        return 200, {"jsonrpc": "2.0", "id": rid, "result": result}

    def err(status: int, code: int, message: str, data=None) -> tuple[int, dict]:
        e = {"code": code, "message": message}
        if data is not None:
            e["data"] = data
        return status, {"jsonrpc": "2.0", "id": rid, "error": e}

    if method == "server/discover":
        if OPTS.legacy:
            reply = OPTS.discover_reply
            if reply == "200err":
                return err(200, -32601, "Method not found: server/discover")
            if reply == "hang":
                threading.Event().wait(30)
            if reply in ("400text", "405", "500", "hang"):
                return int(reply[:3]) if reply != "hang" else 504, None
            return err(404, -32601, "Method not found: server/discover")
        if OPTS.bare_discover:
            return ok({"supportedVersions": [MODERN], "capabilities": {"tools": {}}})
        return ok(
            {
                "resultType": "complete",
                "supportedVersions": [MODERN],
                "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-stub", "version": "0.1.0"}},
                "instructions": "stub",
                "ttlMs": 60000,
                "cacheScope": "public",
            }
        )
    if method == "initialize":
        if not OPTS.legacy:
            return err(400, -32022, "initialize is not supported", {"supported": [MODERN], "requested": params.get("protocolVersion")})
        return ok(
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "modern-stub-legacy", "version": "0.1.0"},
            }
        )
    if method == "tools/list":
        return ok({"resultType": "complete", "tools": TOOLS, "ttlMs": 0, "cacheScope": "private"})
    if method == "tools/call":
        name = params.get("name")
        if name == "test_simple_text":
            return ok(text("This is a simple text response for testing."))
        if name == "test_elicitation" and OPTS.legacy:
            return ok({"content": [{"type": "text", "text": "the legacy stub cannot elicit"}], "isError": True})
        if name == "test_elicitation":
            responses = params.get("inputResponses")
            if not responses:
                return ok(
                    {
                        "resultType": "input_required",
                        "inputRequests": {
                            "elicit-1": {
                                "method": "elicitation/create",
                                "params": {
                                    "mode": "form",
                                    "message": (params.get("arguments") or {}).get("message", "Who are you?"),
                                    "requestedSchema": ELICIT_SCHEMA,
                                },
                            }
                        },
                        "requestState": STATE,
                    }
                )
            if params.get("requestState") != STATE:
                return err(400, -32602, "bad requestState")
            a = responses.get("elicit-1") or {}
            return ok(text(f"User response: action={a.get('action')}, content={json.dumps(a.get('content'), separators=(',', ':'))}"))
        return ok({"resultType": "complete", "content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True})
    return err(404, -32601, f"Method not found: {method}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args) -> None:  # silence default access log
        pass

    def _send(self, status: int, ctype: str | None, body: bytes) -> None:
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _not_allowed(self) -> None:
        log({"http": self.command, "path": self.path, "headers": dict(self.headers.items()), "status": 405})
        self._send(405, None, b"")

    do_GET = _not_allowed
    do_DELETE = _not_allowed

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            msg = json.loads(raw)
        except ValueError:
            msg = None
        entry = {"http": "POST", "path": self.path, "headers": dict(self.headers.items()), "body": msg}
        if not isinstance(msg, dict) or "method" not in msg:
            entry["status"] = 400
            log(entry)
            self._send(400, "application/json", b'{"jsonrpc":"2.0","error":{"code":-32600,"message":"bad request"}}')
            return
        if "id" not in msg:  # notification
            entry["status"] = 202
            log(entry)
            self._send(202, None, b"")
            return
        status, resp = answer(msg)
        entry["status"] = status
        entry["response"] = resp
        log(entry)
        if resp is None:  # a bare HTTP refusal with a plain-text body
            self._send(status, "text/plain", b"no such method")
            return
        body = json.dumps(resp).encode()
        if OPTS.sse and status == 200:
            self._send(200, "text/event-stream", b"event: message\ndata: " + body + b"\n\n")
        else:
            self._send(status, "application/json", body)


def main() -> None:
    global OPTS
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--log")
    p.add_argument("--sse", action="store_true")
    p.add_argument("--legacy", action="store_true")
    p.add_argument(
        "--discover-reply",
        choices=["404", "200err", "400text", "405", "500", "hang"],
        default="404",
        help="with --legacy: how server/discover is refused (default 404 + JSON-RPC -32601)",
    )
    p.add_argument("--no-result-type", action="store_true", help="omit resultType from every complete result but server/discover's")
    p.add_argument("--bare-discover", action="store_true", help="omit resultType/ttlMs/cacheScope from DiscoverResult")
    OPTS = p.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", OPTS.port), Handler)
    print(f"modern-stub on http://127.0.0.1:{OPTS.port}/t/demo/mcp", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
